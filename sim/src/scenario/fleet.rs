//! The workload as a scenario declares it, up to many streams over several accounts: a stream
//! declared once for `count` copies (`{i}` in its name and subjects, 0 … count-1), key-value
//! buckets and object stores, and `publishers`, each on its own stream with its own ledger and
//! consumers.

use serde::{Deserialize, Serialize};

use super::{Scenario, one};
use crate::traffic::{ConsumerKind, ConsumerSpec, PublisherSpec};

/// A scenario's JetStream traffic: streams, buckets, a publisher or several, consumers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    #[serde(default)]
    pub streams: Vec<StreamDecl>,
    pub publisher: Option<PublisherDecl>,
    #[serde(default)]
    pub consumers: Vec<ConsumerSpec>,
    #[serde(default)]
    pub key_values: Vec<BucketDecl>,
    #[serde(default)]
    pub object_stores: Vec<BucketDecl>,
    /// Several publishers, each with its own ledger (instead of `publisher`).
    #[serde(default)]
    pub publishers: Vec<PublisherLane>,
    /// The server the workload sits on when its traffic starts: its connections are made to it
    /// (discovery then finds the others) and each replicated stream of `streams` is led by it.
    /// None by default: the client picks among every hub server, elections place the leaders.
    #[serde(default, skip_serializing_if = "Home::is_any")]
    pub home: Home,
}

/// Where a workload sits when its traffic starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Home {
    /// Nowhere in particular: any hub server, whichever leaders the elections chose.
    #[default]
    Any,
    /// The meta leader's server: a rollout that restarts the meta leader last then steps every
    /// other server with no client and no leader of the workload on it, whoever runs it.
    MetaLeader,
}

impl Home {
    fn is_any(&self) -> bool {
        *self == Home::Any
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamDecl {
    pub name: String,
    pub subjects: Vec<String>,
    #[serde(default = "one")]
    pub replicas: usize,
    /// The NATS cluster its config's placement names (`c1`); none by default.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Declares this many streams: `{i}` in the name and subjects counts 0 … count-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// The account it is created in (one of `topology.accounts`); the first by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublisherDecl {
    /// The stream whose leader the ledger watches.
    pub stream: String,
    #[serde(flatten)]
    pub spec: PublisherSpec,
}

impl Workload {
    /// Whether there is JetStream traffic at all (streams, a publisher or consumers).
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
            && self.publisher.is_none()
            && self.consumers.is_empty()
            && self.key_values.is_empty()
            && self.object_stores.is_empty()
            && self.publishers.is_empty()
    }
}

/// What `{i}` in a stream template's name and subjects stands for.
pub const INDEX: &str = "{i}";

/// A key-value bucket or an object store of the workload: a stream `KV_<bucket>` or
/// `OBJ_<bucket>` on the servers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketDecl {
    pub bucket: String,
    /// The account it is created in (one of `topology.accounts`); the first by default.
    #[serde(default)]
    pub account: Option<String>,
    #[serde(default = "one")]
    pub replicas: usize,
    /// The NATS cluster its config's placement names.
    #[serde(default)]
    pub cluster: Option<String>,
}

impl BucketDecl {
    /// The server-side stream holding it: `KV_<bucket>` or `OBJ_<bucket>` for `prefix`.
    pub fn stream_name(&self, prefix: &str) -> String {
        format!("{prefix}{}", self.bucket)
    }
}

/// One publisher of `publishers` in the report: its stream and the figures of its ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublisherReport {
    pub name: String,
    pub account: Option<String>,
    pub stream: String,
    pub figures: crate::ledger::Figures,
}

/// One of several publishers: its stream (in its account), its own ledger, and a durable
/// consumer of each kind in `consumers`, named `<name>-pull` / `<name>-push`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublisherLane {
    pub name: String,
    /// The account it connects as; the first of `topology.accounts` by default.
    #[serde(default)]
    pub account: Option<String>,
    pub stream: String,
    #[serde(default)]
    pub consumers: Vec<ConsumerKind>,
    #[serde(flatten)]
    pub spec: PublisherSpec,
}

impl PublisherLane {
    /// Its consumers, each named after it and its kind.
    pub fn consumer_specs(&self) -> Vec<ConsumerSpec> {
        self.consumers
            .iter()
            .map(|k| ConsumerSpec {
                name: format!(
                    "{}-{}",
                    self.name,
                    match k {
                        ConsumerKind::Pull => "pull",
                        ConsumerKind::Push => "push",
                    }
                ),
                stream: self.stream.clone(),
                kind: *k,
            })
            .collect()
    }
}

impl StreamDecl {
    /// The streams it declares: itself, or its `count` copies with `{i}` replaced.
    pub fn expand(&self) -> Vec<StreamDecl> {
        let Some(n) = self.count else {
            return vec![self.clone()];
        };
        (0..n)
            .map(|i| StreamDecl {
                name: self.name.replace(INDEX, &i.to_string()),
                subjects: self
                    .subjects
                    .iter()
                    .map(|s| s.replace(INDEX, &i.to_string()))
                    .collect(),
                count: None,
                ..self.clone()
            })
            .collect()
    }
}

impl super::TopologyDecl {
    /// The JetStream accounts the sim signs for a sim topology under `trust: generated`.
    pub fn account_names(&self) -> Vec<String> {
        if self.accounts.is_empty() {
            vec![crate::topology::APP_ACCOUNT.to_string()]
        } else {
            self.accounts.clone()
        }
    }
}

impl Scenario {
    /// Every stream of the workload, templates expanded.
    pub fn streams(&self) -> Vec<StreamDecl> {
        self.workload
            .streams
            .iter()
            .flat_map(StreamDecl::expand)
            .collect()
    }

    /// The account a declaration names, else the first of `topology.accounts` (None on a
    /// topology of one workload account).
    pub fn account_of(&self, named: &Option<String>) -> Option<String> {
        named
            .clone()
            .or_else(|| self.topology.accounts.first().cloned())
    }
}
