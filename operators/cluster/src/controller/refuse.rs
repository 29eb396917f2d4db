//! Phase 3, refuse: what holds the pass (design §4.1, §4.3), pure. The refusals are
//! [`crate::refusals`]' rules over what was gathered and what the servers said (and a missing
//! systemCredentials Secret); the first hold
//! found is the one reported, and while one holds, nothing is written. Then whether the pass
//! goes ahead at all ([`go`]): the NatsCluster must be able to own its objects, and neither a
//! hold nor the plan may refuse it.

use kube::ResourceExt;
use nats_api::cluster::{NatsCluster, annotation};

use super::context::Settings;
use super::gather::Gathered;
use super::observe_servers::Seen;
use super::plan_servers::Planned;
use crate::objects::Owner;
use crate::observation::running_with_auth;
use crate::refusals::{self, Refusal};

/// What holds the pass.
#[derive(Clone, Debug, Default)]
pub struct Holds {
    /// A gateway without TLS while `--allow-gateway-without-tls` is off: refused, and Ready
    /// says so too.
    pub gateway_without_tls: Option<Refusal>,
    /// Every other hold, in the order found: waits for references, a leaf's literal preload,
    /// the gateway's certificate, adding or removing auth.
    pub holds: Vec<Refusal>,
    /// An auth change `restart-all` is to carry (without the annotation it is among `holds`).
    pub auth_change: Option<Refusal>,
    /// The `restart-all` annotation is set.
    pub restart_all: bool,
}

/// What holds `cluster`, from what was gathered and what the servers said.
pub fn refuse(
    cluster: &NatsCluster,
    settings: &Settings,
    gathered: &Gathered,
    seen: &Seen,
) -> Holds {
    let spec = &cluster.spec;
    // A missing systemCredentials Secret first: it names the Secret to create.
    let mut holds: Vec<Refusal> =
        refusals::system_credentials_missing(seen.system_secret_missing.as_deref())
            .into_iter()
            .collect();
    holds.extend(gathered.trusts.waits.iter().cloned());
    holds.extend(refusals::leaf_preload(
        spec,
        &gathered.trusts.literal_preloads,
    ));
    if let Some(c) = &gathered.gateway_certificate {
        let keys: Option<Vec<&str>> = c
            .keys
            .as_ref()
            .map(|k| k.iter().map(String::as_str).collect());
        holds.extend(refusals::gateway_certificate(
            spec,
            &c.secret,
            keys.as_deref(),
        ));
    }
    // Adding or removing auth holds, unless restart-all says to restart every server at once.
    let restart_all = cluster.annotations().contains_key(annotation::RESTART_ALL);
    let auth_change = refusals::auth_change(spec, running_with_auth(&seen.observation));
    let auth_change = match auth_change {
        Some(r) if !restart_all => {
            holds.push(r);
            None
        }
        carried => carried,
    };
    Holds {
        gateway_without_tls: refusals::gateway_without_tls(
            spec,
            settings.allow_gateway_without_tls,
        ),
        holds,
        auth_change,
        restart_all,
    }
}

/// Whether the pass writes anything.
pub enum Go {
    /// Nothing holds it: apply, step and observe.
    Ahead(Owner),
    /// The NatsCluster has no namespace, name or uid to own its objects by.
    Unowned(String),
    /// A hold (the gateway refusal first, then the first hold, then a spec the plan refuses).
    Held(Refusal),
}

/// Whether the pass goes ahead.
pub fn go(cluster: &NatsCluster, holds: &Holds, planned: &Planned) -> Go {
    let owner = match Owner::of(cluster) {
        Ok(owner) => owner,
        Err(e) => return Go::Unowned(e.to_string()),
    };
    let first = holds
        .gateway_without_tls
        .iter()
        .chain(&holds.holds)
        .chain(&planned.refusal)
        .next();
    match first {
        Some(r) => Go::Held(r.clone()),
        None => Go::Ahead(owner),
    }
}
