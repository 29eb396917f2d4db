//! The stories' manifests are the source of truth of the API (design §3), so docs and types must not drift
//! apart: every manifest document and every status example under `docs/stories/` decodes STRICTLY into the
//! `nats-api` types (core kinds into k8s-openapi's). A field the types do not know is a failure naming the
//! story, the file, the document and the field's path — serde would otherwise drop it silently.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use e2e::decode::strict;
use e2e::stories::{self, Document, StatusExample, Story};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::object::HasStatus;
use nats_api::{auth, cluster, jetstream, nats};
use serde::de::DeserializeOwned;
use serde_json::Value;

type Decode = fn(&Value) -> Vec<String>;

/// How to decode one kind: the whole object for a manifest, the status block for a status example.
struct KindDecoder {
    api_version: String,
    kind: String,
    custom: bool,
    manifest: Decode,
    status: Option<Decode>,
}

/// A custom resource decoded whole. kube's derived root type takes apiVersion and kind from the type, not
/// the document, so those two are not "unknown" here; the decoder table matched them already.
fn strict_custom<K: DeserializeOwned>(value: &Value) -> Vec<String> {
    let mut problems = strict::<K>(value);
    problems.retain(|p| p != "unknown field `apiVersion`" && p != "unknown field `kind`");
    problems
}

fn custom<K>() -> KindDecoder
where
    K: Resource<DynamicType = ()> + HasStatus + DeserializeOwned,
    K::Status: DeserializeOwned,
{
    KindDecoder {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        custom: true,
        manifest: strict_custom::<K>,
        status: Some(strict::<K::Status>),
    }
}

fn custom_without_status<K: Resource<DynamicType = ()> + DeserializeOwned>() -> KindDecoder {
    KindDecoder {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        custom: true,
        manifest: strict_custom::<K>,
        status: None,
    }
}

fn core<K: Resource<DynamicType = ()> + DeserializeOwned>() -> KindDecoder {
    KindDecoder {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        custom: false,
        manifest: strict::<K>,
        status: None,
    }
}

/// Every kind a story may use: the 16 custom kinds of the four groups, and the core kinds stories need.
fn decoders() -> BTreeMap<(String, String), KindDecoder> {
    use k8s_openapi::api::core::v1 as corev1;
    [
        custom::<nats::NatsConnection>(),
        custom_without_status::<nats::NatsReferenceGrant>(),
        custom::<nats::NatsOperatorTrust>(),
        custom::<nats::NatsAccountTrust>(),
        custom::<cluster::NatsCluster>(),
        custom::<auth::NatsOperator>(),
        custom::<auth::NatsSystemAccount>(),
        custom::<auth::NatsAccount>(),
        custom::<auth::NatsUser>(),
        custom::<jetstream::NatsStream>(),
        custom::<jetstream::NatsConsumer>(),
        custom::<jetstream::NatsKeyValue>(),
        custom::<jetstream::NatsObjectStore>(),
        custom::<jetstream::NatsBalancer>(),
        custom::<jetstream::NatsSystemBalancer>(),
        custom::<jetstream::NatsClusterEvacuation>(),
        core::<corev1::Namespace>(),
        core::<corev1::Secret>(),
        core::<corev1::ConfigMap>(),
    ]
    .into_iter()
    .map(|d| ((d.api_version.clone(), d.kind.clone()), d))
    .collect()
}

fn load() -> Vec<Story> {
    stories::load().unwrap_or_else(|e| panic!("docs/stories does not load: {e}"))
}

fn decode_manifest(
    decoders: &BTreeMap<(String, String), KindDecoder>,
    doc: &Document,
) -> Vec<String> {
    let key = (doc.object.api_version.clone(), doc.object.kind.clone());
    let Some(decoder) = decoders.get(&key) else {
        return vec![format!("no type for apiVersion {} kind {}", key.0, key.1)];
    };
    let mut problems = (decoder.manifest)(&doc.object.value);
    if doc.object.value.get("status").is_some() {
        problems.push("a manifest carries no status; status examples go under status/".into());
    }
    problems
}

fn decode_status_example(
    decoders: &BTreeMap<(String, String), KindDecoder>,
    example: &StatusExample,
) -> Vec<String> {
    let key = (
        example.object.api_version.clone(),
        example.object.kind.clone(),
    );
    let Some(status) = decoders.get(&key).and_then(|d| d.status) else {
        return vec![format!(
            "no status type for apiVersion {} kind {}",
            key.0, key.1
        )];
    };
    let value = &example.object.value;
    let mut problems: Vec<String> = value
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .filter(|k| !["apiVersion", "kind", "metadata", "status"].contains(&k.as_str()))
        .map(|k| format!("unexpected top-level field `{k}` (a status example holds apiVersion, kind, metadata, status)"))
        .collect();
    problems.extend(
        strict::<ObjectMeta>(&value["metadata"])
            .into_iter()
            .map(|p| format!("metadata: {p}")),
    );
    problems.extend(
        status(&value["status"])
            .into_iter()
            .map(|p| format!("status: {p}")),
    );
    problems
}

#[test]
fn every_manifest_document_decodes_strictly_into_the_api_types() {
    let decoders = decoders();
    let stories = load();
    let mut failures = Vec::new();
    let mut count = 0;
    for doc in stories.iter().flat_map(|s| &s.manifests) {
        count += 1;
        for problem in decode_manifest(&decoders, doc) {
            failures.push(format!("{doc}: {problem}"));
        }
    }
    assert!(count > 0, "docs/stories holds no manifest documents");
    assert!(
        failures.is_empty(),
        "{} problems in manifests:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

#[test]
fn every_status_example_decodes_strictly_into_its_status_type() {
    let decoders = decoders();
    let stories = load();
    let mut failures = Vec::new();
    for example in stories.iter().flat_map(|s| &s.status_examples) {
        for problem in decode_status_example(&decoders, example) {
            failures.push(format!("{example}: {problem}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems in status examples:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// The metav1.Condition shape, every field written: a controller always says why and since when.
#[test]
fn every_condition_in_a_status_example_is_complete() {
    let mut failures = Vec::new();
    for example in load().iter().flat_map(|s| &s.status_examples) {
        let conditions = example.status().get("conditions").and_then(Value::as_array);
        if conditions.is_none_or(|c| c.is_empty()) {
            failures.push(format!("{example}: no conditions"));
        }
        for (i, condition) in conditions.into_iter().flatten().enumerate() {
            for field in ["type", "status", "reason", "message", "lastTransitionTime"] {
                if condition
                    .get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    failures.push(format!("{example}: status.conditions[{i}] has no {field}"));
                }
            }
            let status = condition
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !["True", "False", "Unknown"].contains(&status) {
                failures.push(format!(
                    "{example}: status.conditions[{i}].status is {status:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "incomplete conditions:\n  {}",
        failures.join("\n  ")
    );
}

/// Condition types and reasons in the examples are the API's vocabulary: each is a string constant of the
/// `nats-api` sources of the example's own group (or of `common.rs`), where that group's condition
/// vocabulary lives.
#[test]
fn every_condition_type_and_reason_is_in_the_vocabulary_of_its_group() {
    let api_src = sim::checkout::path("operators/api/src");
    let sources_of = |group: &str| -> &'static [&'static str] {
        match group {
            "nats.mikluko.io" => &["nats.rs", "common.rs"],
            "cluster.nats.mikluko.io" => &["cluster", "cluster.rs", "common.rs"],
            "auth.nats.mikluko.io" => &["auth", "auth.rs", "common.rs"],
            "jetstream.nats.mikluko.io" => &["jetstream", "jetstream.rs", "common.rs"],
            _ => &[],
        }
    };
    let mut vocabulary: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut failures = BTreeSet::new();
    for example in load().iter().flat_map(|s| &s.status_examples) {
        let group = example.object.group().to_owned();
        let words = vocabulary.entry(group.clone()).or_insert_with(|| {
            let mut words = BTreeSet::new();
            for rel in sources_of(&group) {
                collect_string_constants(&api_src.join(rel), &mut words);
            }
            assert!(
                !words.is_empty(),
                "no condition vocabulary found for group {group:?} under {}",
                api_src.display()
            );
            words
        });
        let conditions = example.status().get("conditions").and_then(Value::as_array);
        for condition in conditions.into_iter().flatten() {
            for field in ["type", "reason"] {
                if let Some(word) = condition.get(field).and_then(Value::as_str)
                    && !words.contains(word)
                {
                    failures.insert(format!(
                        "{example}: condition {field} {word:?} is no constant of group {group}"
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "words outside the API vocabulary:\n  {}",
        Vec::from_iter(failures).join("\n  ")
    );
}

/// The values of `const X: &str = "…";` in a source file, or in every source file under a directory
/// (a path that does not exist adds nothing: a group's module may be one file or a folder).
fn collect_string_constants(path: &Path, out: &mut BTreeSet<String>) {
    if path.is_dir() {
        let entries =
            std::fs::read_dir(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            collect_string_constants(&entry.path(), out);
        }
    } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        for line in text.lines().filter(|l| l.contains("&str = \"")) {
            if let Some(word) = line.split('"').nth(1) {
                out.insert(word.to_owned());
            }
        }
    }
}

/// The strict decode is what makes the other tests mean anything: a misspelt or invented field, in spec
/// or in status, at any depth, must be reported with its path.
#[test]
fn strict_decoding_reports_fields_the_types_do_not_know() {
    let decoders = decoders();
    let stories = load();
    let cluster = stories
        .iter()
        .flat_map(|s| &s.manifests)
        .find(|d| d.object.kind == "NatsCluster")
        .expect("a story declares a NatsCluster");
    assert!(
        decode_manifest(&decoders, cluster).is_empty(),
        "{cluster} decodes"
    );
    let mut doc = cluster.clone();
    doc.object.value["spec"]["replicaCount"] = 3.into();
    doc.object.value["spec"]["image"]["tag"] = "2.15.0".into();
    let problems = decode_manifest(&decoders, &doc).join("\n");
    assert!(
        problems.contains("spec.replicaCount"),
        "top-level spec field not reported: {problems}"
    );
    assert!(
        problems.contains("spec.image.?.tag") || problems.contains("spec.image.tag"),
        "nested field not reported: {problems}"
    );

    let example = stories
        .iter()
        .flat_map(|s| &s.status_examples)
        .find(|e| e.object.kind == "NatsCluster")
        .expect("a story has a NatsCluster status example");
    assert!(
        decode_status_example(&decoders, example).is_empty(),
        "{example} decodes"
    );
    let mut bad = example.clone();
    bad.object.value["status"]["conditions"][0]["severity"] = "High".into();
    bad.object.value["status"]["readyServers"] = 3.into();
    let problems = decode_status_example(&decoders, &bad).join("\n");
    assert!(
        problems.contains("readyServers"),
        "status field not reported: {problems}"
    );
    assert!(
        problems.contains("severity"),
        "field inside a condition not reported: {problems}"
    );

    let mut wrong_type = example.clone();
    wrong_type.object.value["status"]["replicas"] = "three".into();
    let problems = decode_status_example(&decoders, &wrong_type).join("\n");
    assert!(
        problems.contains("replicas"),
        "type error not reported with its path: {problems}"
    );
}

#[test]
fn every_story_has_a_readme_a_manifest_and_a_status_example() {
    let stories = load();
    assert_eq!(
        stories.len(),
        14,
        "the 14 stories of the design, found {:?}",
        names(&stories)
    );
    let mut failures = Vec::new();
    for story in &stories {
        if story.readme.is_none() {
            failures.push(format!("{}: no README.md", story.name));
        }
        if story.manifests.is_empty() {
            failures.push(format!("{}: no manifest", story.name));
        }
        if story.status_examples.is_empty() {
            failures.push(format!("{}: no status example under status/", story.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A status example describes an object its story declares, so a test can create it and then write the
/// example's status through the status subresource.
#[test]
fn every_status_example_names_an_object_its_story_declares() {
    let mut failures = Vec::new();
    for story in load() {
        for example in &story.status_examples {
            if story.manifests_of(example).next().is_none() {
                failures.push(format!(
                    "{example}: no manifest of {} declares it",
                    story.name
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_custom_kind_appears_in_a_story_and_counts_are_printed() {
    let decoders = decoders();
    let stories = load();
    let used: BTreeSet<(String, String)> = stories
        .iter()
        .flat_map(|s| &s.manifests)
        .map(|d| (d.object.api_version.clone(), d.object.kind.clone()))
        .collect();
    let custom: Vec<_> = decoders.values().filter(|d| d.custom).collect();
    assert_eq!(custom.len(), 16, "the 16 custom kinds of the four groups");
    let missing: Vec<_> = custom
        .iter()
        .filter(|d| !used.contains(&(d.api_version.clone(), d.kind.clone())))
        .map(|d| format!("{} {}", d.api_version, d.kind))
        .collect();
    assert!(
        missing.is_empty(),
        "custom kinds no story uses: {missing:?}"
    );

    let documents: usize = stories.iter().map(|s| s.manifests.len()).sum();
    let examples: usize = stories.iter().map(|s| s.status_examples.len()).sum();
    println!(
        "stories: {}, manifest documents: {documents}, status examples: {examples}",
        stories.len()
    );
    for story in &stories {
        println!(
            "  {}: {} documents, {} status examples",
            story.name,
            story.manifests.len(),
            story.status_examples.len()
        );
    }
}

fn names(stories: &[Story]) -> Vec<&str> {
    stories.iter().map(|s| s.name.as_str()).collect()
}

/// The CEL rules of each kind's CRD (`x-kubernetes-validations`, as `nats_api::crds::all()` generates them)
/// accept every custom manifest, judged offline with kube-cel after schema defaults, as the apiserver would.
/// A manifest re-declaring an object an earlier file of its story declared is judged as an update of it, so
/// transition rules (`oldSelf`) see the change the story makes.
#[test]
fn every_custom_manifest_passes_the_cel_rules_of_its_crd() {
    let crds: BTreeMap<(String, String), (Value, kube_cel::RootContext)> = nats_api::crds::all()
        .into_iter()
        .flat_map(|crd| {
            let group = crd.spec.group.clone();
            let kind = crd.spec.names.kind.clone();
            crd.spec.versions.into_iter().filter_map(move |version| {
                let schema = version.schema.and_then(|s| s.open_api_v3_schema)?;
                let api_version = format!("{group}/{}", version.name);
                let root = kube_cel::RootContext {
                    api_version: api_version.clone(),
                    api_group: group.clone(),
                    kind: kind.clone(),
                };
                let schema = serde_json::to_value(schema).expect("a CRD schema serializes");
                Some(((api_version, kind.clone()), (schema, root)))
            })
        })
        .collect();
    let validator = kube_cel::Validator::new();
    let mut failures = Vec::new();
    let mut judged = 0;
    for story in load() {
        for (i, doc) in story.manifests.iter().enumerate() {
            if !doc.object.is_custom() {
                continue;
            }
            let key = (doc.object.api_version.clone(), doc.object.kind.clone());
            let Some((schema, root)) = crds.get(&key) else {
                failures.push(format!("{doc}: no CRD serves {} {}", key.0, key.1));
                continue;
            };
            let old = story.manifests[..i]
                .iter()
                .rev()
                .find(|d| d.object.same_object(&doc.object));
            judged += 1;
            let verdict = validator.validate_with_context(
                schema,
                &doc.object.value,
                old.map(|d| &d.object.value),
                Some(root),
            );
            if let Err(errors) = verdict {
                let update = old
                    .map(|d| format!(" (as an update of {d})"))
                    .unwrap_or_default();
                for error in errors.into_vec() {
                    failures.push(format!("{doc}{update}: {error}"));
                }
            }
        }
    }
    assert!(judged > 0, "no custom manifest judged");
    assert!(
        failures.is_empty(),
        "CEL refuses story manifests:\n  {}",
        failures.join("\n  ")
    );
}
