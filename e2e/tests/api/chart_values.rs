//! What the chart's values do and refuse: values.schema.json refuses a wrong type or an unknown key
//! naming the field, the templates refuse what cannot work, the image is repository and digest or
//! tag, each controller is enabled on its own with the flags it is given, every pod meets the
//! restricted Pod Security Standard, the alerts read metrics the controllers export, and the
//! chart's version is the workspace's.

use std::collections::BTreeSet;

use e2e::chart::{
    self, Helm, Rendered, args_of, container, deployment, render, render_yaml, renders,
};
use e2e::monitoring;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use rstest::rstest;

// ---- values.schema.json and the templates' refusals

#[rstest]
#[case::a_string_for_an_integer(
    "controllers:\n  cluster:\n    replicas: two\n",
    "/controllers/cluster/replicas"
)]
#[case::a_misspelled_key(
    "controllers:\n  cluster:\n    replicass: 2\n",
    "'replicass' not allowed"
)]
#[case::a_misspelled_top_level_key(
    "leaderElections:\n  enabled: true\n",
    "'leaderElections' not allowed"
)]
#[case::a_string_for_a_port("metrics:\n  port: \"8080\"\n", "/metrics/port")]
#[case::a_string_for_a_list("watchNamespaces: apps\n", "/watchNamespaces")]
#[case::a_namespace_no_dns_label_allows("watchNamespaces: [Apps]\n", "/watchNamespaces/0")]
#[case::a_digest_that_is_a_tag(
    "controllers:\n  auth:\n    image:\n      digest: latest\n",
    "/controllers/auth/image/digest"
)]
#[case::an_unknown_log_format("logFormat: yaml\n", "/logFormat")]
#[case::a_resync_no_go_duration(
    "controllers:\n  jetstream:\n    resync: 5 minutes\n",
    "/controllers/jetstream/resync"
)]
#[case::a_system_connection_without_namespace(
    "controllers:\n  auth:\n    systemConnection: sys\n",
    "/controllers/auth/systemConnection"
)]
fn values_schema_refuses_naming_the_field(#[case] values: &str, #[case] names: &str) {
    let Some(helm) = Helm::find() else { return };
    let err = render_yaml(&helm, values)
        .err()
        .unwrap_or_else(|| panic!("the chart rendered values it should refuse:\n{values}"));
    assert!(
        err.contains(names),
        "refused, but without naming {names:?}:\n{err}"
    );
}

#[rstest]
#[case::two_replicas_without_a_lease(
    "leaderElection: {enabled: false}\n",
    "controllers.cluster.replicas is 2 but leaderElection.enabled is false"
)]
#[case::a_system_connection_outside_the_served_namespaces(
    "watchNamespaces: [apps]\ncontrollers: {auth: {systemConnection: nats-system/sys}}\n",
    "watchNamespaces does not list"
)]
#[case::an_existing_service_account_without_a_name(
    "controllers: {jetstream: {serviceAccount: {create: false}}}\n",
    "controllers.jetstream.serviceAccount.name is required"
)]
fn the_templates_refuse_what_cannot_work(#[case] values: &str, #[case] says: &str) {
    let Some(helm) = Helm::find() else { return };
    let err = render_yaml(&helm, values)
        .err()
        .unwrap_or_else(|| panic!("rendered:\n{values}"));
    assert!(err.contains(says), "{err}");
}

// ---- what the Deployments run

#[rstest]
#[case::the_app_version_by_default("", "localhost/nats-operators/cluster-controller:{appVersion}")]
#[case::the_shared_tag(
    "image: {tag: 1.2.3}\n",
    "localhost/nats-operators/cluster-controller:1.2.3"
)]
#[case::its_own_tag_over_the_shared(
    "image: {tag: 1.2.3}\ncontrollers: {cluster: {image: {tag: 2.0.0}}}\n",
    "localhost/nats-operators/cluster-controller:2.0.0"
)]
#[case::a_digest_over_any_tag(
    "image: {tag: 1.2.3}\ncontrollers: {cluster: {image: {tag: 2.0.0, digest: \"sha256:abababababababababababababababababababababababababababababababab\"}}}\n",
    "localhost/nats-operators/cluster-controller@sha256:abababababababababababababababababababababababababababababababab"
)]
fn the_image_is_repository_and_digest_or_tag(#[case] values: &str, #[case] image: &str) {
    let Some(helm) = Helm::find() else { return };
    let docs = render_yaml(&helm, values).unwrap_or_else(|e| panic!("{e}"));
    // The chart's appVersion is the workspace's version (a release bumps both).
    let image = image.replace("{appVersion}", env!("CARGO_PKG_VERSION"));
    assert_eq!(container(&docs, "cluster")["image"], image.as_str());
}

#[test]
fn each_controller_is_enabled_on_its_own() {
    let Some(helm) = Helm::find() else { return };
    let docs = render_yaml(&helm, "controllers: {auth: {enabled: false}}\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let auth = docs
        .iter()
        .filter(|d| {
            d.value["metadata"]["labels"]["app.kubernetes.io/component"] == "auth-controller"
        })
        .map(Rendered::describe)
        .collect::<Vec<_>>();
    assert!(auth.is_empty(), "auth disabled, yet rendered: {auth:?}");
    for controller in ["cluster", "jetstream"] {
        deployment(&docs, controller);
    }
    let test_pod = docs
        .iter()
        .find(|d| d.kind() == "Pod")
        .expect("the test pod");
    let urls = test_pod.value["spec"]["containers"][0]["args"].to_string();
    assert!(!urls.contains("-auth-metrics"), "{urls}");
}

/// The flags each controller is given by default; the first seven are common to all three.
#[test]
fn the_default_flags_of_each_controller() {
    let Some(helm) = Helm::find() else { return };
    let docs = render(&helm, &[]);
    let common = [
        "--metrics-addr=0.0.0.0:8080",
        "--leader-elect",
        "--probe-addr=0.0.0.0:8081",
        "--log-format=json",
        "--concurrency=32",
        "--kube-api-qps=0",
        "--kube-api-burst=100",
    ];
    let own: [(&str, &[&str]); 3] = [
        (
            "cluster",
            &[
                "--controller-namespace=nats-system",
                "--cluster-domain=cluster.local",
            ],
        ),
        ("auth", &["--resync=5m"]),
        ("jetstream", &["--resync=5m"]),
    ];
    for (controller, own) in own {
        let want: Vec<String> = common.iter().chain(own).map(|s| s.to_string()).collect();
        assert_eq!(args_of(&docs, controller), want, "{controller}");
    }
    let extra = render_yaml(
        &helm,
        "controllers: {jetstream: {extraArgs: [--future-flag=1]}}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        args_of(&extra, "jetstream").last().map(String::as_str),
        Some("--future-flag=1")
    );
    let bare = render_yaml(
        &helm,
        "logFormat: \"\"\nprobes: {enabled: false}\nleaderElection: {enabled: false}\n\
         controllers: {cluster: {replicas: 1}, auth: {replicas: 1}, jetstream: {replicas: 1}}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // The flags always passed, and the auth controller's own.
    assert_eq!(
        args_of(&bare, "auth"),
        vec![
            "--metrics-addr=0.0.0.0:8080",
            "--concurrency=32",
            "--kube-api-qps=0",
            "--kube-api-burst=100",
            "--resync=5m"
        ]
    );
    assert!(container(&bare, "auth")["readinessProbe"].is_null());
    assert!(!bare.iter().any(|d| d.kind() == "PodDisruptionBudget"));
}

// ---- the restricted Pod Security Standard

/// What the restricted profile refuses in `spec` (kubernetes.io/docs/concepts/security/pod-security-standards).
fn restricted_violations(spec: &PodSpec) -> Vec<String> {
    let mut out = Vec::new();
    let pod = spec.security_context.clone().unwrap_or_default();
    if spec.host_network == Some(true) || spec.host_pid == Some(true) || spec.host_ipc == Some(true)
    {
        out.push("host namespaces".into());
    }
    for v in spec.volumes.iter().flatten() {
        let allowed = v.config_map.is_some()
            || v.csi.is_some()
            || v.downward_api.is_some()
            || v.empty_dir.is_some()
            || v.ephemeral.is_some()
            || v.persistent_volume_claim.is_some()
            || v.projected.is_some()
            || v.secret.is_some();
        if !allowed {
            out.push(format!("volume {} of a refused type", v.name));
        }
    }
    let seccomp_ok = |t: Option<&str>| matches!(t, Some("RuntimeDefault" | "Localhost"));
    let pod_seccomp = pod.seccomp_profile.as_ref().map(|s| s.type_.as_str());
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let sc = c.security_context.clone().unwrap_or_default();
        let name = &c.name;
        if sc.privileged == Some(true) {
            out.push(format!("{name}: privileged"));
        }
        if sc.allow_privilege_escalation != Some(false) {
            out.push(format!("{name}: allowPrivilegeEscalation is not false"));
        }
        let caps = sc.capabilities.clone().unwrap_or_default();
        if !caps.drop.iter().flatten().any(|d| d == "ALL") {
            out.push(format!("{name}: capabilities do not drop ALL"));
        }
        if caps.add.iter().flatten().any(|a| a != "NET_BIND_SERVICE") {
            out.push(format!("{name}: adds capabilities"));
        }
        if sc.run_as_non_root.or(pod.run_as_non_root) != Some(true) {
            out.push(format!("{name}: runAsNonRoot is not true"));
        }
        if sc.run_as_user.or(pod.run_as_user) == Some(0) {
            out.push(format!("{name}: runs as user 0"));
        }
        let own = sc.seccomp_profile.as_ref().map(|s| s.type_.as_str());
        if !seccomp_ok(own.or(pod_seccomp)) {
            out.push(format!(
                "{name}: seccompProfile is not RuntimeDefault or Localhost"
            ));
        }
        if c.ports.iter().flatten().any(|p| p.host_port.is_some()) {
            out.push(format!("{name}: hostPort"));
        }
    }
    out
}

#[test]
fn every_pod_meets_the_restricted_pod_security_standard() {
    let Some(helm) = Helm::find() else { return };
    let mut failures = Vec::new();
    let mut pods = 0;
    for (what, docs) in renders(&helm) {
        for doc in &docs {
            let spec: Option<PodSpec> = match doc.kind() {
                "Deployment" => serde_json::from_value::<Deployment>(doc.value.clone())
                    .ok()
                    .and_then(|d| d.spec?.template.spec),
                "Pod" => serde_json::from_value::<Pod>(doc.value.clone())
                    .ok()
                    .and_then(|p| p.spec),
                _ => continue,
            };
            let spec = spec.unwrap_or_else(|| panic!("{what}: {} has no pod spec", doc.describe()));
            pods += 1;
            for v in restricted_violations(&spec) {
                failures.push(format!("{what}: {}: {v}", doc.describe()));
            }
        }
    }
    assert!(pods >= 12, "only {pods} pod specs rendered");
    assert!(failures.is_empty(), "{failures:#?}");
}

// ---- monitoring

#[test]
fn the_alerts_read_metrics_the_controllers_export() {
    use controller_kit::metrics;
    let Some(helm) = Helm::find() else { return };
    let docs = render_yaml(&helm, "metrics: {prometheusRule: {enabled: true}}\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let rule = docs
        .iter()
        .find(|d| d.kind() == "PrometheusRule")
        .expect("a PrometheusRule");
    let rule: monitoring::PrometheusRule =
        serde_json::from_value(rule.value.clone()).expect("decodes");
    let exported: BTreeSet<&str> = [
        metrics::RECONCILE_TOTAL,
        metrics::RECONCILE_ERRORS,
        metrics::RECONCILE_DURATION,
        metrics::CONDITION,
        metrics::ACCOUNT_JWT_EXPIRY,
        metrics::ROLLOUT_PENDING,
        metrics::ROLLOUT_GATE,
    ]
    .into();
    let mut alerts = Vec::new();
    for r in rule.spec.groups.iter().flat_map(|g| &g.rules) {
        alerts.push(r.alert.clone());
        let used: Vec<&str> = r
            .expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("nats_operator_"))
            .collect();
        assert!(
            !used.is_empty(),
            "{}: reads no nats_operator_ metric",
            r.alert
        );
        for m in used {
            assert!(
                exported.contains(m),
                "{}: {m} is not a metric the controllers export",
                r.alert
            );
        }
    }
    assert_eq!(
        alerts,
        [
            "NatsAccountJWTPastHalfTTL",
            "NatsClusterGateBlocked",
            "NatsResourceNotReady"
        ]
    );
    // The GateBlocked alert names the reason the cluster controller writes.
    assert!(rule.spec.groups[0].rules[1].expr.contains(&format!(
        "reason=\"{}\"",
        nats_api::cluster::reason::GATE_BLOCKED
    )));
}

#[test]
fn the_chart_version_is_the_workspace_version() {
    let path = chart::chart_dir().join("Chart.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let chart: serde_yaml::Value = serde_yaml::from_str(&text).expect("Chart.yaml parses");
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(chart["version"].as_str(), Some(version));
    assert_eq!(chart["appVersion"].as_str(), Some(version));
}
