//! From a NatsCluster to one [`ServerPlan`] per server (design §4.1–§4.3).
//!
//! The inputs the reconciler gathers — the trust roots a NatsOperatorTrust holds, the accounts
//! NatsAccountTrusts preload, the leaf remotes grants admit — arrive already resolved, and a
//! [`Layout`] says where each server listens and where its files are mounted, so the same rules
//! serve pods on Kubernetes and the sim's local servers.

use nats_api::cluster::{GatewayDiscovery, NatsClusterSpec, ResolverType};

use crate::quantity::{self, QuantityError};
use crate::render::{
    GatewayPlan, GatewayRemote, JetStreamPlan, LAME_DUCK_DURATION, LeafListenPlan, LeafRemotePlan,
    Listen, ResolverPlan, ServerPlan, TlsFiles, TrustPlan,
};

/// Share of `resources.limits.memory` the Go runtime is told it may use (GOMEMLIMIT): the GC
/// works harder before the kernel's OOM killer would act.
pub const GOMEMLIMIT_PERCENT: i64 = 90;
/// Share of `resources.limits.memory` given to the JetStream memory store; the rest is the
/// server's own heap, connections and buffers. The quickstart story's status reads a 3Gi memory
/// store from a 4Gi limit (docs/stories/01-quickstart/status).
pub const MEMORY_STORE_PERCENT: i64 = 75;
/// Share of the volume given to the JetStream file store: the whole volume, as the quickstart
/// story's status reads a 20Gi file store from a 20Gi volume. The limit is what JetStream admits
/// into streams; the server's own compaction headroom is its concern.
pub const FILE_STORE_PERCENT: i64 = 100;

/// The trust roots, as read from a NatsOperatorTrust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedTrust {
    pub operator_jwt: String,
    pub system_account: String,
    pub system_account_jwt: String,
}

/// A leaf remote whose NatsConnection a grant admits, as the projected Secret carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedLeafRemote {
    /// Index of the remote in `spec.leafRemotes`; names its files in the projected Secret.
    pub index: usize,
    pub urls: Vec<String>,
    pub has_credentials: bool,
    pub has_ca: bool,
    /// The local account's public key: the system account's for `localSystemAccount`, the
    /// NatsAccountTrust's for `localAccountTrustRef`, none for the global account.
    pub local_account: Option<String>,
}

/// Everything a NatsCluster's servers are rendered from.
#[derive(Clone, Debug)]
pub struct ClusterInputs<'a> {
    pub name: &'a str,
    pub spec: &'a NatsClusterSpec,
    pub trust: Option<ResolvedTrust>,
    /// Account JWTs preloaded from NatsAccountTrusts, by public key.
    pub account_preloads: Vec<(String, String)>,
    /// The admitted leaf remotes only; refused ones are rendered out (design §4.3).
    pub leaf_remotes: Vec<ResolvedLeafRemote>,
}

/// The ports one server listens on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    pub client: u16,
    pub monitor: u16,
    pub route: u16,
    pub gateway: u16,
    pub leafnode: u16,
}

/// The conventional NATS ports, which every pod uses.
pub const STANDARD_PORTS: Ports = Ports {
    client: 4222,
    monitor: 8222,
    route: 6222,
    gateway: 7222,
    leafnode: 7422,
};

/// Where a server listens and where its files are: pods on Kubernetes or local processes.
pub trait Layout {
    /// The host every listener binds.
    fn bind_host(&self) -> String;
    /// The ports of server `ordinal`.
    fn ports(&self, ordinal: u32) -> Ports;
    /// The route URL peers dial to reach server `ordinal`.
    fn route_url(&self, ordinal: u32) -> String;
    /// The directory holding server `ordinal`'s state (JetStream store, resolver).
    fn data_dir(&self, ordinal: u32) -> String;
    /// The pid file lame-duck mode is signalled through.
    fn pid_file(&self, ordinal: u32) -> String;
    /// The directory a listener's certificate (`tls.crt`, `tls.key`, `ca.crt`) is mounted in;
    /// `listener` is `client`, `routes`, `gateway` or `leafnodes`.
    fn tls_dir(&self, ordinal: u32, listener: &str) -> String;
    /// The directory the leaf remotes' creds and CAs are projected into.
    fn leaf_remotes_dir(&self, ordinal: u32) -> String;
    /// What a server dials for a peer outside its NATS cluster (a gateway or leaf remote) that
    /// the spec names `url`: on Kubernetes the URL itself, resolved by the cluster's DNS; a
    /// layout with no such DNS leads the names it knows to where those servers listen.
    fn remote_urls(&self, url: &str) -> Vec<String> {
        vec![url.to_string()]
    }
}

/// Pods of a StatefulSet per server, reached through the headless Service.
#[derive(Clone, Debug)]
pub struct KubernetesLayout {
    pub name: String,
    pub namespace: String,
    /// The cluster DNS domain, `cluster.local` by default.
    pub cluster_domain: String,
}

/// Mount points inside a server's pod.
pub mod mounts {
    pub const CONFIG_DIR: &str = "/etc/nats";
    pub const DATA_DIR: &str = "/data";
    pub const PID_DIR: &str = "/var/run/nats";
    /// Outside CONFIG_DIR: the config volume is a read-only projected volume, in which the
    /// container runtime cannot create the mount points of nested Secret volumes.
    pub const TLS_DIR: &str = "/etc/nats-tls";
    /// The leaf remotes' creds and CAs, projected into the config volume beside nats.conf.
    pub const LEAF_REMOTES_DIR: &str = "/etc/nats/leaf-remotes";
}

impl Layout for KubernetesLayout {
    fn bind_host(&self) -> String {
        "0.0.0.0".into()
    }
    fn ports(&self, _ordinal: u32) -> Ports {
        STANDARD_PORTS
    }
    fn route_url(&self, ordinal: u32) -> String {
        format!(
            "nats://{}.{}.{}.svc.{}:{}",
            nats_api::cluster::names::server_pod(&self.name, ordinal),
            nats_api::cluster::names::headless_service(&self.name),
            self.namespace,
            self.cluster_domain,
            STANDARD_PORTS.route
        )
    }
    fn data_dir(&self, _ordinal: u32) -> String {
        mounts::DATA_DIR.into()
    }
    fn pid_file(&self, _ordinal: u32) -> String {
        format!("{}/nats.pid", mounts::PID_DIR)
    }
    fn tls_dir(&self, _ordinal: u32, listener: &str) -> String {
        format!("{}/{listener}", mounts::TLS_DIR)
    }
    fn leaf_remotes_dir(&self, _ordinal: u32) -> String {
        mounts::LEAF_REMOTES_DIR.into()
    }
}

/// The file (and key in the projected Secret) holding leaf remote `index`'s creds.
pub fn leaf_creds_file(index: usize) -> String {
    format!("remote-{index}.creds")
}

/// The file (and key in the projected Secret) holding leaf remote `index`'s CA bundle.
pub fn leaf_ca_file(index: usize) -> String {
    format!("remote-{index}-ca.crt")
}

/// Why a NatsCluster cannot be planned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    #[error("spec.replicas: {0} is not a positive server count")]
    Replicas(i32),
}

/// Server `ordinal`'s certificate files for `listener`.
fn tls_files(
    layout: &dyn Layout,
    ordinal: u32,
    listener: &str,
    with_ca: bool,
    verify: bool,
) -> TlsFiles {
    let dir = layout.tls_dir(ordinal, listener);
    TlsFiles {
        cert_file: Some(format!("{dir}/tls.crt")),
        key_file: Some(format!("{dir}/tls.key")),
        ca_file: with_ca.then(|| format!("{dir}/ca.crt")),
        verify,
    }
}

/// The JetStream memory store: `jetstream.limits.maxMemoryStore`, else a share of the memory limit.
pub fn memory_store(spec: &NatsClusterSpec) -> Result<Option<i64>, QuantityError> {
    let explicit = spec
        .jetstream
        .as_ref()
        .and_then(|j| j.limits.as_ref())
        .and_then(|l| l.max_memory_store.as_ref());
    if let Some(q) = explicit {
        return quantity::bytes("spec.jetstream.limits.maxMemoryStore", &q.0).map(Some);
    }
    Ok(memory_limit(spec)?.map(|m| m * MEMORY_STORE_PERCENT / 100))
}

/// The JetStream file store: `jetstream.limits.maxFileStore`, else a share of the volume request.
pub fn file_store(spec: &NatsClusterSpec) -> Result<Option<i64>, QuantityError> {
    let js = spec.jetstream.as_ref();
    if let Some(q) = js
        .and_then(|j| j.limits.as_ref())
        .and_then(|l| l.max_file_store.as_ref())
    {
        return quantity::bytes("spec.jetstream.limits.maxFileStore", &q.0).map(Some);
    }
    let request = js
        .and_then(|j| j.volume_claim_template.as_ref())
        .and_then(|t| t.spec.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"));
    match request {
        Some(q) => Ok(Some(
            quantity::bytes(
                "spec.jetstream.volumeClaimTemplate.spec.resources.requests.storage",
                &q.0,
            )? * FILE_STORE_PERCENT
                / 100,
        )),
        None => Ok(None),
    }
}

/// `resources.limits.memory` in bytes, if set.
pub fn memory_limit(spec: &NatsClusterSpec) -> Result<Option<i64>, QuantityError> {
    spec.resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
        .map(|q| quantity::bytes("spec.resources.limits.memory", &q.0))
        .transpose()
}

/// GOMEMLIMIT for the server container, derived from the memory limit.
pub fn gomemlimit(spec: &NatsClusterSpec) -> Result<Option<String>, QuantityError> {
    Ok(memory_limit(spec)?.map(|m| format!("{}B", m * GOMEMLIMIT_PERCENT / 100)))
}

/// The resolver a NATS cluster runs (design §4.3): as set, else Full, except a leaf that
/// preloads no account, which runs Cache.
pub fn resolver_type(spec: &NatsClusterSpec, preloads_accounts: bool) -> ResolverType {
    match spec.auth.as_ref().and_then(|a| a.resolver) {
        Some(r) => r,
        None if spec.is_leaf() && !preloads_accounts => ResolverType::Cache,
        None => ResolverType::Full,
    }
}

/// The `sync_interval` every server renders: `always` unless `spec.jetstream.syncInterval`
/// names a duration. The controller writes `always` where the field is omitted rather than
/// leaving nats-server's two-minute default, which acknowledges writes a power loss then loses
/// (docs/durability.md).
pub fn sync_interval(js: &nats_api::cluster::JetStream) -> String {
    match js.sync_interval() {
        nats_api::cluster::SyncInterval::Always => "always".into(),
        nats_api::cluster::SyncInterval::Every(d) => d,
    }
}

/// Plans every server of the NatsCluster, ordinal 0 first.
pub fn plan_servers(
    inputs: &ClusterInputs<'_>,
    layout: &dyn Layout,
) -> Result<Vec<ServerPlan>, PlanError> {
    let spec = inputs.spec;
    if spec.replicas < 1 {
        return Err(PlanError::Replicas(spec.replicas));
    }
    let replicas = spec.replicas as u32;
    let shared = Shared {
        max_memory_store: memory_store(spec)?,
        max_file_store: file_store(spec)?,
        routes: (0..replicas).map(|i| layout.route_url(i)).collect(),
        tags: spec
            .server_tags
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect(),
        host: layout.bind_host(),
    };
    Ok((0..replicas)
        .map(|i| server_plan(inputs, layout, &shared, i))
        .collect())
}

/// What every server's plan shares.
struct Shared {
    max_memory_store: Option<i64>,
    max_file_store: Option<i64>,
    routes: Vec<String>,
    tags: Vec<String>,
    host: String,
}

/// The plan of server `i`.
fn server_plan(
    inputs: &ClusterInputs<'_>,
    layout: &dyn Layout,
    shared: &Shared,
    i: u32,
) -> ServerPlan {
    let spec = inputs.spec;
    let ports = layout.ports(i);
    let data = layout.data_dir(i);
    let host = &shared.host;
    ServerPlan {
        server_name: nats_api::cluster::names::server(inputs.name, i),
        cluster_name: inputs.name.to_string(),
        client: Listen::new(host.clone(), ports.client),
        client_tls: spec
            .tls
            .as_ref()
            .map(|_| tls_files(layout, i, "client", false, false)),
        monitor: Listen::new(host.clone(), ports.monitor),
        route_listen: Listen::new(host.clone(), ports.route),
        routes: shared.routes.clone(),
        route_tls: spec
            .route_tls_enabled()
            .then(|| tls_files(layout, i, "routes", true, true)),
        tags: shared.tags.clone(),
        pid_file: layout.pid_file(i),
        jetstream: spec.jetstream.as_ref().map(|js| JetStreamPlan {
            store_dir: format!("{data}/jetstream"),
            max_memory_store: shared.max_memory_store,
            max_file_store: shared.max_file_store,
            domain: js.domain.clone(),
            sync_interval: Some(sync_interval(js)),
        }),
        gateway: gateway_plan(inputs, layout, host, ports.gateway, i),
        leafnodes: spec.leafnodes.as_ref().map(|l| LeafListenPlan {
            listen: Listen::new(host.clone(), ports.leafnode),
            advertise: l.advertise.clone(),
            tls: l
                .tls
                .as_ref()
                .map(|_| tls_files(layout, i, "leafnodes", false, false)),
        }),
        leaf_remotes: leaf_remote_plans(inputs, layout, &layout.leaf_remotes_dir(i)),
        trust: trust_plan(inputs, &data),
        lame_duck_duration: LAME_DUCK_DURATION.into(),
    }
}

/// Server `i`'s gateway: every other member of the supercluster, by the URL spec.gateway lists.
fn gateway_plan(
    inputs: &ClusterInputs<'_>,
    layout: &dyn Layout,
    host: &str,
    port: u16,
    i: u32,
) -> Option<GatewayPlan> {
    let gw = inputs.spec.gateway.as_ref()?;
    Some(GatewayPlan {
        name: inputs.name.to_string(),
        listen: Listen::new(host.to_string(), port),
        advertise: gw.advertise.clone(),
        reject_unknown: gw.discovery == GatewayDiscovery::Explicit,
        remotes: gw
            .remotes
            .iter()
            .filter(|r| r.name != inputs.name)
            .map(|r| GatewayRemote {
                name: r.name.clone(),
                urls: layout.remote_urls(&r.url),
            })
            .collect(),
        tls: gw
            .tls
            .as_ref()
            .map(|_| tls_files(layout, i, "gateway", true, true)),
    })
}

/// The admitted leaf remotes, their creds and CA files under `leaf_dir`.
fn leaf_remote_plans(
    inputs: &ClusterInputs<'_>,
    layout: &dyn Layout,
    leaf_dir: &str,
) -> Vec<LeafRemotePlan> {
    inputs
        .leaf_remotes
        .iter()
        .map(|r| LeafRemotePlan {
            urls: r.urls.iter().flat_map(|u| layout.remote_urls(u)).collect(),
            credentials: r
                .has_credentials
                .then(|| format!("{leaf_dir}/{}", leaf_creds_file(r.index))),
            ca_file: r
                .has_ca
                .then(|| format!("{leaf_dir}/{}", leaf_ca_file(r.index))),
            account: r.local_account.clone(),
        })
        .collect()
}

/// The trust roots and resolver, its directory under `data`: the system account preloaded
/// first, then every account NatsAccountTrusts preload.
fn trust_plan(inputs: &ClusterInputs<'_>, data: &str) -> Option<TrustPlan> {
    let t = inputs.trust.as_ref()?;
    let mut preload = vec![(t.system_account.clone(), t.system_account_jwt.clone())];
    preload.extend(inputs.account_preloads.iter().cloned());
    let dir = format!("{data}/resolver");
    Some(TrustPlan {
        operator: t.operator_jwt.clone(),
        system_account: t.system_account.clone(),
        resolver: match resolver_type(inputs.spec, !inputs.account_preloads.is_empty()) {
            ResolverType::Full => ResolverPlan::Full { dir },
            ResolverType::Cache => ResolverPlan::Cache { dir },
        },
        preload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::cluster::NatsClusterSpec;

    fn spec(yaml: &str) -> NatsClusterSpec {
        serde_yaml::from_str(yaml).expect("spec")
    }

    fn layout() -> KubernetesLayout {
        KubernetesLayout {
            name: "demo".into(),
            namespace: "nats".into(),
            cluster_domain: "cluster.local".into(),
        }
    }

    fn plans(s: &NatsClusterSpec) -> Vec<ServerPlan> {
        plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: s,
                trust: None,
                account_preloads: vec![],
                leaf_remotes: vec![],
            },
            &layout(),
        )
        .expect("plans")
    }

    #[rstest::rstest]
    #[case::omitted(
        "omitted: always, not the server's two-minute default",
        "jetstream: {}",
        "always"
    )]
    #[case::always("always as written", "jetstream: {syncInterval: always}", "always")]
    #[case::duration(
        "a duration opts out to a timer",
        "jetstream: {syncInterval: 2m}",
        "2m"
    )]
    fn every_server_renders_the_sync_interval(
        #[case] what: &str,
        #[case] js: &str,
        #[case] want: &str,
    ) {
        let s = spec(&format!("version: 2.15.1\nreplicas: 3\n{js}\n"));
        for p in plans(&s) {
            let got = p.jetstream.and_then(|j| j.sync_interval);
            assert_eq!(got.as_deref(), Some(want), "{what}");
        }
    }

    #[test]
    fn one_plan_per_server_with_explicit_names_and_every_route() {
        let s = spec("version: 2.15.1\nreplicas: 3\njetstream: {}\n");
        let p = plans(&s);
        assert_eq!(p.len(), 3);
        assert_eq!(p[2].server_name, "demo-2");
        assert_eq!(
            p[0].routes[1],
            "nats://demo-1-0.demo-headless.nats.svc.cluster.local:6222"
        );
        assert_eq!(p[0].lame_duck_duration, "2m");
        // Route TLS is on by default, verifying peers against the route CA.
        let rt = p[0].route_tls.as_ref().expect("route tls on by default");
        assert!(rt.verify);
        assert_eq!(rt.ca_file.as_deref(), Some("/etc/nats-tls/routes/ca.crt"));
    }

    #[test]
    fn route_tls_can_be_turned_off() {
        let s = spec("version: 2.15.1\nreplicas: 1\nroutes: {tls: {enabled: false}}\n");
        assert!(plans(&s)[0].route_tls.is_none());
    }

    #[test]
    fn limits_derive_from_memory_and_volume_and_can_be_overridden() {
        let s = spec(
            "version: 2.15.1\nreplicas: 1\nresources: {limits: {memory: 2Gi}}\njetstream:\n  volumeClaimTemplate:\n    spec: {resources: {requests: {storage: 10Gi}}}\n",
        );
        let js = plans(&s)[0].jetstream.clone().expect("js");
        assert_eq!(js.max_memory_store, Some(3 << 29), "75% of 2Gi");
        assert_eq!(js.max_file_store, Some(10i64 << 30), "the whole volume");
        assert_eq!(gomemlimit(&s).expect("q").as_deref(), Some("1932735283B"));

        let s = spec(
            "version: 2.15.1\nreplicas: 1\nresources: {limits: {memory: 2Gi}}\njetstream:\n  limits: {maxMemoryStore: 256Mi, maxFileStore: 1Gi}\n",
        );
        let js = plans(&s)[0].jetstream.clone().expect("js");
        assert_eq!(js.max_memory_store, Some(256 << 20));
        assert_eq!(js.max_file_store, Some(1 << 30));
    }

    #[test]
    fn a_bad_quantity_names_its_field() {
        let s = spec(
            "version: 2.15.1\nreplicas: 1\nresources: {limits: {memory: 100m}}\njetstream: {}\n",
        );
        let e = plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: &s,
                trust: None,
                account_preloads: vec![],
                leaf_remotes: vec![],
            },
            &layout(),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("spec.resources.limits.memory"),
            "{e}"
        );
    }

    #[test]
    fn gateways_skip_the_own_entry_and_follow_discovery() {
        let yaml = |d: &str| {
            format!(
                "version: 2.15.1\nreplicas: 1\ngateway:\n  discovery: {d}\n  remotes:\n  - {{name: demo, url: 'nats://demo-gw:7222'}}\n  - {{name: west, url: 'nats://west-gw:7222'}}\n"
            )
        };
        let explicit = plans(&spec(&yaml("Explicit")))[0]
            .gateway
            .clone()
            .expect("gw");
        assert_eq!(explicit.remotes.len(), 1);
        assert_eq!(explicit.remotes[0].name, "west");
        assert!(explicit.reject_unknown);
        let gossip = plans(&spec(&yaml("Gossip")))[0]
            .gateway
            .clone()
            .expect("gw");
        assert!(!gossip.reject_unknown);
    }

    #[test]
    fn resolver_is_full_except_on_a_leaf_preloading_nothing() {
        let hub = spec("version: 2.15.1\nreplicas: 1\nauth: {trustRef: {name: t}}\n");
        assert_eq!(resolver_type(&hub, false), ResolverType::Full);
        let leaf = spec(
            "version: 2.15.1\nreplicas: 1\nauth: {trustRef: {name: t}}\nleafRemotes: [{connectionRef: {name: hub}}]\n",
        );
        assert_eq!(resolver_type(&leaf, false), ResolverType::Cache);
        assert_eq!(resolver_type(&leaf, true), ResolverType::Full);
        let pinned = spec(
            "version: 2.15.1\nreplicas: 1\nauth: {trustRef: {name: t}, resolver: Full}\nleafRemotes: [{connectionRef: {name: hub}}]\n",
        );
        assert_eq!(resolver_type(&pinned, false), ResolverType::Full);
    }

    #[test]
    fn trust_preloads_the_system_account_then_account_trusts() {
        let s = spec("version: 2.15.1\nreplicas: 2\nauth: {trustRef: {name: t}}\n");
        let p = plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: &s,
                trust: Some(ResolvedTrust {
                    operator_jwt: "OP".into(),
                    system_account: "ASYS".into(),
                    system_account_jwt: "SYS".into(),
                }),
                account_preloads: vec![("AAPP".into(), "APP".into())],
                leaf_remotes: vec![],
            },
            &layout(),
        )
        .expect("plans");
        let t = p[1].trust.clone().expect("trust");
        assert_eq!(
            t.preload,
            vec![("ASYS".into(), "SYS".into()), ("AAPP".into(), "APP".into())]
        );
        assert_eq!(
            t.resolver,
            ResolverPlan::Full {
                dir: "/data/resolver".into()
            }
        );
    }

    #[test]
    fn leaf_remotes_point_at_the_projected_files() {
        let s = spec(
            "version: 2.15.1\nreplicas: 1\nleafRemotes: [{connectionRef: {name: a}}, {connectionRef: {name: b}}]\n",
        );
        let p = plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: &s,
                trust: None,
                account_preloads: vec![],
                // Remote 0 was refused by a grant and rendered out; only remote 1 remains.
                leaf_remotes: vec![ResolvedLeafRemote {
                    index: 1,
                    urls: vec!["nats-leaf://hub:7422".into()],
                    has_credentials: true,
                    has_ca: false,
                    local_account: None,
                }],
            },
            &layout(),
        )
        .expect("plans");
        assert_eq!(p[0].leaf_remotes.len(), 1);
        assert_eq!(
            p[0].leaf_remotes[0].credentials.as_deref(),
            Some("/etc/nats/leaf-remotes/remote-1.creds")
        );
        assert_eq!(p[0].leaf_remotes[0].ca_file, None);
    }
}
