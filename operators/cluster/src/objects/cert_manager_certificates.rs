//! cert-manager Certificates for the listeners whose tls names `certManager` (design §4.1,
//! §4.3): the client certificate issued for the client Service's names, the route certificate
//! for every pod behind the headless Service, and the gateway and leafnode certificates for
//! their external Services and advertised hosts. cert-manager writes each into the Secret the
//! pods mount (`<name>-<listener>-tls`).

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use nats_api::cluster::{CertManagerCertificate, NatsClusterSpec, names};
use serde_json::json;

use super::services::{gateway_service_name, leafnodes_service_name};
use super::{Owner, labels, tls_secret_name};
use crate::route_ca::route_dns_names;

/// The Kubernetes names a Service answers to within the cluster.
fn service_names(service: &str, namespace: &str, cluster_domain: &str) -> Vec<String> {
    vec![
        service.into(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.{cluster_domain}"),
    ]
}

/// The host of an advertise address such as `gw.example.com:443` or `nats://gw.example.com`.
fn advertised_host(advertise: &str) -> String {
    let rest = advertise.split_once("://").map_or(advertise, |(_, r)| r);
    rest.rsplit_once(':').map_or(rest, |(h, _)| h).to_string()
}

fn certificate(
    owner: &Owner,
    listener: &str,
    issuer: &CertManagerCertificate,
    dns_names: Vec<String>,
    both_ways: bool,
) -> DynamicObject {
    let gvk = GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate");
    let name = tls_secret_name(&owner.name, listener, None);
    let mut issuer_ref = json!({"name": issuer.issuer_ref.name});
    if let Some(k) = &issuer.issuer_ref.kind {
        issuer_ref["kind"] = json!(k);
    }
    if let Some(g) = &issuer.issuer_ref.group {
        issuer_ref["group"] = json!(g);
    }
    let mut usages = vec!["digital signature", "key encipherment", "server auth"];
    if both_ways {
        usages.push("client auth");
    }
    let mut obj = DynamicObject::new(&name, &ApiResource::from_gvk(&gvk));
    obj.metadata = owner.meta(name.clone(), labels::cluster(&owner.name));
    obj.data = json!({
        "spec": {
            "secretName": name,
            "issuerRef": issuer_ref,
            "dnsNames": dns_names,
            "usages": usages,
        }
    });
    obj
}

/// Every Certificate the NatsCluster asks cert-manager for.
pub fn certificates(
    owner: &Owner,
    spec: &NatsClusterSpec,
    cluster_domain: &str,
) -> Vec<DynamicObject> {
    let (name, ns) = (owner.name.as_str(), owner.namespace.as_str());
    let mut out = vec![];
    if let Some(cm) = spec.tls.as_ref().and_then(|t| t.cert_manager.as_ref()) {
        let dns = service_names(&names::client_service(name), ns, cluster_domain);
        out.push(certificate(owner, "client", cm, dns, false));
    }
    if let Some(cm) = spec
        .routes
        .as_ref()
        .and_then(|r| r.tls.as_ref())
        .filter(|t| t.enabled)
        .and_then(|t| t.cert_manager.as_ref())
    {
        let mut dns = route_dns_names(name, ns, cluster_domain);
        dns.retain(|d| d != "localhost");
        out.push(certificate(owner, "routes", cm, dns, true));
    }
    if let Some(gw) = spec.gateway.as_ref()
        && let Some(cm) = gw.tls.as_ref().and_then(|t| t.cert_manager.as_ref())
    {
        let mut dns = service_names(&gateway_service_name(name), ns, cluster_domain);
        dns.extend(gw.advertise.as_deref().map(advertised_host));
        // Gateways verify each other both ways (design §4.3).
        out.push(certificate(owner, "gateway", cm, dns, true));
    }
    if let Some(l) = spec.leafnodes.as_ref()
        && let Some(cm) = l.tls.as_ref().and_then(|t| t.cert_manager.as_ref())
    {
        let mut dns = service_names(&leafnodes_service_name(name), ns, cluster_domain);
        dns.extend(l.advertise.as_deref().map(advertised_host));
        out.push(certificate(owner, "leafnodes", cm, dns, false));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::{owner, spec};

    fn certs(yaml: &str) -> Vec<DynamicObject> {
        certificates(&owner(), &spec(yaml), "cluster.local")
    }

    fn names_of(c: &[DynamicObject]) -> Vec<String> {
        c.iter().filter_map(|c| c.metadata.name.clone()).collect()
    }

    #[test]
    fn none_without_cert_manager() {
        assert!(certs("version: 2.15.1\nreplicas: 1\n").is_empty());
        assert!(certs("version: 2.15.1\nreplicas: 1\ntls: {secretRef: {name: c}}\n").is_empty());
    }

    #[test]
    fn the_client_certificate_is_issued_for_the_client_service_names() {
        let c = certs(
            "version: 2.15.1\nreplicas: 1\ntls: {certManager: {issuerRef: {name: ca, kind: ClusterIssuer}}}\n",
        );
        assert_eq!(names_of(&c), vec!["demo-client-tls"]);
        let spec = &c[0].data["spec"];
        assert_eq!(spec["secretName"], "demo-client-tls");
        assert_eq!(spec["issuerRef"]["kind"], "ClusterIssuer");
        assert_eq!(
            spec["dnsNames"],
            json!([
                "demo",
                "demo.nats",
                "demo.nats.svc",
                "demo.nats.svc.cluster.local"
            ])
        );
        assert_eq!(
            c[0].types.as_ref().map(|t| t.kind.as_str()),
            Some("Certificate")
        );
        assert_eq!(
            c[0].metadata.owner_references.clone().expect("owner")[0].controller,
            Some(true)
        );
    }

    #[test]
    fn routes_gateway_and_leafnodes() {
        let c = certs(
            "version: 2.15.1\nreplicas: 1\nroutes: {tls: {certManager: {issuerRef: {name: ca}}}}\nauth: {trustRef: {name: t}}\ngateway: {discovery: Explicit, remotes: [{name: w, url: 'nats://w:7222'}], advertise: 'gw.example.com:443', tls: {certManager: {issuerRef: {name: ca}}}}\nleafnodes: {advertise: 'nats-leaf://leaf.example.com:7422', tls: {certManager: {issuerRef: {name: ca}}}}\n",
        );
        assert_eq!(
            names_of(&c),
            vec!["demo-routes-tls", "demo-gateway-tls", "demo-leafnodes-tls"]
        );
        assert_eq!(
            c[0].data["spec"]["dnsNames"][0],
            "*.demo-headless.nats.svc.cluster.local"
        );
        let usages = |i: usize| c[i].data["spec"]["usages"].to_string();
        assert!(usages(0).contains("client auth"), "routes verify both ways");
        assert!(
            usages(1).contains("client auth"),
            "gateways verify both ways"
        );
        let gw_dns = c[1].data["spec"]["dnsNames"].to_string();
        assert!(gw_dns.contains("gw.example.com"), "{gw_dns}");
        assert!(gw_dns.contains("demo-gateway.nats.svc"), "{gw_dns}");
        assert!(
            c[2].data["spec"]["dnsNames"]
                .to_string()
                .contains("\"leaf.example.com\"")
        );
    }

    #[rstest::rstest]
    #[case("gw.example.com:443", "gw.example.com")]
    #[case("nats://gw.example.com:7222", "gw.example.com")]
    #[case("gw.example.com", "gw.example.com")]
    fn advertised_hosts(#[case] a: &str, #[case] host: &str) {
        assert_eq!(advertised_host(a), host);
    }
}
