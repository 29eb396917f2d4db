//! The reconciler on the sim's local server lifecycle, against a real kube-apiserver and real
//! nats-server processes (story 01, "a change that restarts"): the quickstart settles, a memory
//! raise restarts the servers one at a time, highest ordinal first, each only once every server
//! is up again, and the NATS cluster settles on the new revision.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use cluster_controller::server_lifecycle::{ObservedServer, ServerLifecycle};
use sim::control_plane::{Host, ObjectRef};
use sim::controlled::read_cluster;
use sim::testkit::{message, wait_condition, workspace_path};

const WAIT: Duration = Duration::from_secs(180);

/// The quickstart NatsCluster on the local server lifecycle, settled: the host, its reference and
/// the settled object.
async fn quickstart_settled() -> (Host, ObjectRef, serde_json::Value) {
    let host = Host::start(&["nats"], &["cluster"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    host.apply_manifest(
        &workspace_path("docs/stories/01-quickstart/01-natscluster.yaml"),
        &BTreeMap::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let demo = ObjectRef::parse("NatsCluster/nats/demo").expect("ref");
    let at_rest = wait_condition(&host, &demo, "Settled", WAIT).await;
    (host, demo, at_rest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_raise_restarts_one_server_at_a_time_highest_ordinal_first_meta_leader_last() {
    let (host, demo, at_rest) = quickstart_settled().await;
    assert_eq!(
        at_rest["status"]["readyReplicas"], 3,
        "{}",
        at_rest["status"]
    );
    let cluster = read_cluster(&host, "nats", "demo").await.expect("cluster");
    let before: Vec<ObservedServer> = host
        .server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe");
    let old: Vec<Option<String>> = before.iter().map(|o| o.revision.clone()).collect();
    assert!(
        at_rest["status"]["jetstream"]["metaLeader"].is_string(),
        "status names a meta leader: {}",
        at_rest["status"]
    );
    // The leader as the servers see it now (status may predate an election after boot).
    let leader = live_meta_leader(&host, &cluster).await;
    assert!(old.iter().all(Option::is_some), "{before:?}");

    host.apply_manifest(
        &workspace_path("docs/stories/01-quickstart/02-natscluster-demo-8gi.yaml"),
        &BTreeMap::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // Watch the servers as the rollout goes: the order each reaches a new revision, and that
    // no two are ever down or restarting together.
    let mut order: Vec<String> = vec![];
    let mut worst_down = 0usize;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let seen = host
            .server_lifecycle()
            .observe(&cluster)
            .await
            .expect("observe");
        let down = seen.iter().filter(|o| !o.ready).count();
        worst_down = worst_down.max(down);
        for o in &seen {
            // A server mid-restart reports no revision; only a new one counts.
            if o.revision.is_some()
                && o.revision != old[o.ordinal as usize]
                && !order.contains(&o.server_name)
            {
                order.push(o.server_name.clone());
            }
        }
        if order.len() == 3 && down == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout within {WAIT:?}: updated {order:?}, now {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Highest ordinal first, the meta leader's server last.
    let mut want: Vec<String> = ["demo-2", "demo-1", "demo-0"]
        .iter()
        .map(|s| s.to_string())
        .filter(|s| *s != leader)
        .collect();
    want.push(leader.clone());
    assert_eq!(order, want, "highest first, meta leader {leader} last");
    assert!(worst_down <= 1, "{worst_down} servers down at once");

    // The pass that restarts the last server writes Settled from what it saw before the step;
    // the rollout is over once a later pass reads it up to date with every server ready.
    let done = sim::wait::poll("the rollout reported done", WAIT, || async {
        let now = host.get(&demo).await.map_err(|e| e.to_string())?;
        let current = now["status"]["observedGeneration"] == now["metadata"]["generation"];
        let up_to_date = sim::control_plane::condition_of(&now, "Progressing")
            .is_some_and(|(s, r, _)| s == "False" && r == "UpToDate");
        let settled =
            sim::control_plane::condition_of(&now, "Settled").is_some_and(|(s, _, _)| s == "True");
        let ready = now["status"]["readyReplicas"] == 3;
        Ok((current && up_to_date && settled && ready).then_some(now))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let st = &done["status"];
    assert_eq!(st["config"]["appliedBy"], "Restart", "{st}");
    assert!(
        st["config"]["restartReason"]
            .as_str()
            .is_some_and(|r| r.contains("jetstream")),
        "the restart-only field is named: {st}"
    );
    assert_eq!(
        st["rollout"]["updated"],
        serde_json::json!(["demo-0", "demo-1", "demo-2"]),
        "{st}"
    );
    assert_eq!(st["jetstream"]["limits"]["maxMemoryStore"], "6Gi", "{st}");
    // One RolloutStep Event per server, in the order the gate chose (the Go reference's tests
    // assert the same): the order the servers reached the new revision above.
    let steps = rollout_steps(&host, order.len()).await;
    let stepped: Vec<String> = steps
        .iter()
        .filter_map(|note| {
            note.strip_prefix("restarting ")
                .and_then(|rest| rest.split_whitespace().next())
                .map(str::to_string)
        })
        .collect();
    assert_eq!(
        stepped, order,
        "one RolloutStep Event per server, in the gate's order: {steps:?}"
    );
    let after = host
        .server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe");
    for (b, a) in before.iter().zip(&after) {
        assert!(
            a.restarts > b.restarts,
            "{} restarted: {b:?} -> {a:?}",
            a.server_name
        );
    }
}

/// Adding `auth` to a running NatsCluster is held with AuthChangeBlocked: clients and streams
/// live in the global account now and would be in accounts after, and servers with and without
/// auth do not route to each other, so no rollout carries it. No server restarts — until the
/// `restart-all` annotation says to restart every server at once: then each restarts exactly
/// once, the NATS cluster runs under the operator, and the annotation is cleared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_auth_is_held_until_restart_all_restarts_every_server_at_once() {
    let (host, demo, _) = quickstart_settled().await;
    let cluster = read_cluster(&host, "nats", "demo").await.expect("cluster");
    let before = host
        .server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe");

    let trust = sim::trust::generate().unwrap_or_else(|e| panic!("{e}"));
    let quickstart = std::fs::read_to_string(workspace_path(
        "docs/stories/01-quickstart/01-natscluster.yaml",
    ))
    .expect("quickstart");
    let with_auth = format!(
        "apiVersion: nats.mikluko.io/v1beta1\nkind: NatsOperatorTrust\nmetadata: {{ name: sim, namespace: nats }}\nspec:\n  operatorJWT: ${{trust.operator_jwt}}\n  systemAccountJWT: ${{trust.system_account_jwt}}\n---\n{quickstart}  auth:\n    trustRef: {{ name: sim }}\n"
    );
    host.apply_text(
        Path::new("with-auth.yaml"),
        &sim::control_plane::substitute(&with_auth, &trust.vars),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let held = host
        .wait_condition(&demo, "Progressing=True/AuthChangeBlocked", WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let message = message(&held, "Progressing");
    assert!(message.contains("adding spec.auth"), "{message}");
    let after = host
        .server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe");
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(
            (a.restarts, &a.revision),
            (b.restarts, &b.revision),
            "{} untouched",
            a.server_name
        );
    }

    host.annotate(&demo, "cluster.nats.mikluko.io/restart-all=true")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = tokio::time::Instant::now() + WAIT;
    let done = loop {
        let now = host.get(&demo).await.unwrap_or_else(|e| panic!("{e}"));
        let up_to_date = now["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter().any(|c| {
                c["type"] == "Progressing" && c["status"] == "False" && c["reason"] == "UpToDate"
            })
        });
        if up_to_date
            && now["metadata"]["annotations"]["cluster.nats.mikluko.io/restart-all"].is_null()
        {
            break now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "restart-all carried out and cleared within {WAIT:?}; now: {}",
            serde_json::to_string_pretty(&now).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let reason = done["status"]["config"]["restartReason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.starts_with("restart-all: adding spec.auth"),
        "status.config: {}",
        done["status"]["config"]
    );
    let restarted = host
        .server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe");
    for (b, a) in before.iter().zip(&restarted) {
        assert_eq!(
            a.restarts,
            b.restarts + 1,
            "{} restarted exactly once: {b:?} -> {a:?}",
            a.server_name
        );
    }
    // Every server now runs under the operator: its system account is the generated one.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("http client");
    for o in &restarted {
        let url = format!(
            "{}/varz",
            host.server_lifecycle()
                .address(&cluster, o.ordinal)
                .monitor_url
        );
        let varz: serde_json::Value = http
            .get(&url)
            .send()
            .await
            .expect("varz")
            .json()
            .await
            .expect("varz json");
        assert_eq!(
            varz["system_account"].as_str(),
            trust
                .vars
                .get("trust.system_account")
                .map(|s| s.trim_matches('"')),
            "{} system account",
            o.server_name
        );
    }
}

/// The meta leader every server of `cluster` names in its `/jsz`, polled until they agree.
async fn live_meta_leader(host: &Host, cluster: &nats_api::cluster::NatsCluster) -> String {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("http client");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut named = std::collections::BTreeSet::new();
        for i in 0..3 {
            let url = format!(
                "{}/jsz",
                host.server_lifecycle().address(cluster, i).monitor_url
            );
            let leader = match http.get(&url).send().await {
                Ok(r) => r
                    .json::<serde_json::Value>()
                    .await
                    .ok()
                    .and_then(|v| v["meta_cluster"]["leader"].as_str().map(str::to_string)),
                Err(_) => None,
            };
            named.insert(leader.unwrap_or_default());
        }
        if named.len() == 1
            && let Some(l) = named.pop_first().filter(|l| !l.is_empty())
        {
            return l;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the servers agree on a meta leader: {named:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The notes of the RolloutStep Events in namespace nats, oldest first, once there are `count`.
async fn rollout_steps(host: &Host, count: usize) -> Vec<String> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(host.client(), "nats");
    sim::wait::poll("the RolloutStep Events", WAIT, || {
        let events = events.clone();
        async move {
            let mut steps: Vec<_> = events
                .list(&Default::default())
                .await
                .map_err(|e| format!("listing Events: {e}"))?
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("RolloutStep"))
                .filter_map(|e| Some((e.event_time.clone()?.0, e.note?)))
                .collect();
            steps.sort();
            Ok((steps.len() >= count).then(|| steps.into_iter().map(|(_, n)| n).collect()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}
