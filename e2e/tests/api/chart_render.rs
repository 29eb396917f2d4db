//! The Helm chart `deploy/helm/nats-operators`, rendered offline by Helm v4 (scripts/helm.py):
//! lint is clean; every rendered document decodes strictly into its k8s-openapi type and comes back
//! the same (a typo'd field fails, naming its path); the renders of the default values and of a
//! values file that sets everything match their committed goldens; the RBAC is the table
//! `files/rbac.yaml`, and docs/controllers.md's table is generated from it; the CRDs are the types';
//! values.schema.json refuses a wrong type or an unknown key naming the field; every pod meets the
//! restricted Pod Security Standard.
//!
//! Regenerate the goldens and the docs table with `just chart` (`CHART_UPDATE=1`). Without Helm
//! (scripts/install-helm.sh) each test prints why and passes, except in CI, where it fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use e2e::chart::{self, CONTROLLERS, Helm, Rendered};
use e2e::decode::{round_trip, strict};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, PodSpec, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use rstest::rstest;
use serde::Deserialize;
use serde_json::Value;

const RELEASE: &str = "nats-operators";
const NAMESPACE: &str = "nats-system";

/// The two committed renders: the default values, and testdata/full-values.yaml.
const GOLDENS: [(&str, Option<&str>); 2] = [
    ("default.golden.yaml", None),
    ("full.golden.yaml", Some("full-values.yaml")),
];

fn testdata(name: &str) -> PathBuf {
    chart::testdata_dir().join(name)
}

fn render_files(helm: &Helm, values: &[&Path]) -> Vec<Rendered> {
    let text = helm
        .template(values, RELEASE, NAMESPACE)
        .unwrap_or_else(|e| panic!("the chart does not render: {e}"));
    chart::documents(&text).unwrap_or_else(|e| panic!("the render does not parse: {e}"))
}

/// A render with `yaml` as the only values file.
fn render_yaml(helm: &Helm, yaml: &str) -> Result<Vec<Rendered>, String> {
    let file = values_file(yaml);
    helm.template(&[file.path()], RELEASE, NAMESPACE)
        .map_err(|e| e.stderr)
        .map(|text| chart::documents(&text).unwrap_or_else(|e| panic!("{e}")))
}

fn values_file(yaml: &str) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("temp file");
    std::fs::write(file.path(), yaml).expect("values written");
    file
}

/// The renders every strict test looks at: default, full, and cluster-wide with everything on.
fn renders(helm: &Helm) -> Vec<(String, Vec<Rendered>)> {
    let full = testdata("full-values.yaml");
    let everything =
        "metrics: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}}\n";
    vec![
        ("default values".into(), render_files(helm, &[])),
        ("full-values.yaml".into(), render_files(helm, &[&full])),
        (
            "monitoring on, cluster-wide".into(),
            render_yaml(helm, everything).unwrap_or_else(|e| panic!("{e}")),
        ),
    ]
}

// ---- lint

#[test]
fn helm_lint_is_clean_for_the_default_and_the_full_values() {
    let Some(helm) = Helm::find() else { return };
    let full = testdata("full-values.yaml");
    for values in [vec![], vec![full.as_path()]] {
        let out = helm
            .lint(&values)
            .unwrap_or_else(|e| panic!("helm lint --strict {values:?}:\n{e}"));
        let findings: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with('[') && !l.contains("icon is recommended"))
            .collect();
        assert!(findings.is_empty(), "helm lint {values:?}: {findings:#?}");
    }
}

// ---- strict decoding

/// The Prometheus Operator's kinds (monitoring.coreos.com/v1), the fields this chart writes: no
/// k8s-openapi type exists for them.
mod monitoring {
    use super::*;

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    pub struct ServiceMonitor {
        api_version: String,
        kind: String,
        metadata: ObjectMeta,
        spec: ServiceMonitorSpec,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct ServiceMonitorSpec {
        selector: LabelSelector,
        namespace_selector: Option<NamespaceSelector>,
        endpoints: Vec<Endpoint>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct NamespaceSelector {
        any: Option<bool>,
        match_names: Option<Vec<String>>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Endpoint {
        port: String,
        path: Option<String>,
        interval: Option<String>,
        scrape_timeout: Option<String>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    pub struct PrometheusRule {
        api_version: String,
        kind: String,
        metadata: ObjectMeta,
        pub spec: RuleSpec,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct RuleSpec {
        pub groups: Vec<RuleGroup>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    pub struct RuleGroup {
        name: String,
        pub rules: Vec<Rule>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    pub struct Rule {
        pub alert: String,
        pub expr: String,
        #[serde(rename = "for")]
        for_: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    }
}

/// A custom resource decoded strictly; kube-derived types are not involved, so apiVersion and
/// kind are fields like any other.
fn decode(doc: &Rendered) -> Vec<String> {
    match (doc.api_version(), doc.kind()) {
        ("apps/v1", "Deployment") => round_trip::<Deployment>(&doc.value),
        ("v1", "Service") => round_trip::<Service>(&doc.value),
        ("v1", "ServiceAccount") => round_trip::<ServiceAccount>(&doc.value),
        ("v1", "Pod") => round_trip::<Pod>(&doc.value),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => round_trip::<ClusterRole>(&doc.value),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            round_trip::<ClusterRoleBinding>(&doc.value)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => round_trip::<Role>(&doc.value),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => round_trip::<RoleBinding>(&doc.value),
        ("policy/v1", "PodDisruptionBudget") => round_trip::<PodDisruptionBudget>(&doc.value),
        ("networking.k8s.io/v1", "NetworkPolicy") => round_trip::<NetworkPolicy>(&doc.value),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            round_trip::<CustomResourceDefinition>(&doc.value)
        }
        ("monitoring.coreos.com/v1", "ServiceMonitor") => {
            strict::<monitoring::ServiceMonitor>(&doc.value)
        }
        ("monitoring.coreos.com/v1", "PrometheusRule") => {
            strict::<monitoring::PrometheusRule>(&doc.value)
        }
        (v, k) => vec![format!("no type for apiVersion {v} kind {k}")],
    }
}

#[test]
fn every_rendered_document_decodes_strictly_into_its_type_and_back() {
    let Some(helm) = Helm::find() else { return };
    let mut failures = Vec::new();
    let mut kinds = BTreeSet::new();
    for (what, docs) in renders(&helm) {
        for doc in &docs {
            kinds.insert(doc.kind().to_string());
            for problem in decode(doc) {
                failures.push(format!(
                    "{what}: {} ({}): {problem}",
                    doc.describe(),
                    doc.source
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
    let want = [
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "Deployment",
        "NetworkPolicy",
        "Pod",
        "PodDisruptionBudget",
        "PrometheusRule",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
    ];
    assert_eq!(kinds, want.iter().map(|k| k.to_string()).collect());
}

#[test]
fn a_typo_in_a_template_fails_the_strict_decode_naming_the_field() {
    let Some(helm) = Helm::find() else { return };
    let docs = render_files(&helm, &[]);
    let mut deployment = docs
        .iter()
        .find(|d| d.kind() == "Deployment")
        .expect("a Deployment")
        .clone();
    let spec = deployment.value["spec"]["template"]["spec"]
        .as_object_mut()
        .expect("a pod spec");
    let sa = spec
        .remove("serviceAccountName")
        .expect("serviceAccountName");
    spec.insert("serviceAccountNmae".into(), sa);
    let problems = decode(&deployment);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("spec.template.spec.serviceAccountNmae")),
        "{problems:?}"
    );
}

// ---- goldens

/// A render as committed: CRDs reduced to their metadata (their spec is compared whole with the
/// types by `the_chart_crds_are_the_types_with_the_chart_metadata`, and deploy/crds holds it).
fn golden_text(render: &str) -> String {
    let mut out = String::from(
        "# Generated by `just chart` (CHART_UPDATE=1 cargo nextest run -p e2e --test api chart_render::);\n\
         # do not edit. A CustomResourceDefinition is shown by its metadata: its spec is deploy/crds/<name>.yaml.\n",
    );
    for chunk in render.split("\n---\n") {
        let chunk = chunk.strip_prefix("---\n").unwrap_or(chunk).trim_end();
        if chunk.is_empty() {
            continue;
        }
        out.push_str("---\n");
        if chunk.contains("\nkind: CustomResourceDefinition\n") {
            let docs = chart::documents(chunk).expect("a CRD parses");
            let crd = &docs[0];
            let head = serde_json::json!({
                "apiVersion": crd.value["apiVersion"],
                "kind": crd.value["kind"],
                "metadata": crd.value["metadata"],
            });
            out.push_str(&format!("# Source: {}\n", crd.source));
            out.push_str(&serde_yaml::to_string(&head).expect("yaml"));
        } else {
            out.push_str(chunk);
            out.push('\n');
        }
    }
    out
}

#[test]
fn the_renders_match_their_goldens() {
    let Some(helm) = Helm::find() else { return };
    let mut drift = Vec::new();
    for (golden, values) in GOLDENS {
        let values: Vec<PathBuf> = values.map(testdata).into_iter().collect();
        let values: Vec<&Path> = values.iter().map(PathBuf::as_path).collect();
        let render = helm
            .template(&values, RELEASE, NAMESPACE)
            .unwrap_or_else(|e| panic!("{e}"));
        let want = golden_text(&render);
        let path = testdata(golden);
        if chart::updating() {
            std::fs::write(&path, &want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            let line = have
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
            drift.push(format!(
                "{}: differs from the render from line {} (have {:?}, render {:?})",
                path.display(),
                line + 1,
                have.lines().nth(line).unwrap_or("<end>"),
                want.lines().nth(line).unwrap_or("<end>")
            ));
        }
    }
    assert!(
        drift.is_empty(),
        "the chart's render drifted from its goldens; run `just chart` and review the diff:\n  {}",
        drift.join("\n  ")
    );
}

// ---- RBAC from one table

fn table() -> BTreeMap<String, Vec<chart::RbacRule>> {
    chart::rbac_table().unwrap_or_else(|e| panic!("{e}"))
}

fn rules_of(doc: &Rendered) -> Vec<Value> {
    doc.value["rules"].as_array().cloned().unwrap_or_default()
}

/// The table's rules of `controller` granted in `scope`, as the chart renders them.
fn expected(controller: &str, scope: &str, leader_election: bool) -> Vec<Value> {
    table()[controller]
        .iter()
        .filter(|r| r.scope() == scope)
        .filter(|r| leader_election || r.when.is_none())
        .map(chart::RbacRule::policy_rule)
        .collect()
}

#[test]
fn the_table_names_only_the_three_controllers_and_known_verbs() {
    let table = table();
    assert_eq!(
        table.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        CONTROLLERS.into_iter().collect()
    );
    let verbs: BTreeSet<&str> = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ]
    .into();
    for (controller, rules) in &table {
        for rule in rules {
            assert!(!rule.why.is_empty(), "{controller}: {rule:?} says no why");
            assert!(
                rule.verbs.iter().all(|v| verbs.contains(v.as_str())),
                "{controller}: {rule:?}"
            );
            assert!(
                ["served", "release"].contains(&rule.scope()),
                "{controller}: {rule:?}"
            );
            assert!(
                rule.when.as_deref().is_none_or(|w| w == "leaderElection"),
                "{controller}: {rule:?}"
            );
        }
    }
}

#[test]
fn cluster_wide_each_controller_gets_a_cluster_role_of_its_table_rows() {
    let Some(helm) = Helm::find() else { return };
    let docs = render_files(&helm, &[]);
    for controller in CONTROLLERS {
        let name = format!("{RELEASE}-{controller}");
        let role = docs
            .iter()
            .find(|d| d.kind() == "ClusterRole" && d.name() == name)
            .unwrap_or_else(|| panic!("no ClusterRole {name}"));
        assert_eq!(
            rules_of(role),
            expected(controller, "served", true),
            "{name}"
        );
        let own = docs
            .iter()
            .find(|d| d.kind() == "Role" && d.name() == format!("{name}-self"))
            .unwrap_or_else(|| panic!("no Role {name}-self"));
        assert_eq!(own.namespace(), NAMESPACE);
        assert_eq!(rules_of(own), expected(controller, "release", true));
        let binding = docs
            .iter()
            .find(|d| d.kind() == "ClusterRoleBinding" && d.name() == name)
            .unwrap_or_else(|| panic!("no ClusterRoleBinding {name}"));
        assert_eq!(binding.value["roleRef"]["name"], name.as_str());
        assert_eq!(binding.value["subjects"][0]["name"], name.as_str());
        assert_eq!(binding.value["subjects"][0]["namespace"], NAMESPACE);
    }
    assert!(
        !docs
            .iter()
            .any(|d| d.kind() == "Role" && !d.name().ends_with("-self"))
    );
}

#[test]
fn namespaced_each_controller_gets_a_role_in_each_watched_namespace_and_the_flag() {
    let Some(helm) = Helm::find() else { return };
    let docs = render_yaml(
        &helm,
        "watchNamespaces: [apps, tenants]\nleaderElection: {enabled: false}\n\
         controllers: {cluster: {replicas: 1}, auth: {replicas: 1}, jetstream: {replicas: 1}}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !docs
            .iter()
            .any(|d| d.kind().starts_with("Cluster") && d.kind() != "CustomResourceDefinition")
    );
    for controller in CONTROLLERS {
        let name = format!("{RELEASE}-{controller}");
        for ns in ["apps", "tenants"] {
            let role = docs
                .iter()
                .find(|d| d.kind() == "Role" && d.name() == name && d.namespace() == ns)
                .unwrap_or_else(|| panic!("no Role {ns}/{name}"));
            assert_eq!(rules_of(role), expected(controller, "served", false));
            assert!(
                docs.iter()
                    .any(|d| d.kind() == "RoleBinding" && d.name() == name && d.namespace() == ns),
                "no RoleBinding {ns}/{name}"
            );
        }
        // Without leader election nothing is granted in the release namespace.
        assert!(!docs.iter().any(|d| d.name() == format!("{name}-self")));
        assert!(
            args_of(&docs, controller).contains(&"--watch-namespaces=apps,tenants".to_string())
        );
    }
}

#[test]
fn the_docs_permission_table_is_generated_from_the_rbac_table() {
    let path = chart::workspace_root().join("docs/controllers.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let want = chart::with_docs_table(&text, &chart::rbac_markdown(&table()))
        .unwrap_or_else(|| panic!("{}: the rbac-table markers are missing", path.display()));
    if chart::updating() {
        std::fs::write(&path, &want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    assert!(
        text == want,
        "docs/controllers.md's permission table differs from files/rbac.yaml; run `just chart`"
    );
}

// ---- CRDs

#[test]
fn the_chart_crds_are_the_types_with_the_chart_metadata() {
    let Some(helm) = Helm::find() else { return };
    let docs = render_files(&helm, &[]);
    let crds: Vec<&Rendered> = docs
        .iter()
        .filter(|d| d.kind() == "CustomResourceDefinition")
        .collect();
    let types = nats_api::crds::all();
    assert_eq!(crds.len(), types.len());
    for want in types {
        let name = want.metadata.name.clone().unwrap_or_default();
        let have = crds
            .iter()
            .find(|d| d.name() == name)
            .unwrap_or_else(|| panic!("the chart renders no CRD {name}"));
        let mut have = have.value.clone();
        let meta = have["metadata"].as_object_mut().expect("metadata");
        let annotations = meta.remove("annotations").unwrap_or_default();
        let labels = meta.remove("labels").unwrap_or_default();
        assert_eq!(annotations["helm.sh/resource-policy"], "keep", "{name}");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{name}");
        assert_eq!(
            have,
            serde_json::to_value(&want).expect("json"),
            "{name}: the chart's CRD is not what the types generate (run `just crds`)"
        );
    }
    // crds.install=false renders none; crds.keep=false drops the keep policy.
    let none = render_yaml(&helm, "crds: {install: false}\n").unwrap_or_else(|e| panic!("{e}"));
    assert!(!none.iter().any(|d| d.kind() == "CustomResourceDefinition"));
    let unkept = render_yaml(&helm, "crds: {keep: false}\n").unwrap_or_else(|e| panic!("{e}"));
    assert!(
        unkept
            .iter()
            .filter(|d| d.kind() == "CustomResourceDefinition")
            .all(|d| d.value["metadata"]["annotations"].is_null())
    );
}

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

fn deployment<'a>(docs: &'a [Rendered], controller: &str) -> &'a Rendered {
    docs.iter()
        .find(|d| {
            d.kind() == "Deployment"
                && d.value["metadata"]["labels"]["app.kubernetes.io/component"]
                    == format!("{controller}-controller").as_str()
        })
        .unwrap_or_else(|| panic!("no Deployment of the {controller} controller"))
}

fn container(docs: &[Rendered], controller: &str) -> Value {
    deployment(docs, controller).value["spec"]["template"]["spec"]["containers"][0].clone()
}

fn args_of(docs: &[Rendered], controller: &str) -> Vec<String> {
    serde_json::from_value(container(docs, controller)["args"].clone()).unwrap_or_default()
}

#[rstest]
#[case::the_app_version_by_default("", "nats-operators/cluster-controller:0.1.0")]
#[case::the_shared_tag("image: {tag: 1.2.3}\n", "nats-operators/cluster-controller:1.2.3")]
#[case::its_own_tag_over_the_shared(
    "image: {tag: 1.2.3}\ncontrollers: {cluster: {image: {tag: 2.0.0}}}\n",
    "nats-operators/cluster-controller:2.0.0"
)]
#[case::a_digest_over_any_tag(
    "image: {tag: 1.2.3}\ncontrollers: {cluster: {image: {tag: 2.0.0, digest: \"sha256:abababababababababababababababababababababababababababababababab\"}}}\n",
    "nats-operators/cluster-controller@sha256:abababababababababababababababababababababababababababababababab"
)]
fn the_image_is_repository_and_digest_or_tag(#[case] values: &str, #[case] image: &str) {
    let Some(helm) = Helm::find() else { return };
    let docs = render_yaml(&helm, values).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(container(&docs, "cluster")["image"], image);
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

/// The flags each controller is given by default; the first four are common to all three.
#[test]
fn the_default_flags_of_each_controller() {
    let Some(helm) = Helm::find() else { return };
    let docs = render_files(&helm, &[]);
    let common = [
        "--metrics-addr=0.0.0.0:8080",
        "--leader-elect",
        "--probe-addr=0.0.0.0:8081",
        "--log-format=json",
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
    // What today's binaries take: no flag they lack.
    assert_eq!(
        args_of(&bare, "auth"),
        vec!["--metrics-addr=0.0.0.0:8080", "--resync=5m"]
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
