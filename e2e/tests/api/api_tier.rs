//! The API tier against a genuine kube-apiserver 1.20 (started by `sim::apiserver`): every CRD installs and
//! becomes Established, every story manifest passes a dry-run create, and every status example round-trips
//! through the status subresource unchanged (nothing pruned, nothing refused).
//!
//! Needs `scripts/install-apiserver.sh` to have run; without the binaries the tests fail saying so.

use std::collections::BTreeSet;
use std::time::Duration;

use e2e::stories::{self, Document, Object, StatusExample, Story};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Discovery, Scope};
use serde_json::Value;
use sim::apiserver::ApiServer;
use sim::testkit::{api_error, apiserver_with_crds};

const GONE_DEADLINE: Duration = Duration::from_secs(30);

async fn kube_1_20_with_crds() -> (ApiServer, Vec<CustomResourceDefinition>, Discovery) {
    let server = apiserver_with_crds(&[]).await;
    let crds = nats_api::crds::all();
    let discovery = Discovery::new(server.client())
        .run()
        .await
        .unwrap_or_else(|e| panic!("discovery against kube-apiserver 1.20: {e}"));
    (server, crds, discovery)
}

fn gvk_of(object: &Object) -> GroupVersionKind {
    GroupVersionKind::gvk(object.group(), object.version(), &object.kind)
}

/// The API for an object, in its namespace for namespaced kinds (`default` when the manifest names none).
fn api_for(
    client: Client,
    resource: &ApiResource,
    caps: &ApiCapabilities,
    object: &Object,
) -> Api<DynamicObject> {
    match caps.scope {
        Scope::Cluster => Api::all_with(client, resource),
        Scope::Namespaced => Api::namespaced_with(
            client,
            object.namespace.as_deref().unwrap_or("default"),
            resource,
        ),
    }
}

#[tokio::test]
async fn every_crd_installs_and_is_established_on_kube_apiserver_1_20() {
    let (_server, crds, discovery) = kube_1_20_with_crds().await;
    assert!(!crds.is_empty(), "nats_api::crds::all() returned no CRDs");

    let mut failures = Vec::new();
    let mut names = BTreeSet::new();
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        if !names.insert(name.clone()) {
            failures.push(format!("{name}: listed twice"));
        }
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            let gvk = GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
            let Some((resource, caps)) = discovery.resolve_gvk(&gvk) else {
                failures.push(format!("{name}: {gvk:?} not served after Established"));
                continue;
            };
            if resource.plural != crd.spec.names.plural {
                failures.push(format!(
                    "{name}: served as {}, CRD says {}",
                    resource.plural, crd.spec.names.plural
                ));
            }
            let wants_status = version
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some());
            let has_status = caps
                .subresources
                .iter()
                .any(|(sub, _)| sub.plural == "status");
            if wants_status != has_status {
                failures.push(format!(
                    "{name}: status subresource declared {wants_status}, served {has_status}"
                ));
            }
        }
    }
    println!(
        "API tier (kube-apiserver 1.20): {} CRDs installed, Established and served",
        crds.len()
    );
    assert!(
        failures.is_empty(),
        "{} CRD problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn every_story_manifest_is_accepted_by_a_dry_run_create() {
    let (server, _crds, discovery) = kube_1_20_with_crds().await;
    let stories = stories::load().unwrap_or_else(|e| panic!("docs/stories: {e}"));
    let documents: Vec<&Document> = stories.iter().flat_map(|s| &s.manifests).collect();
    assert!(!documents.is_empty(), "docs/stories holds no manifests");

    // Namespace documents first, while no namespace exists (a dry run persists nothing, so repeats are
    // fine); then the namespaces every other document needs, created for real.
    let (namespaces, others): (Vec<&Document>, Vec<&Document>) = documents
        .iter()
        .partition(|d| d.object.api_version == "v1" && d.object.kind == "Namespace");
    let mut failures = Vec::new();
    for (i, doc) in namespaces.iter().chain(&others).enumerate() {
        if i >= namespaces.len()
            && let Some(ns) = &doc.object.namespace
        {
            server
                .create_namespace(ns)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let Some((resource, caps)) = discovery.resolve_gvk(&gvk_of(&doc.object)) else {
            failures.push(format!("{doc}: {} is not served", doc.object.api_version));
            continue;
        };
        let object: DynamicObject = match serde_json::from_value(doc.object.value.clone()) {
            Ok(object) => object,
            Err(e) => {
                failures.push(format!("{doc}: not an object: {e}"));
                continue;
            }
        };
        let api = api_for(server.client(), &resource, &caps, &doc.object);
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        match api.create(&dry_run, &object).await {
            Err(e) => failures.push(format!("{doc}: refused: {}", api_error(&e))),
            // 1.20 prunes fields its schema does not know instead of refusing them: what would be stored
            // must still hold every field the manifest wrote.
            Ok(stored) if doc.object.is_custom() => {
                let stored = serde_json::to_value(&stored).unwrap_or(Value::Null);
                let mut diffs = Vec::new();
                compare(
                    "",
                    &without_meta(&doc.object.value),
                    &without_meta(&stored),
                    &mut diffs,
                );
                if !diffs.is_empty() {
                    failures.push(format!("{doc}: stored differently: {}", diffs.join("; ")));
                }
            }
            Ok(_) => {}
        }
    }
    let custom = documents.iter().filter(|d| d.object.is_custom()).count();
    println!(
        "API tier (kube-apiserver 1.20): {} manifest documents from {} stories checked by dry-run create \
         ({custom} custom resources, compared with what would be stored), {} refused or pruned",
        documents.len(),
        stories.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} manifests refused:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn every_status_example_round_trips_through_the_status_subresource() {
    let (server, _crds, discovery) = kube_1_20_with_crds().await;
    let stories = stories::load().unwrap_or_else(|e| panic!("docs/stories: {e}"));
    let total: usize = stories.iter().map(|s| s.status_examples.len()).sum();
    assert!(total > 0, "docs/stories holds no status examples");

    let mut failures = Vec::new();
    for story in &stories {
        for example in &story.status_examples {
            if let Err(problem) = round_trip(&server, &discovery, story, example).await {
                failures.push(format!("{example}: {problem}"));
            }
        }
    }
    println!(
        "API tier (kube-apiserver 1.20): {total} status examples written through the status subresource \
         and read back, {} failed",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} status examples failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Creates the object the example describes (from the story's latest manifest of it up to the example's
/// step), merge-patches the example's status onto the status subresource, reads it back and compares.
async fn round_trip(
    server: &ApiServer,
    discovery: &Discovery,
    story: &Story,
    example: &StatusExample,
) -> Result<(), String> {
    let declared: Vec<&Document> = story.manifests_of(example).collect();
    let doc = declared
        .iter()
        .rev()
        .find(|d| d.step <= example.step)
        .or(declared.last())
        .ok_or("no manifest of the story declares this object")?;
    let (resource, caps) = discovery
        .resolve_gvk(&gvk_of(&example.object))
        .ok_or_else(|| format!("{} is not served", example.object.api_version))?;
    if let Some(ns) = &example.object.namespace {
        server
            .create_namespace(ns)
            .await
            .map_err(|e| e.to_string())?;
    }
    let api = api_for(server.client(), &resource, &caps, &example.object);
    let name = &example.object.name;
    // Stories reuse names (several `demo` clusters): start from a clean slate.
    sim::testkit::delete_and_wait(&api, name, GONE_DEADLINE).await?;

    let object: DynamicObject = serde_json::from_value(doc.object.value.clone())
        .map_err(|e| format!("manifest {doc}: {e}"))?;
    api.create(&PostParams::default(), &object)
        .await
        .map_err(|e| format!("create from {doc}: {}", api_error(&e)))?;
    let outcome = async {
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(example.status_patch()),
        )
        .await
        .map_err(|e| format!("status refused: {}", api_error(&e)))?;
        let read = api
            .get_status(name)
            .await
            .map_err(|e| format!("read back: {}", api_error(&e)))?;
        let got = read.data.get("status").cloned().unwrap_or(Value::Null);
        let mut diffs = Vec::new();
        compare("status", example.status(), &got, &mut diffs);
        if diffs.is_empty() {
            Ok(())
        } else {
            Err(format!("read back differs: {}", diffs.join("; ")))
        }
    }
    .await;
    sim::testkit::delete_and_wait(&api, name, GONE_DEADLINE).await?;
    outcome
}

/// The object without apiVersion, kind and metadata (the server fills metadata in).
fn without_meta(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        for key in ["apiVersion", "kind", "metadata"] {
            map.remove(key);
        }
    }
    object
}

/// Every field written must be read back equal; the apiserver may add fields (defaults), never drop or
/// change one. Lists must match element by element.
fn compare(path: &str, want: &Value, got: &Value, diffs: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(want), Value::Object(got)) => {
            for (key, w) in want {
                match got.get(key) {
                    Some(g) => compare(&format!("{path}.{key}"), w, g, diffs),
                    None => {
                        diffs.push(format!("{path}.{key} dropped (pruned: not in the schema?)"))
                    }
                }
            }
        }
        (Value::Array(want), Value::Array(got)) if want.len() == got.len() => {
            for (i, (w, g)) in want.iter().zip(got).enumerate() {
                compare(&format!("{path}[{i}]"), w, g, diffs);
            }
        }
        _ if want == got => {}
        _ => diffs.push(format!("{path}: wrote {want}, read {got}")),
    }
}

#[test]
fn compare_reports_pruned_changed_and_shortened_fields_but_not_defaults() {
    let wrote = serde_json::json!({"a": {"b": 1, "c": [1, 2]}, "d": "x"});
    let mut diffs = Vec::new();
    compare(
        "status",
        &wrote,
        &serde_json::json!({"a": {"b": 1, "c": [1, 2], "default": true}, "d": "x"}),
        &mut diffs,
    );
    assert!(diffs.is_empty(), "{diffs:?}");
    compare(
        "status",
        &wrote,
        &serde_json::json!({"a": {"b": 2, "c": [1]}}),
        &mut diffs,
    );
    assert_eq!(diffs.len(), 3, "{diffs:?}");
    assert!(
        diffs.iter().any(|d| d.starts_with("status.d dropped")),
        "{diffs:?}"
    );
    assert!(
        diffs
            .iter()
            .any(|d| d.starts_with("status.a.b: wrote 1, read 2")),
        "{diffs:?}"
    );
    assert!(
        diffs
            .iter()
            .any(|d| d.starts_with("status.a.c: wrote [1,2], read [1]")),
        "{diffs:?}"
    );
}
