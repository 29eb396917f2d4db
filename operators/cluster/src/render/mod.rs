//! The pure renderer: one server's plan in, its nats.conf out.
//!
//! A [`ServerPlan`] holds everything a server's configuration depends on as plain data —
//! addresses, file paths, JWTs — so the same function renders for a pod (DNS names, mounted
//! paths) and for the sim's local servers (loopback ports, temp dirs). Translating a
//! NatsCluster spec into plans is the job of [`crate::plan`]; this module only writes files.

pub mod conf;

use conf::{Block, Value};

/// The lame-duck duration every server runs with; it ends well inside the pod's
/// terminationGracePeriodSeconds of 300 (design §4.4). nats-server refuses less than 30s.
pub const LAME_DUCK_DURATION: &str = "2m";

/// A listener address.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Listen {
    pub host: String,
    pub port: u16,
}

impl Listen {
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }
    fn render(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Certificate files of a TLS listener or dialer, as mounted on the server.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct TlsFiles {
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub ca_file: Option<String>,
    /// Demand and verify a peer certificate (routes and gateways verify both ways).
    pub verify: bool,
}

impl TlsFiles {
    fn block(&self) -> Block {
        let mut b = Block::new();
        b.set_opt("cert_file", self.cert_file.as_ref())
            .set_opt("key_file", self.key_file.as_ref())
            .set_opt("ca_file", self.ca_file.as_ref());
        if self.verify {
            b.set("verify", true);
        }
        b.set("timeout", 5i64);
        b
    }
}

/// JetStream on one server.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JetStreamPlan {
    pub store_dir: String,
    /// `max_memory_store` in bytes; omitted, the server's own default (75% of RAM).
    pub max_memory_store: Option<i64>,
    /// `max_file_store` in bytes; omitted, the server's own default.
    pub max_file_store: Option<i64>,
    pub domain: Option<String>,
    /// `sync_interval`: `always` or a Go duration; `None` renders none, leaving the server's own
    /// default (two minutes). A plan stored before the field existed reads `None`, which is what
    /// that server runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_interval: Option<String>,
}

/// A gateway remote: another member of the supercluster.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GatewayRemote {
    pub name: String,
    pub urls: Vec<String>,
}

/// The gateway block (design §4.3).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GatewayPlan {
    /// The NATS cluster's own gateway name (its NatsCluster's name).
    pub name: String,
    pub listen: Listen,
    pub advertise: Option<String>,
    /// Explicit discovery: reject gateways not listed.
    pub reject_unknown: bool,
    /// Every other member of the supercluster (the cluster's own entry already skipped).
    pub remotes: Vec<GatewayRemote>,
    pub tls: Option<TlsFiles>,
}

/// The hub side: a leafnode listener.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeafListenPlan {
    pub listen: Listen,
    pub advertise: Option<String>,
    pub tls: Option<TlsFiles>,
}

/// The leaf side: one remote hub.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeafRemotePlan {
    pub urls: Vec<String>,
    /// Path of the creds file, projected beside nats.conf.
    pub credentials: Option<String>,
    /// Path of the CA bundle to verify the hub with.
    pub ca_file: Option<String>,
    /// The local account (public key) the remote binds; the system account for a system remote.
    pub account: Option<String>,
}

/// Which resolver the servers run (design §4.3); Memory is not offered.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ResolverPlan {
    /// Full: keeps every account JWT, syncs with peers, accepts deletes.
    Full { dir: String },
    /// Cache: fetches accounts on demand and keeps a bounded cache.
    Cache { dir: String },
}

/// Trust roots: the NATS operator, the system account and the resolver.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TrustPlan {
    /// The NATS operator JWT itself, or a path to it.
    pub operator: String,
    /// The system account's public key.
    pub system_account: String,
    pub resolver: ResolverPlan,
    /// Account JWTs preloaded by public key: the system account's always, so a server boots
    /// before its gateways are up, and any account a NatsAccountTrust preloads.
    pub preload: Vec<(String, String)>,
}

/// Everything one server's nats.conf depends on.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerPlan {
    pub server_name: String,
    /// The NATS cluster's name, used for routes and as the gateway name.
    pub cluster_name: String,
    pub client: Listen,
    pub client_tls: Option<TlsFiles>,
    pub monitor: Listen,
    pub route_listen: Listen,
    /// Every server's route URL, this server's own included (the server skips itself).
    pub routes: Vec<String>,
    pub route_tls: Option<TlsFiles>,
    /// `key:value` tags.
    pub tags: Vec<String>,
    pub pid_file: String,
    pub jetstream: Option<JetStreamPlan>,
    pub gateway: Option<GatewayPlan>,
    pub leafnodes: Option<LeafListenPlan>,
    pub leaf_remotes: Vec<LeafRemotePlan>,
    pub trust: Option<TrustPlan>,
    /// The lame-duck duration; [`LAME_DUCK_DURATION`] on Kubernetes.
    pub lame_duck_duration: String,
}

/// Renders a server's plan as the structured nats.conf the server will load.
pub fn render_block(plan: &ServerPlan) -> Block {
    let mut top = Block::new();
    top.set("server_name", &plan.server_name)
        .set("listen", plan.client.render())
        .set("http", plan.monitor.render())
        .set("pid_file", &plan.pid_file)
        .set("lame_duck_duration", &plan.lame_duck_duration);
    if !plan.tags.is_empty() {
        top.set("server_tags", plan.tags.clone());
    }
    if let Some(tls) = &plan.client_tls {
        top.set("tls", tls.block());
    }
    top.set("cluster", cluster_block(plan));
    if let Some(js) = &plan.jetstream {
        top.set("jetstream", jetstream_block(js));
    }
    if let Some(gw) = &plan.gateway {
        top.set("gateway", gateway_block(gw));
    }
    if plan.leafnodes.is_some() || !plan.leaf_remotes.is_empty() {
        top.set("leafnodes", leafnodes_block(plan));
    }
    if let Some(trust) = &plan.trust {
        set_trust(&mut top, trust);
    }
    top
}

/// `cluster {}`: the NATS cluster's name, the route listener, its routes and their TLS.
fn cluster_block(plan: &ServerPlan) -> Block {
    let mut cluster = Block::new();
    cluster
        .set("name", &plan.cluster_name)
        .set("listen", plan.route_listen.render())
        .set("routes", plan.routes.clone());
    if let Some(tls) = &plan.route_tls {
        cluster.set("tls", tls.block());
    }
    cluster
}

/// `jetstream {}`: the store and its limits, and the domain.
fn jetstream_block(js: &JetStreamPlan) -> Block {
    let mut b = Block::new();
    b.set("store_dir", &js.store_dir)
        .set_opt("max_memory_store", js.max_memory_store)
        .set_opt("max_file_store", js.max_file_store)
        .set_opt("domain", js.domain.as_ref())
        .set_opt("sync_interval", js.sync_interval.as_ref());
    b
}

/// `gateway {}`: the listener, its TLS and every other member of the supercluster.
fn gateway_block(gw: &GatewayPlan) -> Block {
    let mut b = Block::new();
    b.set("name", &gw.name)
        .set("listen", gw.listen.render())
        .set_opt("advertise", gw.advertise.as_ref())
        .set("reject_unknown_cluster", gw.reject_unknown);
    if let Some(tls) = &gw.tls {
        b.set("tls", tls.block());
    }
    let remotes: Vec<Value> = gw
        .remotes
        .iter()
        .map(|r| {
            let mut rb = Block::new();
            rb.set("name", &r.name).set("urls", r.urls.clone());
            Value::Block(rb)
        })
        .collect();
    b.set("gateways", Value::List(remotes));
    b
}

/// `leafnodes {}`: the leafnode listener and its TLS, and the leaf remotes.
fn leafnodes_block(plan: &ServerPlan) -> Block {
    let mut b = Block::new();
    if let Some(l) = &plan.leafnodes {
        b.set("listen", l.listen.render())
            .set_opt("advertise", l.advertise.as_ref());
        if let Some(tls) = &l.tls {
            b.set("tls", tls.block());
        }
    }
    if !plan.leaf_remotes.is_empty() {
        let remotes: Vec<Value> = plan
            .leaf_remotes
            .iter()
            .map(|r| {
                let mut rb = Block::new();
                rb.set("urls", r.urls.clone())
                    .set_opt("credentials", r.credentials.as_ref())
                    .set_opt("account", r.account.as_ref());
                if let Some(ca) = &r.ca_file {
                    let mut tls = Block::new();
                    tls.set("ca_file", ca);
                    rb.set("tls", tls);
                }
                Value::Block(rb)
            })
            .collect();
        b.set("remotes", Value::List(remotes));
    }
    b
}

/// The trust roots: operator, system account, resolver and the preloaded accounts.
fn set_trust(top: &mut Block, trust: &TrustPlan) {
    top.set("operator", &trust.operator)
        .set("system_account", &trust.system_account);
    let mut r = Block::new();
    match &trust.resolver {
        ResolverPlan::Full { dir } => {
            r.set("type", "full")
                .set("dir", dir)
                .set("allow_delete", true)
                .set("interval", "2m");
        }
        ResolverPlan::Cache { dir } => {
            r.set("type", "cache").set("dir", dir).set("ttl", "1h");
        }
    }
    top.set("resolver", r);
    if !trust.preload.is_empty() {
        let mut p = Block::new();
        for (key, jwt) in &trust.preload {
            p.set(key, jwt);
        }
        top.set("resolver_preload", p);
    }
}

/// Renders a server's plan as nats.conf text.
pub fn render(plan: &ServerPlan) -> String {
    render_block(plan).to_conf()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A three-server plan for server 0 of `demo`, the shape tests start from.
    pub(crate) fn plan() -> ServerPlan {
        ServerPlan {
            server_name: "demo-0".into(),
            cluster_name: "demo".into(),
            client: Listen::new("0.0.0.0", 4222),
            client_tls: None,
            monitor: Listen::new("0.0.0.0", 8222),
            route_listen: Listen::new("0.0.0.0", 6222),
            routes: (0..3)
                .map(|i| format!("nats://demo-{i}.demo-headless.ns.svc:6222"))
                .collect(),
            route_tls: None,
            tags: vec!["region:east".into()],
            pid_file: "/var/run/nats/nats.pid".into(),
            jetstream: Some(JetStreamPlan {
                store_dir: "/data/jetstream".into(),
                max_memory_store: Some(1 << 30),
                max_file_store: None,
                domain: None,
                sync_interval: Some("always".into()),
            }),
            gateway: None,
            leafnodes: None,
            leaf_remotes: vec![],
            trust: None,
            lame_duck_duration: LAME_DUCK_DURATION.into(),
        }
    }

    #[test]
    fn a_plain_server_renders_its_name_routes_and_jetstream() {
        let text = render(&plan());
        assert!(text.starts_with("server_name: \"demo-0\"\n"), "{text}");
        assert!(text.contains("lame_duck_duration: \"2m\""));
        assert!(text.contains("server_tags: [\"region:east\"]"));
        assert!(text.contains("max_memory_store: 1073741824"));
        assert!(
            !text.contains("max_file_store"),
            "unset limits are left to the server"
        );
        assert!(!text.contains("gateway"));
        assert!(!text.contains("operator"));
    }

    #[rstest::rstest]
    #[case::always(
        "the durable default",
        Some("always"),
        Some("sync_interval: \"always\"")
    )]
    #[case::duration("an opt-out to a timer", Some("2m"), Some("sync_interval: \"2m\""))]
    #[case::unset("a plan stored before the field: the server's default", None, None)]
    fn jetstream_renders_its_sync_interval(
        #[case] what: &str,
        #[case] sync: Option<&str>,
        #[case] line: Option<&str>,
    ) {
        let mut p = plan();
        p.jetstream.as_mut().unwrap().sync_interval = sync.map(str::to_string);
        let text = render(&p);
        match line {
            Some(line) => assert!(text.contains(line), "{what}: {text}"),
            None => assert!(!text.contains("sync_interval"), "{what}: {text}"),
        }
    }

    #[test]
    fn explicit_gateways_reject_unknown_and_list_every_remote() {
        let mut p = plan();
        p.gateway = Some(GatewayPlan {
            name: "demo".into(),
            listen: Listen::new("0.0.0.0", 7222),
            advertise: Some("east.example:7222".into()),
            reject_unknown: true,
            remotes: vec![GatewayRemote {
                name: "west".into(),
                urls: vec!["nats://west.example:7222".into()],
            }],
            tls: Some(TlsFiles {
                cert_file: Some("/tls/gw/tls.crt".into()),
                key_file: Some("/tls/gw/tls.key".into()),
                ca_file: Some("/tls/gw/ca.crt".into()),
                verify: true,
            }),
        });
        let b = render_block(&p);
        let Some(Value::Block(gw)) = b.get("gateway") else {
            panic!("no gateway block")
        };
        assert_eq!(gw.get("reject_unknown_cluster"), Some(&Value::Bool(true)));
        let Some(Value::List(remotes)) = gw.get("gateways") else {
            panic!("no remotes")
        };
        assert_eq!(remotes.len(), 1);
    }

    #[test]
    fn trust_renders_operator_system_account_and_preload() {
        let mut p = plan();
        p.trust = Some(TrustPlan {
            operator: "eyJop".into(),
            system_account: "ASYS".into(),
            resolver: ResolverPlan::Full {
                dir: "/data/resolver".into(),
            },
            preload: vec![("ASYS".into(), "eyJsys".into())],
        });
        let text = render(&p);
        assert!(text.contains("operator: \"eyJop\""));
        assert!(text.contains("system_account: \"ASYS\""));
        assert!(text.contains("type: \"full\""));
        assert!(text.contains("resolver_preload {\n  ASYS: \"eyJsys\"\n}"));
    }
}
