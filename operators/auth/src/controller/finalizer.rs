//! The auth controller's finalizer (one per object it signs for: a deleted object stays until
//! what it waits on is done), through the kit's one finalizer path
//! ([`controller_kit::finalizer::reconcile`]), and the Events of a held or forced deletion.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use controller_kit::conditions::Decided;
use controller_kit::finalizer::{self, Cleanup, WriteError};
use controller_kit::reconcile::describe;
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::auth::FINALIZER;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Context;
use super::error::Error;
use super::write_status::previous_conditions;

/// How soon a pass whose finalizer write was stale looks again, as after a stale status write.
const STALE_RETRY: Duration = Duration::from_millis(200);

/// Whether `obj` carries the auth controller's finalizer.
pub(crate) fn has<K: Resource>(obj: &K) -> bool {
    finalizer::has(obj, FINALIZER)
}

/// One pass of `obj` under the auth controller's finalizer: `apply` for a live object (the
/// finalizer added first when it `wants` it), `cleanup` for one being deleted, which releases
/// the finalizer once [`Cleanup::Done`]. A finalizer write made from a list that changed since
/// it was read (422, or a 409) is no failure: the pass looks again at the fresh object in
/// 200 ms, not after the error backoff.
pub(crate) async fn reconcile<K, A, AF, C, CF>(
    ctx: &Context,
    obj: Arc<K>,
    wants: bool,
    apply: A,
    cleanup: C,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
    A: FnOnce(Arc<K>) -> AF,
    AF: Future<Output = Result<Action, Error>>,
    C: FnOnce(Arc<K>) -> CF,
    CF: Future<Output = Result<Cleanup, Error>>,
{
    let api: Api<K> = Api::namespaced(
        ctx.shared.client.clone(),
        &obj.namespace().unwrap_or_default(),
    );
    // The object as the finalizer write left it is a version this pass works from: its
    // watch event is an echo ([`controller_kit::echoes`]).
    let read_at = obj.meta().resource_version.clone();
    let apply = move |o: Arc<K>| {
        if o.meta().resource_version != read_at {
            ctx.shared.echoes.worked_from(&*o);
        }
        apply(o)
    };
    match finalizer::reconcile(&api, FINALIZER, obj, wants, apply, cleanup).await {
        Err(Error::Finalizer(e)) if stale(&e) => {
            tracing::debug!(error = %e, "finalizer write was stale; looking again");
            Ok(Action::requeue(STALE_RETRY))
        }
        other => other,
    }
}

/// Whether a finalizer write failed because the object changed since it was read: the patch's
/// guarding `test` failed (422 naming no field: a spec the apiserver finds invalid names its
/// fields, and is a failure to back off from), or the apiserver gave up on a conflict (409).
fn stale(e: &WriteError) -> bool {
    let kube::Error::Api(s) = &e.source else {
        return false;
    };
    let no_field = s.details.as_ref().is_none_or(|d| d.causes.is_empty());
    s.code == 409 || (s.code == 422 && no_field)
}

/// A DeletionHeld Warning Event for a held deletion whose Ready condition `cond` is new (the
/// first pass that holds it, or a hold for another reason): not one per retry.
pub(crate) async fn deletion_held<K>(ctx: &Context, obj: &K, cond: &Decided)
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let already = previous_conditions(obj)
        .iter()
        .any(|c| c.type_ == cond.type_ && c.reason == cond.reason && c.message == cond.message);
    if !already {
        ctx.shared
            .events
            .publish(
                obj,
                true,
                nats_api::auth::event::DELETION_HELD,
                cond.message.clone(),
            )
            .await;
    }
}

/// A ForceDeleted Warning Event: the finalizer is released without what it waited for.
pub(crate) async fn force_deleted<K>(ctx: &Context, obj: &K, message: String)
where
    K: Resource<DynamicType = ()>,
{
    tracing::warn!(object = %describe(obj), "{message}");
    ctx.shared
        .events
        .publish(obj, true, nats_api::auth::event::FORCE_DELETED, message)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn write_error(code: u16, field: Option<&str>) -> WriteError {
        let mut status = kube::core::Status::failure("m", "Invalid").with_code(code);
        let causes: Vec<_> = field
            .map(|f| serde_json::json!({"field": f}))
            .into_iter()
            .collect();
        status.details =
            serde_json::from_value(serde_json::json!({"causes": causes})).expect("status details");
        WriteError {
            object: "NatsUser nats/u".into(),
            finalizer: FINALIZER.into(),
            op: finalizer::Op::Add,
            source: kube::Error::Api(status.boxed()),
        }
    }

    #[rstest]
    #[case::the_list_changed_since_it_was_read(422, None, true)]
    #[case::a_conflict_the_apiserver_gave_up_on(409, None, true)]
    #[case::an_object_the_apiserver_finds_invalid_is_a_failure(422, Some("spec.x"), false)]
    #[case::anything_else_is_a_failure(500, None, false)]
    fn a_stale_finalizer_write_is_looked_at_again_soon(
        #[case] code: u16,
        #[case] field: Option<&str>,
        #[case] want: bool,
    ) {
        assert_eq!(stale(&write_error(code, field)), want);
    }
}
