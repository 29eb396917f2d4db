//! The server-lifecycle port on Kubernetes: a StatefulSet and a ConfigMap per server, the shared
//! Services, PodDisruptionBudget, NetworkPolicy and cert-manager Certificates, all written by
//! server-side apply under the field manager `cluster-controller` ([`crate::objects::server_side_apply`]);
//! servers observed through their StatefulSets and Pods.
//!
//! An existing object of a rendered name that this NatsCluster does not control is never
//! written: it is returned in [`Applied::foreign`] as `Kind/name` (design §4.1). Nothing is
//! deleted by label: a removed server's PVC only when proven the claim of its own StatefulSet
//! ([`crate::objects::claims`]), before that StatefulSet, at the uid and resourceVersion judged;
//! a PVC that only looks like it is returned in [`Applied::kept`].

use controller_kit::reconcile::describe;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use nats_api::cluster::{NatsCluster, names};

use super::claim_deletion;
use super::config_projection;
use super::{
    Applied, DesiredServer, ObservedServer, ServerAddress, ServerLifecycle, ServerLifecycleError,
};
use crate::objects::cluster::{ClusterObjects, Site, render_objects};
use crate::objects::configmap::{self, REVISION_ANNOTATION};
use crate::objects::server_side_apply::{apply_owned, delete_as_read, delete_owned, failed};
use crate::objects::statefulset::{NATS_CONTAINER, ServerWorkload, stateful_set};
use crate::objects::{Owner, labels, services};
use crate::plan::{KubernetesLayout, Layout, STANDARD_PORTS};
use crate::refusals::controlled_by;
use crate::render::ServerPlan;

/// Where the controller runs: what the rendered objects name beyond the NatsCluster itself.
#[derive(Clone, Debug)]
pub struct SiteSettings {
    /// The namespace the cluster controller runs in (the NetworkPolicy admits monitoring from it).
    pub controller_namespace: String,
    /// The cluster DNS domain.
    pub cluster_domain: String,
}

impl Default for SiteSettings {
    fn default() -> Self {
        Self {
            controller_namespace: "nats-system".into(),
            cluster_domain: "cluster.local".into(),
        }
    }
}

/// The Kubernetes implementation of [`ServerLifecycle`].
#[derive(Clone)]
pub struct KubernetesServerLifecycle {
    client: kube::Client,
    site: SiteSettings,
}

impl KubernetesServerLifecycle {
    pub fn new(client: kube::Client, site: SiteSettings) -> Self {
        Self { client, site }
    }

    fn site(&self) -> Site<'_> {
        Site {
            controller_namespace: &self.site.controller_namespace,
            cluster_domain: &self.site.cluster_domain,
        }
    }

    fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn render(
        &self,
        cluster: &NatsCluster,
        plans: &[ServerPlan],
    ) -> Result<(Owner, ClusterObjects), ServerLifecycleError> {
        let owner = owner(cluster)?;
        let objects = render_objects(&owner, &cluster.spec, plans, self.site()).map_err(|e| {
            ServerLifecycleError::Failed {
                action: "render",
                object: describe(cluster),
                reason: e.to_string(),
            }
        })?;
        Ok((owner, objects))
    }

    /// Has the kubelet sync `server`'s pod now, so that the ConfigMap just written reaches its
    /// file in seconds rather than at the next resync ([`projection`]). A failure only costs
    /// that time, so it is logged, not returned.
    async fn nudge_pod(&self, owner: &Owner, server: &DesiredServer) {
        let pods: Api<Pod> = self.api(&owner.namespace);
        let name = names::server_pod(&owner.name, server.ordinal);
        let result = match pods.get_opt(&name).await {
            Ok(Some(pod)) => {
                match config_projection::nudge(&pod, &server.plan.server_name, &server.revision) {
                    Some(patch) => pods
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(|_| ()),
                    None => Ok(()),
                }
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::warn!(pod = %name, error = %e, "could not nudge the kubelet to project the new config; the reload waits for its resync");
        }
    }

    async fn server_objects(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> Result<(Owner, ConfigMap, StatefulSet), ServerLifecycleError> {
        let owner = owner(cluster)?;
        let (mut cm, _) = configmap::config_map(&owner, &cluster.spec, &server.plan);
        // The revision as the reconciler decided it (with any restart material), the one the
        // StatefulSet names and stored_plan is asked for.
        cm.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                configmap::REVISION_ANNOTATION.into(),
                server.revision.clone(),
            );
        let sts = stateful_set(&ServerWorkload {
            owner: &owner,
            spec: &cluster.spec,
            plan: &server.plan,
            revision: &server.revision,
        })
        .map_err(|e| ServerLifecycleError::Failed {
            action: "render",
            object: format!("StatefulSet {}", server.plan.server_name),
            reason: e.to_string(),
        })?;
        Ok((owner, cm, sts))
    }
}

impl KubernetesServerLifecycle {
    /// Deletes the PVCs proven claims of server `server`'s own StatefulSet
    /// ([`crate::objects::claims`]), each one by name at the uid and resourceVersion it was
    /// judged at; returns what looks like its claim and is left, `PersistentVolumeClaim/name: why`.
    async fn delete_claims(
        &self,
        owner: &Owner,
        server: &str,
        sets: &Api<StatefulSet>,
    ) -> Result<Vec<String>, ServerLifecycleError> {
        let sts = sets
            .get_opt(server)
            .await
            .map_err(|e| failed("read", "StatefulSet", server, e))?;
        let pvcs: Api<PersistentVolumeClaim> = self.api(&owner.namespace);
        // Found by the server's labels (the look-alikes too) and by each name a claim of it has
        // (one without labels too): list requests, the only read of PVCs the controller has.
        let selector = selector_text(&labels::server_selector(&owner.name, server));
        let mut found: Vec<ObjectMeta> = pvcs
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| failed("list", "PersistentVolumeClaim", &selector, e))?
            .items
            .into_iter()
            .map(|p| p.metadata)
            .collect();
        for name in claim_deletion::names_of(server, sts.as_ref()) {
            let by_name = format!("metadata.name={name}");
            let listed = pvcs
                .list_metadata(&ListParams::default().fields(&by_name))
                .await
                .map_err(|e| failed("list", "PersistentVolumeClaim", &name, e))?;
            for p in listed.items {
                if !found.iter().any(|f| f.uid == p.metadata.uid) {
                    found.push(p.metadata);
                }
            }
        }
        let judged = claim_deletion::judge(&owner.name, uid(owner), server, sts.as_ref(), &found);
        for pvc in &judged.own {
            if !delete_as_read(&pvcs, "PersistentVolumeClaim", pvc).await? {
                return Err(ServerLifecycleError::Failed {
                    action: "delete",
                    object: format!(
                        "PersistentVolumeClaim/{}",
                        pvc.name.as_deref().unwrap_or_default()
                    ),
                    reason: "it was replaced or changed after it was judged the server's claim; \
                             it is judged again next pass"
                        .into(),
                });
            }
        }
        let kept = judged.kept();
        for k in &kept {
            tracing::warn!(server, pvc = %k, "a PVC that looks like the server's claim is left: it is not proven the controller's");
        }
        Ok(kept)
    }

    /// Writes the PodDisruptionBudget as policy/v1, or as policy/v1beta1 where the apiserver
    /// serves no policy/v1 (before 1.21): the fields rendered are the same in both.
    async fn apply_pdb(
        &self,
        owner: &Owner,
        pdb: &PodDisruptionBudget,
    ) -> Result<Option<String>, ServerLifecycleError> {
        let serves_v1 = self
            .client
            .list_api_group_resources("policy/v1")
            .await
            .is_ok_and(|l| l.resources.iter().any(|r| r.name == "poddisruptionbudgets"));
        if serves_v1 {
            let api: Api<PodDisruptionBudget> = self.api(&owner.namespace);
            return apply_owned(&api, "PodDisruptionBudget", uid(owner), pdb).await;
        }
        let ar = kube::api::ApiResource {
            group: "policy".into(),
            version: "v1beta1".into(),
            api_version: "policy/v1beta1".into(),
            kind: "PodDisruptionBudget".into(),
            plural: "poddisruptionbudgets".into(),
        };
        let name = pdb.metadata.name.clone().unwrap_or_default();
        let mut body = serde_json::to_value(pdb).map_err(|e| ServerLifecycleError::Failed {
            action: "render",
            object: format!("PodDisruptionBudget/{name}"),
            reason: e.to_string(),
        })?;
        body["apiVersion"] = serde_json::json!("policy/v1beta1");
        let obj: kube::api::DynamicObject =
            serde_json::from_value(body).map_err(|e| ServerLifecycleError::Failed {
                action: "render",
                object: format!("PodDisruptionBudget/{name}"),
                reason: e.to_string(),
            })?;
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(self.client.clone(), &owner.namespace, &ar);
        apply_owned(&api, "PodDisruptionBudget", uid(owner), &obj).await
    }
}

fn owner(cluster: &NatsCluster) -> Result<Owner, ServerLifecycleError> {
    Owner::of(cluster).map_err(|e| ServerLifecycleError::Failed {
        action: "own",
        object: describe(cluster),
        reason: e.to_string(),
    })
}

fn uid(owner: &Owner) -> &str {
    &owner.reference.uid
}

/// The ordinal of StatefulSet `sts` of NatsCluster `cluster` (`<cluster>-<i>`).
pub fn ordinal_of(cluster: &str, sts: &str) -> Option<u32> {
    sts.strip_prefix(cluster)?.strip_prefix('-')?.parse().ok()
}

/// The claim spec a server's StatefulSet made its data volume from.
fn claim_spec(sts: &StatefulSet) -> Option<&k8s_openapi::api::core::v1::PersistentVolumeClaimSpec> {
    sts.spec
        .as_ref()?
        .volume_claim_templates
        .as_ref()?
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(crate::objects::statefulset::DATA_VOLUME))?
        .spec
        .as_ref()
}

/// A StatefulSet's claim templates cannot change once it exists: an existing server keeps the
/// ones it was created with until a replacement (design §4.5) deletes and recreates it, and
/// every other field is written as rendered.
pub fn keep_claim_template(
    mut rendered: StatefulSet,
    existing: Option<&StatefulSet>,
) -> StatefulSet {
    if let (Some(spec), Some(existing)) = (
        rendered.spec.as_mut(),
        existing.and_then(|e| e.spec.as_ref()),
    ) {
        spec.volume_claim_templates = existing.volume_claim_templates.clone();
    }
    rendered
}

/// What a Pod says of its server: Ready, the config revision it was started under, and how often
/// its nats container restarted.
pub fn pod_state(pod: &Pod) -> (bool, Option<String>, u32) {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let revision = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .cloned();
    let restarts = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == NATS_CONTAINER))
        .map_or(0, |c| c.restart_count.max(0) as u32);
    (ready, revision, restarts)
}

impl ServerLifecycle for KubernetesServerLifecycle {
    /// A pod's Ready changing is a pod watch event (`controller::watch`).
    const READINESS_WATCHED: bool = true;
    fn layout(&self, cluster: &NatsCluster) -> Box<dyn Layout + Send + Sync> {
        Box::new(KubernetesLayout {
            name: cluster.name_any(),
            namespace: cluster.namespace().unwrap_or_default(),
            cluster_domain: self.site.cluster_domain.clone(),
        })
    }

    async fn apply_shared(
        &self,
        cluster: &NatsCluster,
        plans: &[ServerPlan],
    ) -> Result<Applied, ServerLifecycleError> {
        let (owner, objects) = self.render(cluster, plans)?;
        let ns = owner.namespace.clone();
        let mut foreign = vec![];
        let services: Api<Service> = self.api(&ns);
        for svc in [
            Some(&objects.client_service),
            Some(&objects.headless_service),
            objects.gateway_service.as_ref(),
            objects.leafnodes_service.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            foreign.extend(apply_owned(&services, "Service", uid(&owner), svc).await?);
        }
        // External Services whose template was removed from the spec go with it.
        if objects.gateway_service.is_none() {
            let name = services::gateway_service_name(&owner.name);
            delete_owned(&services, "Service", uid(&owner), &name).await?;
        }
        if objects.leafnodes_service.is_none() {
            let name = services::leafnodes_service_name(&owner.name);
            delete_owned(&services, "Service", uid(&owner), &name).await?;
        }
        foreign.extend(
            self.apply_pdb(&owner, &objects.pod_disruption_budget)
                .await?,
        );
        let policies: Api<NetworkPolicy> = self.api(&ns);
        match &objects.network_policy {
            Some(p) => {
                foreign.extend(apply_owned(&policies, "NetworkPolicy", uid(&owner), p).await?)
            }
            None => delete_owned(&policies, "NetworkPolicy", uid(&owner), &owner.name).await?,
        }
        for cert in &objects.certificates {
            let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                "cert-manager.io",
                "v1",
                "Certificate",
            ));
            let api: Api<kube::api::DynamicObject> =
                Api::namespaced_with(self.client.clone(), &ns, &ar);
            foreign.extend(apply_owned(&api, "Certificate", uid(&owner), cert).await?);
        }
        Ok(Applied {
            foreign,
            ..Default::default()
        })
    }

    async fn write_config(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> Result<Applied, ServerLifecycleError> {
        let (owner, cm, _) = self.server_objects(cluster, server).await?;
        let api: Api<ConfigMap> = self.api(&owner.namespace);
        let foreign: Vec<String> = apply_owned(&api, "ConfigMap", uid(&owner), &cm)
            .await?
            .into_iter()
            .collect();
        if foreign.is_empty() {
            self.nudge_pod(&owner, server).await;
        }
        Ok(Applied {
            foreign,
            ..Default::default()
        })
    }

    fn config_projection(&self) -> std::time::Duration {
        config_projection::PROJECTION_BOUND
    }

    async fn apply_server(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> Result<Applied, ServerLifecycleError> {
        let (owner, cm, sts) = self.server_objects(cluster, server).await?;
        let cms: Api<ConfigMap> = self.api(&owner.namespace);
        if let Some(f) = apply_owned(&cms, "ConfigMap", uid(&owner), &cm).await? {
            // The pod would mount a config this NatsCluster does not write: hold its workload too.
            return Ok(Applied {
                foreign: vec![f],
                ..Default::default()
            });
        }
        let sets: Api<StatefulSet> = self.api(&owner.namespace);
        let sts = keep_claim_template(
            sts,
            sets.get_opt(&server.plan.server_name)
                .await
                .map_err(|e| failed("read", "StatefulSet", &server.plan.server_name, e))?
                .as_ref(),
        );
        Ok(Applied {
            foreign: apply_owned(&sets, "StatefulSet", uid(&owner), &sts)
                .await?
                .into_iter()
                .collect(),
            ..Default::default()
        })
    }

    async fn delete_server(
        &self,
        cluster: &NatsCluster,
        ordinal: u32,
        remove_storage: bool,
    ) -> Result<Applied, ServerLifecycleError> {
        let owner = owner(cluster)?;
        let server = names::server(&owner.name, ordinal);
        let sets: Api<StatefulSet> = self.api(&owner.namespace);
        // The claims first, while the StatefulSet that proves them theirs still stands.
        let kept = if remove_storage {
            self.delete_claims(&owner, &server, &sets).await?
        } else {
            vec![]
        };
        delete_owned(&sets, "StatefulSet", uid(&owner), &server).await?;
        let cms: Api<ConfigMap> = self.api(&owner.namespace);
        delete_owned(&cms, "ConfigMap", uid(&owner), &configmap::name(&server)).await?;
        Ok(Applied {
            foreign: vec![],
            kept,
        })
    }

    async fn servers_gone(&self, cluster: &NatsCluster) -> Result<bool, ServerLifecycleError> {
        let owner = owner(cluster)?;
        let selector = selector_text(&labels::selector(&owner.name));
        let list = ListParams::default().labels(&selector).limit(1);
        let sets: Api<StatefulSet> = self.api(&owner.namespace);
        let sets = sets
            .list_metadata(&list)
            .await
            .map_err(|e| failed("list", "StatefulSet", &selector, e))?;
        let pvcs: Api<PersistentVolumeClaim> = self.api(&owner.namespace);
        let pvcs = pvcs
            .list_metadata(&list)
            .await
            .map_err(|e| failed("list", "PersistentVolumeClaim", &selector, e))?;
        Ok(sets.items.is_empty() && pvcs.items.is_empty())
    }

    async fn observe(
        &self,
        cluster: &NatsCluster,
    ) -> Result<Vec<ObservedServer>, ServerLifecycleError> {
        let owner = owner(cluster)?;
        let selector = selector_text(&labels::selector(&owner.name));
        let sets: Api<StatefulSet> = self.api(&owner.namespace);
        let pods: Api<Pod> = self.api(&owner.namespace);
        let sets = sets
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| failed("list", "StatefulSet", &selector, e))?;
        let pods = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| failed("list", "Pod", &selector, e))?;
        let claims: Api<PersistentVolumeClaim> = self.api(&owner.namespace);
        let claims = claims
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| failed("list", "PersistentVolumeClaim", &selector, e))?;
        let claim_metas: Vec<ObjectMeta> = claims.items.into_iter().map(|c| c.metadata).collect();
        let mut present: Vec<u32> = sets
            .items
            .iter()
            .filter(|s| controlled_by(s.owner_references(), uid(&owner)))
            .filter_map(|s| ordinal_of(&owner.name, &s.name_any()))
            .collect();
        present.sort_unstable();
        let wanted = cluster.spec.replicas.max(0) as u32;
        let mut ordinals: Vec<u32> = (0..wanted).chain(present.iter().copied()).collect();
        ordinals.sort_unstable();
        ordinals.dedup();
        Ok(ordinals
            .into_iter()
            .map(|i| {
                let server_name = names::server(&owner.name, i);
                let pod_name = names::server_pod(&owner.name, i);
                let pod = pods.items.iter().find(|p| {
                    p.name_any() == pod_name && p.labels().get(labels::SERVER) == Some(&server_name)
                });
                let (ready, revision, restarts) = pod.map(pod_state).unwrap_or_default();
                let volume = sets
                    .items
                    .iter()
                    .find(|s| s.name_any() == server_name)
                    .and_then(claim_spec)
                    .map(crate::rollout::volume::shape_of);
                let sts = sets.items.iter().find(|s| s.name_any() == server_name);
                let claim = claim_deletion::judge(
                    &owner.name,
                    uid(&owner),
                    &server_name,
                    sts,
                    &claim_metas,
                )
                .claim();
                ObservedServer {
                    ordinal: i,
                    server_name,
                    present: present.contains(&i),
                    ready,
                    revision,
                    restarts,
                    volume,
                    claim,
                }
            })
            .collect())
    }

    async fn stored_plan(
        &self,
        cluster: &NatsCluster,
        ordinal: u32,
        revision: &str,
    ) -> Option<ServerPlan> {
        let namespace = cluster.namespace()?;
        let cms: Api<ConfigMap> = self.api(&namespace);
        let name = configmap::name(&names::server(&cluster.name_any(), ordinal));
        let cm = cms.get_opt(&name).await.ok()??;
        configmap::stored_plan(&cm, revision)
    }

    fn address(&self, cluster: &NatsCluster, ordinal: u32) -> ServerAddress {
        let name = cluster.name_any();
        let host = format!(
            "{}.{}.{}.svc.{}",
            names::server_pod(&name, ordinal),
            names::headless_service(&name),
            cluster.namespace().unwrap_or_default(),
            self.site.cluster_domain
        );
        let scheme = if cluster.spec.tls.is_some() {
            "tls"
        } else {
            "nats"
        };
        ServerAddress {
            client_url: format!("{scheme}://{host}:{}", STANDARD_PORTS.client),
            monitor_url: format!("http://{host}:{}", STANDARD_PORTS.monitor),
        }
    }
}

/// `k=v,k=v` of a label map, for a list's label selector.
pub fn selector_text(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodStatus};

    #[rstest::rstest]
    #[case("demo", "demo-0", Some(0))]
    #[case("demo", "demo-12", Some(12))]
    #[case("demo", "demo-x", None)]
    #[case("demo", "demo2-1", None)]
    #[case("demo-a", "demo-a-3", Some(3))]
    fn ordinals_from_statefulset_names(
        #[case] cluster: &str,
        #[case] sts: &str,
        #[case] want: Option<u32>,
    ) {
        assert_eq!(ordinal_of(cluster, sts), want);
    }

    fn pod(ready: &str, revision: Option<&str>, restarts: i32) -> Pod {
        let mut p = Pod::default();
        if let Some(r) = revision {
            p.metadata.annotations =
                Some([(REVISION_ANNOTATION.to_string(), r.to_string())].into());
        }
        p.status = Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: ready.into(),
                ..Default::default()
            }]),
            container_statuses: Some(vec![
                ContainerStatus {
                    name: "exporter".into(),
                    restart_count: 9,
                    ..Default::default()
                },
                ContainerStatus {
                    name: NATS_CONTAINER.into(),
                    restart_count: restarts,
                    ..Default::default()
                },
            ]),
            ..Default::default()
        });
        p
    }

    #[test]
    fn pod_state_reads_ready_revision_and_the_nats_containers_restarts() {
        assert_eq!(
            pod_state(&pod("True", Some("abc"), 2)),
            (true, Some("abc".into()), 2)
        );
        assert_eq!(pod_state(&pod("False", None, 0)), (false, None, 0));
        assert_eq!(pod_state(&Pod::default()), (false, None, 0));
    }

    #[test]
    fn selectors_join_labels() {
        assert_eq!(
            selector_text(&labels::selector("demo")),
            "app.kubernetes.io/instance=demo,app.kubernetes.io/name=nats"
        );
    }

    #[test]
    fn an_existing_server_keeps_its_claim_template_and_takes_the_rest() {
        let sts = |storage: &str, image: &str| -> StatefulSet {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "demo-0"},
                "spec": {
                    "serviceName": "demo-headless",
                    "selector": {},
                    "template": {"spec": {"containers": [{"name": "nats", "image": image}]}},
                    "volumeClaimTemplates": [{
                        "metadata": {"name": "data"},
                        "spec": {"resources": {"requests": {"storage": storage}}}
                    }]
                }
            }))
            .expect("StatefulSet")
        };
        let existing = sts("20Gi", "nats:2.15.0");
        let kept = keep_claim_template(sts("40Gi", "nats:2.15.1"), Some(&existing));
        let spec = kept.spec.as_ref().expect("spec");
        assert_eq!(
            claim_spec(&kept).map(crate::rollout::volume::shape_of),
            claim_spec(&existing).map(crate::rollout::volume::shape_of),
            "the claim template it was created with"
        );
        assert_eq!(
            spec.template.spec.as_ref().expect("pod").containers[0]
                .image
                .as_deref(),
            Some("nats:2.15.1"),
            "the rest as rendered"
        );
        let created = keep_claim_template(sts("40Gi", "nats:2.15.1"), None);
        assert_eq!(
            claim_spec(&created).and_then(|c| crate::rollout::volume::shape_of(c).size),
            Some(40 << 30),
            "a new server takes the new template"
        );
    }
}
