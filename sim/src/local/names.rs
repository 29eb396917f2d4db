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
//! A name of any other shape is left to the system resolver.

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
}
