//! `users.distributed_10000` (issue 40, item 3; `just bench --scale`): 10,000 NatsUsers across
//! [`ACCOUNTS`] NatsAccounts applied at once under the `auth-controller` binary, on the same plane
//! as `users.distributed_1000` ([`super::boot`]), timed from the last apply until every creds
//! Secret is written, every user Ready and every account Distributed; the binary's resident size
//! with them; and how many times each account's JWT was pushed meanwhile. Floors as the 1,000
//! figure's, at 10,000: the user JWTs signed and their creds Secrets written directly
//! ([`super::sign_and_write`]), and the work floor ([`super::work::floor`]).

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};

use super::{AT_ONCE, NS, Plane, auth_api, has, numbered, pushes, text, usable, user_of};
use crate::summary::Figure;

/// Users applied.
const COUNT: usize = 10_000;
/// Accounts they are spread over, `a<i % ACCOUNTS>`.
const ACCOUNTS: usize = 10;
/// How long the users may take before the run gives up.
const DONE_WAIT: Duration = Duration::from_secs(600);

fn account_name(i: usize) -> String {
    format!("a{i}")
}

pub async fn figures(binary: &Path) -> anyhow::Result<Vec<Figure>> {
    let docs = (0..ACCOUNTS)
        .map(|i| usable::account_doc(&account_name(i)))
        .collect();
    let Plane {
        api: _api,
        client,
        child,
        port,
        topo: _topo,
        controller_creds: _,
    } = super::boot(binary, docs).await?;
    let accounts = auth_api(&client, "NatsAccount");
    let users = auth_api(&client, "NatsUser");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let mut keys = Vec::new();
    for i in 0..ACCOUNTS {
        let acc = super::wait_has(&accounts, &account_name(i), "Distributed", "True").await?;
        keys.push(text(&acc, "/status/publicKey")?);
    }
    sim::testkit::wait_metrics(port, "the binary's /metrics", super::WAIT, |b| {
        b.contains("nats_operator_leader")
    })
    .await;
    let idle = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;
    let before = sim::testkit::metrics(port)
        .await
        .map_err(anyhow::Error::msg)?;

    let docs: Vec<DynamicObject> = (0..COUNT)
        .map(|i| serde_json::from_value(user_of(&format!("u{i}"), &account_name(i % ACCOUNTS))))
        .collect::<Result<_, _>>()?;
    let all_ready = crate::watch::counting(
        &users,
        "every NatsUser Ready",
        COUNT,
        DONE_WAIT,
        |n| numbered(n, "u"),
        |u| serde_json::to_value(u).is_ok_and(|v| has(&v, "Ready", "True")),
    );
    let started = Instant::now();
    crate::apply::create_all(&users, docs, "NatsUser").await?;
    let applied = started.elapsed();
    println!("  {COUNT} users applied in {:.1} s", applied.as_secs_f64());
    all_ready.await?;
    let (secrets_ref, accounts_ref) = (&secrets, &accounts);
    sim::wait::poll_every(
        "every creds Secret written, every account distributed",
        DONE_WAIT,
        Duration::from_millis(500),
        || async move {
            let written = super::secrets_written(secrets_ref, "u").await?;
            let distributed = super::count(accounts_ref, |a| {
                serde_json::to_value(a).is_ok_and(|v| has(&v, "Distributed", "True"))
            })
            .await?;
            if written == COUNT && distributed >= ACCOUNTS {
                Ok(Some(()))
            } else {
                Err(format!(
                    "{written} creds written, {distributed} accounts distributed"
                ))
            }
        },
    )
    .await?;
    let all = started.elapsed();
    let value = all - applied;
    println!(
        "  {COUNT} users done {:.1} s after the last apply",
        value.as_secs_f64()
    );
    let loaded = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;
    let body = sim::testkit::metrics(port)
        .await
        .map_err(anyhow::Error::msg)?;
    let pushed: Vec<f64> = keys
        .iter()
        .map(|k| pushes(&body, k) - pushes(&before, k))
        .collect();
    let pushed_text = pushed
        .iter()
        .map(|p| format!("{p:.0}"))
        .collect::<Vec<_>>()
        .join("/");
    println!("  account JWT pushes per account: {pushed_text}");
    let mut notes = vec![format!(
        "each of the {ACCOUNTS} account JWTs pushed {pushed_text} times"
    )];
    notes.extend(crate::scrape::per_object(
        &before, &body, "NatsUser", COUNT, "user",
    ));
    notes.push(format!(
        "{:.0} NatsAccount passes",
        crate::scrape::passes(&body, "NatsAccount") - crate::scrape::passes(&before, "NatsAccount")
    ));
    notes.push(format!(
        "applied in {:.1} s, done {:.1} s after the first apply",
        applied.as_secs_f64(),
        all.as_secs_f64()
    ));

    let direct = super::sign_and_write(&secrets, COUNT).await?;
    drop(child);
    let work = super::work::floor(&users, &secrets, COUNT, super::work::Clock::LastApply).await?;
    notes.push(format!(
        "work floor {:.1} s: {COUNT} users signed, their creds Secrets written, finalizers added and one status write each, {AT_ONCE} at a time; ratio {:.2} against it",
        work.as_secs_f64(),
        value.as_secs_f64() / work.as_secs_f64()
    ));
    Ok(vec![
        Figure {
            name: format!("users.distributed_{COUNT}"),
            what: format!(
                "{COUNT} NatsUsers across {ACCOUNTS} NatsAccounts applied at once until every creds Secret is written, every user Ready and every account distributed, from the last apply"
            ),
            value: value.as_secs_f64(),
            unit: "s".into(),
            floor: direct.as_secs_f64(),
            floor_what: format!(
                "{COUNT} user JWTs signed and their creds Secrets written directly, {AT_ONCE} at a time"
            ),
            goal: Some("≤ 90 s; each account JWT pushed a bounded number of times".into()),
            notes,
        },
        Figure {
            name: format!("rss.auth_{COUNT}_users"),
            what: format!(
                "auth-controller resident size at rest with {COUNT} NatsUsers in {ACCOUNTS} NatsAccounts (and 2000 unrelated 10 KiB Secrets)"
            ),
            value: loaded,
            unit: "MiB".into(),
            floor: idle,
            floor_what: "the same binary at rest with none".into(),
            goal: Some("≤ 40 MiB".into()),
            notes: vec![],
        },
    ])
}
