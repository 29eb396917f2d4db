//! Live tier of scale-down and replacement (design §4.5): the reconciler on the local server lifecycle
//! against a real apiserver and real nats-server processes. Without JetStream a server beyond
//! replicas is deleted and a replaced one deleted and started again under the same name; with
//! JetStream and no system credentials nothing can be evacuated, so both are blocked with a
//! reason and no server is touched. The replace-server annotation is cleared once read.

use std::path::Path;
use std::time::Duration;

use cluster_controller::server_lifecycle::ServerLifecycle;
use sim::control_plane::{Host, ObjectRef, condition_of};
use sim::controlled::read_cluster;
use sim::local::LocalEvent;
use sim::testkit::wait_object;

const WAIT: Duration = Duration::from_secs(180);
const REPLACE: &str = "cluster.nats.mikluko.io/replace-server";

fn quickstart(replicas: u32, jetstream: bool) -> String {
    let js = if jetstream {
        "  jetstream:\n    volumeClaimTemplate:\n      spec:\n        accessModes: [ReadWriteOnce]\n        resources:\n          requests:\n            storage: 20Gi\n"
    } else {
        ""
    };
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: nats\n---\n\
apiVersion: cluster.nats.mikluko.io/v1beta1\nkind: NatsCluster\nmetadata:\n  name: demo\n  namespace: nats\n\
spec:\n  version: 2.15.0\n  replicas: {replicas}\n{js}"
    )
}

async fn apply(host: &Host, text: &str) {
    host.apply_text(Path::new("inline"), text)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

async fn present(host: &Host, name: &str) -> Vec<String> {
    let cluster = read_cluster(host, "nats", name).await.expect("cluster");
    host.server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe")
        .into_iter()
        .filter(|o| o.present)
        .map(|o| o.server_name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_jetstream_scale_down_deletes_and_replace_server_recreates_under_the_same_name() {
    let host = Host::start(&["nats"], &["cluster"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let demo = ObjectRef::parse("NatsCluster/nats/demo").expect("ref");
    apply(&host, &quickstart(3, false)).await;
    host.wait_condition(&demo, "Settled", WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    apply(&host, &quickstart(2, false)).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while present(&host, "demo").await.contains(&"demo-2".to_string()) {
        assert!(tokio::time::Instant::now() < deadline, "demo-2 removed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let done = wait_object(&host, &demo, "UpToDate on 2 servers", WAIT, |v| {
        condition_of(v, "Progressing").is_some_and(|(s, r, _)| s == "False" && r == "UpToDate")
            && v["status"]["readyReplicas"] == 2
    })
    .await;
    assert_eq!(
        present(&host, "demo").await,
        vec!["demo-0", "demo-1"],
        "{}",
        done["status"]
    );

    let before = host.server_lifecycle().events().len();
    host.annotate(&demo, &format!("{REPLACE}=demo-1"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Deleted, then started again under the same name: read from the server lifecycle's own log, since
    // polling for absence can miss a gap of a few milliseconds.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let since: Vec<LocalEvent> = host.server_lifecycle().events()[before..]
            .iter()
            .filter(|e| e.server == "demo-1")
            .map(|e| e.event)
            .collect();
        let deleted = since.iter().position(|e| *e == LocalEvent::Deleted);
        if deleted.is_some_and(|d| since[d..].contains(&LocalEvent::Started)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "demo-1 deleted and started again within {WAIT:?}; its events since the annotation: {since:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let done = wait_object(&host, &demo, "demo-1 replaced", WAIT, |v| {
        condition_of(v, "Progressing").is_some_and(|(s, r, _)| s == "False" && r == "UpToDate")
            && v["status"]["readyReplicas"] == 2
            && v["status"]["removals"].as_array().is_none_or(Vec::is_empty)
    })
    .await;
    assert!(
        done["metadata"]["annotations"][REPLACE].is_null(),
        "replace-server cleared once read: {}",
        done["metadata"]
    );
    assert_eq!(present(&host, "demo").await, vec!["demo-0", "demo-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_jetstream_and_no_system_credentials_replacement_and_scale_down_are_blocked() {
    let host = Host::start(&["nats"], &["cluster"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let demo = ObjectRef::parse("NatsCluster/nats/demo").expect("ref");
    apply(&host, &quickstart(3, true)).await;
    host.wait_condition(&demo, "Settled", WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    host.annotate(&demo, &format!("{REPLACE}=demo-1"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let blocked = wait_object(&host, &demo, "ReplacementBlocked", WAIT, |v| {
        condition_of(v, "Progressing")
            .is_some_and(|(s, r, _)| s == "False" && r == "ReplacementBlocked")
    })
    .await;
    let (_, _, message) = condition_of(&blocked, "Progressing").expect("Progressing");
    assert!(message.contains("systemCredentials"), "{message}");
    assert!(
        blocked["metadata"]["annotations"][REPLACE].is_null(),
        "cleared once read: {}",
        blocked["metadata"]
    );
    assert_eq!(
        blocked["status"]["removals"][0]["name"], "demo-1",
        "{}",
        blocked["status"]
    );

    apply(&host, &quickstart(2, true)).await;
    // demo-2's removal comes first unless demo-2 leads the meta group: the leader's server goes
    // last, after the replacement of demo-1, which stays blocked.
    let blocked = wait_object(&host, &demo, "ScaleDownBlocked", WAIT, |v| {
        condition_of(v, "Progressing").is_some_and(|(s, r, _)| {
            s == "False"
                && (r == "ScaleDownBlocked"
                    || (r == "ReplacementBlocked"
                        && v["status"]["jetstream"]["metaLeader"] == "demo-2"))
        })
    })
    .await;
    let (_, reason, message) = condition_of(&blocked, "Progressing").expect("Progressing");
    if reason == "ScaleDownBlocked" {
        assert!(message.contains("demo-2"), "{message}");
    }
    assert_eq!(
        present(&host, "demo").await,
        vec!["demo-0", "demo-1", "demo-2"],
        "nothing removed"
    );
}
