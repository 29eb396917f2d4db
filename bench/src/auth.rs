//! The `auth-controller` binary on kube-apiserver 1.20 and a 3-server cluster in operator mode,
//! booted as the scenarios' auth plane is (scenarios/manifests/auth: trust roots and system
//! users, the servers under the JWTs the NatsOperatorTrust mirrors, the controller's system
//! connection pointed at them): 1,000 NatsUsers under one NatsAccount applied at once until
//! every creds Secret is written, every user Ready and the account Distributed (floors: the same
//! 1,000 user JWTs signed and their creds Secrets written directly; and the work floor, [`work`]);
//! the binary's resident size at rest after them (floor: the same binary at rest with none);
//! deleted NatsUsers' last connections closed, five at rest and five right after the 1,000 were
//! applied ([`kick`]; floor: the revoking account JWT pushed with CLAIMS.UPDATE by hand; work
//! floor: [`kick_work`]); and how
//! soon an applied user, and an applied account with a user, can connect ([`usable`]).
//! 2,000 unrelated 10 KiB Secrets in other namespaces exist before the binary starts.

mod kick;
mod kick_work;
mod ready;
pub mod scale;
mod usable;
mod work;

use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ObjectMeta, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use nats_claims::{Creds, KeyKind, NKey, UserClaims};
use serde_json::{Value, json};
use sim::{Auth, OperatorMode, Topology, TopologySpec};

use self::kick::{Watched, millis, watched};

use crate::stats::{self, ms};
use crate::summary::Figure;

const COUNT: usize = 1000;
const NS: &str = "nats";
use crate::apply::AT_ONCE;
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
    user_of(name, ACCOUNT)
}

/// NatsUser `name` of NatsAccount `account`, its creds in Secret `<name>-creds`.
fn user_of(name: &str, account: &str) -> Value {
    json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"accountRef": {"kind": "NatsAccount", "name": account},
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

/// Whether `name` is `prefix` followed by a number (`u12`, `u12-creds`; not `usable-u0`).
fn numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// How many objects a LIST of `api` returns that `keep`.
async fn count<K>(api: &Api<K>, keep: impl Fn(&K) -> bool) -> Result<usize, String>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(list.items.iter().filter(|o| keep(o)).count())
}

/// The creds Secrets of the users `<prefix><n>` written so far.
async fn secrets_written(secrets: &Api<Secret>, prefix: &str) -> Result<usize, String> {
    count(secrets, |s| {
        s.metadata
            .name
            .as_deref()
            .is_some_and(|n| numbered(n, prefix) && n.ends_with("-creds"))
    })
    .await
}

/// The NatsUsers whose deletion the kick figures time: five at rest, five right after the 1,000.
const KICKED: usize = 5;

/// The figures' goals (issue #40), printed beside them, never asserted.
const KICK_GOAL: &str = "≤ 30 ms";
const USER_GOAL: &str = "≤ 250 ms";
const ACCOUNT_GOAL: &str = "≤ 400 ms";

/// The median of `times` ([`stats::median`]) in milliseconds; NaN for none, not a made-up 0 ms.
fn median_ms(times: &[std::time::Duration]) -> f64 {
    stats::median(times, std::time::Duration::cmp).map_or(f64::NAN, ms)
}

/// The auth plane a figure runs on: the apiserver, the binary, the servers under the trust it
/// signed, the binary's own system connection applied.
struct Plane {
    api: sim::apiserver::ApiServer,
    client: kube::Client,
    child: sim::testkit::KillOnDrop,
    /// The binary's /metrics port.
    port: u16,
    topo: Topology,
    /// The auth controller's system-account creds.
    controller_creds: String,
}

/// Boots the [`Plane`] with `docs` applied before the servers start (after the trust roots and
/// system users of scenarios/manifests/auth).
async fn boot(binary: &Path, docs: Vec<Value>) -> anyhow::Result<Plane> {
    let mut namespaces = vec![NS];
    namespaces.extend(UNRELATED);
    let api = sim::testkit::apiserver_with_crds(&namespaces).await;
    let client = api.client();
    for ns in UNRELATED {
        sim::testkit::memory::unrelated_secrets(&client, ns, 1000, 10 * 1024).await;
    }
    let port = sim::ports::free_port();
    let child = sim::testkit::spawn_binary(
        binary,
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
    for doc in docs {
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
    Ok(Plane {
        api,
        client,
        child,
        port,
        topo,
        controller_creds,
    })
}

pub async fn figures(binary: &Path) -> anyhow::Result<Vec<Figure>> {
    // bob's connection is the kick floor's; k<i>'s are the kick figures'; f<i>'s the work floor's.
    let kicked: Vec<String> = (0..2 * KICKED).map(|i| format!("k{i}")).collect();
    let floored: Vec<String> = (0..KICKED).map(|i| format!("f{i}")).collect();
    let mut docs = vec![usable::account_doc(ACCOUNT), user_doc("bob")];
    docs.extend(kicked.iter().chain(&floored).map(|n| user_doc(n)));
    let Plane {
        api: apiserver,
        client,
        child,
        port,
        topo,
        controller_creds,
    } = boot(binary, docs).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secrets = &secrets;
    let accounts = auth_api(&client, "NatsAccount");
    let users = auth_api(&client, "NatsUser");
    wait_has(&accounts, ACCOUNT, "Distributed", "True").await?;
    for u in kicked
        .iter()
        .chain(&floored)
        .map(String::as_str)
        .chain(["bob"])
    {
        wait_has(&users, u, "Ready", "True").await?;
    }
    let acc = accounts.get(ACCOUNT).await?;
    let acc_pk = text(&serde_json::to_value(&acc)?, "/status/publicKey")?;
    sim::testkit::wait_metrics(port, "the binary's /metrics", WAIT, |b| {
        b.contains("nats_operator_leader")
    })
    .await;
    let idle = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;

    // Every kicked user's connection, and bob's for the floor, to one server.
    let url = topo.client_urls().last().cloned().unwrap_or_default();
    let creds_of = |name: String| async move {
        secret_text(secrets, &format!("{name}-creds"), "user.creds")
            .await
            .ok_or_else(|| anyhow::anyhow!("no {name}-creds"))
    };
    let bob_creds = creds_of("bob".into()).await?;
    let bob = watched(&bob_creds, &url).await?;
    let mut conns: Vec<Watched> = Vec::new();
    for name in &kicked {
        conns.push(watched(&creds_of(name.clone()).await?, &url).await?);
    }
    let mut floored_creds = Vec::new();
    let mut floored_conns = Vec::new();
    for name in &floored {
        let creds = creds_of(name.clone()).await?;
        floored_conns.push(watched(&creds, &url).await?);
        floored_creds.push(creds);
    }

    // Five deletions at rest, one at a time, each user gone before the next.
    let mut at_rest = Vec::new();
    for (name, conn) in kicked.iter().zip(&conns).take(KICKED) {
        at_rest.push(kick::deleted(&users, name, conn).await?);
        kick::gone(&users, name).await?;
    }
    println!("  kicks at rest: {} ms", millis(&at_rest));

    // How soon what was applied is usable, and the same by hand, at rest.
    let op_signer = kick::operator_signer(&client, &kick::account_issuer(&accounts).await?).await?;
    let mut sys = Vec::new();
    for server in topo.client_urls() {
        sys.push(
            async_nats::ConnectOptions::with_credentials(&controller_creds)?
                .ignore_discovered_servers()
                .connect(server)
                .await?,
        );
    }
    let used = usable::measure(&client, &users, &sys, &op_signer, &url).await?;
    println!(
        "  usable: user {} ms (by hand {}), account {} ms (by hand {})",
        millis(&used.user),
        millis(&used.user_floor),
        millis(&used.account),
        millis(&used.account_floor)
    );

    let scraped = sim::testkit::metrics(port)
        .await
        .map_err(anyhow::Error::msg)?;
    let before = pushes(&scraped, &acc_pk);

    let api_before = crate::scrape::apiserver_metrics(&client).await;
    let (etcd_pid, apiserver_pid) = apiserver.pids();
    let processes = [
        ("the apiserver", apiserver_pid),
        ("etcd", etcd_pid),
        ("the controller", child.0.id()),
        ("the bench", std::process::id()),
    ];
    let cpu_before = crate::cpu::Sample::now(&processes);
    // 1,000 users applied at once, 32 at a time.
    let docs: Vec<DynamicObject> = (0..COUNT)
        .map(|i| serde_json::from_value(user_doc(&format!("u{i}"))))
        .collect::<Result<_, _>>()?;
    // Read off the controller's condition gauge, not the apiserver (crate::gauge says why).
    let all_done = crate::gauge::reaching(
        port,
        "every NatsUser Ready, the account Distributed",
        ready::GAUGE_POLL,
        Duration::from_secs(600),
        |body| ready::ready_in(body) >= COUNT && ready::distributed_in(body),
        |body| format!("{} Ready", ready::ready_in(body)),
    );
    let started = Instant::now();
    crate::apply::create_all(&users, docs, "NatsUser").await?;
    let applied = started.elapsed();
    // Right after the 1,000 were applied, their passes queued: five deletions, one at a time.
    let mut after_apply = Vec::new();
    let mut ready_then = Vec::new();
    for (name, conn) in kicked.iter().zip(&conns).skip(KICKED) {
        let body = sim::testkit::metrics(port).await.unwrap_or_default();
        ready_then.push(ready::ready_in(&body));
        after_apply.push(kick::deleted(&users, name, conn).await?);
    }
    println!("  the {COUNT} applied in {:.2} s", applied.as_secs_f64());
    println!(
        "  kicks right after the {COUNT} were applied: {} ms",
        millis(&after_apply)
    );
    let gauge_done = all_done.await?.duration_since(started);
    // What the gauge read, checked once against the apiserver (waited for, should it lag).
    ready::checked(&users, secrets, &accounts).await?;
    let checked = started.elapsed();
    // The gauge is set once the apiserver answered the status write: the apiserver holds what it
    // read by then, and the check above finds it so unless something undid it since.
    let all = gauge_done;
    println!("  {COUNT} users done in {:.1} s", all.as_secs_f64());
    let loaded = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;
    let api_after = crate::scrape::apiserver_metrics(&client).await;
    let cpu_after = crate::cpu::Sample::now(&processes);
    let loaded_body = sim::testkit::metrics(port)
        .await
        .map_err(anyhow::Error::msg)?;
    let after = pushes(&loaded_body, &acc_pk);
    let mut notes = vec![
        format!("{} account JWTs pushed", after - before),
        format!(
            "the {COUNT} applied in {:.2} s (the last create answered)",
            applied.as_secs_f64()
        ),
    ];
    notes.push(format!(
        "every user Ready and the account Distributed {:.2} s after the first apply, as the controller's condition gauge read them (set once the apiserver answered each status write), polled every {} ms; every creds Secret written and both found so by the apiserver at {:.2} s",
        all.as_secs_f64(),
        ready::GAUGE_POLL.as_millis(),
        checked.as_secs_f64()
    ));
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
    notes.push(format!(
        "the passes and requests include those of the {KICKED} deletions timed meanwhile"
    ));
    for name in kicked.iter().skip(KICKED) {
        kick::gone(&users, name).await?;
    }

    // The floor: 1,000 user JWTs signed by an account key and their creds Secrets written.
    let direct = sign_and_write(secrets, COUNT).await?;
    // The work floor, with the controller stopped: nothing else writes its NatsUsers.
    drop(child);
    let api_floor_before = crate::scrape::apiserver_metrics(&client).await;
    // The controller is stopped: the apiserver, etcd and the bench doing its work.
    let floor_processes = [processes[0], processes[1], processes[3]];
    let cpu_floor_before = crate::cpu::Sample::now(&floor_processes);
    let work = work::floor(&users, secrets, COUNT, work::Clock::FirstApply).await?;
    let api_floor_after = crate::scrape::apiserver_metrics(&client).await;
    let cpu_floor_after = crate::cpu::Sample::now(&floor_processes);
    notes.push(format!(
        "work floor {:.2} s: {COUNT} NatsUsers applied, each signed, its creds Secret written, its finalizer added and one status write, {AT_ONCE} at a time; ratio {:.2} against it, {:.1} against the floor",
        work.as_secs_f64(),
        all.as_secs_f64() / work.as_secs_f64(),
        all.as_secs_f64() / direct.as_secs_f64()
    ));
    notes.push(format!(
        "the apiserver's costliest requests meanwhile: {}; in the work floor: {}",
        crate::scrape::by_request(&api_before, &api_after, 6),
        crate::scrape::by_request(&api_floor_before, &api_floor_after, 6)
    ));
    notes.push(format!(
        "CPU time meanwhile: {}; in the work floor: {}",
        cpu_before.spent_until(&cpu_after),
        cpu_floor_before.spent_until(&cpu_floor_after)
    ));

    // The kicks' work floor, the controller stopped, before bob's floor (whose JWT revokes none
    // of these users, so it goes last).
    let victims: Vec<kick_work::Victim> = floored_creds
        .into_iter()
        .zip(&floored_conns)
        .map(|(creds, conn)| kick_work::Victim { creds, conn })
        .collect();
    let work_kick = kick_work::floor(
        &client,
        &accounts,
        &topo.client_urls(),
        &controller_creds,
        &victims,
    )
    .await?;
    println!("  kicks' work floor: {} ms", millis(&work_kick));
    let floor_kick = kick::revoke_by_hand(
        &client,
        &accounts,
        &topo,
        &controller_creds,
        &bob_creds,
        &bob,
    )
    .await?;
    let kick_floor_what = "the account JWT revoking the user pushed with CLAIMS.UPDATE by hand";

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
            goal: Some("≤ 1.5× the work floor".into()),
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
            what: format!(
                "a NatsUser deleted until its connection is closed, 3 servers, median of {KICKED} at rest"
            ),
            value: median_ms(&at_rest),
            unit: "ms".into(),
            floor: ms(floor_kick),
            floor_what: kick_floor_what.into(),
            goal: Some(KICK_GOAL.into()),
            notes: vec![
                format!("{} ms", millis(&at_rest)),
                kick_work::note(median_ms(&at_rest), &work_kick),
            ],
        },
        Figure {
            name: "kick.user_deletion_after_1000".into(),
            what: format!(
                "the same, median of {KICKED} deletions right after the {COUNT} NatsUsers were applied, their passes queued"
            ),
            value: median_ms(&after_apply),
            unit: "ms".into(),
            floor: ms(floor_kick),
            floor_what: kick_floor_what.into(),
            goal: Some(KICK_GOAL.into()),
            notes: vec![
                format!(
                    "{} ms; users Ready at each deletion: {}",
                    millis(&after_apply),
                    ready_then
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join("/")
                ),
                kick_work::note(median_ms(&after_apply), &work_kick),
            ],
        },
        Figure {
            name: "usable.user_applied".into(),
            what: format!(
                "a NatsUser applied until a client connects with the creds of its Secret, median of {}",
                usable::ROUNDS
            ),
            value: median_ms(&used.user),
            unit: "ms".into(),
            floor: median_ms(&used.user_floor),
            floor_what: "a user JWT signed by hand, its creds Secret written, until a client connects with it".into(),
            goal: Some(USER_GOAL.into()),
            notes: vec![format!(
                "{} ms; by hand {} ms{}",
                millis(&used.user),
                millis(&used.user_floor),
                refused_note(&used.refused)
            )],
        },
        Figure {
            name: "usable.account_applied".into(),
            what: format!(
                "a NatsAccount and a NatsUser of it applied at once until the user connects, median of {}",
                usable::ROUNDS
            ),
            value: median_ms(&used.account),
            unit: "ms".into(),
            floor: median_ms(&used.account_floor),
            floor_what: "an account JWT signed and pushed with CLAIMS.UPDATE by hand, a user of it signed and its creds Secret written, until it connects".into(),
            goal: Some(ACCOUNT_GOAL.into()),
            notes: vec![format!(
                "{} ms; by hand {} ms{}",
                millis(&used.account),
                millis(&used.account_floor),
                refused_note(&used.refused)
            )],
        },
    ])
}

/// The floor rounds given up, for a figure's notes.
fn refused_note(refused: &[String]) -> String {
    match refused.first() {
        None => String::new(),
        Some(first) => format!("; {} floor rounds given up ({first})", refused.len()),
    }
}

/// The floor of `users.distributed_<count>`: `count` user JWTs signed by an account key and their
/// creds Secrets written, 32 at a time.
async fn sign_and_write(secrets: &Api<Secret>, count: usize) -> anyhow::Result<Duration> {
    let signer = NKey::generate(KeyKind::Account);
    let started = Instant::now();
    let written: Vec<Result<Secret, anyhow::Error>> = futures::stream::iter(0..count)
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
    Ok(direct)
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

    #[test]
    fn only_the_numbered_users_count() {
        assert!(numbered("u12-creds", "u"));
        assert!(!numbered("usable-u0-creds", "u"));
        assert!(!numbered("usable0-user", "u"));
    }
}
