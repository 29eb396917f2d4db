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
/// How many of `seen` are down: not running (a server being restarted reports no revision), or
/// not Ready since it last started. `ready_since` keeps, per ordinal, the start (its restart
/// count) at which the server last answered `/healthz`. A server once Ready since its start
/// and failing one `/healthz` now is not down: its pod's readiness probe (period 10 s, three
/// failures) would keep it Ready, and one is expected while another server is restarted (a
/// JetStream server answers 503 until the meta group has a leader again, after the leader's
/// server restarted).
fn down(seen: &[ObservedServer], ready_since: &mut BTreeMap<u32, u32>) -> usize {
    seen.iter()
        .filter(|o| {
            if o.ready {
                ready_since.insert(o.ordinal, o.restarts);
            }
            let up_since_start = ready_since.get(&o.ordinal) == Some(&o.restarts);
            o.revision.is_none() || !up_since_start
        })
        .count()
}

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
    // no two are ever down or restarting together. Down is as a pod's readiness has it: not
    // running, or not yet Ready since it last started ([`down`]).
    let mut order: Vec<String> = vec![];
    let mut ready_since: BTreeMap<u32, u32> = BTreeMap::new();
    let mut worst_down = 0usize;
    // The observation with the most servers down, and when: what a failure names.
    let mut worst_seen: Vec<ObservedServer> = vec![];
    let started = tokio::time::Instant::now();
    let mut worst_at = Duration::ZERO;
    let mut worst_order: Vec<String> = vec![];
    let deadline = started + WAIT;
    loop {
        let seen = host
            .server_lifecycle()
            .observe(&cluster)
            .await
            .expect("observe");
        let down = down(&seen, &mut ready_since);
        if down > worst_down {
            worst_down = down;
            worst_seen = seen.clone();
            worst_at = started.elapsed();
            worst_order = order.clone();
        }
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
    assert!(
        worst_down <= 1,
        "{worst_down} servers down at once, {worst_at:?} into the rollout (updated before it: {worst_order:?}): {worst_seen:?}"
    );

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

/// [`down`] over a server's life: restarted, up but not yet Ready, Ready, one failed `/healthz`,
/// restarted again.
#[test]
fn down_is_not_running_or_not_ready_since_the_last_start() {
    let server = |ready: bool, running: bool, restarts: u32| ObservedServer {
        ordinal: 0,
        server_name: "demo-0".into(),
        present: true,
        ready,
        revision: running.then(|| "r".to_string()),
        restarts,
        ..ObservedServer::default()
    };
    let mut since = BTreeMap::new();
    let life = [
        (server(true, true, 0), 0, "Ready at its first start"),
        (server(false, true, 0), 0, "one failed /healthz after Ready"),
        (server(false, false, 1), 1, "being restarted"),
        (server(false, true, 1), 1, "running again, not yet Ready"),
        (server(true, true, 1), 0, "Ready since its restart"),
        (server(false, true, 1), 0, "one failed /healthz after it"),
        (server(false, true, 2), 1, "restarted again, not yet Ready"),
    ];
    for (seen, want, what) in life {
        assert_eq!(down(&[seen], &mut since), want, "{what}");
    }
    // Two servers: one restarting, one up and never Ready since its own restart.
    let mut other = server(false, true, 1);
    other.ordinal = 1;
    let both = [server(false, false, 3), other];
    assert_eq!(down(&both, &mut BTreeMap::new()), 2);
}
