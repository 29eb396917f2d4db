//! `controller_kit::finalizer` against a real kube-apiserver, on ConfigMaps: the finalizer is
//! added before the apply path and removed after a cleanup that is done, never taking another
//! controller's finalizer with it; a cleanup that waits keeps it; a write made from a stale read
//! fails instead of dropping or doubling a finalizer someone else wrote meanwhile.
//!
//! Needs `scripts/install-apiserver.sh` to have run; without the binaries the tests fail saying so.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use controller_kit::finalizer::{self, Cleanup, WriteError};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::json;
use sim::apiserver::ApiServer;

const NS: &str = "kit";
const OURS: &str = "kit.nats.mikluko.io/test";
const THEIRS: &str = "other.example.com/keep";

#[derive(Debug, thiserror::Error)]
enum TestError {
    #[error(transparent)]
    Write(#[from] WriteError),
}

async fn apiserver() -> (ApiServer, Api<ConfigMap>) {
    let api = ApiServer::kube_1_20()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    api.create_namespace(NS)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let cms = Api::namespaced(api.client(), NS);
    (api, cms)
}

async fn create(cms: &Api<ConfigMap>, name: &str, finalizers: &[&str]) -> ConfigMap {
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "finalizers": finalizers},
    }))
    .expect("a ConfigMap");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("ConfigMap created")
}

async fn get(cms: &Api<ConfigMap>, name: &str) -> Option<ConfigMap> {
    cms.get_opt(name).await.expect("ConfigMap read")
}

fn finalizers(cm: &ConfigMap) -> Vec<String> {
    cm.metadata.finalizers.clone().unwrap_or_default()
}

async fn delete(cms: &Api<ConfigMap>, name: &str) {
    cms.delete(name, &DeleteParams::default())
        .await
        .expect("ConfigMap deleted");
}

/// One pass under our finalizer; returns its Action, whether apply ran (with our finalizer on
/// the object it got) and whether cleanup ran. The cleanup answers `cleanup`.
async fn pass(
    cms: &Api<ConfigMap>,
    obj: ConfigMap,
    wants: bool,
    cleanup: Cleanup,
) -> (Result<Action, TestError>, Option<bool>, bool) {
    let applied: Arc<std::sync::Mutex<Option<bool>>> = Arc::default();
    let cleaned = Arc::new(AtomicBool::new(false));
    let (a, c) = (applied.clone(), cleaned.clone());
    let result = finalizer::reconcile(
        cms,
        OURS,
        Arc::new(obj),
        wants,
        |o: Arc<ConfigMap>| async move {
            *a.lock().unwrap_or_else(|p| p.into_inner()) = Some(finalizer::has(&*o, OURS));
            Ok::<_, TestError>(Action::requeue(Duration::from_secs(300)))
        },
        |_| async move {
            c.store(true, Ordering::SeqCst);
            Ok::<_, TestError>(cleanup)
        },
    )
    .await;
    let applied = *applied.lock().unwrap_or_else(|p| p.into_inner());
    (result, applied, cleaned.load(Ordering::SeqCst))
}

#[tokio::test]
async fn the_finalizer_is_added_before_apply_and_removal_leaves_another_controllers_in_place() {
    let (_api, cms) = apiserver().await;
    let cm = create(&cms, "both", &[THEIRS]).await;

    let (result, applied, cleaned) = pass(&cms, cm, true, Cleanup::Done).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        applied,
        Some(true),
        "apply runs on the object carrying the finalizer"
    );
    assert!(!cleaned);
    let cm = get(&cms, "both").await.expect("still there");
    assert_eq!(finalizers(&cm), vec![THEIRS.to_string(), OURS.to_string()]);

    // A second pass adds nothing (no duplicate).
    let (_, applied, _) = pass(&cms, cm, true, Cleanup::Done).await;
    assert_eq!(applied, Some(true));
    let cm = get(&cms, "both").await.expect("still there");
    assert_eq!(finalizers(&cm).len(), 2, "{:?}", finalizers(&cm));

    delete(&cms, "both").await;
    let cm = get(&cms, "both").await.expect("held by both finalizers");
    let (result, applied, cleaned) = pass(&cms, cm, true, Cleanup::Done).await;
    assert_eq!(result.ok(), Some(Action::await_change()));
    assert_eq!(applied, None, "a deletion does not apply");
    assert!(cleaned);
    let cm = get(&cms, "both").await.expect("still held by theirs");
    assert_eq!(finalizers(&cm), vec![THEIRS.to_string()], "theirs kept");
    assert!(cm.metadata.deletion_timestamp.is_some());

    // Deleting without our finalizer: nothing of ours to clean up.
    let (result, _, cleaned) = pass(&cms, cm, true, Cleanup::Done).await;
    assert_eq!(result.ok(), Some(Action::await_change()));
    assert!(!cleaned, "no cleanup without our finalizer");
}

#[tokio::test]
async fn a_cleanup_that_waits_keeps_the_finalizer_until_it_is_done() {
    let (_api, cms) = apiserver().await;
    create(&cms, "held", &[OURS]).await;
    delete(&cms, "held").await;
    let wait = Cleanup::Wait {
        after: Duration::from_secs(7),
        reason: "the data is still there".into(),
    };
    for _ in 0..2 {
        let cm = get(&cms, "held").await.expect("held by our finalizer");
        let (result, _, cleaned) = pass(&cms, cm, true, wait.clone()).await;
        assert_eq!(result.ok(), Some(Action::requeue(Duration::from_secs(7))));
        assert!(cleaned);
    }
    let cm = get(&cms, "held").await.expect("still held after waiting");
    assert_eq!(finalizers(&cm), vec![OURS.to_string()]);

    let (result, _, _) = pass(&cms, cm, true, Cleanup::Done).await;
    assert_eq!(result.ok(), Some(Action::await_change()));
    assert!(get(&cms, "held").await.is_none(), "gone once done");
}

#[tokio::test]
async fn an_object_that_no_longer_wants_the_finalizer_loses_only_ours() {
    let (_api, cms) = apiserver().await;
    let cm = create(&cms, "unwanted", &[OURS, THEIRS]).await;
    let (result, applied, cleaned) = pass(&cms, cm, false, Cleanup::Done).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(applied, Some(false), "apply runs on the object without it");
    assert!(!cleaned);
    let cm = get(&cms, "unwanted").await.expect("still there");
    assert_eq!(finalizers(&cm), vec![THEIRS.to_string()]);
}

#[tokio::test]
async fn a_write_from_a_stale_read_fails_instead_of_dropping_another_finalizer() {
    let (_api, cms) = apiserver().await;
    let set = |f: Vec<&str>| Patch::Merge(json!({"metadata": {"finalizers": f}}));

    // Added: read with no finalizers; another controller adds its own before we write.
    let stale = create(&cms, "added", &[]).await;
    cms.patch("added", &PatchParams::default(), &set(vec![THEIRS]))
        .await
        .expect("theirs added");
    let err = finalizer::add(&cms, &stale, OURS)
        .await
        .expect_err("the add from the stale read fails");
    assert_eq!(err.op, finalizer::Op::Add);
    assert!(
        matches!(&err.source, kube::Error::Api(s) if s.code == 422),
        "{err}"
    );
    let fresh = get(&cms, "added").await.expect("there");
    assert_eq!(finalizers(&fresh), vec![THEIRS.to_string()], "theirs kept");
    finalizer::add(&cms, &fresh, OURS)
        .await
        .expect("the add from the fresh read");
    let cm = get(&cms, "added").await.expect("there");
    assert_eq!(finalizers(&cm), vec![THEIRS.to_string(), OURS.to_string()]);

    // Removed: read with theirs before ours; theirs goes before we write, so ours moved.
    let stale = cm;
    cms.patch(
        "added",
        &PatchParams::default(),
        &set(vec![OURS, "late.example.com/x"]),
    )
    .await
    .expect("theirs removed, another added");
    let err = finalizer::remove(&cms, &stale, OURS)
        .await
        .expect_err("the removal at the stale index fails");
    assert_eq!(err.op, finalizer::Op::Remove);
    let fresh = get(&cms, "added").await.expect("there");
    assert_eq!(
        finalizers(&fresh),
        vec![OURS.to_string(), "late.example.com/x".to_string()],
        "nothing dropped"
    );
    finalizer::remove(&cms, &fresh, OURS)
        .await
        .expect("the removal from the fresh read");
    let cm = get(&cms, "added").await.expect("there");
    assert_eq!(finalizers(&cm), vec!["late.example.com/x".to_string()]);
}
