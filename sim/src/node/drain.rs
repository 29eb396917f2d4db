//! Stopping the node's pods the way a node drain does before its parts are killed: the workloads
//! that would recreate them deleted, then each pod deleted with its own grace period, so the
//! kubelet runs its preStop hook, stops its containers, unmounts its volumes and tears its
//! network down through the CNI. What is still running after the deadline is killed with the
//! parts (and named in `down`'s report).

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

/// Deletes every workload and pod, in rounds, until no pod is left or `deadline` passes; the
/// lines are what went wrong (an API error, the pods left). Rounds, because a controller still
/// running on the node recreates what it owns (the cluster controller a NatsCluster's
/// StatefulSets) until its own pod is gone; the round after that deletes them for good.
pub(super) async fn drain(client: &Client, deadline: Duration) -> Vec<String> {
    let pods: Api<Pod> = Api::all(client.clone());
    let errors = std::sync::Mutex::new(Vec::new());
    let gone = crate::wait::poll_every("the node's pods stopped", deadline, ROUND, || async {
        let round = delete_round(client).await;
        *errors.lock().unwrap_or_else(|e| e.into_inner()) = round;
        let list = pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        if list.items.is_empty() {
            return Ok(Some(()));
        }
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|p| {
                Some(format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref()?,
                    p.metadata.name.as_deref()?
                ))
            })
            .collect();
        Err(format!("pods left: {names:?}"))
    })
    .await;
    let mut left = errors.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = gone {
        left.push(format!("pods still running when the node went down: {e}"));
    }
    left
}

/// How often a drain deletes again what was recreated.
const ROUND: Duration = Duration::from_secs(2);

async fn delete_round(client: &Client) -> Vec<String> {
    let mut left = Vec::new();
    left.extend(delete_all::<StatefulSet>(client).await);
    left.extend(delete_all::<Deployment>(client).await);
    left.extend(delete_all::<DaemonSet>(client).await);
    left.extend(delete_all::<ReplicaSet>(client).await);
    left.extend(delete_all::<Job>(client).await);
    left.extend(delete_all::<Pod>(client).await);
    left
}

/// Deletes every object of kind `K` in every namespace not already being deleted, each with its
/// own grace period and its dependents in the background.
async fn delete_all<K>(client: &Client) -> Vec<String>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let all: Api<K> = Api::all(client.clone());
    let list = match all.list(&ListParams::default()).await {
        Ok(l) => l,
        Err(e) => {
            return vec![format!(
                "listing {}: {e}",
                K::kind(&K::DynamicType::default())
            )];
        }
    };
    let mut left = Vec::new();
    for o in list.items {
        let meta = o.meta();
        let (Some(ns), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref()) else {
            continue;
        };
        if meta.deletion_timestamp.is_some() {
            continue; // already going, with its grace period
        }
        let api: Api<K> = Api::namespaced(client.clone(), ns);
        if let Err(e) = api.delete(name, &DeleteParams::background()).await
            && !matches!(&e, kube::Error::Api(r) if r.code == 404)
        {
            left.push(format!("deleting {ns}/{name}: {e}"));
        }
    }
    left
}
