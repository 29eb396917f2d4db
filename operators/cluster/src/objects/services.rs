//! The Services of a NatsCluster (design §4.1, §4.3): the client Service (client port only,
//! never monitoring), the headless Service (every port, not-ready pods too), and the external
//! gateway and leafnode Services rendered from spec.gateway.service and spec.leafnodes.service.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nats_api::cluster::{NatsClusterSpec, ServiceTemplate, ServiceType, names};

use super::{METRICS_PORT, Owner, labels, port_name};
use crate::render::ServerPlan;

fn service_port(name: &str, port: u16) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port: i32::from(port),
        target_port: Some(IntOrString::String(name.into())),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// The external gateway Service's name.
pub fn gateway_service_name(cluster: &str) -> String {
    format!("{cluster}-gateway")
}

/// The external leafnode Service's name.
pub fn leafnodes_service_name(cluster: &str) -> String {
    format!("{cluster}-leafnodes")
}

/// The client Service `<name>`: the client port only; the monitoring port has no
/// authentication and is never on it.
pub fn client_service(owner: &Owner, plan: &ServerPlan) -> Service {
    Service {
        metadata: owner.meta(
            names::client_service(&owner.name),
            labels::cluster(&owner.name),
        ),
        spec: Some(ServiceSpec {
            selector: Some(labels::selector(&owner.name)),
            ports: Some(vec![service_port(port_name::CLIENT, plan.client.port)]),
            ..Default::default()
        }),
        status: None,
    }
}

/// The headless Service `<name>-headless`: every port the servers listen on, monitoring
/// included, and the addresses of pods not yet ready, which routes need to form the cluster.
pub fn headless_service(owner: &Owner, spec: &NatsClusterSpec, plan: &ServerPlan) -> Service {
    let mut ports = vec![
        service_port(port_name::CLIENT, plan.client.port),
        service_port(port_name::CLUSTER, plan.route_listen.port),
        service_port(port_name::MONITOR, plan.monitor.port),
    ];
    if let Some(gw) = &plan.gateway {
        ports.push(service_port(port_name::GATEWAY, gw.listen.port));
    }
    if let Some(l) = &plan.leafnodes {
        ports.push(service_port(port_name::LEAFNODES, l.listen.port));
    }
    if spec.exporter_enabled() {
        ports.push(service_port(port_name::METRICS, METRICS_PORT));
    }
    Service {
        metadata: owner.meta(
            names::headless_service(&owner.name),
            labels::cluster(&owner.name),
        ),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(labels::selector(&owner.name)),
            ports: Some(ports),
            ..Default::default()
        }),
        status: None,
    }
}

fn from_template(owner: &Owner, name: String, t: &ServiceTemplate, port: ServicePort) -> Service {
    let mut meta = owner.meta(name, labels::cluster(&owner.name));
    if !t.annotations.is_empty() {
        meta.annotations = Some(t.annotations.clone());
    }
    let type_ = t.type_.map(|t| match t {
        ServiceType::ClusterIP => "ClusterIP",
        ServiceType::NodePort => "NodePort",
        ServiceType::LoadBalancer => "LoadBalancer",
    });
    Service {
        metadata: meta,
        spec: Some(ServiceSpec {
            type_: type_.map(Into::into),
            selector: Some(labels::selector(&owner.name)),
            ports: Some(vec![port]),
            load_balancer_source_ranges: t.load_balancer_source_ranges.clone(),
            load_balancer_class: t.load_balancer_class.clone(),
            ..Default::default()
        }),
        status: None,
    }
}

/// The external gateway Service, when spec.gateway.service is set.
pub fn gateway_service(
    owner: &Owner,
    spec: &NatsClusterSpec,
    plan: &ServerPlan,
) -> Option<Service> {
    let t = spec.gateway.as_ref()?.service.as_ref()?;
    let port = plan.gateway.as_ref()?.listen.port;
    let mut service = from_template(
        owner,
        gateway_service_name(&owner.name),
        t,
        service_port(port_name::GATEWAY, port),
    );
    // A server is Ready once JetStream has a meta leader, and the meta group of a supercluster
    // spans its members: their gateways must reach servers that are not Ready yet, or members
    // starting together wait on each other forever.
    if let Some(s) = service.spec.as_mut() {
        s.publish_not_ready_addresses = Some(true);
    }
    Some(service)
}

/// The external leafnode Service, when spec.leafnodes.service is set.
pub fn leafnodes_service(
    owner: &Owner,
    spec: &NatsClusterSpec,
    plan: &ServerPlan,
) -> Option<Service> {
    let t = spec.leafnodes.as_ref()?.service.as_ref()?;
    let port = plan.leafnodes.as_ref()?.listen.port;
    Some(from_template(
        owner,
        leafnodes_service_name(&owner.name),
        t,
        service_port(port_name::LEAFNODES, port),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::{owner, spec};
    use crate::plan::{ClusterInputs, KubernetesLayout, plan_servers};

    fn plan(s: &NatsClusterSpec) -> ServerPlan {
        plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: s,
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
        .expect("plans")
        .remove(0)
    }

    fn port_names(s: &Service) -> Vec<String> {
        s.spec
            .iter()
            .flat_map(|s| s.ports.iter().flatten())
            .filter_map(|p| p.name.clone())
            .collect()
    }

    const FULL: &str = "version: 2.15.1\nreplicas: 3\nauth: {trustRef: {name: t}}\ngateway:\n  discovery: Explicit\n  remotes: [{name: w, url: 'nats://w:7222'}]\n  tls: {secretRef: {name: gw}}\n  service: {type: LoadBalancer, annotations: {a: b}, loadBalancerSourceRanges: [10.0.0.0/8]}\nleafnodes:\n  service: {type: NodePort}\n";

    #[rstest::rstest]
    #[case("version: 2.15.1\nreplicas: 3\n", &["client"], &["client", "cluster", "monitor", "metrics"])]
    #[case("version: 2.15.1\nreplicas: 3\nexporter: {enabled: false}\n", &["client"], &["client", "cluster", "monitor"])]
    #[case(FULL, &["client"], &["client", "cluster", "monitor", "gateway", "leafnodes", "metrics"])]
    fn client_and_headless_ports(
        #[case] yaml: &str,
        #[case] client: &[&str],
        #[case] headless: &[&str],
    ) {
        let s = spec(yaml);
        let p = plan(&s);
        let c = client_service(&owner(), &p);
        assert_eq!(c.metadata.name.as_deref(), Some("demo"));
        assert_eq!(port_names(&c), client);
        let h = headless_service(&owner(), &s, &p);
        assert_eq!(h.metadata.name.as_deref(), Some("demo-headless"));
        assert_eq!(port_names(&h), headless);
        let hs = h.spec.expect("spec");
        assert_eq!(hs.cluster_ip.as_deref(), Some("None"));
        assert_eq!(hs.publish_not_ready_addresses, Some(true));
        assert_eq!(hs.selector, Some(labels::selector("demo")));
    }

    #[test]
    fn external_services_follow_their_templates() {
        let s = spec(FULL);
        let p = plan(&s);
        let gw = gateway_service(&owner(), &s, &p).expect("gateway service");
        assert_eq!(gw.metadata.name.as_deref(), Some("demo-gateway"));
        assert_eq!(gw.metadata.annotations.clone().expect("ann")["a"], "b");
        let gs = gw.spec.clone().expect("spec");
        assert_eq!(gs.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(
            gs.publish_not_ready_addresses,
            Some(true),
            "peers reach servers waiting for the supercluster's meta leader"
        );
        assert_eq!(
            gs.load_balancer_source_ranges,
            Some(vec!["10.0.0.0/8".into()])
        );
        assert_eq!(port_names(&gw), vec!["gateway"]);
        let leaf = leafnodes_service(&owner(), &s, &p).expect("leafnode service");
        assert_eq!(leaf.metadata.name.as_deref(), Some("demo-leafnodes"));
        assert_eq!(
            leaf.spec.clone().and_then(|s| s.type_).as_deref(),
            Some("NodePort")
        );
        assert_eq!(port_names(&leaf), vec!["leafnodes"]);

        let plain = spec("version: 2.15.1\nreplicas: 1\n");
        assert!(gateway_service(&owner(), &plain, &plan(&plain)).is_none());
        assert!(leafnodes_service(&owner(), &plain, &plan(&plain)).is_none());
    }
}
