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

/// Deletes every workload and pod and waits up to `deadline` for the pods to be gone; the lines
/// are what went wrong (an API error, the pods left).
pub(super) async fn drain(client: &Client, deadline: Duration) -> Vec<String> {
    let mut left = Vec::new();
    left.extend(delete_all::<StatefulSet>(client).await);
    left.extend(delete_all::<Deployment>(client).await);
    left.extend(delete_all::<DaemonSet>(client).await);
    left.extend(delete_all::<ReplicaSet>(client).await);
    left.extend(delete_all::<Job>(client).await);
    left.extend(delete_all::<Pod>(client).await);
    let pods: Api<Pod> = Api::all(client.clone());
    let gone = crate::wait::poll("the node's pods stopped", deadline, || async {
        let list = pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(list.items.is_empty().then_some(()))
    })
    .await;
    if let Err(e) = gone {
        left.push(format!("pods still running when the node went down: {e}"));
    }
    left
}

/// Deletes every object of kind `K` in every namespace, each with its own grace period and its
/// dependents in the background.
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
        let api: Api<K> = Api::namespaced(client.clone(), ns);
        if let Err(e) = api.delete(name, &DeleteParams::background()).await
            && !matches!(&e, kube::Error::Api(r) if r.code == 404)
        {
            left.push(format!("deleting {ns}/{name}: {e}"));
        }
    }
    left
}
