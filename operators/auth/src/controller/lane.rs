//! The revocation lane: a deleted NatsUser's revocation, push and kick run at once, never queued
//! behind the Controllers' passes (§5.3, §7). The Controllers batch the events of a burst (their
//! debounce) and run a bounded number of passes at a time, so behind a thousand users being
//! created a deletion waited for every creation pass, and the account's pass that revokes was
//! put off for as long as the burst lasted.
//!
//! The lane follows the index's changes of NatsUsers and NatsAccounts and runs, the moment a
//! change calls for it, the same pass a Controller would, in the design's order:
//!
//! 1. a deleted user whose own pass has not observed its deletion: the user's pass (it holds the
//!    user while a NatsConnection names its creds, else records the deletion, which makes the
//!    user revocable), and at once the account's pass, which revokes the user without waiting
//!    for that record where it finds no NatsConnection naming the creds itself;
//! 2. a revocable deleted user, or one whose grant was withdrawn, whose key its NatsAccount's JWT
//!    does not revoke yet: the account's pass (it signs the JWT revoking the key and pushes it to
//!    every server; a server closes the user's connections when it takes it);
//! 3. an account whose JWT revokes a deleted user's key and which every server holds: the user's
//!    pass (the kick of what connections remain, then its creds Secret and its finalizer).
//!
//! Every pass, the lane's or a Controller's, holds its object's lock ([`super::locks::Locks`]):
//! no object is passed over twice at once, and a Controller's pass that waited for the lane's
//! runs again. Each works from the index's copy of its object, read fresh instead while a write
//! of this controller's to it is not back in the watch (the kit's `Read::Current`). A lane pass
//! is an extra pass: the Controllers' passes still run as their events say, so a lane pass
//! missed (this replica not leading, a lagging receiver) costs time only.
//! The lane covers the users of NatsAccounts; a NatsSystemAccount's users go the Controllers' way.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use controller_kit::process_state::{Gate, Process};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use kube::{Resource, ResourceExt};
use nats_api::auth::{AccountKind, NatsUser};
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use super::Context;
use super::change::{Change, Touched};
use super::finalizer;
use super::index::Kind;
use super::time::secs_of;

/// A pass the lane runs: of a NatsUser or a NatsAccount, by (namespace, name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Job {
    User(String, String),
    Account(String, String),
}

/// Whether the JWT `jwt` revokes `key` from `at` on.
fn revokes(jwt: Option<&str>, key: &str, at: i64) -> bool {
    jwt.and_then(|j| nats_claims::decode_unverified::<nats_claims::Account>(j).ok())
        .is_some_and(|c| c.nats.revocations.get(key).is_some_and(|t| *t >= at))
}

/// What a change of the user `u` asks of the lane, its account's JWT being `account_jwt`
/// (steps 1 and 2 of the module doc); none: nothing the Controllers' passes would not do as
/// soon.
pub(crate) fn after_user_change(u: &NatsUser, account_jwt: Option<&str>) -> Vec<Job> {
    let (ns, name) = (u.namespace().unwrap_or_default(), u.name_any());
    let st = u.status.as_ref();
    let public_key = st.and_then(|s| s.public_key.as_deref());
    let unrevoked = |pk: Option<&str>, at| pk.is_some_and(|pk| !revokes(account_jwt, pk, at));
    if let Some(at) = &u.metadata.deletion_timestamp {
        if !finalizer::has(u) {
            return Vec::new();
        }
        let at = secs_of(at);
        let observed = st.and_then(|s| s.observed_generation) == u.metadata.generation;
        if !observed {
            // Its own pass, and at once the account's, which revokes it if no NatsConnection
            // names its creds (`in_use::unused_creds`) without waiting for the first.
            let mut jobs = vec![Job::User(ns, name)];
            jobs.extend(account_job(u).filter(|_| unrevoked(public_key, at)));
            return jobs;
        }
        let revocable = super::user::in_use::revocable(u);
        return account_job(u)
            .filter(|_| revocable && unrevoked(public_key, at))
            .into_iter()
            .collect();
    }
    let Some(withdrawn) = st.and_then(|s| s.withdrawn_at.as_ref()) else {
        return Vec::new();
    };
    account_job(u)
        .filter(|_| unrevoked(public_key, secs_of(withdrawn)))
        .into_iter()
        .collect()
}

/// The pass of `u`'s account, when that is a NatsAccount.
fn account_job(u: &NatsUser) -> Option<Job> {
    match super::refs::account_of(u) {
        (AccountKind::NatsAccount, ns, name) => Some(Job::Account(ns, name)),
        _ => None,
    }
}

/// Whether a change of its account, whose JWT is `account_jwt` and which every server holds or
/// not (`current`), asks for the deleted user `u`'s pass (step 3: the kick, then the rest).
pub(crate) fn kick_due(u: &NatsUser, account_jwt: Option<&str>, current: bool) -> bool {
    let (Some(at), Some(pk)) = (
        &u.metadata.deletion_timestamp,
        u.status.as_ref().and_then(|s| s.public_key.as_deref()),
    ) else {
        return false;
    };
    current && finalizer::has(u) && revokes(account_jwt, pk, secs_of(at))
}

/// The jobs a change of a NatsUser asks for.
fn user_jobs(ctx: &Context, t: &Touched) -> Vec<Job> {
    let Some((AccountKind::NatsAccount, a_ns, a_name)) = &t.account else {
        return Vec::new();
    };
    let Some(u) = ctx.index.user(&t.namespace, &t.name) else {
        return Vec::new();
    };
    let account = ctx.index.account(a_ns, a_name);
    let jwt = account
        .as_ref()
        .and_then(|a| a.status.as_ref())
        .and_then(|s| s.jwt.as_deref());
    after_user_change(&u, jwt)
}

/// The jobs a change of a NatsAccount asks for: its deleted users to kick.
fn account_jobs(ctx: &Context, t: &Touched) -> Vec<Job> {
    let Some(a) = ctx.index.account(&t.namespace, &t.name) else {
        return Vec::new();
    };
    let st = a.status.as_ref();
    let jwt = st.and_then(|s| s.jwt.as_deref());
    let current = st
        .and_then(|s| s.distribution.as_ref())
        .is_some_and(crate::distribution::all_current);
    if !current {
        return Vec::new();
    }
    ctx.index
        .users_of(AccountKind::NatsAccount, &t.namespace, &t.name)
        .iter()
        .filter(|u| kick_due(u, jwt, current))
        .map(|u| Job::User(u.namespace().unwrap_or_default(), u.name_any()))
        .collect()
}

/// The next change of `rx`, `None` once it is closed (a lag is a change missed: the Controllers
/// see it).
async fn next(rx: &mut Receiver<Change>) -> Option<Option<Touched>> {
    match rx.recv().await {
        Ok(Change::Touched(t)) => Some(Some(*t)),
        Ok(Change::Relisted) | Err(RecvError::Lagged(_)) => Some(None),
        Err(RecvError::Closed) => None,
    }
}

/// Follows the index's changes of users and accounts and runs the jobs they ask for at once,
/// each object's one at a time (a job asked for while its object's runs is run once more after).
pub(crate) async fn run(ctx: Arc<Context>) {
    let (Some(mut users), Some(mut accounts)) = (
        ctx.index.changes(Kind::User),
        ctx.index.changes(Kind::Account),
    ) else {
        return;
    };
    let process = Process::current();
    let mut running = FuturesUnordered::new();
    // The jobs running, and whether each was asked for again meanwhile.
    let mut busy: HashMap<Job, bool> = HashMap::new();
    loop {
        let jobs = tokio::select! {
            c = next(&mut users) => match c {
                None => return,
                Some(t) => t.map(|t| user_jobs(&ctx, &t)).unwrap_or_default(),
            },
            c = next(&mut accounts) => match c {
                None => return,
                Some(t) => t.map(|t| account_jobs(&ctx, &t)).unwrap_or_default(),
            },
            Some(done) = running.next(), if !running.is_empty() => {
                match busy.remove(&done) {
                    Some(true) => vec![done],
                    _ => Vec::new(),
                }
            }
        };
        for job in jobs {
            if let Some(again) = busy.get_mut(&job) {
                *again = true;
                continue;
            }
            busy.insert(job.clone(), false);
            running.push(one(ctx.clone(), process.clone(), job));
        }
    }
}

/// Runs `job`'s pass when this replica leads, under its object's lock, on the index's copy of
/// its object, or a fresh read while a write of this controller's to it is not back in the
/// watch ([`controller_kit::reconcile::Read::Current`]'s rule).
async fn one(ctx: Arc<Context>, process: Process, job: Job) -> Job {
    if process.gate().now_or_never() != Some(Gate::Open) || ctx.index.ready().await.is_err() {
        return job;
    }
    let result = match &job {
        Job::User(ns, name) => {
            let cached = ctx.index.user(ns, name);
            pass(&ctx, &process, (ns, name, cached), super::user::reconcile).await
        }
        Job::Account(ns, name) => {
            let cached = ctx.index.account(ns, name);
            pass(
                &ctx,
                &process,
                (ns, name, cached),
                super::account::reconcile,
            )
            .await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, ?job, "the revocation lane's pass failed; the Controller's retries");
    }
    job
}

async fn pass<K, F, Fut>(
    ctx: &Arc<Context>,
    process: &Process,
    (ns, name, cached): (&str, &str, Option<Arc<K>>),
    reconcile: F,
) -> Result<(), super::Error>
where
    K: super::index::Watched
        + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: std::future::Future<Output = Result<kube::runtime::controller::Action, super::Error>>,
{
    let described = format!("{} {ns}/{name}", K::kind(&()));
    let (_held, _) = ctx.locks.lock(described.clone()).await;
    let _passing = process.passing(described.clone());
    let read = controller_kit::reconcile::Read::Current;
    let current = controller_kit::reconcile::current(&ctx.shared, cached, read, ns, name);
    let Some(obj) = current.await? else {
        return Ok(());
    };
    let started = Instant::now();
    let result = reconcile(obj, ctx.clone()).await;
    ctx.shared
        .metrics
        .reconciled(&K::kind(&()), started.elapsed());
    result.map(|_| ())
}

#[cfg(test)]
#[path = "lane/tests.rs"]
mod tests;
