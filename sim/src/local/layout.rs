//! The sim's local servers as a [`Layout`]: every server on 127.0.0.1 with ports of its own and
//! its files under a directory of its own, so the same planning and rendering that serve pods
//! bring up real local processes.

use std::path::PathBuf;

use cluster_controller::plan::{Layout, Ports};

/// Servers on loopback; `ports[i]` are server i's, allocated by the caller (the sim picks free
/// ones), and `root/<ordinal>/` holds each server's data, pid file, TLS files and leaf remotes.
#[derive(Clone)]
pub struct LocalLayout {
    pub root: PathBuf,
    pub ports: Vec<Ports>,
    /// Where a gateway or leaf remote naming a local NatsCluster's Service leads
    /// ([`super::names`]); without it remote URLs are dialled as written.
    pub remotes: Option<nats_wire::names::ServiceNames>,
}

impl std::fmt::Debug for LocalLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLayout")
            .field("root", &self.root)
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

/// The loopback address every local server binds and dials.
pub const LOCAL_HOST: &str = "127.0.0.1";

impl LocalLayout {
    pub fn new(root: impl Into<PathBuf>, ports: Vec<Ports>) -> Self {
        Self {
            root: root.into(),
            ports,
            remotes: None,
        }
    }

    /// Leads remote URLs that name a local NatsCluster's Service to its loopback listeners.
    pub fn with_remotes(mut self, names: nats_wire::names::ServiceNames) -> Self {
        self.remotes = Some(names);
        self
    }

    /// Server `ordinal`'s own directory.
    pub fn server_dir(&self, ordinal: u32) -> PathBuf {
        self.root.join(ordinal.to_string())
    }

    fn path(&self, ordinal: u32, rest: &str) -> String {
        self.server_dir(ordinal).join(rest).display().to_string()
    }
}

impl Layout for LocalLayout {
    fn bind_host(&self) -> String {
        LOCAL_HOST.into()
    }
    fn remote_urls(&self, url: &str) -> Vec<String> {
        let (Some(names), Ok(addr)) = (&self.remotes, url.parse::<async_nats::ServerAddr>()) else {
            return vec![url.to_string()];
        };
        nats_wire::names::expand_with(names.as_ref(), vec![addr])
            .iter()
            .map(|a| a.as_url_str().trim_end_matches('/').to_string())
            .collect()
    }
    /// Ports of a server the caller allocated none for are all 0: nats-server then picks any
    /// free port, which no peer can route to, so a short allocation shows at once.
    fn ports(&self, ordinal: u32) -> Ports {
        self.ports.get(ordinal as usize).copied().unwrap_or(Ports {
            client: 0,
            monitor: 0,
            route: 0,
            gateway: 0,
            leafnode: 0,
        })
    }
    fn route_url(&self, ordinal: u32) -> String {
        format!("nats://{LOCAL_HOST}:{}", self.ports(ordinal).route)
    }
    fn data_dir(&self, ordinal: u32) -> String {
        self.path(ordinal, "data")
    }
    fn pid_file(&self, ordinal: u32) -> String {
        self.path(ordinal, "nats.pid")
    }
    fn tls_dir(&self, ordinal: u32, listener: &str) -> String {
        self.path(ordinal, &format!("tls/{listener}"))
    }
    fn leaf_remotes_dir(&self, ordinal: u32) -> String {
        self.path(ordinal, "leaf-remotes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster_controller::plan::{ClusterInputs, plan_servers};
    use nats_api::cluster::NatsClusterSpec;

    fn spec(yaml: &str) -> NatsClusterSpec {
        serde_yaml::from_str(yaml).expect("spec")
    }

    fn ports(base: u16) -> Ports {
        Ports {
            client: base,
            monitor: base + 1,
            route: base + 2,
            gateway: base + 3,
            leafnode: base + 4,
        }
    }

    #[test]
    fn each_server_has_its_own_ports_and_directory() {
        let layout = LocalLayout::new("/tmp/sim", vec![ports(20000), ports(20010)]);
        let s = spec("version: 2.15.1\nreplicas: 2\njetstream: {}\n");
        let p = plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: &s,
                trust: None,
                account_preloads: vec![],
                leaf_remotes: vec![],
            },
            &layout,
        )
        .expect("plans");
        assert_eq!(p[1].client.host, "127.0.0.1");
        assert_eq!(p[1].client.port, 20010);
        assert_eq!(p[1].monitor.port, 20011);
        assert_eq!(
            p[0].routes,
            vec!["nats://127.0.0.1:20002", "nats://127.0.0.1:20012"]
        );
        assert_eq!(p[1].pid_file, "/tmp/sim/1/nats.pid");
        assert_eq!(
            p[1].jetstream.as_ref().map(|j| j.store_dir.as_str()),
            Some("/tmp/sim/1/data/jetstream")
        );
        assert_eq!(
            p[0].route_tls.as_ref().and_then(|t| t.ca_file.as_deref()),
            Some("/tmp/sim/0/tls/routes/ca.crt")
        );
        assert_eq!(layout.ports(5).client, 0, "unallocated");
    }
}
