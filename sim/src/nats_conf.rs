//! A small typed builder for nats-server configuration files, with room for raw extra text
//! (other crates run operator mode or accounts with their own blocks).

use std::fmt::Write as _;
use std::path::PathBuf;

/// One server's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub http_port: u16,
    pub pid_file: PathBuf,
    pub jetstream: Option<JetStreamBlock>,
    pub cluster: Option<ClusterBlock>,
    pub gateway: Option<GatewayBlock>,
    pub leafnodes: Option<LeafNodesBlock>,
    pub tags: Vec<String>,
    /// e.g. "30s"; nats-server refuses less than 30s.
    pub lame_duck_duration: Option<String>,
    /// e.g. "0s"; the wait before lame duck starts closing clients.
    pub lame_duck_grace_period: Option<String>,
    /// Raw text appended verbatim (operator mode, accounts, authorization …).
    pub extra: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JetStreamBlock {
    pub store_dir: PathBuf,
    pub domain: Option<String>,
    pub max_memory_store: Option<u64>,
    pub max_file_store: Option<u64>,
    /// `sync_interval`: `always` or a Go duration; `None` leaves the server's default (2m).
    pub sync_interval: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClusterBlock {
    pub name: String,
    pub port: u16,
    /// `nats-route://host:port` URLs of the other servers of the cluster.
    pub routes: Vec<String>,
    /// `host:port` the server tells its route peers to dial it at (gossip), if not its listener.
    pub advertise: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GatewayBlock {
    pub name: String,
    pub port: u16,
    /// Address other servers are told to dial (a sim proxy when links must be cuttable).
    pub advertise: Option<String>,
    pub reject_unknown_cluster: bool,
    pub gateways: Vec<RemoteGateway>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RemoteGateway {
    pub name: String,
    pub urls: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LeafNodesBlock {
    /// Accept leaf connections on this port (hub side).
    pub port: Option<u16>,
    pub advertise: Option<String>,
    pub remotes: Vec<LeafRemote>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LeafRemote {
    pub urls: Vec<String>,
    pub account: Option<String>,
    pub credentials: Option<PathBuf>,
}

impl ServerConfig {
    /// A standalone server listening on 127.0.0.1.
    pub fn new(name: impl Into<String>, port: u16, http_port: u16, pid_file: PathBuf) -> Self {
        ServerConfig {
            name: name.into(),
            host: "127.0.0.1".to_string(),
            port,
            http_port,
            pid_file,
            jetstream: None,
            cluster: None,
            gateway: None,
            leafnodes: None,
            tags: Vec::new(),
            lame_duck_duration: Some("30s".to_string()),
            lame_duck_grace_period: Some("0s".to_string()),
            extra: String::new(),
        }
    }

    /// The nats.conf text: the server's own settings, then its jetstream, cluster, gateway and
    /// leafnodes blocks, then the raw extra text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_server(&mut out);
        if let Some(js) = &self.jetstream {
            render_jetstream(&mut out, js);
        }
        if let Some(c) = &self.cluster {
            let _ = writeln!(out, "cluster {{");
            let _ = writeln!(out, "  name: {}", q(&c.name));
            let _ = writeln!(out, "  listen: {}", q(&format!("{}:{}", self.host, c.port)));
            if let Some(a) = &c.advertise {
                let _ = writeln!(out, "  advertise: {}", q(a));
            }
            let _ = writeln!(out, "  routes: [{}]", list(&c.routes));
            let _ = writeln!(out, "}}");
        }
        if let Some(g) = &self.gateway {
            self.render_gateway(&mut out, g);
        }
        if let Some(l) = &self.leafnodes {
            self.render_leafnodes(&mut out, l);
        }
        if !self.extra.is_empty() {
            out.push_str(&self.extra);
            if !self.extra.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }

    /// Name, listeners, pid file, lame duck and tags.
    fn render_server(&self, out: &mut String) {
        let _ = writeln!(out, "server_name: {}", q(&self.name));
        let _ = writeln!(
            out,
            "listen: {}",
            q(&format!("{}:{}", self.host, self.port))
        );
        let _ = writeln!(
            out,
            "http: {}",
            q(&format!("{}:{}", self.host, self.http_port))
        );
        let _ = writeln!(out, "pid_file: {}", q(&self.pid_file.display().to_string()));
        if let Some(d) = &self.lame_duck_duration {
            let _ = writeln!(out, "lame_duck_duration: {}", q(d));
        }
        if let Some(g) = &self.lame_duck_grace_period {
            let _ = writeln!(out, "lame_duck_grace_period: {}", q(g));
        }
        if !self.tags.is_empty() {
            let tags: Vec<String> = self.tags.iter().map(|t| q(t)).collect();
            let _ = writeln!(out, "server_tags: [{}]", tags.join(", "));
        }
    }

    fn render_gateway(&self, out: &mut String, g: &GatewayBlock) {
        let _ = writeln!(out, "gateway {{");
        let _ = writeln!(out, "  name: {}", q(&g.name));
        let _ = writeln!(out, "  listen: {}", q(&format!("{}:{}", self.host, g.port)));
        if let Some(a) = &g.advertise {
            let _ = writeln!(out, "  advertise: {}", q(a));
        }
        if g.reject_unknown_cluster {
            let _ = writeln!(out, "  reject_unknown_cluster: true");
        }
        let _ = writeln!(out, "  gateways: [");
        for r in &g.gateways {
            let _ = writeln!(
                out,
                "    {{ name: {}, urls: [{}] }}",
                q(&r.name),
                list(&r.urls)
            );
        }
        let _ = writeln!(out, "  ]");
        let _ = writeln!(out, "}}");
    }

    fn render_leafnodes(&self, out: &mut String, l: &LeafNodesBlock) {
        let _ = writeln!(out, "leafnodes {{");
        if let Some(p) = l.port {
            let _ = writeln!(out, "  listen: {}", q(&format!("{}:{}", self.host, p)));
        }
        if let Some(a) = &l.advertise {
            let _ = writeln!(out, "  advertise: {}", q(a));
        }
        if !l.remotes.is_empty() {
            let _ = writeln!(out, "  remotes: [");
            for r in &l.remotes {
                let mut fields = vec![format!("urls: [{}]", list(&r.urls))];
                if let Some(a) = &r.account {
                    fields.push(format!("account: {}", q(a)));
                }
                if let Some(c) = &r.credentials {
                    fields.push(format!("credentials: {}", q(&c.display().to_string())));
                }
                let _ = writeln!(out, "    {{ {} }}", fields.join(", "));
            }
            let _ = writeln!(out, "  ]");
        }
        let _ = writeln!(out, "}}");
    }
}

fn render_jetstream(out: &mut String, js: &JetStreamBlock) {
    let _ = writeln!(out, "jetstream {{");
    let _ = writeln!(
        out,
        "  store_dir: {}",
        q(&js.store_dir.display().to_string())
    );
    if let Some(d) = &js.domain {
        let _ = writeln!(out, "  domain: {}", q(d));
    }
    if let Some(m) = js.max_memory_store {
        let _ = writeln!(out, "  max_memory_store: {m}");
    }
    if let Some(m) = js.max_file_store {
        let _ = writeln!(out, "  max_file_store: {m}");
    }
    if let Some(s) = &js.sync_interval {
        // Quoted: unquoted, `2m` is the number two million to the config parser.
        let _ = writeln!(out, "  sync_interval: {}", q(s));
    }
    let _ = writeln!(out, "}}");
}

/// A double-quoted config string (JSON escaping is a subset the config parser accepts).
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn list(items: &[String]) -> String {
    items.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_block() {
        let mut c = ServerConfig::new("c1-0", 4222, 8222, "/tmp/x.pid".into());
        c.tags = vec!["az:1".into()];
        c.jetstream = Some(JetStreamBlock {
            store_dir: "/tmp/js".into(),
            domain: Some("hub".into()),
            max_memory_store: Some(1 << 20),
            max_file_store: None,
            sync_interval: Some("2m".into()),
        });
        c.cluster = Some(ClusterBlock {
            name: "c1".into(),
            port: 6222,
            routes: vec!["nats-route://127.0.0.1:6223".into()],
            advertise: Some("127.0.0.1:6300".into()),
        });
        c.gateway = Some(GatewayBlock {
            name: "c1".into(),
            port: 7222,
            advertise: None,
            reject_unknown_cluster: true,
            gateways: vec![RemoteGateway {
                name: "c2".into(),
                urls: vec!["nats://127.0.0.1:7223".into()],
            }],
        });
        c.leafnodes = Some(LeafNodesBlock {
            port: Some(7422),
            advertise: None,
            remotes: vec![],
        });
        c.extra = "accounts { A: {} }".into();
        let text = c.render();
        for needle in [
            "server_name: \"c1-0\"",
            "server_tags: [\"az:1\"]",
            "domain: \"hub\"",
            "sync_interval: \"2m\"",
            "routes: [\"nats-route://127.0.0.1:6223\"]",
            "advertise: \"127.0.0.1:6300\"",
            "reject_unknown_cluster: true",
            "{ name: \"c2\", urls: [\"nats://127.0.0.1:7223\"] }",
            "listen: \"127.0.0.1:7422\"",
            "accounts { A: {} }\n",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }
}
