//! The Helm chart `deploy/helm/nats-operators`, rendered offline by Helm v4 (scripts/helm.py): lint
//! is clean; every rendered document decodes strictly into its k8s-openapi type and comes back the
//! same (a typo'd field fails, naming its path); the renders of the default values and of a values
//! file that sets everything match their committed goldens; the CRDs are the types'.
//!
//! Regenerate the goldens with `just chart` (`CHART_UPDATE=1`). Without Helm
//! (scripts/install-helm.sh) each test prints why and passes, except in CI, where it fails.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use e2e::chart::{
    self, Helm, NAMESPACE, RELEASE, Rendered, render, render_yaml, renders, testdata,
};
use e2e::decode::{round_trip, strict};
use e2e::monitoring;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// The two committed renders: the default values, and testdata/full-values.yaml.
const GOLDENS: [(&str, Option<&str>); 2] = [
    ("default.golden.yaml", None),
    ("full.golden.yaml", Some("full-values.yaml")),
];

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

fn decode(doc: &Rendered) -> Vec<String> {
    match (doc.api_version(), doc.kind()) {
        ("apps/v1", "Deployment") => round_trip::<Deployment>(&doc.value),
        ("v1", "Service") => round_trip::<Service>(&doc.value),
        ("v1", "ServiceAccount") => round_trip::<ServiceAccount>(&doc.value),
        ("v1", "Pod") => round_trip::<Pod>(&doc.value),
        ("batch/v1", "Job") => round_trip::<Job>(&doc.value),
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
        "Job",
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
    let docs = render(&helm, &[]);
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
        "# Generated by `just chart` (CHART_UPDATE=1 on e2e's chart_render tests);\n\
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

// ---- CRDs

#[test]
fn the_chart_crds_are_the_types_with_the_chart_metadata() {
    let Some(helm) = Helm::find() else { return };
    let docs = render(&helm, &[]);
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
