//! status.endpoints (design §4.1, §4.7): where clients, monitoring and gateway peers reach the
//! NATS cluster. Clients dial `tls://` when the client listener runs TLS.

use nats_api::cluster::{Endpoints, NatsClusterSpec, names};

use super::services::gateway_service_name;
use crate::render::ServerPlan;

/// The endpoints of NatsCluster `name` in `namespace`, from its spec and a server's plan.
pub fn endpoints(
    name: &str,
    namespace: &str,
    spec: &NatsClusterSpec,
    plan: &ServerPlan,
) -> Endpoints {
    let scheme = if plan.client_tls.is_some() {
        "tls"
    } else {
        "nats"
    };
    let gateway = plan.gateway.as_ref().and_then(|gw| match &gw.advertise {
        Some(a) => Some(a.clone()),
        None => spec
            .gateway
            .as_ref()
            .and_then(|g| g.service.as_ref())
            .map(|_| {
                format!(
                    "nats://{}.{namespace}.svc:{}",
                    gateway_service_name(name),
                    gw.listen.port
                )
            }),
    });
    Endpoints {
        client: Some(format!(
            "{scheme}://{}.{namespace}.svc:{}",
            names::client_service(name),
            plan.client.port
        )),
        monitor: Some(format!(
            "http://{}.{namespace}.svc:{}",
            names::headless_service(name),
            plan.monitor.port
        )),
        gateway,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::spec;
    use crate::plan::{ClusterInputs, KubernetesLayout, plan_servers};

    fn endpoints_of(yaml: &str) -> Endpoints {
        let s = spec(yaml);
        let p = plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: &s,
                trust: None,
                account_preloads: vec![],
                leaf_remotes: vec![],
            },
            &KubernetesLayout {
                name: "demo".into(),
                namespace: "nats".into(),
                cluster_domain: "cluster.local".into(),
            },
        )
        .expect("plans");
        endpoints("demo", "nats", &s, &p[0])
    }

    const GW: &str = "auth: {trustRef: {name: t}}\ngateway: {discovery: Explicit, remotes: [{name: w, url: 'nats://w:7222'}], tls: {secretRef: {name: gw}}";

    #[rstest::rstest]
    // The quickstart story's status.
    #[case("", "nats://demo.nats.svc:4222", None)]
    #[case("tls: {secretRef: {name: c}}\n", "tls://demo.nats.svc:4222", None)]
    #[case(&format!("{GW}}}\n"), "nats://demo.nats.svc:4222", None)]
    #[case(&format!("{GW}, service: {{type: LoadBalancer}}}}\n"), "nats://demo.nats.svc:4222", Some("nats://demo-gateway.nats.svc:7222"))]
    #[case(&format!("{GW}, advertise: 'gw.example.com:443'}}\n"), "nats://demo.nats.svc:4222", Some("gw.example.com:443"))]
    fn endpoint_table(#[case] extra: &str, #[case] client: &str, #[case] gateway: Option<&str>) {
        let e = endpoints_of(&format!("version: 2.15.1\nreplicas: 3\n{extra}"));
        assert_eq!(e.client.as_deref(), Some(client));
        assert_eq!(
            e.monitor.as_deref(),
            Some("http://demo-headless.nats.svc:8222")
        );
        assert_eq!(e.gateway.as_deref(), gateway);
    }
}
