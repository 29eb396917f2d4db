//! The `auth-controller` binary on kube-apiserver 1.20 and a 3-server cluster in operator mode,
//! booted as the scenarios' auth plane is (scenarios/manifests/auth: trust roots and system
//! users, the servers under the JWTs the NatsOperatorTrust mirrors, the controller's system
//! connection pointed at them): 1,000 NatsUsers under one NatsAccount applied at once until
//! every creds Secret is written, every user Ready and the account Distributed (floor: the same
//! 1,000 user JWTs signed and their creds Secrets written directly); the binary's resident size
//! at rest after them (floor: the same binary at rest with none); and a deleted NatsUser's last
//! connection closed (floor: the revoking account JWT pushed with CLAIMS.UPDATE by hand).
//! 2,000 unrelated 10 KiB Secrets in other namespaces exist before the binary starts.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::{ConnectOptions, Event};
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use nats_claims::{Account, Creds, KeyKind, NKey, UserClaims, decode_unverified};
use serde_json::{Value, json};
use sim::{Auth, OperatorMode, Topology, TopologySpec};

use crate::summary::Figure;

const COUNT: usize = 1000;
const NS: &str = "nats";
const AT_ONCE: usize = 32;
const UNRELATED: [&str; 2] = ["unrelated-a", "unrelated-b"];
const WAIT: Duration = Duration::from_secs(120);
const ACCOUNT: &str = "bench";

fn api_of(client: &kube::Client, group: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1beta1", kind);
    let plural = format!("{}s", kind.to_lowercase());
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(&gvk, &plural),
    )
}

fn auth_api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    api_of(client, "auth.nats.mikluko.io", kind)
}

/// Whether `obj`'s condition `type_` has `status`.
fn has(obj: &Value, type_: &str, status: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == type_ && c["status"] == status)
        })
}

async fn wait_has(
    api: &Api<DynamicObject>,
    name: &str,
    type_: &str,
    status: &str,
) -> anyhow::Result<Value> {
    Ok(
        sim::wait::poll(&format!("{name} {type_}={status}"), WAIT, || async move {
            let Some(o) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
                return Err(format!("{name} does not exist"));
            };
            let v = serde_json::to_value(&o).map_err(|e| e.to_string())?;
            if has(&v, type_, status) {
                Ok(Some(v))
            } else {
                Err(format!("status: {}", v["status"]))
            }
        })
        .await?,
    )
}

fn text(v: &Value, pointer: &str) -> anyhow::Result<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no {pointer}"))
}

async fn secret_text(secrets: &Api<Secret>, name: &str, key: &str) -> Option<String> {
    let s = secrets.get_opt(name).await.ok()??;
    let b = s.data?.remove(key)?;
    String::from_utf8(b.0).ok()
}

fn user_doc(name: &str) -> Value {
    json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"accountRef": {"kind": "NatsAccount", "name": ACCOUNT},
                 "permissions": {"publish": {"allow": ["bench.>"]}, "subscribe": {"allow": ["_INBOX.>"]}},
                 "credentials": {"secretKeyRef": {"name": format!("{name}-creds")}}},
    })
}

/// `nats_operator_account_jwt_pushes{account="<pk>"}` from a /metrics body (0 without one).
pub fn pushes(body: &str, account: &str) -> f64 {
    let series = format!("nats_operator_account_jwt_pushes{{account=\"{account}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A connection with `creds` to `url` and when the server closed it.
struct Watched {
    _client: async_nats::Client,
    closed: Arc<Mutex<Option<Instant>>>,
}

async fn watched(creds: &str, url: &str) -> anyhow::Result<Watched> {
    let closed = Arc::new(Mutex::new(None));
    let seen = closed.clone();
    let client = ConnectOptions::with_credentials(creds)?
        .ignore_discovered_servers()
        .max_reconnects(Some(1))
        .event_callback(move |e| {
            let seen = seen.clone();
            async move {
                if matches!(e, Event::Disconnected) {
                    seen.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(Instant::now());
                }
            }
        })
        .connect(url)
        .await?;
    client.flush().await?;
    Ok(Watched {
        _client: client,
        closed,
    })
}

impl Watched {
    async fn closed_since(&self, since: Instant) -> anyhow::Result<Duration> {
        let closed = &self.closed;
        let at = sim::wait::poll("the connection closed", WAIT, || async move {
            Ok::<_, String>(*closed.lock().unwrap_or_else(|p| p.into_inner()))
        })
        .await?;
        Ok(at.saturating_duration_since(since))
    }
}

async fn secrets_written(secrets: &Api<Secret>, prefix: &str) -> Result<usize, String> {
    let list = secrets
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .iter()
        .filter(|s| {
            s.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with("-creds"))
        })
        .count())
}

pub async fn figures(binary: &Path) -> anyhow::Result<Vec<Figure>> {
    let mut namespaces = vec![NS];
    namespaces.extend(UNRELATED);
    let api = sim::testkit::apiserver_with_crds(&namespaces).await;
    let client = api.client();
    for ns in UNRELATED {
        sim::testkit::memory::unrelated_secrets(&client, ns, 1000, 10 * 1024).await;
    }
    let port = sim::ports::free_port();
    let child = sim::testkit::spawn_binary(
        &binary.display().to_string(),
        api.kubeconfig(),
        &[
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--probe-addr",
            "127.0.0.1:0",
            "--system-connection",
            &format!("{NS}/auth"),
        ],
    );
    for path in [
        "scenarios/manifests/auth/01-trust-roots.yaml",
        "scenarios/manifests/auth/02-system-users.yaml",
    ] {
        for doc in sim::testkit::story_docs(path) {
            sim::testkit::apply(&client, &doc)
                .await
                .map_err(anyhow::Error::msg)?;
        }
    }
    let account = json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": ACCOUNT, "namespace": NS},
        "spec": {"operatorRef": {"name": "demo"}},
    });
    for doc in [account, user_doc("alice"), user_doc("bob")] {
        sim::testkit::apply(&client, &doc)
            .await
            .map_err(anyhow::Error::msg)?;
    }
    let trust = wait_has(
        &api_of(&client, "nats.mikluko.io", "NatsOperatorTrust"),
        "demo",
        "Ready",
        "True",
    )
    .await?;
    let operators = auth_api(&client, "NatsOperator");
    let op = wait_has(&operators, "demo", "Ready", "True").await?;
    let sys_pk = text(&op, "/status/systemAccount/publicKey")?;
    let spec = TopologySpec::cluster(3).with_auth(Auth::Operator(OperatorMode {
        operator_jwt: text(&trust, "/status/operatorJWT")?,
        system_account: sys_pk.clone(),
        preload: vec![(sys_pk, text(&trust, "/status/systemAccountJWT")?)],
    }));
    let topo = Topology::start(spec).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secrets = &secrets;
    let controller_creds = sim::wait::poll("the auth controller's creds", WAIT, || async move {
        Ok::<_, String>(secret_text(secrets, "auth-controller-creds", "user.creds").await)
    })
    .await?;
    sim::testkit::apply(
        &client,
        &json!({
            "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
            "metadata": {"name": "auth", "namespace": NS},
            "spec": {"servers": topo.client_urls(),
                     "credentials": {"secretKeyRef": {"name": "auth-controller-creds", "key": "user.creds"}}},
        }),
    )
    .await
    .map_err(anyhow::Error::msg)?;
    let accounts = auth_api(&client, "NatsAccount");
    let users = auth_api(&client, "NatsUser");
    wait_has(&accounts, ACCOUNT, "Distributed", "True").await?;
    for u in ["alice", "bob"] {
        wait_has(&users, u, "Ready", "True").await?;
    }
    let acc = accounts.get(ACCOUNT).await?;
    let acc_pk = text(&serde_json::to_value(&acc)?, "/status/publicKey")?;
    sim::testkit::wait_metrics(port, "the binary's /metrics", WAIT, |b| {
        b.contains("nats_operator_leader")
    })
    .await;
    let idle = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;

    // A deleted user's last connection closed by the controller, at rest before the 1,000 (a
    // kick measured behind their passes would time the queue); bob's by hand at the end.
    let url = topo.client_urls().last().cloned().unwrap_or_default();
    let alice_creds = secret_text(secrets, "alice-creds", "user.creds")
        .await
        .ok_or_else(|| anyhow::anyhow!("no alice-creds"))?;
    let bob_creds = secret_text(secrets, "bob-creds", "user.creds")
        .await
        .ok_or_else(|| anyhow::anyhow!("no bob-creds"))?;
    let alice = watched(&alice_creds, &url).await?;
    let bob = watched(&bob_creds, &url).await?;
    let deleted = Instant::now();
    users.delete("alice", &DeleteParams::default()).await?;
    let kicked = alice.closed_since(deleted).await?;
    println!(
        "  alice's connection closed {} ms after her deletion",
        kicked.as_millis()
    );
    let users_ref = &users;
    sim::wait::poll("alice gone, her revocation signed", WAIT, || async move {
        let left = users_ref
            .get_opt("alice")
            .await
            .map_err(|e| e.to_string())?;
        Ok(left.is_none().then_some(()))
    })
    .await?;

    let scraped = sim::testkit::metrics(port)
        .await
        .map_err(anyhow::Error::msg)?;
    let before = pushes(&scraped, &acc_pk);

    // 1,000 users applied at once, 32 at a time.
    let docs: Vec<DynamicObject> = (0..COUNT)
        .map(|i| serde_json::from_value(user_doc(&format!("u{i}"))))
        .collect::<Result<_, _>>()?;
    let started = Instant::now();
    let made: Vec<Result<DynamicObject, kube::Error>> = futures::stream::iter(docs)
        .map(|d| {
            let users = users.clone();
            async move { users.create(&PostParams::default(), &d).await }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    if let Some(Err(e)) = made.into_iter().find(|r| r.is_err()) {
        anyhow::bail!("creating a NatsUser: {e}");
    }
    let (users_ref, accounts_ref) = (&users, &accounts);
    sim::wait::poll(
        "every creds Secret written, every user Ready, the account distributed",
        Duration::from_secs(600),
        || async move {
            let written = secrets_written(secrets, "u").await?;
            let list = users_ref
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let ready = list
                .items
                .iter()
                .filter(|u| {
                    serde_json::to_value(u).is_ok_and(|v| has(&v, "Ready", "True"))
                        && u.metadata
                            .name
                            .as_deref()
                            .is_some_and(|n| n.starts_with('u'))
                })
                .count();
            let acc = accounts_ref.get(ACCOUNT).await.map_err(|e| e.to_string())?;
            let distributed =
                serde_json::to_value(&acc).is_ok_and(|v| has(&v, "Distributed", "True"));
            if written == COUNT && ready == COUNT && distributed {
                Ok(Some(()))
            } else {
                Err(format!(
                    "{written} creds written, {ready} Ready, distributed {distributed}"
                ))
            }
        },
    )
    .await?;
    let all = started.elapsed();
    println!("  {COUNT} users done in {:.1} s", all.as_secs_f64());
    let loaded = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;
    let loaded_body = sim::testkit::metrics(port)
        .await
        .map_err(anyhow::Error::msg)?;
    let after = pushes(&loaded_body, &acc_pk);
    let mut notes = vec![format!("{} account JWTs pushed", after - before)];
    notes.extend(crate::scrape::per_object(
        &scraped,
        &loaded_body,
        "NatsUser",
        COUNT,
        "user",
    ));
    notes.push(format!(
        "{:.0} NatsAccount passes",
        crate::scrape::passes(&loaded_body, "NatsAccount")
            - crate::scrape::passes(&scraped, "NatsAccount")
    ));

    // The floor: 1,000 user JWTs signed by an account key and their creds Secrets written.
    let signer = NKey::generate(KeyKind::Account);
    let started = Instant::now();
    let written: Vec<Result<Secret, anyhow::Error>> = futures::stream::iter(0..COUNT)
        .map(|i| {
            let (secrets, signer) = (secrets.clone(), &signer);
            async move {
                let user = NKey::generate(KeyKind::User);
                let jwt = UserClaims::new(user.public_key())
                    .name(format!("d{i}"))
                    .encode(signer)?;
                let creds = Creds::render(&jwt, &user.seed())?;
                let s = Secret {
                    metadata: ObjectMeta {
                        name: Some(format!("d{i}-creds")),
                        ..Default::default()
                    },
                    data: Some(
                        [(
                            "user.creds".to_string(),
                            ByteString(creds.expose().as_bytes().to_vec()),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                };
                Ok(secrets.create(&PostParams::default(), &s).await?)
            }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let direct = started.elapsed();
    if let Some(Err(e)) = written.into_iter().find(|r| r.is_err()) {
        anyhow::bail!("writing a creds Secret directly: {e}");
    }

    let floor_kick = revoke_by_hand(
        &client,
        &accounts,
        &topo,
        &controller_creds,
        &bob_creds,
        &bob,
    )
    .await?;
    drop(child);

    Ok(vec![
        Figure {
            name: "users.distributed_1000".into(),
            what: format!(
                "{COUNT} NatsUsers under one NatsAccount applied at once until every creds Secret is written, every user Ready and the account distributed"
            ),
            value: all.as_secs_f64(),
            unit: "s".into(),
            floor: direct.as_secs_f64(),
            floor_what: format!(
                "{COUNT} user JWTs signed and their creds Secrets written directly, {AT_ONCE} at a time"
            ),
            goal: None,
            notes,
        },
        Figure {
            name: "rss.auth_1000_users".into(),
            what: format!(
                "auth-controller resident size at rest with {COUNT} NatsUsers (and 2000 unrelated 10 KiB Secrets)"
            ),
            value: loaded,
            unit: "MiB".into(),
            floor: idle,
            floor_what: "the same binary at rest with none".into(),
            goal: Some("≤ 25 MiB".into()),
            notes: vec![],
        },
        Figure {
            name: "kick.user_deletion".into(),
            what: "a NatsUser deleted until its connection is closed, 3 servers".into(),
            value: kicked.as_secs_f64() * 1000.0,
            unit: "ms".into(),
            floor: floor_kick.as_secs_f64() * 1000.0,
            floor_what: "the account JWT revoking the user pushed with CLAIMS.UPDATE by hand"
                .into(),
            goal: None,
            notes: vec![],
        },
    ])
}

/// The floor of the kick: the account's JWT, bob revoked, signed with the operator key that
/// signed it and pushed with `$SYS.REQ.CLAIMS.UPDATE` as the auth controller's user; the time
/// until the server closed bob's connection.
async fn revoke_by_hand(
    client: &kube::Client,
    accounts: &Api<DynamicObject>,
    topo: &Topology,
    controller_creds: &str,
    bob_creds: &str,
    bob: &Watched,
) -> anyhow::Result<Duration> {
    let acc = serde_json::to_value(accounts.get(ACCOUNT).await?)?;
    let jwt = text(&acc, "/status/jwt")?;
    let mut claims = decode_unverified::<Account>(&jwt)?;
    let bob_pk = Creds::parse(bob_creds)?.jwt;
    let bob_pk = decode_unverified::<nats_claims::User>(&bob_pk)?.subject;
    let op = serde_json::to_value(auth_api(client, "NatsOperator").get("demo").await?)?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let mut names: Vec<String> = op
        .pointer("/status/seedSecrets/signing")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect();
    names.extend(text(&op, "/status/seedSecrets/identity").ok());
    let mut signer = None;
    for name in names {
        let Some(s) = secrets.get_opt(&name).await? else {
            continue;
        };
        for v in s.data.unwrap_or_default().into_values() {
            if let Ok(k) = NKey::from_seed(&v.0)
                && k.public_key() == claims.issuer
            {
                signer = Some(k);
            }
        }
    }
    let signer = signer.ok_or_else(|| anyhow::anyhow!("no seed of {}", claims.issuer))?;
    let now = chrono_now();
    claims = claims.revoke_at(bob_pk, now);
    let revoking = claims.encode(&signer)?;
    let sys = async_nats::ConnectOptions::with_credentials(controller_creds)?
        .connect(topo.client_urls())
        .await?;
    let pushed = Instant::now();
    // Published, not requested: the user's permissions admit its own inbox prefix only, and
    // the server acts on the update whether or not anyone reads its answer.
    sys.publish("$SYS.REQ.CLAIMS.UPDATE", revoking.into())
        .await?;
    sys.flush().await?;
    bob.closed_since(pushed).await
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_are_read_off_the_account_series() {
        let body = "nats_operator_account_jwt_pushes{account=\"AB\"} 4\n\
                    nats_operator_account_jwt_pushes{account=\"AC\"} 9\n";
        assert_eq!(pushes(body, "AC"), 9.0);
        assert_eq!(pushes(body, "AD"), 0.0);
    }
}
