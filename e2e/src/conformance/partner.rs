//! Story 13's partner supercluster, played by the run ([`supercluster`]): NATS clusters `core-a`
//! and `core-b`, three servers each, outside the node, under an operator of their own (strict
//! signing, as the story's JWTs show) with the accounts `billing` and `ledger`, joined by gateways
//! over TLS both ways from the partner's CA at `gw.core-a.partner.example.com` and
//! `gw.core-b.partner.example.com`, each listing `west` at `gw.west.example.org` as the owners
//! add it.
//!
//! What the owners hand over is made here, since the story's JWTs are the documentation's and no
//! run holds their seeds: the run's operator, system account and account JWTs stand in for the
//! story's literal ones ([`super::outside::stand_in`]), and the creds and gateway certificate
//! are its own. `gw.west.example.org`, the address west advertises behind its load balancer, is
//! named in the cluster DNS once west's gateway Service exists (its ClusterIP, which the host
//! reaches through kube-proxy), and the partner's servers resolve through that DNS.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use nats_claims::{AccountClaims, Creds, KeyKind, NKey, OperatorClaims, UserClaims};
use serde_json::{Value, json};
use sim::kube_backend::OutsideNet;

use super::issuer::Ca;
use super::outside::{
    Cluster, GATEWAY_PORT, Gateway, Operator, Surroundings, namespace, secret, signing, start,
};

/// The namespace of story 13.
const NAMESPACE: &str = "nats-partner";
/// The address west advertises for its gateway (story 13's `02-west.yaml`).
const WEST_GATEWAY: &str = "gw.west.example.org";

/// The gateway name of partner cluster `c`.
fn gateway_host(c: &str) -> String {
    format!("gw.{c}.partner.example.com")
}

/// Every member's gateway URL, as the owners list them: core-a, core-b and west.
fn remotes() -> Vec<(String, String)> {
    ["core-a", "core-b"]
        .iter()
        .map(|c| (c.to_string(), gateway_host(c)))
        .chain([("west".to_string(), WEST_GATEWAY.to_string())])
        .map(|(c, host)| (c, format!("nats://{host}:{GATEWAY_PORT}")))
        .collect()
}

/// An account of the partner with JetStream, its signing key, signed by the operator's
/// signing key `by`: (identity, signing key, JWT).
fn account(name: &str, by: &NKey) -> Result<(NKey, NKey, String), String> {
    let identity = NKey::generate(KeyKind::Account);
    let signing_key = NKey::generate(KeyKind::Account);
    let jwt = AccountClaims::new(identity.public_key())
        .name(name)
        .signing_key(signing_key.public_key())
        .jetstream(sim::trust::unlimited_jetstream())
        .encode(by)
        .map_err(signing(name))?;
    Ok((identity, signing_key, jwt))
}

/// A user of `account` issued by its signing key (the operator requires signing keys), as creds.
fn user(name: &str, account: &NKey, by: &NKey) -> Result<String, String> {
    let user = NKey::generate(KeyKind::User);
    let jwt = UserClaims::new(user.public_key())
        .name(name)
        .issuer_account(account.public_key())
        .encode(by)
        .map_err(signing(name))?;
    Ok(Creds::render_key(&jwt, &user)
        .map_err(signing(name))?
        .expose()
        .to_string())
}

/// The partner's supercluster, started and gatewayed, and what its owners hand over.
pub async fn supercluster(
    client: &kube::Client,
    net: Arc<dyn OutsideNet>,
    dir: &Path,
    binary: &Path,
) -> Result<Surroundings, String> {
    let operator = NKey::generate(KeyKind::Operator);
    let operator_signing = NKey::generate(KeyKind::Operator);
    let (system, system_signing, _) = account("SYS", &operator_signing)?;
    let system_jwt = AccountClaims::new(system.public_key())
        .name("SYS")
        .signing_key(system_signing.public_key())
        .encode(&operator_signing)
        .map_err(signing("the partner's system account"))?;
    let operator_jwt = OperatorClaims::new(operator.public_key())
        .name("partner")
        .signing_key(operator_signing.public_key())
        .system_account(system.public_key())
        .strict_signing(true)
        .encode(&operator)
        .map_err(signing("the partner's operator"))?;
    let (billing, _, billing_jwt) = account("billing", &operator_signing)?;
    let (ledger, ledger_signing, ledger_jwt) = account("ledger", &operator_signing)?;
    let ca = Ca::new("partner-ca").map_err(|e| format!("the partner's CA: {e}"))?;

    let mut named: Vec<(Ipv4Addr, String)> = Vec::new();
    let mut servers = Vec::new();
    for (c, first) in [("core-a", 21u8), ("core-b", 31u8)] {
        let cluster = Cluster {
            name: c,
            servers: (0..3u8)
                .map(|i| {
                    (
                        format!("{c}-{i}"),
                        format!("{c}-{i}.partner.example.com"),
                        first + i,
                    )
                })
                .collect(),
            operator: Operator {
                jwt: operator_jwt.clone(),
                system_account: system.public_key(),
                preload: vec![
                    (system.public_key(), system_jwt.clone()),
                    (billing.public_key(), billing_jwt.clone()),
                    (ledger.public_key(), ledger_jwt.clone()),
                ],
            },
            jetstream: true,
            tls: None,
            gateway: Some(Gateway {
                advertise: format!("{}:{GATEWAY_PORT}", gateway_host(c)),
                remotes: remotes(),
                ca: &ca,
            }),
            node_dns: true,
        };
        servers.extend(start(&*net, dir, binary, &cluster, &mut named).await?);
    }
    let west_tls = west_gateway_tls(&ca)?;
    let stand_ins = stand_ins(&[
        ("operatorJWT", operator_jwt),
        ("systemAccountJWT", system_jwt),
        ("billing.publicKey", billing.public_key()),
        ("billing.jwt", billing_jwt),
        ("ledger.publicKey", ledger.public_key()),
        ("ledger.jwt", ledger_jwt),
    ])?;
    let naming = tokio::spawn(name_west(client.clone(), net, named));
    Ok(Surroundings {
        said: format!(
            "the partner's supercluster outside the node: core-a and core-b at {} and {} over \
             gateway TLS, listing west at {WEST_GATEWAY}",
            gateway_host("core-a"),
            gateway_host("core-b")
        ),
        servers,
        tasks: vec![naming],
        stand_ins,
        fixtures: vec![
            namespace(NAMESPACE),
            secret(
                NAMESPACE,
                "partner-system-creds",
                json!({"user.creds": user("cluster-controller", &system, &system_signing)?}),
            ),
            secret(
                NAMESPACE,
                "partner-ledger-creds",
                json!({"user.creds": user("ledger-app", &ledger, &ledger_signing)?}),
            ),
            west_tls,
        ],
        values: None,
    })
}

/// West's gateway certificate from the partner's CA (`partner-gateway-tls`): for the address
/// it advertises and its Service's names, both ways (a gateway dials and is dialled).
fn west_gateway_tls(ca: &Ca) -> Result<Value, String> {
    let svc = format!("west-gateway.{NAMESPACE}");
    let names = [
        WEST_GATEWAY.to_string(),
        "west-gateway".into(),
        svc.clone(),
        format!("{svc}.svc"),
        format!("{svc}.svc.cluster.local"),
    ];
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let params = super::outside::serving(&names, &[], super::outside::Both::ServerAndClient)
        .map_err(|e| format!("west's gateway names: {e}"))?;
    let (crt, key) = ca
        .sign(params)
        .map_err(|e| format!("signing west's gateway certificate: {e}"))?;
    let mut s = secret(
        NAMESPACE,
        "partner-gateway-tls",
        json!({"tls.crt": crt, "tls.key": key, "ca.crt": ca.pem()}),
    );
    s["type"] = json!("kubernetes.io/tls");
    Ok(s)
}

/// The documentation's strings of story 13's `01-trust.yaml` (`operatorJWT`,
/// `systemAccountJWT`, and `<account>.publicKey`, `<account>.jwt` of each NatsAccountTrust),
/// paired with the run's.
fn stand_ins(run: &[(&str, String)]) -> Result<Vec<(String, String)>, String> {
    let path = crate::stories::stories_dir()
        .join("13-join-supercluster")
        .join("01-trust.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut doc = std::collections::BTreeMap::new();
    for d in serde_yaml::Deserializer::from_str(&text) {
        let v = <Value as serde::Deserialize>::deserialize(d)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let spec = &v["spec"];
        match v["kind"].as_str() {
            Some("NatsOperatorTrust") => {
                for k in ["operatorJWT", "systemAccountJWT"] {
                    doc.insert(k.to_string(), spec[k].clone());
                }
            }
            Some("NatsAccountTrust") => {
                let name = v["metadata"]["name"].as_str().unwrap_or_default();
                for k in ["publicKey", "jwt"] {
                    doc.insert(format!("{name}.{k}"), spec[k].clone());
                }
            }
            _ => {}
        }
    }
    run.iter()
        .map(|(k, ours)| {
            let theirs = doc
                .get(*k)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{}: no {k}", path.display()))?;
            Ok((theirs.to_string(), ours.clone()))
        })
        .collect()
}

/// Names `gw.west.example.org` with the ClusterIP of west's gateway Service once it exists
/// (again if it changes), beside the names `named` already given, until aborted.
async fn name_west(client: kube::Client, net: Arc<dyn OutsideNet>, named: Vec<(Ipv4Addr, String)>) {
    let services: Api<Service> = Api::namespaced(client, NAMESPACE);
    let mut given: Option<Ipv4Addr> = None;
    loop {
        let ip = services
            .get_opt("west-gateway")
            .await
            .ok()
            .flatten()
            .and_then(|s| s.spec?.cluster_ip?.parse::<Ipv4Addr>().ok());
        if let Some(ip) = ip.filter(|ip| Some(*ip) != given) {
            let mut all = named.clone();
            all.push((ip, WEST_GATEWAY.to_string()));
            match net.name(&all).await {
                Ok(()) => given = Some(ip),
                Err(e) => eprintln!("naming {WEST_GATEWAY}: {e}"),
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_is_listed_at_its_gateway_name() {
        assert_eq!(
            remotes(),
            vec![
                (
                    "core-a".to_string(),
                    "nats://gw.core-a.partner.example.com:7222".to_string()
                ),
                (
                    "core-b".into(),
                    "nats://gw.core-b.partner.example.com:7222".into()
                ),
                ("west".into(), "nats://gw.west.example.org:7222".into()),
            ]
        );
    }

    #[test]
    fn the_run_stands_in_for_each_literal_of_the_storys_trust() {
        let pairs = stand_ins(&[
            ("operatorJWT", "OP".into()),
            ("ledger.publicKey", "LEDGER".into()),
        ])
        .expect("the story's trust file");
        assert_eq!(pairs.len(), 2);
        assert!(pairs[0].0.starts_with("eyJ"), "{}", pairs[0].0);
        assert_eq!(
            pairs[1],
            (
                "ABMTDWH3IZSMT7DE37IRE7Q2SQZFF54XJIQEVZLZFD7QSRTZEDKLZXIW".to_string(),
                "LEDGER".to_string()
            )
        );
    }
}
