//! The auth plane a NatsCluster runs under: its NatsOperatorTrust, system credentials, resolver
//! and the NatsAccountTrusts it preloads.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Credentials, ObjectReference};

/// The auth plane a NATS cluster runs under.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Auth {
    /// The NatsOperatorTrust holding the trust roots: the NATS operator JWT and the system
    /// account JWT, preloaded so a server boots before its gateways are up.
    pub trust_ref: ObjectReference,
    /// Creds of a user of the system account the cluster controller connects as, to reload
    /// servers, observe Raft groups and evacuate servers. Omitted, every config change restarts
    /// and scale-down with JetStream is blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_credentials: Option<Credentials>,
    /// The account resolver: `Full` (a directory kept in sync) or `Cache`. Omitted, Full, except on a
    /// leaf that preloads no account, which runs Cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::common::optional_enum_field)]
    pub resolver: Option<ResolverType>,
    /// NatsAccountTrusts of accounts the servers preload (their JWTs rendered into the resolver),
    /// such as accounts of a supercluster nobody here signs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub account_trust_refs: Vec<ObjectReference>,
}

/// A NATS account resolver type. `Memory` is not offered: accounts arrive over the network.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ResolverType {
    /// A full resolver: every account JWT kept in a directory, synced with the other servers.
    Full,
    /// A cache resolver: accounts fetched on demand and cached.
    Cache,
}
