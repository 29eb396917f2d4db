//! Events as the controllers publish them (controller-kit), against a real kube-apiserver: a
//! repeat of one Event (same object, reason and note) grows that Event's series, and a new
//! note is a new Event — "restarting demo-2" then "restarting demo-0" are two Events, not the
//! first one counted twice.

use controller_kit::events::Events;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, PostParams};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_grow_a_series_and_every_distinct_note_is_kept() {
    // No CRDs: Events are about core objects.
    let server = sim::testkit::apiserver_with(&[], &["nats"]).await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "nats");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("demo".into());
    let cm = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("ConfigMap");

    let events = Events::new(client.clone(), "test-controller");
    for note in [
        "restarting demo-2",
        "restarting demo-2",
        "restarting demo-0",
    ] {
        events.publish(&cm, false, "RolloutStep", note.into()).await;
    }
    events
        .publish(&cm, true, "ReconcileFailed", "restarting demo-2".into())
        .await;

    let listed: Api<Event> = Api::namespaced(client, "nats");
    let mut got: Vec<(String, String, String, i32)> = listed
        .list(&Default::default())
        .await
        .expect("Events")
        .items
        .into_iter()
        .map(|e| {
            assert_eq!(
                e.regarding.as_ref().and_then(|r| r.name.as_deref()),
                Some("demo")
            );
            assert_eq!(e.reporting_controller.as_deref(), Some("test-controller"));
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
                e.series.map_or(1, |s| s.count),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            (
                "Normal".into(),
                "RolloutStep".into(),
                "restarting demo-0".into(),
                1
            ),
            (
                "Normal".into(),
                "RolloutStep".into(),
                "restarting demo-2".into(),
                2
            ),
            (
                "Warning".into(),
                "ReconcileFailed".into(),
                "restarting demo-2".into(),
                1
            ),
        ]
    );
}
