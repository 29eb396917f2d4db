//! Which PersistentVolumeClaims are the cluster controller's to delete (design §4.1, §4.5: it
//! "writes no object of those names that exists and it does not control").
//!
//! A server's data claim is made by the StatefulSet controller from the server's StatefulSet,
//! not by this controller, and on Kubernetes 1.20 nothing of the claim names its maker: the
//! StatefulSet controller copies the claim template's labels and the StatefulSet's selector onto
//! it and gives it no owner reference (the retention policy that adds one, 1.23 and later, is
//! not set on the servers' StatefulSets). What can be proven, and what [`own_claim`] asks, all of
//! it, before a PVC is deleted:
//!
//! 1. the StatefulSet is the NatsCluster's: its controller owner reference names the
//!    NatsCluster's uid (so a NatsCluster of the same name recreated, or one in another
//!    namespace, owns nothing of the first);
//! 2. the PVC is in the StatefulSet's namespace;
//! 3. every owner reference it carries names that StatefulSet (what a retention policy would
//!    add): a PVC another object owns is that object's;
//! 4. its name is one the StatefulSet controller gives a claim of it:
//!    `<claim template>-<StatefulSet>-<ordinal>`, an ordinal below its replicas, and it carries
//!    every label the StatefulSet controller puts on that claim: the template's labels (the
//!    server's, [`super::labels::server`]) and the StatefulSet's selector;
//! 5. it was created no earlier than the StatefulSet: a PVC that was there first was not made
//!    from its template, whoever made it.
//!
//! Labels alone prove nothing (anyone who may write a PVC may copy them), so a PVC that carries
//! a server's labels under another name is never deleted, only reported. A PVC of the claim's
//! name that fails a test is left too, and named as a leftover of the removal; once the
//! StatefulSet is gone nothing proves a claim, so the server lifecycle deletes claims while their
//! StatefulSet still stands, and each delete carries the uid and resourceVersion it was judged at
//! as preconditions: a PVC replaced or changed in between is not deleted.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::refusals::controlled_by;

/// Why a PVC is not proven the claim of a server's StatefulSet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotOwnClaim {
    #[error("the server's StatefulSet is gone, so nothing proves it the server's claim")]
    NoStatefulSet,
    #[error("StatefulSet {0} is not controlled by this NatsCluster")]
    StatefulSetNotControlled(String),
    #[error("it is in namespace {pvc}, the StatefulSet in {statefulset}")]
    OtherNamespace { pvc: String, statefulset: String },
    #[error("its name is not a claim name of StatefulSet {statefulset} ({expected})")]
    NotAClaimName {
        statefulset: String,
        expected: String,
    },
    #[error("it lacks the label {0} the StatefulSet controller puts on the claim")]
    MissingLabel(String),
    #[error("it is owned by {0}")]
    OtherOwner(String),
    #[error("it was created before StatefulSet {0}, so not from its claim template")]
    OlderThanStatefulSet(String),
}

/// The claim names StatefulSet `sts` gives its pods' claims, with the template each is made
/// from: `<template>-<sts>-<ordinal>` for every ordinal below its replicas (at least one).
pub fn claim_names(sts: &StatefulSet) -> Vec<(String, &ObjectMeta)> {
    let name = sts.metadata.name.as_deref().unwrap_or_default();
    let Some(spec) = sts.spec.as_ref() else {
        return vec![];
    };
    let replicas = spec.replicas.unwrap_or(1).max(1);
    let templates = spec.volume_claim_templates.as_deref().unwrap_or_default();
    templates
        .iter()
        .flat_map(|t| {
            let template = t.metadata.name.as_deref().unwrap_or_default();
            (0..replicas).map(move |i| (format!("{template}-{name}-{i}"), &t.metadata))
        })
        .collect()
}

/// Whether the PVC `pvc` is proven the claim of StatefulSet `sts` of the NatsCluster of uid
/// `cluster_uid` (the module's rule, every test); `sts` is `None` when the server's StatefulSet
/// is gone.
pub fn own_claim(
    cluster_uid: &str,
    sts: Option<&StatefulSet>,
    pvc: &ObjectMeta,
) -> Result<(), NotOwnClaim> {
    let sts = sts.ok_or(NotOwnClaim::NoStatefulSet)?;
    let sts_name = sts.metadata.name.clone().unwrap_or_default();
    let refs = sts.metadata.owner_references.as_deref().unwrap_or_default();
    if !controlled_by(refs, cluster_uid) {
        return Err(NotOwnClaim::StatefulSetNotControlled(sts_name));
    }
    let (pvc_ns, sts_ns) = (
        pvc.namespace.clone().unwrap_or_default(),
        sts.metadata.namespace.clone().unwrap_or_default(),
    );
    if pvc_ns != sts_ns {
        return Err(NotOwnClaim::OtherNamespace {
            pvc: pvc_ns,
            statefulset: sts_ns,
        });
    }
    let sts_uid = sts.metadata.uid.as_deref().unwrap_or_default();
    if let Some(other) = pvc
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.uid != sts_uid)
    {
        return Err(NotOwnClaim::OtherOwner(format!(
            "{}/{} (uid {})",
            other.kind, other.name, other.uid
        )));
    }
    let names = claim_names(sts);
    let name = pvc.name.as_deref().unwrap_or_default();
    let Some((_, template)) = names.iter().find(|(n, _)| n == name) else {
        return Err(NotOwnClaim::NotAClaimName {
            statefulset: sts_name,
            expected: names
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let selector = sts
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref());
    let wanted = template
        .labels
        .iter()
        .flatten()
        .chain(selector.into_iter().flatten());
    let labels = pvc.labels.clone().unwrap_or_default();
    for (k, v) in wanted {
        if labels.get(k) != Some(v) {
            return Err(NotOwnClaim::MissingLabel(format!("{k}={v}")));
        }
    }
    if let (Some(made), Some(sts_made)) = (
        pvc.creation_timestamp.as_ref(),
        sts.metadata.creation_timestamp.as_ref(),
    ) && made.0 < sts_made.0
    {
        return Err(NotOwnClaim::OlderThanStatefulSet(sts_name));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    const CLUSTER_UID: &str = "cluster-uid";

    fn sts() -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {
                "name": "demo-2", "namespace": "nats", "uid": "sts-uid",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "cluster.nats.mikluko.io/v1beta1", "kind": "NatsCluster",
                    "name": "demo", "uid": CLUSTER_UID, "controller": true}],
            },
            "spec": {
                "replicas": 1,
                "serviceName": "demo-headless",
                "selector": {"matchLabels": {"app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": "demo",
                    "cluster.nats.mikluko.io/server": "demo-2"}},
                "template": {},
                "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {
                    "app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": "demo",
                    "app.kubernetes.io/managed-by": "nats-cluster-controller",
                    "cluster.nats.mikluko.io/server": "demo-2", "team": "payments"}}}],
            },
        }))
        .expect("a StatefulSet")
    }

    /// The claim as the StatefulSet controller makes it: the template's labels and the selector.
    fn claim() -> Value {
        json!({
            "name": "data-demo-2-0", "namespace": "nats", "uid": "pvc-uid",
            "creationTimestamp": "2026-01-01T00:00:05Z",
            "labels": {"app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": "demo",
                "app.kubernetes.io/managed-by": "nats-cluster-controller",
                "cluster.nats.mikluko.io/server": "demo-2", "team": "payments"},
        })
    }

    fn not_a_claim_name() -> NotOwnClaim {
        NotOwnClaim::NotAClaimName {
            statefulset: "demo-2".into(),
            expected: "data-demo-2-0".into(),
        }
    }

    #[rstest]
    #[case::the_real_claim("the claim the StatefulSet controller made", |_: &mut Value, _: &mut Value| {}, Ok(()))]
    #[case::extra_labels("labels added beside the StatefulSet controller's do not matter", |p: &mut Value, _: &mut Value| { p["labels"]["backup"] = json!("daily") }, Ok(()))]
    #[case::retention_owner("owned by its StatefulSet (a retention policy's reference)", |p: &mut Value, _: &mut Value| {
        p["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "demo-2", "uid": "sts-uid"}]) }, Ok(()))]
    #[case::foreign_with_labels("a foreign PVC carrying exactly the claim's labels under another name", |p: &mut Value, _: &mut Value| { p["name"] = json!("imposter") },
        Err(not_a_claim_name()))]
    #[case::other_ordinal("named like a claim of an ordinal the StatefulSet does not have", |p: &mut Value, _: &mut Value| { p["name"] = json!("data-demo-2-1") },
        Err(not_a_claim_name()))]
    #[case::other_template("named like a claim of a template the StatefulSet does not have", |p: &mut Value, _: &mut Value| { p["name"] = json!("logs-demo-2-0") },
        Err(not_a_claim_name()))]
    #[case::no_labels("the claim's name without labels", |p: &mut Value, _: &mut Value| { p["labels"] = json!(null) },
        Err(NotOwnClaim::MissingLabel("app.kubernetes.io/instance=demo".into())))]
    #[case::another_servers_labels("the claim's name with another server's labels", |p: &mut Value, _: &mut Value| { p["labels"]["cluster.nats.mikluko.io/server"] = json!("demo-1") },
        Err(NotOwnClaim::MissingLabel("cluster.nats.mikluko.io/server=demo-2".into())))]
    #[case::template_label_missing("the claim's name without a label of the claim template", |p: &mut Value, _: &mut Value| { p["labels"].as_object_mut().map(|l| l.remove("team")); },
        Err(NotOwnClaim::MissingLabel("team=payments".into())))]
    #[case::wrong_owner("the claim's name and labels, owned by another object", |p: &mut Value, _: &mut Value| {
        p["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": "other-uid", "controller": true}]) },
        Err(NotOwnClaim::OtherOwner("ConfigMap/keeper (uid other-uid)".into())))]
    #[case::older("the claim's name and labels, made before the StatefulSet", |p: &mut Value, _: &mut Value| { p["creationTimestamp"] = json!("2025-12-31T23:59:59Z") },
        Err(NotOwnClaim::OlderThanStatefulSet("demo-2".into())))]
    #[case::other_namespace("a claim of a NatsCluster of the same name in another namespace", |p: &mut Value, _: &mut Value| { p["namespace"] = json!("team-b") },
        Err(NotOwnClaim::OtherNamespace { pvc: "team-b".into(), statefulset: "nats".into() }))]
    #[case::recreated_cluster("a StatefulSet of an earlier NatsCluster of the same name", |_: &mut Value, s: &mut Value| { s["metadata"]["ownerReferences"][0]["uid"] = json!("earlier-uid") },
        Err(NotOwnClaim::StatefulSetNotControlled("demo-2".into())))]
    #[case::not_controller("a StatefulSet the NatsCluster owns without controlling it", |_: &mut Value, s: &mut Value| { s["metadata"]["ownerReferences"][0]["controller"] = json!(false) },
        Err(NotOwnClaim::StatefulSetNotControlled("demo-2".into())))]
    fn a_pvc_is_deleted_only_when_proven_the_claim_of_an_own_statefulset(
        #[case] what: &str,
        #[case] edit: fn(&mut Value, &mut Value),
        #[case] want: Result<(), NotOwnClaim>,
    ) {
        let (mut pvc, mut set) = (claim(), serde_json::to_value(sts()).expect("json"));
        edit(&mut pvc, &mut set);
        let pvc: ObjectMeta = serde_json::from_value(pvc).expect("PVC metadata");
        let set: StatefulSet = serde_json::from_value(set).expect("StatefulSet");
        assert_eq!(own_claim(CLUSTER_UID, Some(&set), &pvc), want, "{what}");
    }

    #[test]
    fn without_its_statefulset_nothing_proves_a_claim() {
        let pvc: ObjectMeta = serde_json::from_value(claim()).expect("PVC metadata");
        assert_eq!(
            own_claim(CLUSTER_UID, None, &pvc),
            Err(NotOwnClaim::NoStatefulSet)
        );
    }

    #[test]
    fn claim_names_are_template_statefulset_ordinal() {
        let mut set = sts();
        if let Some(s) = set.spec.as_mut() {
            s.replicas = Some(2);
        }
        let names: Vec<String> = claim_names(&set).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, vec!["data-demo-2-0", "data-demo-2-1"]);
        set.spec = None;
        assert!(claim_names(&set).is_empty());
    }
}
