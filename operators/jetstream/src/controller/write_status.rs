//! write_status: a pass's [`Outcome`] written as the resource's status (server-side apply on the
//! status subresource), then the spec fields it adopts, then when the resource is next due. The
//! status as written is recorded as the pass's echo ([`controller_kit::echoes`]); the spec patch
//! is not: its new generation wakes the pass that records it as observed.
//!
//! A status that would differ from the one held only in its times (lastSyncedTime,
//! nextCheckTime) is not written while the held one is younger than [`STATUS_REFRESH`]
//! ([`needs_write`]): a resync pass over a settled resource then sends the apiserver nothing.
//! Its lastSyncedTime is thus at most [`STATUS_REFRESH`] behind the last comparison.

use std::fmt::Debug;
use std::time::Duration;

use controller_kit::conditions;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::jetstream::{FIELD_MANAGER, StreamTransfer, SyncStatus, condition};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::context::Context;
use super::error::{Error, kube_err};
use super::outcome::{Outcome, previous_status, previous_transfer};

/// Writes the outcome as status and updates the condition gauge, writes the spec fields it
/// adopts, and returns the Action (the resource is due again after the outcome's requeue).
pub(crate) async fn write_status<K>(
    ctx: &Context,
    obj: &K,
    outcome: Outcome,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let previous = previous_status(obj);
    let requeue = outcome.requeue.unwrap_or(ctx.settings.resync);
    let status = sync_status(
        &previous,
        obj.meta().generation,
        &outcome,
        requeue,
        &conditions::now(),
    );
    // Only NatsStream's status has transfer; leaving it out of the apply removes it.
    let transfer = match outcome.transfer {
        Some(t) => t,
        None => previous_transfer(obj),
    };
    let body = with_transfer(&status, transfer);
    let held = serde_json::to_value(obj)
        .ok()
        .and_then(|mut v| v.get_mut("status").map(Value::take));
    let now = conditions::now();
    if needs_write(
        held.as_ref(),
        &body,
        previous.last_synced_time.as_ref(),
        &now,
    ) {
        let written = ctx
            .shared
            .write_status(obj, &body)
            .await
            .map_err(kube_err(obj))?;
        ctx.shared.echoes.worked_from(&written);
    } else {
        ctx.shared.metrics.set_conditions(
            &K::kind(&()),
            &obj.namespace().unwrap_or_default(),
            &obj.name_any(),
            &status.conditions,
        );
    }
    if let Some(spec) = &outcome.spec_patch {
        let api: Api<K> = Api::namespaced(
            ctx.shared.client.clone(),
            &obj.namespace().unwrap_or_default(),
        );
        controller_kit::status::apply_spec(&api, &obj.name_any(), FIELD_MANAGER, spec)
            .await
            .map_err(kube_err(obj))?;
    }
    ctx.shared.due.schedule(obj, requeue);
    Ok(Action::requeue(requeue))
}

/// How long a settled resource's status may go unwritten: its lastSyncedTime and nextCheckTime
/// are moved at least this often, though nothing else changed.
pub(crate) const STATUS_REFRESH: Duration = Duration::from_secs(30 * 60);

/// The times a pass moves on every status it writes.
const TIMES: [&str; 2] = ["lastSyncedTime", "nextCheckTime"];

/// Whether a pass writes `body` over the status `held`: unless the two differ only in their
/// times, the held status was compared (`last_synced`) less than [`STATUS_REFRESH`] before
/// `now`, and no Terminal is True (a Terminal under terminalPolicy Retry says its next check in
/// nextCheckTime). So a resync over settled resources costs the apiserver no write, and the
/// first pass of a resource, or a change of its conditions, ownership or server state, one.
fn needs_write(held: Option<&Value>, body: &Value, last_synced: Option<&Time>, now: &Time) -> bool {
    let Some(held) = held else { return true };
    let Some(last_synced) = last_synced else {
        return true;
    };
    let recent = plus(last_synced, STATUS_REFRESH).0 > now.0;
    let terminal = body["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == condition::TERMINAL && c["status"] == "True")
    });
    !recent || terminal || without_times(held) != without_times(body)
}

/// `status` without the times every pass moves.
fn without_times(status: &Value) -> Value {
    let mut s = status.clone();
    if let Some(map) = s.as_object_mut() {
        for t in TIMES {
            map.remove(t);
        }
    }
    s
}

/// The status a pass writes: its conditions over the previous ones (Terminal removed unless the
/// pass set it), lastSyncedTime moved only when it compared, nextCheckTime `requeue` from `now`,
/// ownership and server state kept unless it observed them.
fn sync_status(
    previous: &SyncStatus,
    generation: Option<i64>,
    outcome: &Outcome,
    requeue: Duration,
    now: &Time,
) -> SyncStatus {
    SyncStatus {
        observed_generation: generation,
        conditions: conditions::merge(
            &previous.conditions,
            generation,
            &outcome.conditions,
            &[condition::TERMINAL],
            now,
        ),
        last_synced_time: if outcome.compared {
            Some(now.clone())
        } else {
            previous.last_synced_time.clone()
        },
        next_check_time: Some(plus(now, requeue)),
        ownership: outcome.ownership.clone().or(previous.ownership.clone()),
        server: outcome.server.clone().or(previous.server.clone()),
    }
}

/// Deleting=True, DeletedOnServer, over the status as read (nothing else of it changes): a
/// NatsStream whose deletion left no stream on the server says so before its finalizer goes, so
/// a Delete-policy NatsConsumer bound to it, still to be deleted, knows that its consumer went
/// with the stream and needs no server (see [`super::in_use::went_with_stream`]).
pub(crate) async fn write_deleted_on_server<K>(
    ctx: &Context,
    obj: &K,
    what: &str,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let mut status = previous_status(obj);
    let decided = conditions::Decided::new(
        condition::DELETING,
        true,
        nats_api::jetstream::reason::DELETED_ON_SERVER,
        format!("{what} is no longer on the server; its consumers went with it"),
    );
    let generation = obj.meta().generation;
    status.observed_generation = generation;
    status.conditions = conditions::merge(
        &status.conditions,
        generation,
        &[decided],
        &[],
        &conditions::now(),
    );
    let written = ctx
        .shared
        .write_status(obj, &with_transfer(&status, previous_transfer(obj)))
        .await
        .map_err(kube_err(obj))?;
    ctx.shared.echoes.worked_from(&written);
    Ok(())
}

/// The status body: `status`, with `transfer` beside it when there is one.
fn with_transfer(status: &SyncStatus, transfer: Option<StreamTransfer>) -> Value {
    let mut body = serde_json::to_value(status).unwrap_or_default();
    if let (Some(t), Some(map)) = (transfer, body.as_object_mut())
        && let Ok(t) = serde_json::to_value(t)
    {
        map.insert("transfer".into(), t);
    }
    body
}

fn plus(now: &Time, d: Duration) -> Time {
    let span = k8s_openapi::jiff::SignedDuration::try_from(d).unwrap_or_default();
    Time(now.0.checked_add(span).unwrap_or(now.0))
}

/// Counts a balancing pass that held ([`nats_api::jetstream::metric::BALANCER_HELD_PASSES`]):
/// `conditions` hold Holding True, whose reason (one of the few Holding reasons) is the label.
pub(crate) fn count_held<K: Resource>(
    ctx: &Context,
    obj: &K,
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) {
    let Some(held) = conditions
        .iter()
        .find(|c| c.type_ == condition::HOLDING && c.status == "True")
    else {
        return;
    };
    ctx.shared.metrics.add_counter(
        nats_api::jetstream::metric::BALANCER_HELD_PASSES,
        "Balancing passes that held instead of moving, by reason.",
        &[
            ("namespace", &obj.namespace().unwrap_or_default()),
            ("name", &obj.name_any()),
            ("reason", &held.reason),
        ],
        1.0,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use controller_kit::conditions::Decided;
    use nats_api::jetstream::reason;
    use rstest::rstest;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("a time"))
    }

    fn body(ready: &str, synced: i64, next: i64) -> Value {
        serde_json::json!({
            "conditions": [{"type": "Ready", "status": ready}],
            "lastSyncedTime": at(synced),
            "nextCheckTime": at(next),
        })
    }

    /// Each row: the status held (None: never written), the body of this pass, when the held
    /// status was last compared, now, and whether the pass writes.
    #[rstest]
    #[case::a_first_pass_writes(None, body("True", 400, 700), None, 400, true)]
    #[case::a_settled_resync_writes_nothing(
        Some(body("True", 100, 400)),
        body("True", 400, 700),
        Some(100),
        400,
        false
    )]
    #[case::a_change_of_a_condition_writes(
        Some(body("True", 100, 400)),
        body("False", 400, 700),
        Some(100),
        400,
        true
    )]
    #[case::times_older_than_the_refresh_are_moved(
        Some(body("True", 100, 400)),
        body("True", 1900, 2200),
        Some(100),
        1900,
        true
    )]
    #[case::no_last_synced_time_writes(
        Some(body("True", 100, 400)),
        body("True", 400, 700),
        None,
        400,
        true
    )]
    #[case::a_terminal_always_writes_its_next_check(
        Some(serde_json::json!({"conditions": [{"type": "Terminal", "status": "True"}]})),
        serde_json::json!({"conditions": [{"type": "Terminal", "status": "True"}], "nextCheckTime": at(700)}),
        Some(100), 400, true
    )]
    fn a_pass_writes_status_unless_only_its_times_would_move(
        #[case] held: Option<Value>,
        #[case] body: Value,
        #[case] last_synced: Option<i64>,
        #[case] now: i64,
        #[case] want: bool,
    ) {
        assert_eq!(
            needs_write(held.as_ref(), &body, last_synced.map(at).as_ref(), &at(now)),
            want
        );
    }

    #[test]
    fn next_check_time_is_now_plus_the_wait() {
        assert_eq!(plus(&at(1_000), Duration::from_secs(300)), at(1_300));
    }

    fn was_terminal() -> SyncStatus {
        let mut conds = Vec::new();
        Decided::new(condition::TERMINAL, true, reason::OWNED_BY_OTHER, "m").upsert(
            &mut conds,
            Some(1),
            &at(10),
        );
        SyncStatus {
            conditions: conds,
            last_synced_time: Some(at(10)),
            ..SyncStatus::default()
        }
    }

    #[rstest]
    #[case::a_pass_that_does_not_set_terminal_removes_it(
        vec![Decided::new(condition::READY, true, reason::MATCHES_SPEC, "ok")],
        true,
        vec![condition::READY],
        Some(100)
    )]
    #[case::a_pass_that_sets_terminal_keeps_it(
        vec![Decided::new(condition::TERMINAL, true, reason::OWNED_BY_OTHER, "m")],
        false,
        vec![condition::TERMINAL],
        Some(10)
    )]
    fn a_pass_writes_its_conditions_and_moves_last_synced_only_when_it_compared(
        #[case] decided: Vec<Decided>,
        #[case] compared: bool,
        #[case] types: Vec<&str>,
        #[case] last_synced: Option<i64>,
    ) {
        let outcome = Outcome {
            conditions: decided,
            compared,
            ..Outcome::default()
        };
        let s = sync_status(
            &was_terminal(),
            Some(2),
            &outcome,
            Duration::from_secs(5),
            &at(100),
        );
        let got: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(got, types);
        assert!(
            s.conditions
                .iter()
                .all(|c| c.observed_generation == Some(2))
        );
        assert_eq!(s.last_synced_time, last_synced.map(at));
        assert_eq!(s.next_check_time, Some(at(105)));
        assert_eq!(s.observed_generation, Some(2));
    }
}
