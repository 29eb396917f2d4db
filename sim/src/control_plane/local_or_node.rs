//! The control plane a scenario drives ([`ControlPlane`]): the local [`Host`] (kube-apiserver
//! and the controllers in-process, servers as local processes) or a [`NodeHost`] (the sim's
//! real node, the controllers the chart's pods, servers the kubelet's pods). Both are their
//! objects ([`Objects`]) and both tell the servers' lives as [`ServerLifecycleEvent`]s; steps only a
//! local host can take (restart an in-process controller, kill an elected replica, boot an auth
//! plane) ask for [`ControlPlane::local`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};

use super::{Host, HostError, Objects};
use crate::local::ServerLifecycleEvent;
use crate::node::containers::Containers;
use crate::node::fit::Fit;
use crate::node::pods::{Lives, PodLog};

/// The label the chart gives each controller's pods: `<name>-controller`.
const COMPONENT_LABEL: &str = "app.kubernetes.io/component";

/// The sim's node with the chart installed: the controllers run as its pods, and every
/// NatsCluster applied through it is fitted to the node ([`Fit`]) and run by the kubelet.
pub struct NodeHost {
    objects: Objects,
    pods: PodLog,
    /// The namespace the chart runs the controllers in.
    controllers: String,
    fit: Fit,
    /// The kubelet's containers, for the scenarios' faults on pods.
    containers: Option<Containers>,
}

impl std::fmt::Debug for NodeHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHost")
            .field("controllers", &self.controllers)
            .field("fit", &self.fit)
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for NodeHost {
    type Target = Objects;
    fn deref(&self) -> &Objects {
        &self.objects
    }
}

impl NodeHost {
    /// The node `client` reaches, whose controllers run in namespace `controllers`; creates
    /// `namespaces` (those that exist are kept) and starts watching the servers' pods.
    pub async fn new(
        client: Client,
        controllers: &str,
        fit: Fit,
        namespaces: &[&str],
    ) -> Result<Self, HostError> {
        let api: Api<Namespace> = Api::all(client.clone());
        for ns in namespaces {
            let mut object = Namespace::default();
            object.metadata.name = Some((*ns).into());
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(source) => {
                    return Err(HostError::Object {
                        action: "creating",
                        object: format!("Namespace/{ns}"),
                        source,
                    });
                }
            }
        }
        Ok(Self {
            pods: PodLog::start(client.clone()),
            objects: Objects::fitted(client, fit.clone()),
            controllers: controllers.into(),
            fit,
            containers: None,
        })
    }

    /// This host, its scenarios' faults reaching the pods through `containers`.
    pub fn with_containers(mut self, containers: Containers) -> Self {
        self.containers = Some(containers);
        self
    }

    pub fn fit(&self) -> &Fit {
        &self.fit
    }

    pub fn containers(&self) -> Option<&Containers> {
        self.containers.as_ref()
    }

    fn failed(
        &self,
        action: &'static str,
        object: String,
    ) -> impl FnOnce(kube::Error) -> HostError {
        move |source| HostError::Object {
            action,
            object,
            source,
        }
    }

    /// The pods of controller `name` (`cluster`, `auth`, `jetstream`), by name.
    async fn controller_pods(&self, name: &str) -> Result<Vec<String>, HostError> {
        let pods: Api<Pod> = Api::namespaced(self.client(), &self.controllers);
        let selector = format!("{COMPONENT_LABEL}={name}-controller");
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(self.failed("listing", format!("the pods of {selector}")))?;
        Ok(list.items.iter().map(|p| p.name_any()).collect())
    }

    /// How many replicas the chart runs of controller `name`.
    pub async fn controller_replicas(&self, name: &str) -> Result<u32, HostError> {
        let api: Api<Deployment> = Api::namespaced(self.client(), &self.controllers);
        let selector = format!("{COMPONENT_LABEL}={name}-controller");
        let list = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(self.failed("listing", format!("the Deployment of {selector}")))?;
        let d = list
            .items
            .first()
            .ok_or_else(|| HostError::UnknownController(name.into()))?;
        Ok(d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32)
    }

    /// Deletes the pod of controller `name` that holds its Lease at once (grace 0: no release,
    /// as a node lost would); returns the pod's name. The Deployment starts another.
    pub async fn kill_leader(&self, name: &str) -> Result<String, HostError> {
        let pods = self.controller_pods(name).await?;
        let leases: Api<Lease> = Api::namespaced(self.client(), &self.controllers);
        let list = leases
            .list(&ListParams::default())
            .await
            .map_err(self.failed("listing", format!("the Leases of {}", self.controllers)))?;
        let leader = list
            .items
            .iter()
            .filter_map(|l| l.spec.as_ref()?.holder_identity.as_deref())
            .map(holder_pod)
            .find(|h| pods.iter().any(|p| p == h))
            .map(String::from)
            .ok_or_else(|| HostError::NoLeader(name.into()))?;
        let api: Api<Pod> = Api::namespaced(self.client(), &self.controllers);
        api.delete(&leader, &DeleteParams::default().grace_period(0))
            .await
            .map_err(self.failed("deleting", format!("Pod/{}/{leader}", self.controllers)))?;
        Ok(leader)
    }

    /// Deletes every pod of controller `name` (each with its grace period): the Deployment starts
    /// them again from nothing, as a restart would.
    pub async fn restart_controller(&self, name: &str) -> Result<(), HostError> {
        let pods = self.controller_pods(name).await?;
        if pods.is_empty() {
            return Err(HostError::UnknownController(name.into()));
        }
        let api: Api<Pod> = Api::namespaced(self.client(), &self.controllers);
        for p in pods {
            api.delete(&p, &DeleteParams::default())
                .await
                .map_err(self.failed("deleting", format!("Pod/{}/{p}", self.controllers)))?;
        }
        Ok(())
    }

    /// Per controller (`cluster`, `auth`, `jetstream`), the restarts of its pods' containers.
    pub async fn controller_restarts(&self) -> Result<BTreeMap<String, u32>, HostError> {
        let pods: Api<Pod> = Api::namespaced(self.client(), &self.controllers);
        let list = pods
            .list(&ListParams::default().labels(COMPONENT_LABEL))
            .await
            .map_err(|source| HostError::Object {
                action: "listing",
                object: format!("the controllers' pods in {}", self.controllers),
                source,
            })?;
        let mut out = BTreeMap::new();
        for p in &list.items {
            let Some(name) = p
                .labels()
                .get(COMPONENT_LABEL)
                .and_then(|c| c.strip_suffix("-controller"))
            else {
                continue;
            };
            let restarts: i32 = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|cs| cs.iter().map(|c| c.restart_count).sum())
                .unwrap_or(0);
            *out.entry(name.to_string()).or_insert(0) += restarts.max(0) as u32;
        }
        Ok(out)
    }

    /// The servers' lives so far, read off their pods.
    pub fn server_events(&self) -> Vec<ServerLifecycleEvent> {
        self.pods.events()
    }
}

/// The pod a Lease holder's identity names: `<pod>_<random suffix>` (controller_kit's
/// `leader::identity`), or the identity itself without a suffix.
pub fn holder_pod(identity: &str) -> &str {
    identity.rsplit_once('_').map_or(identity, |(pod, _)| pod)
}

/// The control plane of a scenario's run.
#[derive(Clone, Debug)]
pub enum ControlPlane {
    Local(Arc<Host>),
    Node(Arc<NodeHost>),
}

impl std::ops::Deref for ControlPlane {
    type Target = Objects;
    fn deref(&self) -> &Objects {
        match self {
            ControlPlane::Local(h) => h,
            ControlPlane::Node(h) => h,
        }
    }
}

impl ControlPlane {
    /// The backend the servers run on.
    pub fn backend(&self) -> &'static str {
        match self {
            ControlPlane::Local(_) => "local",
            ControlPlane::Node(_) => "node",
        }
    }

    /// The local host, for what only it can do (boot an auth plane); `what` names what asked.
    pub fn local(&self, what: &str) -> Result<&Arc<Host>, String> {
        match self {
            ControlPlane::Local(h) => Ok(h),
            ControlPlane::Node(_) => Err(format!(
                "{what} needs the local backend (on the node the controllers are the chart's pods)"
            )),
        }
    }

    /// The servers' lives so far: the local server lifecycle's log, or what the node's pods showed.
    pub fn server_events(&self) -> Vec<ServerLifecycleEvent> {
        match self {
            ControlPlane::Local(h) => h.server_lifecycle().events(),
            ControlPlane::Node(h) => h.server_events(),
        }
    }

    /// Kills the leading replica of controller `name`; returns what it was.
    pub async fn kill_leader(&self, name: &str) -> Result<String, String> {
        match self {
            ControlPlane::Local(h) => h.kill_leader(name).map_err(|e| e.to_string()),
            ControlPlane::Node(h) => h.kill_leader(name).await.map_err(|e| e.to_string()),
        }
    }

    /// Restarts controller `name` from nothing.
    pub async fn restart_controller(&self, name: &str) -> Result<(), String> {
        match self {
            ControlPlane::Local(h) => h.restart_controller(name).await,
            ControlPlane::Node(h) => h.restart_controller(name).await,
        }
        .map_err(|e| e.to_string())
    }

    /// Waits until every server of NatsCluster `namespace/name` runs and answers: the local
    /// server lifecycle's processes, or the node's pods Ready.
    pub async fn wait_servers(
        &self,
        namespace: &str,
        name: &str,
        timeout: std::time::Duration,
    ) -> Result<(), String> {
        match self {
            ControlPlane::Local(h) => {
                crate::controlled::wait_servers(h, namespace, name, timeout).await
            }
            ControlPlane::Node(h) => {
                crate::node::servers::wait_ready(&h.client(), namespace, name, timeout).await
            }
        }
    }

    /// Per server seen, its restarts (replaced or revived) so far.
    pub fn server_restarts(&self) -> BTreeMap<String, u32> {
        Lives::restarts(&self.server_events())
    }

    /// Per controller, its restarts so far (none known is an empty map).
    pub async fn controller_restarts(&self) -> BTreeMap<String, u32> {
        match self {
            ControlPlane::Local(h) => h
                .controller_names()
                .into_iter()
                .map(|c| {
                    let n = h.controller_restarts(&c).unwrap_or(0);
                    (c, n)
                })
                .collect(),
            ControlPlane::Node(h) => h.controller_restarts().await.unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::holder_pod;

    #[rstest::rstest]
    #[case::suffixed(
        "nats-operators-cluster-687b47b964-wp6vw_1a2b3c4d",
        "nats-operators-cluster-687b47b964-wp6vw"
    )]
    #[case::bare("cluster-0", "cluster-0")]
    #[case::underscores_in_the_name("a_b_0000ffff", "a_b")]
    fn a_lease_holder_names_its_pod(#[case] identity: &str, #[case] pod: &str) {
        assert_eq!(holder_pod(identity), pod);
    }
}
