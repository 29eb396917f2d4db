//! A server's data claims on Kubernetes: found by name and by the server's labels, judged by
//! [`crate::objects::claims::own_claim`], and deleted one at a time with the uid and
//! resourceVersion they were judged at as preconditions — never by a label selector. A PVC that
//! looks like the server's claim but is not proven its own is left and reported
//! ([`Judged::kept`]).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::objects::claims::{NotOwnClaim, claim_names, own_claim};
use crate::objects::labels;
use crate::objects::statefulset::DATA_VOLUME;
use crate::rollout::removal::Claim;

/// The name the data claim of server `server` has: `data-<server>-0`, what its StatefulSet
/// (replicas 1, one claim template) gives it.
pub fn data_claim_name(server: &str) -> String {
    format!("{DATA_VOLUME}-{server}-0")
}

/// The names a claim of server `server` can have: its StatefulSet's claim names, and the data
/// claim's whether or not the StatefulSet is there.
pub fn names_of(server: &str, sts: Option<&StatefulSet>) -> Vec<String> {
    let mut names: Vec<String> = sts
        .map(claim_names)
        .unwrap_or_default()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let data = data_claim_name(server);
    if !names.contains(&data) {
        names.push(data);
    }
    names
}

/// The server's claims and look-alikes, judged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Judged {
    /// Proven the server's own and not being deleted: to delete, at the uid and resourceVersion
    /// read.
    pub own: Vec<ObjectMeta>,
    /// Of a claim's name and being deleted already.
    pub deleting: Vec<String>,
    /// Of a claim's name, not proven the server's: left, a leftover of the removal.
    pub named: Vec<(String, NotOwnClaim)>,
    /// Carrying the server's labels under a name no claim of it has: left, reported.
    pub lookalikes: Vec<(String, NotOwnClaim)>,
}

impl Judged {
    /// The removal's view of the server's claim: one to delete or being deleted first, then one
    /// left.
    pub fn claim(&self) -> Option<(String, Claim)> {
        let name = |m: &ObjectMeta| m.name.clone().unwrap_or_default();
        self.own
            .first()
            .map(|m| (name(m), Claim::Own))
            .or_else(|| self.deleting.first().map(|n| (n.clone(), Claim::Deleting)))
            .or_else(|| {
                self.named
                    .first()
                    .map(|(n, why)| (n.clone(), Claim::NotOwn(why.to_string())))
            })
    }

    /// Every PVC that looks like the server's claim and is left because it is not proven the
    /// controller's, as `PersistentVolumeClaim/<name>: <why>`.
    pub fn kept(&self) -> Vec<String> {
        self.named
            .iter()
            .chain(&self.lookalikes)
            .map(|(n, why)| format!("PersistentVolumeClaim/{n}: {why}"))
            .collect()
    }
}

/// Judges the PVCs `pvcs` (of the server's namespace; others are ignored) for server `server` of
/// the NatsCluster `cluster`/`cluster_uid`, whose StatefulSet is `sts` if it exists.
pub fn judge(
    cluster: &str,
    cluster_uid: &str,
    server: &str,
    sts: Option<&StatefulSet>,
    pvcs: &[ObjectMeta],
) -> Judged {
    let names = names_of(server, sts);
    let selector: BTreeMap<String, String> = labels::server_selector(cluster, server);
    let mut out = Judged::default();
    for pvc in pvcs {
        let name = pvc.name.clone().unwrap_or_default();
        let named = names.contains(&name);
        let labelled = selector
            .iter()
            .all(|(k, v)| pvc.labels.as_ref().and_then(|l| l.get(k)) == Some(v));
        if !named && !labelled {
            continue;
        }
        if named && pvc.deletion_timestamp.is_some() {
            out.deleting.push(name);
            continue;
        }
        match own_claim(cluster_uid, sts, pvc) {
            Ok(()) => out.own.push(pvc.clone()),
            Err(why) if named => out.named.push((name, why)),
            Err(why) => {
                if pvc.deletion_timestamp.is_none() {
                    out.lookalikes.push((name, why));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sts() -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "demo-2", "namespace": "nats", "uid": "sts-uid",
                "ownerReferences": [{"apiVersion": "cluster.nats.mikluko.io/v1beta1", "kind": "NatsCluster",
                    "name": "demo", "uid": "c", "controller": true}]},
            "spec": {"replicas": 1, "serviceName": "demo-headless", "template": {},
                "selector": {"matchLabels": labels::server_selector("demo", "demo-2")},
                "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": labels::server("demo", "demo-2")}}]},
        }))
        .expect("a StatefulSet")
    }

    fn pvc(name: &str, labelled: bool, deleting: bool) -> ObjectMeta {
        serde_json::from_value(json!({
            "name": name, "namespace": "nats",
            "labels": if labelled { json!(labels::server("demo", "demo-2")) } else { json!(null) },
            "deletionTimestamp": if deleting { json!("2026-01-01T00:00:00Z") } else { json!(null) },
        }))
        .expect("metadata")
    }

    #[test]
    fn the_claim_is_deleted_look_alikes_are_kept_and_named() {
        let pvcs = [
            pvc("data-demo-2-0", true, false),
            pvc("imposter", true, false),
            pvc("data-demo-1-0", false, false),
            pvc("unrelated", false, false),
        ];
        let set = sts();
        let j = judge("demo", "c", "demo-2", Some(&set), &pvcs);
        assert_eq!(
            j.own.iter().map(|m| m.name.as_deref()).collect::<Vec<_>>(),
            vec![Some("data-demo-2-0")]
        );
        assert_eq!(j.claim(), Some(("data-demo-2-0".into(), Claim::Own)));
        assert_eq!(
            j.kept(),
            vec![
                "PersistentVolumeClaim/imposter: its name is not a claim name of StatefulSet demo-2 (data-demo-2-0)"
            ]
        );
    }

    #[test]
    fn without_the_statefulset_a_claim_being_deleted_is_waited_for_and_another_is_left() {
        let deleting = [pvc("data-demo-2-0", true, true)];
        let j = judge("demo", "c", "demo-2", None, &deleting);
        assert_eq!(j.claim(), Some(("data-demo-2-0".into(), Claim::Deleting)));
        assert!(j.kept().is_empty());
        let left = [pvc("data-demo-2-0", true, false)];
        let j = judge("demo", "c", "demo-2", None, &left);
        assert_eq!(
            j.claim(),
            Some((
                "data-demo-2-0".into(),
                Claim::NotOwn(NotOwnClaim::NoStatefulSet.to_string())
            ))
        );
        assert!(j.own.is_empty());
    }

    #[test]
    fn a_claim_of_its_name_without_labels_is_left_and_named() {
        let set = sts();
        let j = judge(
            "demo",
            "c",
            "demo-2",
            Some(&set),
            &[pvc("data-demo-2-0", false, false)],
        );
        assert!(j.own.is_empty());
        assert_eq!(
            j.claim().map(|(n, c)| (n, matches!(c, Claim::NotOwn(_)))),
            Some(("data-demo-2-0".into(), true))
        );
    }
}
