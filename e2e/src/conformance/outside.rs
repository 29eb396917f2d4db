//! NATS deployments a story finds outside Kubernetes, played by the run ([`super::reach::before`]): nats-server
//! processes on this machine, on the backend's outside addresses and named in its cluster DNS
//! ([`sim::kube_backend::OutsideNet`]: the node's, `sim::node::outside`, or k3s's,
//! `sim::k3s_outside`), running until the story ends.
//!
//! - Story 03's cluster "nobody here deployed": three servers `nats-N.legacy.example.internal`
//!   over TLS from a private CA, under an operator of their own with a `payments` account, already
//!   holding the streams the story meets (`LEDGER` with data, `AUDIT`, `ARCHIVE`). The platform
//!   hands over the CA and a payments user's creds (`legacy-nats-ca`, `payments-creds`).
//! - Story 14's servers that trust the operator made with nsc: the story's own operator JWT, its
//!   system account and the account `legacy-app` as nsc signed them (signed here with the seeds of
//!   the story's `01-keys.yaml`), the latter with the subject mapping the adoption would drop and
//!   two users revoked under nsc. The auth controller's system connection is theirs while the
//!   story runs: a system user's creds and NatsConnection `legacy-system`, and the chart value
//!   `controllers.auth.systemConnection` pointing at it.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream;
use nats_claims::{
    AccountClaims, JetStreamLimits, KeyKind, NKey, NO_LIMIT, UserClaims, WeightedMapping,
};
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyUsagePurpose, SanType};
use serde_json::{Value, json};
use sim::kube_backend::OutsideNet;
use sim::nats_conf::{ClusterBlock, JetStreamBlock, ServerConfig};
use sim::server::Server;

use super::issuer::Ca;

mod nsc;
pub(super) use nsc::nsc;
pub use nsc::{NSC_REVOCATIONS, NSC_SYSTEM_CONNECTION};
#[cfg(test)]
use nsc::{story_operator_jwt, story_seed};

/// What a story finds outside the node, running while this value lives (each server is killed by
/// PID when it drops, each task aborted).
pub struct Surroundings {
    pub(super) servers: Vec<Server>,
    pub(super) tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Strings of the story's manifests the run stands in for (the documentation's keys and
    /// JWTs, whose seeds no run holds), with what it applies in their place.
    pub stand_ins: Vec<(String, String)>,
    /// The objects the platform hands over, applied before the story's first step.
    pub fixtures: Vec<Value>,
    /// Chart values the controllers run with during the story (a Helm upgrade before, undone
    /// after).
    pub values: Option<String>,
    /// What was started, for the run's log.
    pub said: String,
}

impl Drop for Surroundings {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// `value` with every string of `stand_ins` replaced by its stand-in, wherever it occurs.
pub fn stand_in(value: &Value, stand_ins: &[(String, String)]) -> Value {
    match value {
        Value::String(s) => Value::String(
            stand_ins
                .iter()
                .fold(s.clone(), |s, (from, to)| s.replace(from.as_str(), to)),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| stand_in(v, stand_ins)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), stand_in(v, stand_ins)))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl Surroundings {
    /// The PIDs of the servers, for the run's log.
    pub fn pids(&self) -> Vec<u32> {
        self.servers.iter().filter_map(Server::pid).collect()
    }
}

/// How long the outside servers have to elect a JetStream meta leader and take the streams.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The client, cluster and monitoring ports every outside server listens on (its own address).
const PORTS: (u16, u16, u16) = (4222, 6222, 8222);

/// One outside NATS cluster to start.
pub(super) struct Cluster<'a> {
    pub name: &'a str,
    /// (server name, DNS name, outside address number) of each server.
    pub servers: Vec<(String, String, u8)>,
    /// Operator mode: the operator JWT, the system account, the accounts preloaded.
    pub operator: Operator,
    pub jetstream: bool,
    /// The CA that signs each server's client certificate, when clients connect over TLS.
    pub tls: Option<&'a Ca>,
    /// The gateway of a supercluster member, over TLS both ways from its CA.
    pub gateway: Option<Gateway<'a>>,
    /// Outside names resolved through the node's cluster DNS (a gateway's remotes), not the
    /// host's.
    pub node_dns: bool,
}

/// A cluster's gateway: its advertised address and every member's URLs.
pub(super) struct Gateway<'a> {
    pub advertise: String,
    pub remotes: Vec<(String, String)>,
    pub ca: &'a Ca,
}

/// The gateway port of an outside server.
pub(super) const GATEWAY_PORT: u16 = 7222;

pub(super) struct Operator {
    pub jwt: String,
    pub system_account: String,
    pub preload: Vec<(String, String)>,
}

/// The servers of `cluster`, named in the DNS (beside `named`, names already given) and
/// started, routed to each other by address; the names given.
pub(super) async fn start(
    net: &dyn OutsideNet,
    dir: &Path,
    binary: &Path,
    cluster: &Cluster<'_>,
    named: &mut Vec<(Ipv4Addr, String)>,
) -> Result<Vec<Server>, String> {
    let mut addresses = Vec::new();
    for (_, dns, n) in &cluster.servers {
        let ip = net.address(*n).map_err(|e| e.to_string())?;
        addresses.push((ip, dns.clone()));
    }
    named.extend(addresses.iter().cloned());
    if let Some(g) = &cluster.gateway
        && let Some((host, _)) = g.advertise.split_once(':')
    {
        named.extend(addresses.iter().map(|(ip, _)| (*ip, host.to_string())));
    }
    net.name(named).await.map_err(|e| e.to_string())?;
    let binary = if cluster.node_dns {
        in_node_dns(dir, binary, net.dns_address())?
    } else {
        binary.to_path_buf()
    };
    let mut servers = Vec::new();
    for (i, (name, dns, _)) in cluster.servers.iter().enumerate() {
        let ip = addresses[i].0;
        let server_dir = dir.join(cluster.name).join(name);
        std::fs::create_dir_all(&server_dir)
            .map_err(|e| format!("{}: {e}", server_dir.display()))?;
        let (client, route, monitor) = PORTS;
        let mut config = ServerConfig::new(name, client, monitor, server_dir.join("nats.pid"));
        config.host = ip.to_string();
        config.cluster = Some(ClusterBlock {
            name: cluster.name.into(),
            port: route,
            routes: addresses
                .iter()
                .filter(|(other, _)| *other != ip)
                .map(|(other, _)| format!("nats-route://{other}:{route}"))
                .collect(),
            advertise: None,
        });
        if cluster.jetstream {
            config.jetstream = Some(JetStreamBlock {
                store_dir: server_dir.join("jetstream"),
                domain: None,
                max_memory_store: Some(1 << 30),
                max_file_store: Some(1 << 40),
                sync_interval: None,
            });
        }
        config.extra = operator_text(&cluster.operator, &server_dir);
        if let Some(ca) = cluster.tls {
            config.extra.push_str(&tls_text(ca, &server_dir, dns, ip)?);
        }
        if let Some(g) = &cluster.gateway {
            config
                .extra
                .push_str(&gateway_text(cluster.name, g, &server_dir, ip)?);
        }
        let mut server = Server::new(binary.clone(), server_dir, cluster.name.into(), config);
        server
            .start()
            .await
            .map_err(|e| format!("starting {name} at {ip}: {e}"))?;
        servers.push(server);
    }
    Ok(servers)
}

/// A wrapper of nats-server `binary` under `dir` that runs it in a mount namespace of its own
/// whose `/etc/resolv.conf` names the cluster DNS at `dns` (the node's dnsmasq, k3s's CoreDNS),
/// so the outside names a supercluster's members dial by (a partner's `gw.west.example.org`)
/// resolve as the cluster's pods resolve them; the host's own resolver is left alone. The mount
/// namespace needs root, as the node does (the nightly k3s job runs the conformance as root).
fn in_node_dns(dir: &Path, binary: &Path, dns: Ipv4Addr) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let resolv = dir.join("resolv.conf");
    std::fs::write(&resolv, format!("nameserver {dns}\n"))
        .map_err(|e| format!("{}: {e}", resolv.display()))?;
    let wrapper = dir.join("nats-server-in-node-dns");
    let script = format!(
        "#!/bin/sh\nexec unshare --mount --propagation private /bin/sh -c 'mount --bind \"{}\" /etc/resolv.conf && exec \"{}\" \"$@\"' nats-server \"$@\"\n",
        resolv.display(),
        binary.display()
    );
    std::fs::write(&wrapper, script).map_err(|e| format!("{}: {e}", wrapper.display()))?;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", wrapper.display()))?;
    Ok(wrapper)
}

/// The gateway block of server `ip` of cluster `name`: TLS both ways from the gateway's CA (the
/// certificate for its advertised name and its address), every member's URLs.
fn gateway_text(
    name: &str,
    g: &Gateway<'_>,
    server_dir: &Path,
    ip: Ipv4Addr,
) -> Result<String, String> {
    let host = g
        .advertise
        .split_once(':')
        .map_or(g.advertise.as_str(), |(h, _)| h);
    let params = serving(&[host], &[ip], Both::ServerAndClient).map_err(|e| e.to_string())?;
    let (crt, key) =
        g.ca.sign(params)
            .map_err(|e| format!("signing {host}'s gateway certificate: {e}"))?;
    let (crt, key, ca) = (
        keep(server_dir, "gateway.crt", &crt)?,
        keep(server_dir, "gateway.key", &key)?,
        keep(server_dir, "gateway-ca.crt", &g.ca.pem())?,
    );
    let remotes: Vec<String> = g
        .remotes
        .iter()
        .map(|(n, url)| format!("    {{ name: \"{n}\", urls: [\"{url}\"] }}"))
        .collect();
    Ok(format!(
        "gateway {{\n  name: \"{name}\"\n  listen: \"{ip}:{GATEWAY_PORT}\"\n  advertise: \"{}\"\n  tls {{\n    cert_file: \"{}\"\n    key_file: \"{}\"\n    ca_file: \"{}\"\n    verify: true\n    timeout: 5\n  }}\n  gateways: [\n{}\n  ]\n}}\n",
        g.advertise,
        crt.display(),
        key.display(),
        ca.display(),
        remotes.join(",\n")
    ))
}

/// The operator-mode text of a server's config: trust, the full resolver in the server's own
/// directory, the preloaded accounts.
pub(super) fn operator_text(op: &Operator, server_dir: &Path) -> String {
    let mut s = format!(
        "operator: \"{}\"\nsystem_account: \"{}\"\nresolver: {{ type: full, dir: \"{}\", allow_delete: false, interval: \"2m\" }}\nresolver_preload: {{\n",
        op.jwt,
        op.system_account,
        server_dir.join("jwt").display()
    );
    for (key, jwt) in &op.preload {
        s.push_str(&format!("  \"{key}\": \"{jwt}\"\n"));
    }
    s.push_str("}\n");
    s
}

/// The client listener's TLS block, its certificate (for `dns` and `ip`, signed by `ca`) written
/// beside the config.
fn tls_text(ca: &Ca, server_dir: &Path, dns: &str, ip: Ipv4Addr) -> Result<String, String> {
    let params = serving(&[dns], &[ip], Both::ServerOnly).map_err(|e| e.to_string())?;
    let (crt, key) = ca
        .sign(params)
        .map_err(|e| format!("signing {dns}'s certificate: {e}"))?;
    let (crt, key, ca) = (
        keep(server_dir, "server.crt", &crt)?,
        keep(server_dir, "server.key", &key)?,
        keep(server_dir, "ca.crt", &ca.pem())?,
    );
    Ok(format!(
        "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  ca_file: \"{}\"\n  timeout: 5\n}}\n",
        crt.display(),
        key.display(),
        ca.display()
    ))
}

/// `text` written to `dir`/`file`, for a server's config to name.
fn keep(dir: &Path, file: &str, text: &str) -> Result<PathBuf, String> {
    let path = dir.join(file);
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// What a certificate serves: a listener alone, or a gateway, which dials its peers with it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Both {
    ServerOnly,
    ServerAndClient,
}

/// A serving certificate's parameters for a server named `names` (the first is its common
/// name) at `ips` (the addresses its peers' INFO gives clients).
pub fn serving(
    names: &[&str],
    ips: &[Ipv4Addr],
    usage: Both,
) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::default();
    if let Some(first) = names.first() {
        params.distinguished_name.push(DnType::CommonName, *first);
    }
    params.subject_alt_names = names
        .iter()
        .map(|n| (*n).try_into().map(SanType::DnsName))
        .collect::<Result<_, _>>()?;
    params
        .subject_alt_names
        .extend(ips.iter().map(|ip| SanType::IpAddress(IpAddr::V4(*ip))));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    if usage == Both::ServerAndClient {
        params
            .extended_key_usages
            .push(ExtendedKeyUsagePurpose::ClientAuth);
    }
    Ok(params)
}

/// The servers `nats-1..=n` of `domain`, at outside addresses from `first`.
pub(super) fn named(n: u8, domain: &str, first: u8) -> Vec<(String, String, u8)> {
    (1..=n)
        .map(|i| {
            (
                format!("nats-{i}"),
                format!("nats-{i}.{domain}"),
                first + i - 1,
            )
        })
        .collect()
}

/// A Secret of `data` (string values) named `name` in `namespace`.
pub(super) fn secret(namespace: &str, name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "stringData": data,
    })
}

pub(super) fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

pub(super) fn signing(what: &str) -> impl FnOnce(nats_claims::Error) -> String + '_ {
    move |e| format!("signing {what}: {e}")
}

pub(super) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Story 03's legacy cluster, with the streams the story meets already on it.
pub(super) async fn legacy(
    net: &dyn OutsideNet,
    dir: &Path,
    binary: &Path,
) -> Result<Surroundings, String> {
    let roots = sim::trust::Roots::sign("legacy").map_err(signing("the legacy operator"))?;
    let payments = NKey::generate(KeyKind::Account);
    let payments_jwt = AccountClaims::new(payments.public_key())
        .name("payments")
        .jetstream(sim::trust::unlimited_jetstream())
        .encode(&roots.operator)
        .map_err(signing("the payments account"))?;
    let creds =
        sim::trust::user_creds(&payments, "payments-app").map_err(signing("the payments user"))?;
    let mode = roots.operator_mode(&[(payments.public_key(), payments_jwt)]);
    let ca = Ca::new("legacy-nats-ca").map_err(|e| format!("the legacy CA: {e}"))?;
    let cluster = Cluster {
        name: "legacy",
        servers: named(3, "legacy.example.internal", 1),
        operator: Operator {
            jwt: mode.operator_jwt,
            system_account: mode.system_account,
            preload: mode.preload,
        },
        jetstream: true,
        tls: Some(&ca),
        gateway: None,
        node_dns: false,
    };
    let servers = start(net, dir, binary, &cluster, &mut Vec::new()).await?;
    let ca_file = dir.join("legacy-ca.crt");
    std::fs::write(&ca_file, ca.pem()).map_err(|e| format!("{}: {e}", ca_file.display()))?;
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("tls://{}:{}", s.config.host, s.config.port))
        .collect();
    let held = existing_streams(&urls, &creds, &ca_file).await?;
    Ok(Surroundings {
        said: format!(
            "legacy NATS cluster outside the node: {} over TLS, holding {held}",
            cluster
                .servers
                .iter()
                .map(|(_, dns, _)| dns.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        servers,
        tasks: vec![],
        stand_ins: vec![],
        fixtures: vec![
            namespace("payments"),
            secret("payments", "legacy-nats-ca", json!({"ca.crt": ca.pem()})),
            secret("payments", "payments-creds", json!({"user.creds": creds})),
        ],
        values: None,
    })
}

/// The streams story 03 finds on the legacy cluster: `LEDGER` (adopted) with messages, `AUDIT`
/// (owned by nobody here) and `ARCHIVE` (a push consumer's, with no resource); what they hold.
async fn existing_streams(urls: &[String], creds: &str, ca: &Path) -> Result<String, String> {
    let nats = async_nats::ConnectOptions::with_credentials(creds)
        .map_err(|e| format!("the payments creds: {e}"))?
        .add_root_certificates(ca.to_path_buf())
        .require_tls(true)
        .connection_timeout(Duration::from_secs(5))
        .connect(urls)
        .await
        .map_err(|e| format!("connecting to the legacy cluster: {e}"))?;
    let js = jetstream::new(nats);
    let streams = [
        ("LEDGER", "payments.ledger.>", 3),
        ("AUDIT", "payments.audit.>", 3),
        ("ARCHIVE", "archive.payments.>", 1),
    ];
    for (name, subject, replicas) in streams {
        let config = jetstream::stream::Config {
            name: name.into(),
            subjects: vec![subject.into()],
            num_replicas: replicas,
            storage: jetstream::stream::StorageType::File,
            ..Default::default()
        };
        sim::wait::poll(
            &format!("the legacy cluster takes stream {name}"),
            READY_WITHIN,
            || {
                let js = js.clone();
                let config = config.clone();
                async move {
                    js.get_or_create_stream(config)
                        .await
                        .map(|_| Some(()))
                        .map_err(|e| e.to_string())
                }
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    }
    const LEDGER_ENTRIES: usize = 500;
    for i in 0..LEDGER_ENTRIES {
        js.publish(
            format!("payments.ledger.{}", i % 7),
            format!("entry {i}").into(),
        )
        .await
        .map_err(|e| format!("publishing to LEDGER: {e}"))?
        .await
        .map_err(|e| format!("LEDGER's ack: {e}"))?;
    }
    Ok(format!(
        "LEDGER ({LEDGER_ENTRIES} entries), AUDIT and ARCHIVE"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_are_numbered_from_one_on_consecutive_addresses() {
        assert_eq!(
            named(2, "legacy.example.internal", 1),
            vec![
                ("nats-1".into(), "nats-1.legacy.example.internal".into(), 1),
                ("nats-2".into(), "nats-2.legacy.example.internal".into(), 2),
            ]
        );
    }

    #[test]
    fn story_14s_seeds_are_the_keys_its_operator_jwt_names() {
        let dir = crate::stories::stories_dir().join("14-adopt-nsc");
        let signing = story_seed(&dir, "legacy-operator-keys", "signing.nk").expect("seed");
        let system = story_seed(&dir, "legacy-system-keys", "identity.nk").expect("seed");
        let operator = nats_claims::decode::<nats_claims::claims::Operator>(
            &story_operator_jwt(&dir).expect("jwt"),
        )
        .expect("decodes");
        assert!(operator.nats.signing_keys.contains(&signing.public_key()));
        assert_eq!(operator.nats.system_account, system.public_key());
    }

    #[test]
    fn a_stand_in_replaces_the_documentations_string_wherever_it_occurs() {
        let doc = json!({"spec": {"jwt": "DOCJWT", "list": ["x DOCKEY y", 3], "n": 1}});
        let pairs = [
            ("DOCJWT".to_string(), "RUNJWT".to_string()),
            ("DOCKEY".into(), "RUNKEY".into()),
        ];
        assert_eq!(
            stand_in(&doc, &pairs),
            json!({"spec": {"jwt": "RUNJWT", "list": ["x RUNKEY y", 3], "n": 1}})
        );
    }

    #[test]
    fn the_operator_text_preloads_each_account_over_a_full_resolver() {
        let text = operator_text(
            &Operator {
                jwt: "OJWT".into(),
                system_account: "ASYS".into(),
                preload: vec![("ASYS".into(), "SJWT".into())],
            },
            Path::new("/s"),
        );
        assert!(text.contains("operator: \"OJWT\""), "{text}");
        assert!(text.contains("type: full, dir: \"/s/jwt\""), "{text}");
        assert!(text.contains("  \"ASYS\": \"SJWT\"\n"), "{text}");
    }
}
