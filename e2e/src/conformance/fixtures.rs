//! What a story leaves to the platform team and the conformance run therefore brings itself
//! ([`before`]): story 02's `demo-client-tls`, "from the platform's PKI", is a Secret of a CA
//! made for the run and a serving certificate it signed for the NatsCluster's names.
//!
//! The CAs are the run's issuers' ([`super::issuer::Issuers`]), so what a story's platform signs
//! and what its cert-manager issuers sign chain to the same CA when the story says they do.

use serde_json::Value;

use super::issuer::{Issuers, Request};

/// A Secret of `tls.crt`, `tls.key` and `ca.crt` (the shape cert-manager writes) for the
/// client listener of NatsCluster `cluster` in `namespace`: its Service, the headless Service's
/// pods, and the cluster domain's long forms of each, signed by the CA of `issuers` named
/// `ca`.
pub fn server_tls(
    issuers: &Issuers,
    ca: &str,
    name: &str,
    namespace: &str,
    cluster: &str,
) -> Result<Value, rcgen::Error> {
    signed(
        issuers,
        ca,
        name,
        namespace,
        server_names(namespace, cluster),
        false,
    )
}

/// A Secret `name` in `namespace` for `dns_names`, signed by the CA of `issuers` named `ca`;
/// for both ways (client auth too) when `both_ways`.
fn signed(
    issuers: &Issuers,
    ca: &str,
    name: &str,
    namespace: &str,
    dns_names: Vec<String>,
    both_ways: bool,
) -> Result<Value, rcgen::Error> {
    let mut usages = vec!["digital signature", "key encipherment", "server auth"];
    if both_ways {
        usages.push("client auth");
    }
    let request = Request {
        namespace: namespace.into(),
        certificate: name.into(),
        secret_name: name.into(),
        issuer: ca.into(),
        issuer_kind: "ClusterIssuer".into(),
        dns_names,
        usages: usages.into_iter().map(str::to_string).collect(),
    };
    let ca = issuers.ca(ca)?;
    let (crt, key) = ca.issue(&request)?;
    Ok(request.secret(&crt, &key, &ca.pem()))
}

/// The names a client of NatsCluster `cluster` dials it by.
fn server_names(namespace: &str, cluster: &str) -> Vec<String> {
    let mut names = vec![cluster.to_string(), format!("{cluster}.{namespace}")];
    for base in [
        format!("{cluster}.{namespace}.svc"),
        format!("*.{cluster}-headless.{namespace}.svc"),
    ] {
        names.push(format!("{base}.cluster.local"));
        names.push(base);
    }
    names
}

/// The objects applied before `story`'s first step, signed by the CAs of `issuers`.
pub fn before(story: &str, issuers: &Issuers) -> Result<Vec<Value>, rcgen::Error> {
    Ok(match story.split_once('-').map_or(story, |(n, _)| n) {
        "02" => vec![server_tls(
            issuers,
            "platform-ca",
            "demo-client-tls",
            "nats-system",
            "demo",
        )?],
        // "The platform publishes its client CA (public material) into every team namespace."
        "04" => {
            let ns = "team-payments";
            let ca = issuers.ca("platform-ca")?.pem();
            vec![
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "nats-ca", "namespace": ns},
                    "stringData": {"ca.crt": ca}}),
            ]
        }
        "06" => {
            // West's gateway Secret from the platform's private CA: the CA east's issuer
            // nats-gateway-ca signs with, so the two verify each other.
            let west = "nats-system-west";
            let mut names = service_names("west-gateway", west);
            names.push(format!("gw.west.{}", sim::node::dns::OUTSIDE_DOMAIN));
            vec![
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": west}}),
                signed(
                    issuers,
                    "nats-gateway-ca",
                    "west-gateway-tls",
                    west,
                    names,
                    true,
                )?,
            ]
        }
        // "The orders team on the east/west supercluster of story 06": its account and user,
        // in its own namespace as story 04's teams do it, admitted to story 06's NatsOperator.
        "08" => orders_team(),
        // "Until every account carries it": a team's account beside orders without the
        // jetstream-stepdown export, with a stream on demo.
        "07" => billing_team(),
        _ => vec![],
    })
}

/// Story 08's team: the account `orders` and the user `orders-app` of namespace `orders`, whose
/// creds Secret `orders-app-creds` the story's NatsConnection names, and the grant in
/// `nats-system` that admits the account to the NatsOperator `demo` (story 04's pattern).
fn orders_team() -> Vec<Value> {
    use serde_json::json;
    let ns = "orders";
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        json!({
            "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsReferenceGrant",
            "metadata": {"name": "orders-accounts", "namespace": "nats-system"},
            "spec": {
                "from": [{"group": "auth.nats.mikluko.io", "kind": "NatsAccount", "namespace": ns}],
                "to": [{"group": "auth.nats.mikluko.io", "kind": "NatsOperator", "name": "demo"}],
            },
        }),
        json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
            "metadata": {"name": "orders", "namespace": ns},
            "spec": {
                "operatorRef": {"name": "demo", "namespace": "nats-system"},
                "limits": {"connections": 100, "jetstream": {
                    "diskStorage": 4_294_967_296_u64, "memoryStorage": 268_435_456,
                    "streams": 10, "consumers": 100,
                }},
            },
        }),
        json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
            "metadata": {"name": "orders-app", "namespace": ns},
            "spec": {
                "accountRef": {"kind": "NatsAccount", "name": "orders"},
                "permissions": {
                    "publish": {"allow": ["orders.>", "$JS.API.>", "$JS.ACK.ORDERS.>"]},
                    "subscribe": {"allow": ["_INBOX.>", "orders.>"]},
                },
                "credentials": {"secretKeyRef": {"name": "orders-app-creds"}},
            },
        }),
    ]
}

/// Story 07's other team on story 02's `demo`: the account `billing` (no jetstream-stepdown
/// export), its user `billing-app`, the NatsConnection `billing` as story 02's `orders` dials,
/// and its streams `BILLING` and `BILLING_HISTORY`.
fn billing_team() -> Vec<Value> {
    use serde_json::json;
    let ns = "nats-system";
    vec![
        json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
            "metadata": {"name": "billing", "namespace": ns},
            "spec": {
                "operatorRef": {"name": "demo"},
                "limits": {"jetstream": {
                    "diskStorage": 1_073_741_824_u64, "memoryStorage": 268_435_456, "streams": 10,
                }},
            },
        }),
        json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
            "metadata": {"name": "billing-app", "namespace": ns},
            "spec": {
                "accountRef": {"kind": "NatsAccount", "name": "billing"},
                "credentials": {"secretKeyRef": {"name": "billing-app-creds"}},
            },
        }),
        json!({
            "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
            "metadata": {"name": "billing", "namespace": ns},
            "spec": {
                "servers": ["tls://demo.nats-system.svc:4222"],
                "tls": {"ca": {"secretKeyRef": {"name": "demo-client-tls"}}},
                "credentials": {"secretKeyRef": {"name": "billing-app-creds"}},
            },
        }),
    ]
    .into_iter()
    .chain(
        [
            ("billing", "BILLING", "billing.live.>"),
            ("billing-history", "BILLING_HISTORY", "billing.history.>"),
        ]
        .into_iter()
        .map(|(name, stream, subject)| {
            json!({
                "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsStream",
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "connectionRef": {"name": "billing"},
                    "name": stream,
                    "subjects": [subject],
                    "storage": "File",
                    "replicas": 3,
                },
            })
        }),
    )
    .collect()
}

/// The names Service `service` in `namespace` answers to within the cluster.
fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auth_planes_listener_secret_names_every_way_to_the_cluster() {
        let issuers = Issuers::default();
        let secret = server_tls(
            &issuers,
            "platform-ca",
            "demo-client-tls",
            "nats-system",
            "demo",
        )
        .expect("issued");
        let data = &secret["stringData"];
        for key in ["tls.crt", "tls.key", "ca.crt"] {
            assert!(
                data[key]
                    .as_str()
                    .is_some_and(|p| p.starts_with("-----BEGIN")),
                "{key}"
            );
        }
        assert_eq!(
            server_names("nats-system", "demo"),
            [
                "demo",
                "demo.nats-system",
                "demo.nats-system.svc.cluster.local",
                "demo.nats-system.svc",
                "*.demo-headless.nats-system.svc.cluster.local",
                "*.demo-headless.nats-system.svc",
            ]
        );
        assert_eq!(before("02-auth-plane", &issuers).expect("issued").len(), 1);
        assert!(before("01-quickstart", &issuers).expect("none").is_empty());
    }

    #[test]
    fn wests_gateway_secret_is_signed_by_easts_gateway_issuer() {
        let issuers = Issuers::default();
        let objects = before("06-supercluster", &issuers).expect("issued");
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0]["kind"], "Namespace");
        let secret = &objects[1];
        assert_eq!(secret["metadata"]["namespace"], "nats-system-west");
        assert_eq!(
            secret["stringData"]["ca.crt"],
            issuers.ca("nats-gateway-ca").expect("the CA").pem()
        );
        let names = secret["metadata"]["annotations"]["cert-manager.io/alt-names"]
            .as_str()
            .expect("names");
        assert!(names.ends_with(",gw.west.example.net"), "{names}");
        assert!(
            names.contains("west-gateway.nats-system-west.svc"),
            "{names}"
        );
    }
}
