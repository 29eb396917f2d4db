//! Live tier of certificate rotation: the route certificate the controller reissues once a
//! third of its year remains reaches the running servers. A server reads its certificate files
//! only when it starts or reloads, so without this the servers would go on presenting the old
//! certificate until it expired. With a system user every server is asked to reload and
//! serves the new certificate with no restart; without one the rotation is a restart step,
//! one server at a time under the gate. Checked against what each server says it loaded
//! (`/varz` `cluster.tls_cert_not_after`).

use std::collections::BTreeMap;
use std::time::Duration;

use cluster_controller::route_ca;
use cluster_controller::server_lifecycle::{ObservedServer, ServerLifecycle};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use sim::control_plane::{Host, ObjectRef, condition_of};
use sim::controlled::read_cluster;
use sim::testkit::{wait_condition, workspace_path};

const WAIT: Duration = Duration::from_secs(180);

/// Boots `manifest` (with `vars`) and waits for Settled.
async fn settled(manifest: &str, vars: &BTreeMap<String, String>) -> (Host, ObjectRef) {
    let host = Host::start(&["nats"], &["cluster"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    host.apply_manifest(&workspace_path(manifest), vars)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let demo = ObjectRef::parse("NatsCluster/nats/demo").expect("ref");
    wait_condition(&host, &demo, "Settled", WAIT).await;
    (host, demo)
}

async fn observe(host: &Host) -> Vec<ObservedServer> {
    let cluster = read_cluster(host, "nats", "demo").await.expect("cluster");
    host.server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe")
}

/// NotAfter of the route certificate each server loaded, by server name.
async fn loaded_route_certificates(host: &Host) -> BTreeMap<String, String> {
    let cluster = read_cluster(host, "nats", "demo").await.expect("cluster");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("http client");
    let mut out = BTreeMap::new();
    for o in host
        .server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe")
    {
        let url = format!(
            "{}/varz",
            host.server_lifecycle()
                .address(&cluster, o.ordinal)
                .monitor_url
        );
        let varz: Option<serde_json::Value> = match http.get(&url).send().await {
            Ok(r) => r.json().await.ok(),
            Err(_) => None,
        };
        let at = varz
            .as_ref()
            .and_then(|v| v["cluster"]["tls_cert_not_after"].as_str())
            .unwrap_or_default()
            .to_string();
        out.insert(o.server_name, at);
    }
    out
}

/// The NotAfter the route certificate's Secret records.
async fn recorded_not_after(host: &Host) -> String {
    let secrets: Api<Secret> = Api::namespaced(host.client(), "nats");
    let name = route_ca::routes_tls_secret("demo");
    let s = secrets.get(&name).await.expect("route certificate Secret");
    s.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(route_ca::NOT_AFTER_ANNOTATION))
        .cloned()
        .expect("recorded NotAfter")
}

/// Makes the route certificate look two thirds through its year, so the controller reissues
/// it under the same CA key now.
///
/// Validity is kept in whole seconds and `/varz` tells certificates apart only by NotAfter, so
/// a reissue within the second of the first issue would carry the same NotAfter as the
/// certificate it replaces: the aging waits until that second has passed.
async fn age_the_route_certificate(host: &Host) {
    let secrets: Api<Secret> = Api::namespaced(host.client(), "nats");
    let name = route_ca::routes_tls_secret("demo");
    let s = secrets.get(&name).await.expect("route certificate Secret");
    let (issued, _) = route_ca::recorded_validity(&s).expect("recorded validity");
    sim::wait::poll("a second past the first issue", WAIT, || async {
        let past = time::OffsetDateTime::now_utc() >= issued + time::Duration::seconds(1);
        Ok(past.then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let now = time::OffsetDateTime::now_utc();
    let annotations = route_ca::validity_annotations(
        now - time::Duration::days(300),
        now + time::Duration::days(65),
    );
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    secrets
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("age the route certificate");
}

/// The route certificate's NotAfter once the controller has reissued it (it differs from
/// `old`), as `/varz` prints it.
async fn reissued(host: &Host, old: &str) -> String {
    let secrets: Api<Secret> = Api::namespaced(host.client(), "nats");
    let name = route_ca::routes_tls_secret("demo");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = secrets.get(&name).await.expect("route certificate Secret");
        let recorded = route_ca::recorded_validity(&s).map(|(_, after)| after);
        if let Some(after) = recorded
            && !route_ca::secret_needs_reissue(&s, time::OffsetDateTime::now_utc())
        {
            let text = after
                .format(&time::format_description::well_known::Rfc3339)
                .expect("RFC 3339");
            if text != old {
                return text;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "route certificate reissued within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until every server serves `not_after` and Progressing reads UpToDate.
async fn every_server_serves(host: &Host, demo: &ObjectRef, not_after: &str) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let loaded = loaded_route_certificates(host).await;
        let now = host.get(demo).await.unwrap_or_else(|e| panic!("{e}"));
        let up_to_date = condition_of(&now, "Progressing")
            .is_some_and(|(s, r, _)| s == "False" && r == "UpToDate");
        if up_to_date && !loaded.is_empty() && loaded.values().all(|v| v == not_after) {
            return now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "every server serving the route certificate until {not_after} within {WAIT:?}: {loaded:?}; status: {}",
            now["status"]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_system_user_a_reissued_route_certificate_is_reloaded_with_no_restart() {
    let trust = sim::trust::generate().unwrap_or_else(|e| panic!("{e}"));
    let (host, demo) = settled(
        "scenarios/manifests/trusted/01-natscluster.yaml",
        &trust.vars,
    )
    .await;
    let before = observe(&host).await;
    let old = recorded_not_after(&host).await;
    let loaded = loaded_route_certificates(&host).await;
    assert!(
        loaded.values().all(|v| *v == old),
        "every server first serves the certificate the Secret holds: {loaded:?} vs {old}"
    );
    let aged = std::time::Instant::now();
    age_the_route_certificate(&host).await;

    let new = reissued(&host, &old).await;
    every_server_serves(&host, &demo, &new).await;
    println!(
        "figure: every server serves the reissued route certificate {} ms after the Secret aged (reload)",
        aged.elapsed().as_millis()
    );
    let after = observe(&host).await;
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(
            (a.restarts, &a.revision),
            (b.restarts, &b.revision),
            "{} reloaded, not restarted",
            a.server_name
        );
    }
    // The reloads are told as Events naming the servers (a reload confirmed only after its
    // pass's wait is not told again, so not every server is certain to have one). The controller
    // publishes them after it confirms the reload, which can be a moment after the test saw it.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(host.client(), "nats");
    let names: Vec<String> = after.iter().map(|o| o.server_name.clone()).collect();
    let notes = sim::wait::poll("a CertificatesReloaded Event", WAIT, || {
        let events = events.clone();
        async move {
            let notes: Vec<String> = events
                .list(&Default::default())
                .await
                .map_err(|e| format!("listing Events: {e}"))?
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("CertificatesReloaded"))
                .filter_map(|e| e.note)
                .collect();
            Ok((!notes.is_empty()).then_some(notes))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        notes.iter().all(|n| {
            names.iter().any(|s| {
                n == &format!("reloaded {s}: it serves the rotated certificates of routes")
            })
        }),
        "CertificatesReloaded Events naming servers: {notes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_system_user_a_reissued_route_certificate_restarts_each_server_once() {
    let (host, demo) = settled(
        "docs/stories/01-quickstart/01-natscluster.yaml",
        &BTreeMap::new(),
    )
    .await;
    let before = observe(&host).await;
    let old = recorded_not_after(&host).await;
    let aged = std::time::Instant::now();
    age_the_route_certificate(&host).await;
    let new = reissued(&host, &old).await;
    every_server_serves(&host, &demo, &new).await;
    println!(
        "figure: every server serves the reissued route certificate {} ms after the Secret aged (gated restarts)",
        aged.elapsed().as_millis()
    );
    let after = observe(&host).await;
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(
            a.restarts,
            b.restarts + 1,
            "{} restarted exactly once: {b:?} -> {a:?}",
            a.server_name
        );
        assert_ne!(
            a.revision, b.revision,
            "{} on a new revision",
            a.server_name
        );
    }
    // One at a time: the restarts never overlap (each lame duck follows the previous start).
    let events: Vec<(String, sim::local::LocalEvent)> = host
        .server_lifecycle()
        .events()
        .into_iter()
        .filter(|e| {
            matches!(
                e.event,
                sim::local::LocalEvent::LameDuck | sim::local::LocalEvent::Restarted
            )
        })
        .map(|e| (e.server, e.event))
        .collect();
    for pair in events.chunks(2) {
        assert!(
            pair.len() == 2 && pair[0].0 == pair[1].0,
            "each lame duck is followed by that server's restart: {events:?}"
        );
    }
}
