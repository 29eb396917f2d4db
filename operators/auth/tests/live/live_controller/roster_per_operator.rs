//! The roster with memory (§5.3) is one NATS deployment's: one deployment trusts one operator,
//! so the servers an object of another NatsOperator recorded are not this deployment's servers.
//! An account of a second operator carries a record naming a server no system connection reaches
//! (`far-0`, silent, as an account of another supercluster records its servers); once the
//! controller has read that record, an account of the servers' own operator still reads every
//! server of its deployment current, with no silent server named. Conformance found the bug this
//! guards: after its system connection moved to another deployment, the auth controller held a
//! new account of it RecoveringRevocations for the servers of a story run before.

use kube::api::{Patch, PatchParams};
use nats_api::auth::{NatsAccount, NatsOperator};
use serde_json::json;
use sim::testkit::{WAIT, is, message, wait_for};

use super::apirig::wait_ready;
use super::{SYS, plane};

/// The server of another deployment the stranger's record names.
const FAR: &str = "far-0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_of_another_operators_account_never_enters_this_deployments_roster() {
    let (rig, _topo) = plane(&[]).await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsSystemAccount",
        "metadata": {"name": "elsewhere-system", "namespace": SYS},
        "spec": {"operatorRef": {"name": "elsewhere"}},
    }))
    .await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsOperator",
        "metadata": {"name": "elsewhere", "namespace": SYS},
        "spec": {"systemAccountRef": {"name": "elsewhere-system"}},
    }))
    .await;
    wait_ready(&rig.api::<NatsOperator>(SYS), "elsewhere", "True", "Signed").await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "stranger", "namespace": SYS},
        "spec": {"operatorRef": {"name": "elsewhere"}},
    }))
    .await;
    let accounts = rig.api::<NatsAccount>(SYS);
    wait_for(&accounts, "stranger", "stranger signed and counted", |o| {
        o.pointer("/status/distribution/roster").is_some()
    })
    .await;

    // The record of another deployment's server, as the controller would have written it there;
    // written again until a pass of the controller has read it (a pass in flight may overwrite
    // it once).
    let silent_since = k8s_openapi::jiff::Timestamp::now().to_string();
    sim::wait::poll("the stranger's record naming far-0 read", WAIT, || async {
        let now = accounts.get("stranger").await;
        let read = now.as_ref().is_ok_and(|a| {
            let v = serde_json::to_value(a).unwrap_or_default();
            message(&v, "Distributed").contains(FAR)
        });
        if read {
            return Ok(Some(()));
        }
        let mut roster = now
            .ok()
            .and_then(|a| a.status)
            .and_then(|s| s.distribution)
            .map(|d| serde_json::to_value(d.roster).unwrap_or_default())
            .and_then(|r| r.as_array().cloned())
            .unwrap_or_default();
        roster.retain(|s| s["name"] != FAR);
        roster.push(json!({"name": FAR, "id": "NFARAWAY", "silentSince": silent_since}));
        accounts
            .patch_status(
                "stranger",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"distribution": {"roster": roster}}})),
            )
            .await
            .map_err(|e| format!("patching the stranger's status: {e}"))?;
        Err("the controller has not read the record yet".to_string())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // An account of the servers' own operator: its servers are these three, all current.
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "local", "namespace": SYS},
        "spec": {"operatorRef": {"name": "demo"}},
    }))
    .await;
    let local = wait_for(&accounts, "local", "local 3 of 3", |o| {
        is(o, "Ready", "True", "Signed") && is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
    assert_eq!(
        message(&local, "Distributed"),
        "3 of 3 servers hold this JWT"
    );
    let roster = local
        .pointer("/status/distribution/roster")
        .and_then(|r| r.as_array())
        .cloned()
        .unwrap_or_default();
    assert!(
        roster.len() == 3 && roster.iter().all(|s| s["name"] != FAR),
        "local's roster: {roster:?}"
    );
}
