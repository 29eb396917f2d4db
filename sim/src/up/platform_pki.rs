//! `sim up`'s stand-in for the platform's PKI: a NatsCluster whose listener names a TLS Secret
//! that does not exist (story 02's `demo-client-tls`, "from the platform's PKI") gets one, issued
//! by a CA `sim up` makes at start, for the names the listener is reached at here: its Services'
//! names and 127.0.0.1, where [`crate::local::names`] leads them.
//!
//! Only a missing Secret is issued, labelled [`ISSUED_BY`]; one the user made is never touched.
//! A listener under `certManager` is not served: there is no cert-manager here.

use std::collections::BTreeSet;

use cluster_controller::route_ca::RouteCa;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DynamicObject, ObjectMeta, PostParams};

/// The label on every Secret this stand-in issued.
pub const ISSUED_BY: &str = "sim.nats.mikluko.io/issued-by";

/// The listeners of a NatsCluster that may name a Secret: client, routes, gateway, leafnodes.
const LISTENERS: [&str; 4] = [
    "/spec/tls/secretRef/name",
    "/spec/routes/tls/secretRef/name",
    "/spec/gateway/tls/secretRef/name",
    "/spec/leafnodes/tls/secretRef/name",
];

/// The TLS Secrets a NatsCluster's listeners name, each once.
pub fn named_secrets(cluster: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<String> = LISTENERS
        .iter()
        .filter_map(|p| cluster.pointer(p)?.as_str())
        .filter(|n| !n.is_empty())
        .map(String::from)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The DNS names a certificate for NatsCluster `name` in `namespace` is issued for: its client,
/// headless (every pod), gateway and leafnode Services, with and without the cluster domain,
/// and `localhost`.
pub fn dns_names(namespace: &str, name: &str) -> Vec<String> {
    let mut out = vec!["localhost".to_string()];
    for service in [
        name.to_string(),
        format!("*.{name}-headless"),
        format!("{name}-headless"),
        format!("{name}-gateway"),
        format!("{name}-leafnodes"),
    ] {
        out.push(format!("{service}.{namespace}.svc"));
        out.push(format!("{service}.{namespace}.svc.cluster.local"));
    }
    out
}

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("making sim up's CA: {0}")]
    Ca(#[source] cluster_controller::route_ca::RouteCaError),
}

/// The CA and what it has issued in this run.
pub struct Pki {
    ca: RouteCa,
    issued: BTreeSet<String>,
}

impl Pki {
    pub fn new() -> Result<Self, PkiError> {
        let ca =
            RouteCa::generate("sim-up", time::OffsetDateTime::now_utc()).map_err(PkiError::Ca)?;
        Ok(Self {
            ca,
            issued: BTreeSet::new(),
        })
    }

    /// Issues every Secret a NatsCluster names that does not exist; a line for each, and for each
    /// that could not be issued.
    pub async fn issue_missing(
        &mut self,
        client: &Client,
        clusters: &[DynamicObject],
    ) -> Vec<String> {
        let mut lines = Vec::new();
        for cluster in clusters {
            let (Some(ns), Some(name)) = (
                cluster.metadata.namespace.as_deref(),
                cluster.metadata.name.as_deref(),
            ) else {
                continue;
            };
            for secret in named_secrets(&cluster.data) {
                let key = format!("{ns}/{secret}");
                if self.issued.contains(&key) {
                    continue;
                }
                let api: Api<Secret> = Api::namespaced(client.clone(), ns);
                match api.get_opt(&secret).await {
                    Ok(Some(_)) => {
                        self.issued.insert(key);
                    }
                    Ok(None) => match self.issue(&api, ns, name, &secret).await {
                        Ok(()) => {
                            lines.push(format!(
                                "Secret {key} issued for NatsCluster {ns}/{name} by sim up's stand-in \
                                 for the platform PKI (its Services' names and 127.0.0.1)"
                            ));
                            self.issued.insert(key);
                        }
                        Err(e) => lines.push(format!("Secret {key} could not be issued: {e}")),
                    },
                    Err(e) => lines.push(format!("Secret {key} could not be read: {e}")),
                }
            }
        }
        lines
    }

    async fn issue(
        &self,
        api: &Api<Secret>,
        ns: &str,
        cluster: &str,
        secret: &str,
    ) -> Result<(), String> {
        let cert = self
            .ca
            .issue(
                &dns_names(ns, cluster),
                &[std::net::IpAddr::from([127, 0, 0, 1])],
                time::OffsetDateTime::now_utc(),
            )
            .map_err(|e| e.to_string())?;
        let data = [
            ("tls.crt", cert.cert_pem),
            ("tls.key", cert.key_pem),
            ("ca.crt", cert.ca_pem),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.into_bytes())))
        .collect();
        let object = Secret {
            metadata: ObjectMeta {
                name: Some(secret.into()),
                namespace: Some(ns.into()),
                labels: Some([(ISSUED_BY.to_string(), "sim-up".to_string())].into()),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(data),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => Ok(()),
            // Made meanwhile by someone else: theirs stands.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case(json!({"spec": {}}), &[])]
    #[case(json!({"spec": {"tls": {"secretRef": {"name": "demo-client-tls"}}}}), &["demo-client-tls"])]
    #[case(json!({"spec": {"tls": {"certManager": {"issuerRef": {"name": "x"}}}}}), &[])]
    #[case(
        json!({"spec": {
            "tls": {"secretRef": {"name": "a"}},
            "gateway": {"tls": {"secretRef": {"name": "gw"}}},
            "leafnodes": {"tls": {"secretRef": {"name": "a"}}},
            "routes": {"tls": {"secretRef": {"name": "r"}}}
        }}),
        &["a", "gw", "r"]
    )]
    fn the_secrets_a_cluster_names(#[case] cluster: serde_json::Value, #[case] want: &[&str]) {
        assert_eq!(named_secrets(&cluster), want);
    }

    #[test]
    fn names_cover_the_services_the_local_names_resolve() {
        let names = dns_names("nats-system", "demo");
        for host in [
            "demo.nats-system.svc",
            "demo-0.demo-headless.nats-system.svc",
        ] {
            let target = crate::local::names::service_target(host).expect("a service name");
            assert_eq!(target.cluster, "demo");
            let covered = names.iter().any(|n| match n.strip_prefix("*.") {
                Some(rest) => host.split_once('.').is_some_and(|(_, h)| h == rest),
                None => n == host,
            });
            assert!(covered, "{host} not in {names:?}");
        }
    }
}
