//! Upgrades that restart nothing unasked: what this build renders for every NatsCluster of the
//! stories, held as goldens, so a change of the controllers that would restart NATS servers on
//! upgrade is seen in review before any user sees it.
//!
//! A server restarts when its revision's workload part changes, and reloads when its config part
//! does (see [`crate::revision`]); the rolling restart of every server of every NatsCluster is what
//! users fear most from an operator upgrade. Two tests:
//! - [`every_story_renders_as_its_golden`]: each story manifest's NatsClusters, every server's
//!   nats.conf, pod template and revision, against `testdata/renders/<story>/<file>.yaml`. A
//!   difference fails with the first lines that differ; `RENDER_UPDATE=1` rewrites the goldens.
//! - [`a_changed_revision_is_named_in_the_upgrade_notes`]: the revisions of the last release are
//!   kept in `testdata/renders/released-revisions.txt` (written by the release, `scripts/release.py`,
//!   or `RENDER_RELEASE=1`). While any server's revision differs from them, CHANGELOG.md's
//!   Unreleased section must say "restarts NATS servers on upgrade" (a config part alone: "reloads
//!   NATS servers on upgrade" suffices).
//!
//! The inputs besides the spec are fixed: the trust roots and leaf remotes a NatsCluster names are
//! stand-ins of fixed text (the renderer copies them, never reads them), the namespace is the
//! manifest's own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nats_api::cluster::NatsCluster;
use serde::{Deserialize, Serialize};

use super::cluster::{Site, render_objects};
use super::{Owner, configmap};
use crate::plan::{
    ClusterInputs, KubernetesLayout, ResolvedLeafRemote, ResolvedTrust, plan_servers,
};

/// What one server of a story's NatsCluster is rendered as.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct ServerRender {
    server: String,
    revision: String,
    config: String,
    pod_template: serde_yaml::Value,
}

/// One NatsCluster of a manifest.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct ClusterRender {
    namespace: String,
    name: String,
    servers: Vec<ServerRender>,
}

fn repo() -> PathBuf {
    sim::checkout::root()
}

fn renders() -> PathBuf {
    sim::checkout::path("operators/cluster/testdata/renders")
}

/// Every story manifest holding a NatsCluster spec (status examples left out), in path order.
fn story_manifests() -> Vec<PathBuf> {
    let mut out = vec![];
    let stories = repo().join("docs/stories");
    for dir in std::fs::read_dir(&stories).expect("docs/stories").flatten() {
        for f in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = f.path();
            if p.extension().is_some_and(|e| e == "yaml") && !clusters_of(&p).is_empty() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn clusters_of(path: &Path) -> Vec<NatsCluster> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    serde_yaml::Deserializer::from_str(&text)
        .map(serde_yaml::Value::deserialize)
        .map_while(Result::ok)
        .filter(|v| {
            v.get("kind").and_then(|k| k.as_str()) == Some("NatsCluster") && v.get("spec").is_some()
        })
        .map(|v| serde_yaml::from_value(v).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

fn render(cluster: &NatsCluster) -> ClusterRender {
    let name = cluster
        .metadata
        .name
        .clone()
        .expect("a story's NatsCluster has a name");
    let namespace = cluster
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let spec = &cluster.spec;
    let trust = spec.auth.as_ref().map(|_| ResolvedTrust {
        operator_jwt: "operator-jwt-of-the-trust-roots".into(),
        system_account: "ASYSTEMACCOUNTOFTHETRUSTROOTS".into(),
        system_account_jwt: "system-account-jwt-of-the-trust-roots".into(),
    });
    let leaf_remotes = (0..spec.leaf_remotes.len())
        .map(|index| ResolvedLeafRemote {
            index,
            urls: vec![format!("nats-leaf://hub-{index}.invalid:7422")],
            has_credentials: true,
            has_ca: true,
            local_account: None,
        })
        .collect();
    let plans = plan_servers(
        &ClusterInputs {
            name: &name,
            spec,
            trust,
            account_preloads: vec![],
            leaf_remotes,
        },
        &KubernetesLayout {
            name: name.clone(),
            namespace: namespace.clone(),
            cluster_domain: "cluster.local".into(),
        },
    )
    .unwrap_or_else(|e| panic!("{namespace}/{name}: {e}"));
    let owner = Owner {
        name: name.clone(),
        namespace: namespace.clone(),
        reference: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "cluster.nats.mikluko.io/v1beta1".into(),
            kind: "NatsCluster".into(),
            name: name.clone(),
            uid: "uid-of-the-story".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    };
    let site = Site {
        controller_namespace: "nats-system",
        cluster_domain: "cluster.local",
    };
    let objects = render_objects(&owner, spec, &plans, site)
        .unwrap_or_else(|e| panic!("{namespace}/{name}: {e}"));
    let servers = objects
        .stateful_sets
        .iter()
        .zip(&objects.config_maps)
        .zip(&objects.revisions)
        .map(|((sts, cm), revision)| ServerRender {
            server: sts.metadata.name.clone().unwrap_or_default(),
            revision: revision.clone(),
            config: cm
                .data
                .as_ref()
                .and_then(|d| d.get(configmap::CONFIG_KEY))
                .cloned()
                .unwrap_or_default(),
            pod_template: serde_yaml::to_value(sts.spec.as_ref().map(|s| &s.template))
                .expect("a pod template serializes"),
        })
        .collect();
    ClusterRender {
        namespace,
        name,
        servers,
    }
}

/// The golden's path of a story manifest: `<story>/<file>` under testdata/renders.
fn golden_of(manifest: &Path) -> PathBuf {
    let file = manifest.file_name().expect("a file");
    let story = manifest
        .parent()
        .and_then(Path::file_name)
        .expect("a story");
    renders().join(story).join(file)
}

fn first_difference(want: &str, got: &str) -> String {
    let at = want
        .lines()
        .zip(got.lines())
        .position(|(w, g)| w != g)
        .unwrap_or_else(|| want.lines().count().min(got.lines().count()));
    let pick = |t: &str| {
        t.lines()
            .skip(at.saturating_sub(2))
            .take(6)
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "first difference at line {}:\n--- golden\n{}\n--- rendered\n{}",
        at + 1,
        pick(want),
        pick(got)
    )
}

#[test]
fn every_story_renders_as_its_golden() {
    let update = std::env::var_os("RENDER_UPDATE").is_some();
    let manifests = story_manifests();
    assert!(
        manifests.len() >= 10,
        "only {} story manifests hold a NatsCluster",
        manifests.len()
    );
    let mut changed = vec![];
    for manifest in &manifests {
        let rendered: Vec<ClusterRender> = clusters_of(manifest).iter().map(render).collect();
        let text = serde_yaml::to_string(&rendered).expect("renders serialize");
        let golden = golden_of(manifest);
        if update {
            std::fs::create_dir_all(golden.parent().expect("a folder"))
                .expect("create renders folder");
            std::fs::write(&golden, &text).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&golden).unwrap_or_default();
        if want != text {
            changed.push(format!(
                "{}: {}",
                golden.display(),
                first_difference(&want, &text)
            ));
        }
    }
    assert!(
        changed.is_empty(),
        "what the controller renders for a story's NatsCluster changed. A changed revision restarts (its \
         workload part) or reloads (its config part) every such server on upgrade: if that is meant, \
         rewrite the goldens with RENDER_UPDATE=1 and say so in CHANGELOG.md's upgrade notes.\n\n{}",
        changed.join("\n\n")
    );
}

/// Every server's revision, keyed `<story>/<file>:<namespace>/<server>` (stories reuse names).
fn revisions() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for manifest in story_manifests() {
        let golden = golden_of(&manifest);
        let at = golden
            .strip_prefix(renders())
            .unwrap_or(&golden)
            .display()
            .to_string();
        for c in clusters_of(&manifest).iter().map(render) {
            for s in c.servers {
                out.insert(format!("{at}:{}/{}", c.namespace, s.server), s.revision);
            }
        }
    }
    out
}

/// What kind of change the revisions went through since the release, by the rule of
/// [`crate::revision`]: a workload part changed restarts, a config part alone reloads.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Upgrade {
    Nothing,
    Reloads,
    Restarts,
}

fn upgrade(released: &BTreeMap<String, String>, now: &BTreeMap<String, String>) -> Upgrade {
    now.iter()
        .filter_map(|(server, rev)| released.get(server).map(|old| (old, rev)))
        .map(
            |(old, new)| match (old.split_once('-'), new.split_once('-')) {
                _ if old == new => Upgrade::Nothing,
                (Some((_, w_old)), Some((_, w_new))) if w_old == w_new => Upgrade::Reloads,
                _ => Upgrade::Restarts,
            },
        )
        .max()
        .unwrap_or(Upgrade::Nothing)
}

#[rstest::rstest]
#[case(&[("a", "c1-w1")], &[("a", "c1-w1")], Upgrade::Nothing)]
#[case(&[("a", "c1-w1")], &[("a", "c2-w1")], Upgrade::Reloads)]
#[case(&[("a", "c1-w1"), ("b", "c1-w1")], &[("a", "c2-w1"), ("b", "c1-w2")], Upgrade::Restarts)]
#[case(&[("a", "c1-w1")], &[("a", "c1-w1"), ("new", "c9-w9")], Upgrade::Nothing)]
fn upgrade_reads_the_revision_parts(
    #[case] released: &[(&str, &str)],
    #[case] now: &[(&str, &str)],
    #[case] want: Upgrade,
) {
    let map = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(upgrade(&map(released), &map(now)), want);
}

/// CHANGELOG.md's Unreleased section, lowercased.
fn unreleased_notes() -> String {
    let text = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap_or_default();
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("## ") {
            inside = line.to_ascii_lowercase().contains("unreleased");
            continue;
        }
        if inside {
            out.push_str(&line.to_ascii_lowercase());
            out.push('\n');
        }
    }
    out
}

#[test]
fn a_changed_revision_is_named_in_the_upgrade_notes() {
    let path = renders().join("released-revisions.txt");
    let now = revisions();
    if std::env::var_os("RENDER_RELEASE").is_some() {
        let text: String = now.iter().map(|(s, r)| format!("{s} {r}\n")).collect();
        std::fs::write(&path, text).expect("write released revisions");
        return;
    }
    let released: BTreeMap<String, String> = std::fs::read_to_string(&path)
        .expect("testdata/renders/released-revisions.txt (RENDER_RELEASE=1 writes it)")
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(s, r)| (s.to_string(), r.to_string()))
        .collect();
    let notes = unreleased_notes();
    match upgrade(&released, &now) {
        Upgrade::Nothing => {}
        Upgrade::Reloads => assert!(
            notes.contains("reloads nats servers on upgrade")
                || notes.contains("restarts nats servers on upgrade"),
            "a server's config revision differs from the last release's: CHANGELOG.md's Unreleased section must \
             say \"reloads NATS servers on upgrade\""
        ),
        Upgrade::Restarts => assert!(
            notes.contains("restarts nats servers on upgrade"),
            "a server's workload revision differs from the last release's, so upgrading restarts it: \
             CHANGELOG.md's Unreleased section must say \"restarts NATS servers on upgrade\""
        ),
    }
}
