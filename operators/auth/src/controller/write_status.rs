//! Conditions and status writes shared by every pass: the previous conditions merged with a
//! pass's decisions ([`merged`], the kit's [`Decided`] and [`conditions::merge`]); the status written by server-side apply on
//! the status subresource ([`write_status`]), or only at the resourceVersion it was read at
//! ([`write_status_at`], for a status that is a record); and the condition gauge.

use std::fmt::Debug;

use controller_kit::conditions::{self, Decided};
use controller_kit::error::KubeError;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Context;
use super::error::Error;

/// The object's previous conditions with a pass's decisions `set` and the types of `remove` it
/// does not set removed ([`conditions::merge`]: observedGeneration the object's generation,
/// lastTransitionTime kept while a status holds).
pub(crate) fn merged<K: Resource + Serialize>(
    obj: &K,
    set: &[Decided],
    remove: &[&str],
) -> Vec<Condition> {
    let generation = obj.meta().generation;
    conditions::merge(
        &previous_conditions(obj),
        generation,
        set,
        remove,
        &conditions::now(),
    )
}

/// The previous status of an object as JSON (an empty object when it has none).
pub(crate) fn previous_status<K: Serialize>(obj: &K) -> serde_json::Value {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.get("status").cloned())
        .filter(|v| v.is_object())
        .unwrap_or_else(|| serde_json::json!({}))
}

/// The previous conditions of an object.
pub(crate) fn previous_conditions<K: Serialize>(obj: &K) -> Vec<Condition> {
    previous_status(obj)
        .get("conditions")
        .cloned()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default()
}

/// Writes `status` (the whole status this controller owns) by server-side apply on the status
/// subresource and updates the condition gauge ([`controller_kit::context::Shared::write_status`]).
/// A field left out is removed. A status equal to the one `obj` holds is not sent: every pass
/// reads its object fresh, so the apply would change nothing, and a settled pass then costs
/// the apiserver no write.
pub(crate) async fn write_status<K, S>(ctx: &Context, obj: &K, status: &S) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
    S: Serialize,
{
    if unchanged(obj, status) {
        conditions_gauge(ctx, obj, status);
        return Ok(());
    }
    let written = ctx
        .shared
        .write_status(obj, status)
        .await
        .map_err(KubeError::of(obj))?;
    ctx.shared.echoes.worked_from(&written);
    Ok(())
}

/// Whether `status` is what `obj` holds already (as JSON, field by field).
pub(crate) fn unchanged<K: Serialize, S: Serialize>(obj: &K, status: &S) -> bool {
    let held = serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.get("status").cloned());
    match (held, serde_json::to_value(status).ok()) {
        (Some(held), Some(new)) => held == new,
        _ => false,
    }
}

/// The condition gauge of `obj`, from the status just written.
fn conditions_gauge<K: Resource<DynamicType = ()>, S: Serialize>(
    ctx: &Context,
    obj: &K,
    status: &S,
) {
    let conds: Vec<Condition> = serde_json::to_value(status)
        .ok()
        .and_then(|v| v.get("conditions").cloned())
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default();
    ctx.shared.metrics.set_conditions(
        &K::kind(&()),
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
        &conds,
    );
}

/// Writes `status` as [`write_status`] does, only while `obj` is at the resourceVersion it was
/// read at; `Ok(false)` when it changed since (the caller looks again). For the status that is a
/// record (an account's revocations): a pass must never write back a status someone removed.
pub(crate) async fn write_status_at<K, S>(ctx: &Context, obj: &K, status: &S) -> Result<bool, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
    S: Serialize,
{
    let Some(rv) = obj.meta().resource_version.as_deref() else {
        return write_status(ctx, obj, status).await.map(|()| true);
    };
    if unchanged(obj, status) {
        conditions_gauge(ctx, obj, status);
        return Ok(true);
    }
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.shared.client.clone(), &ns);
    match controller_kit::status::apply_at(
        &api,
        &obj.name_any(),
        rv,
        ctx.shared.field_manager,
        status,
    )
    .await
    {
        Ok(written) => ctx.shared.echoes.worked_from(&written),
        Err(kube::Error::Api(e)) if e.code == 409 => return Ok(false),
        Err(e) => return Err(KubeError::of(obj)(e).into()),
    }
    conditions_gauge(ctx, obj, status);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::time::time_of;
    use nats_api::auth::NatsUser;

    #[rstest::rstest]
    #[case::the_same(Some("UA"), vec![("Ready", "True")], Some("UA"), vec![("Ready", "True")], true)]
    #[case::another_key(Some("UA"), vec![("Ready", "True")], Some("UB"), vec![("Ready", "True")], false)]
    #[case::a_condition_turned(Some("UA"), vec![("Ready", "True")], Some("UA"), vec![("Ready", "False")], false)]
    #[case::a_field_to_remove(Some("UA"), vec![], None, vec![], false)]
    #[case::no_status_yet(None, vec![], None, vec![], false)]
    fn a_status_equal_to_the_one_held_is_not_written(
        #[case] held_key: Option<&str>,
        #[case] held: Vec<(&str, &str)>,
        #[case] new_key: Option<&str>,
        #[case] new: Vec<(&str, &str)>,
        #[case] same: bool,
    ) {
        let status = |key: Option<&str>, conds: &[(&str, &str)]| nats_api::auth::NatsUserStatus {
            public_key: key.map(str::to_string),
            conditions: conds.iter().map(|(t, st)| cond(t, st, "R")).collect(),
            ..Default::default()
        };
        let mut u: NatsUser = serde_json::from_value(serde_json::json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
            "metadata": {"name": "u", "namespace": "n"},
            "spec": {"accountRef": {"kind": "NatsAccount", "name": "a"}},
        }))
        .expect("a NatsUser");
        if held_key.is_some() || !held.is_empty() {
            u.status = Some(status(held_key, &held));
        }
        assert_eq!(unchanged(&u, &status(new_key, &new)), same);
    }

    fn cond(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            last_transition_time: time_of(1_000),
            observed_generation: Some(1),
        }
    }

    #[test]
    fn merging_conditions_upserts_and_removes_only_what_is_not_set() {
        let mut u: NatsUser = serde_json::from_value(serde_json::json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
            "metadata": {"name": "u", "namespace": "nats", "generation": 2},
            "spec": {"accountRef": {"kind": "NatsAccount", "name": "a"}},
        }))
        .expect("a NatsUser");
        u.status = Some(nats_api::auth::NatsUserStatus {
            conditions: vec![
                cond("Ready", "False", "KeysPending"),
                cond("Distributed", "False", "NoSystemConnection"),
            ],
            ..Default::default()
        });
        let out = merged(
            &u,
            &[Decided::new("Ready", true, "Signed", "signed")],
            &["Distributed", "Ready"],
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].reason, "Signed");
        assert_eq!(out[0].status, "True");
        assert_eq!(out[0].observed_generation, Some(2));
    }
}
