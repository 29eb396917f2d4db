//! The Service names of local NatsClusters, resolved to their loopback servers: what cluster DNS
//! does for pods, done for the local backend (`sim up` installs it with
//! [`nats_wire::names::resolve_names_with`]).
//!
//! The names are the ones the cluster controller renders and a NatsConnection names:
//! - the client Service, `<cluster>.<namespace>.svc` (with or without `.<cluster domain>`): every
//!   server's client listener, as the Service spreads connections over its pods;
//! - one pod behind the headless Service, `<cluster>-<i>.<cluster>-headless.<namespace>.svc…`:
//!   server `i`'s client listener.
//!
//! - the gateway and leafnode Services, `<cluster>-gateway.<namespace>.svc…` and
//!   `<cluster>-leafnodes.<namespace>.svc…`: every server's gateway or leafnode listener, for
//!   the gateway and leaf remotes a server dials.
//!
//! On the client Service and a pod's name the port picks the listener, as it would on the pod.
//! A name of any other shape, or of a NatsCluster this backend does not run, is left to the
//! system resolver.

use cluster_controller::plan::STANDARD_PORTS;

/// Which listener of the servers a name and port lead to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    Client,
    Gateway,
    Leafnodes,
}

/// The listener a pod's standard port is.
pub fn by_port(port: u16) -> Listener {
    if port == STANDARD_PORTS.gateway {
        Listener::Gateway
    } else if port == STANDARD_PORTS.leafnode {
        Listener::Leafnodes
    } else {
        Listener::Client
    }
}

/// The NatsCluster (by name) and listener a Service name and port lead to, given which
/// NatsClusters of the namespace this backend runs (`exists(namespace, name)`): a cluster named
/// as the name says first, else the gateway or leafnode Service of one.
pub fn resolve(
    target: &ServiceTarget,
    port: u16,
    exists: impl Fn(&str, &str) -> bool,
) -> Option<(String, Listener)> {
    if exists(&target.namespace, &target.cluster) {
        return Some((target.cluster.clone(), by_port(port)));
    }
    if target.ordinal.is_some() {
        return None;
    }
    [
        ("-gateway", Listener::Gateway),
        ("-leafnodes", Listener::Leafnodes),
    ]
    .into_iter()
    .find_map(|(suffix, l)| {
        let c = target.cluster.strip_suffix(suffix)?;
        exists(&target.namespace, c).then(|| (c.to_string(), l))
    })
}

/// What a Service name leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceTarget {
    pub namespace: String,
    pub cluster: String,
    /// One server (a pod's name), or every server (the client Service).
    pub ordinal: Option<u32>,
}

/// The rule: which local servers a host name names, if it is a Service name.
pub fn service_target(host: &str) -> Option<ServiceTarget> {
    let all: Vec<&str> = host.trim_end_matches('.').split('.').collect();
    // The labels before the first `svc` label; what follows it is the cluster domain.
    let svc = 2 + all.iter().skip(2).position(|l| *l == "svc")?;
    let labels = &all[..svc];
    match labels {
        [cluster, namespace] if !cluster.is_empty() && !namespace.is_empty() => {
            Some(ServiceTarget {
                namespace: (*namespace).into(),
                cluster: (*cluster).into(),
                ordinal: None,
            })
        }
        [pod, headless, namespace] => {
            let cluster = headless.strip_suffix("-headless")?;
            let ordinal = pod.strip_prefix(cluster)?.strip_prefix('-')?.parse().ok()?;
            (!cluster.is_empty() && !namespace.is_empty()).then(|| ServiceTarget {
                namespace: (*namespace).into(),
                cluster: cluster.into(),
                ordinal: Some(ordinal),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn t(ns: &str, cluster: &str, ordinal: Option<u32>) -> Option<ServiceTarget> {
        Some(ServiceTarget {
            namespace: ns.into(),
            cluster: cluster.into(),
            ordinal,
        })
    }

    #[rstest]
    #[case("demo.nats.svc", t("nats", "demo", None))]
    #[case("demo.nats.svc.cluster.local", t("nats", "demo", None))]
    #[case("demo.nats.svc.cluster.local.", t("nats", "demo", None))]
    #[case("demo-2.demo-headless.nats.svc", t("nats", "demo", Some(2)))]
    #[case(
        "demo-0.demo-headless.nats.svc.example.org",
        t("nats", "demo", Some(0))
    )]
    #[case(
        "my-nats-1.my-nats-headless.team-a.svc",
        t("team-a", "my-nats", Some(1))
    )]
    #[case("demo-x.demo-headless.nats.svc", None)]
    #[case("other-1.demo-headless.nats.svc", None)]
    #[case("demo.nats", None)]
    #[case("demo", None)]
    #[case("127.0.0.1", None)]
    #[case("demo.nats.svcx", None)]
    #[case("demo.nats.svc.", t("nats", "demo", None))]
    #[case(".nats.svc", None)]
    #[case("a.b.c.d.svc", None)]
    #[case("svc.nats.svc", t("nats", "svc", None))]
    fn service_names_name_local_servers(#[case] host: &str, #[case] want: Option<ServiceTarget>) {
        assert_eq!(service_target(host), want, "{host}");
    }

    #[rstest]
    #[case("demo", 4222, Some(("demo", Listener::Client)))]
    #[case("demo", 7222, Some(("demo", Listener::Gateway)))]
    #[case("demo", 7422, Some(("demo", Listener::Leafnodes)))]
    #[case("demo-gateway", 7222, Some(("demo", Listener::Gateway)))]
    #[case("demo-leafnodes", 7422, Some(("demo", Listener::Leafnodes)))]
    #[case("demo-gateway", 4222, Some(("demo", Listener::Gateway)))]
    #[case("other", 4222, None)]
    #[case("other-gateway", 7222, None)]
    // A NatsCluster itself named like a gateway Service is the one meant.
    #[case("edge-gateway", 4222, Some(("edge-gateway", Listener::Client)))]
    fn a_name_leads_to_a_cluster_and_listener(
        #[case] cluster: &str,
        #[case] port: u16,
        #[case] want: Option<(&str, Listener)>,
    ) {
        let exists = |ns: &str, c: &str| ns == "nats" && (c == "demo" || c == "edge-gateway");
        let target = ServiceTarget {
            namespace: "nats".into(),
            cluster: cluster.into(),
            ordinal: None,
        };
        assert_eq!(
            resolve(&target, port, exists),
            want.map(|(c, l)| (c.to_string(), l))
        );
    }

    #[test]
    fn a_pod_name_of_an_unknown_cluster_is_left_alone() {
        let target = ServiceTarget {
            namespace: "nats".into(),
            cluster: "demo-gateway".into(),
            ordinal: Some(0),
        };
        assert_eq!(resolve(&target, 7222, |_, c| c == "demo"), None);
    }
}
