//! A server's StatefulSet (design §4.1, §4.4): one replica, its pod template naming the config
//! revision, lame duck before stop, the restricted Pod Security Standard, the exporter sidecar,
//! and spec.podTemplate merged over all of it.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapProjection, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, ExecAction, HTTPGetAction, KeyToPath, Lifecycle, LifecycleHandler,
    PersistentVolumeClaim, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, ProjectedVolumeSource, ResourceRequirements, SeccompProfile,
    SecretProjection, SecretVolumeSource, SecurityContext, Volume, VolumeMount, VolumeProjection,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nats_api::cluster::{NatsClusterSpec, exporter_defaults, names};

use super::configmap::{self, CONFIG_KEY, REVISION_ANNOTATION};
pub use super::images::{
    DEFAULT_EXPORTER_IMAGE, DEFAULT_NATS_REPOSITORY, exporter_image, nats_image,
};
use super::{METRICS_PORT, ObjectsError, Owner, labels, pod_merge, port_name, tls_secret_name};
use crate::plan::{self, mounts};
use crate::render::ServerPlan;

/// Long enough for the rendered lame_duck_duration of 2m to end inside it (design §4.4).
pub const TERMINATION_GRACE_PERIOD_SECONDS: i64 = 300;
/// The uid/gid the containers run as: the restricted standard demands a non-root user.
pub const RUN_AS_USER: i64 = 1000;

pub const NATS_CONTAINER: &str = "nats";
pub const EXPORTER_CONTAINER: &str = "exporter";
pub const CONFIG_VOLUME: &str = "config";
pub const DATA_VOLUME: &str = "data";
pub const PID_VOLUME: &str = "pid";

/// Everything one server's StatefulSet is built from.
#[derive(Clone, Debug)]
pub struct ServerWorkload<'a> {
    pub owner: &'a Owner,
    pub spec: &'a NatsClusterSpec,
    pub plan: &'a ServerPlan,
    /// The config revision of the server's ConfigMap.
    pub revision: &'a str,
}

fn port(name: &str, p: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: i32::from(p),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        run_as_non_root: Some(true),
        read_only_root_filesystem: Some(true),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..Default::default()
    }
}

fn healthz(path: &str, monitor: u16, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(i32::from(monitor)),
            ..Default::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        timeout_seconds: Some(5),
        ..Default::default()
    }
}

/// The container ports of the nats container, in the order the plan renders listeners.
pub fn nats_ports(plan: &ServerPlan) -> Vec<ContainerPort> {
    let mut ports = vec![
        port(port_name::CLIENT, plan.client.port),
        port(port_name::CLUSTER, plan.route_listen.port),
        port(port_name::MONITOR, plan.monitor.port),
    ];
    if let Some(gw) = &plan.gateway {
        ports.push(port(port_name::GATEWAY, gw.listen.port));
    }
    if let Some(l) = &plan.leafnodes {
        ports.push(port(port_name::LEAFNODES, l.listen.port));
    }
    ports
}

fn tls_volume(listener: &str, secret: String) -> (Volume, VolumeMount) {
    let name = format!("tls-{listener}");
    (
        Volume {
            name: name.clone(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret),
                ..Default::default()
            }),
            ..Default::default()
        },
        VolumeMount {
            name,
            mount_path: format!("{}/{listener}", mounts::TLS_DIR),
            read_only: Some(true),
            ..Default::default()
        },
    )
}

/// The config volume: nats.conf from the ConfigMap with the leaf remotes' creds and CAs from
/// the projected Secret beside it, so kubelet refreshes both together (design §4.3).
fn config_volume(owner: &Owner, plan: &ServerPlan) -> Volume {
    let mut sources = vec![VolumeProjection {
        config_map: Some(ConfigMapProjection {
            name: configmap::name(&plan.server_name),
            items: Some(vec![KeyToPath {
                key: CONFIG_KEY.into(),
                path: CONFIG_KEY.into(),
                mode: None,
            }]),
            optional: Some(false),
        }),
        ..Default::default()
    }];
    let leaf_dir = format!("{}/", mounts::LEAF_REMOTES_DIR);
    let items: Vec<KeyToPath> = plan
        .leaf_remotes
        .iter()
        .flat_map(|r| r.credentials.iter().chain(r.ca_file.iter()))
        .filter_map(|path| path.strip_prefix(&leaf_dir))
        .map(|file| KeyToPath {
            key: file.into(),
            path: format!("leaf-remotes/{file}"),
            mode: None,
        })
        .collect();
    if !items.is_empty() {
        sources.push(VolumeProjection {
            secret: Some(SecretProjection {
                name: names::leaf_remotes_secret(&owner.name),
                items: Some(items),
                optional: Some(false),
            }),
            ..Default::default()
        });
    }
    Volume {
        name: CONFIG_VOLUME.into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(sources),
            default_mode: None,
        }),
        ..Default::default()
    }
}

fn exporter_container(spec: &NatsClusterSpec, plan: &ServerPlan) -> Container {
    let mut args = vec![
        format!("-port={METRICS_PORT}"),
        "-varz".into(),
        "-connz".into(),
        "-routez".into(),
        "-subz".into(),
        "-healthz".into(),
        "-use_internal_server_name".into(),
    ];
    if plan.jetstream.is_some() {
        args.push("-jsz=all".into());
    }
    if plan.gateway.is_some() {
        args.push("-gatewayz".into());
    }
    if plan.leafnodes.is_some() || !plan.leaf_remotes.is_empty() {
        args.push("-leafz".into());
    }
    // Over the pod's loopback, which no NetworkPolicy governs (design §4.1).
    args.push(format!("http://127.0.0.1:{}", plan.monitor.port));
    let resources = spec
        .exporter
        .as_ref()
        .and_then(|e| e.resources.clone())
        .unwrap_or_else(|| {
            let q = |s: &str| Quantity(s.into());
            ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".into(), q(exporter_defaults::CPU_REQUEST)),
                    ("memory".into(), q(exporter_defaults::MEMORY_REQUEST)),
                ])),
                limits: Some(BTreeMap::from([
                    ("cpu".into(), q(exporter_defaults::CPU_LIMIT)),
                    ("memory".into(), q(exporter_defaults::MEMORY_LIMIT)),
                ])),
                ..Default::default()
            }
        });
    Container {
        name: EXPORTER_CONTAINER.into(),
        image: Some(exporter_image(spec)),
        args: Some(args),
        ports: Some(vec![port(port_name::METRICS, METRICS_PORT)]),
        resources: Some(resources),
        security_context: Some(restricted_container()),
        ..Default::default()
    }
}

/// Prefer distinct nodes for the servers of one NATS cluster.
fn spread_affinity(name: &str) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(labels::selector(name)),
                            match_expressions: None,
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..Default::default()
                    },
                },
            ]),
            required_during_scheduling_ignored_during_execution: None,
        }),
        ..Default::default()
    }
}

/// The pod template as rendered, before spec.podTemplate is merged over it.
pub fn rendered_pod(w: &ServerWorkload<'_>) -> Result<PodTemplateSpec, ObjectsError> {
    let (owner, spec, plan) = (w.owner, w.spec, w.plan);
    let name = owner.name.as_str();
    let mut env = vec![];
    if let Some(limit) = plan::gomemlimit(spec).map_err(|source| ObjectsError::Quantity {
        cluster: name.into(),
        source,
    })? {
        env.push(EnvVar {
            name: "GOMEMLIMIT".into(),
            value: Some(limit),
            value_from: None,
        });
    }
    let (volumes, mounts) = pod_volumes(w);
    let mut containers = vec![nats_container(spec, plan, env, mounts)];
    if spec.exporter_enabled() {
        containers.push(exporter_container(spec, plan));
    }
    let user_sets_affinity = spec
        .pod_template
        .as_ref()
        .and_then(|t| t.spec.as_ref())
        .is_some_and(|s| s.contains_key("affinity"));
    Ok(PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels::server(name, &plan.server_name)),
            annotations: Some(BTreeMap::from([(
                REVISION_ANNOTATION.into(),
                w.revision.into(),
            )])),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers,
            volumes: Some(volumes),
            affinity: (!user_sets_affinity).then(|| spread_affinity(name)),
            termination_grace_period_seconds: Some(TERMINATION_GRACE_PERIOD_SECONDS),
            automount_service_account_token: Some(false),
            security_context: Some(restricted_pod()),
            ..Default::default()
        }),
    })
}

/// The pod's volumes and the nats container's mounts: its config, pid file and data (an
/// emptyDir without a claim), and each TLS listener's certificate Secret.
fn pod_volumes(w: &ServerWorkload<'_>) -> (Vec<Volume>, Vec<VolumeMount>) {
    let (owner, spec, plan) = (w.owner, w.spec, w.plan);
    let name = owner.name.as_str();
    let mut volumes = vec![
        config_volume(owner, plan),
        Volume {
            name: PID_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
    ];
    let mut mounts_ = vec![
        VolumeMount {
            name: CONFIG_VOLUME.into(),
            mount_path: mounts::CONFIG_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        },
        VolumeMount {
            name: PID_VOLUME.into(),
            mount_path: mounts::PID_DIR.into(),
            ..Default::default()
        },
        VolumeMount {
            name: DATA_VOLUME.into(),
            mount_path: mounts::DATA_DIR.into(),
            ..Default::default()
        },
    ];
    let has_claim = spec
        .jetstream
        .as_ref()
        .is_some_and(|j| j.volume_claim_template.is_some());
    if !has_claim {
        // Without a claim, the resolver directory and store live as long as the pod.
        volumes.push(Volume {
            name: DATA_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        });
    }
    let listeners = [
        ("client", plan.client_tls.is_some(), spec.tls.as_ref()),
        // Route TLS names its Secret through route_secret_name below.
        ("routes", plan.route_tls.is_some(), None),
        (
            "gateway",
            plan.gateway.as_ref().is_some_and(|g| g.tls.is_some()),
            spec.gateway.as_ref().and_then(|g| g.tls.as_ref()),
        ),
        (
            "leafnodes",
            plan.leafnodes.as_ref().is_some_and(|l| l.tls.is_some()),
            spec.leafnodes.as_ref().and_then(|l| l.tls.as_ref()),
        ),
    ];
    for (listener, on, tls) in listeners {
        if !on {
            continue;
        }
        let secret = if listener == "routes" {
            route_secret_name(spec, name)
        } else {
            tls_secret_name(name, listener, tls)
        };
        let (v, m) = tls_volume(listener, secret);
        volumes.push(v);
        mounts_.push(m);
    }
    (volumes, mounts_)
}

/// The nats container: the server with its config, probes on `/healthz`, lame duck before stop.
fn nats_container(
    spec: &NatsClusterSpec,
    plan: &ServerPlan,
    env: Vec<EnvVar>,
    mounts_: Vec<VolumeMount>,
) -> Container {
    let monitor = plan.monitor.port;
    Container {
        name: NATS_CONTAINER.into(),
        image: Some(nats_image(spec)),
        args: Some(vec![
            "--config".into(),
            format!("{}/{CONFIG_KEY}", mounts::CONFIG_DIR),
        ]),
        ports: Some(nats_ports(plan)),
        env: Some(env),
        resources: spec.resources.clone(),
        volume_mounts: Some(mounts_),
        readiness_probe: Some(healthz("/healthz", monitor, 10, 3)),
        liveness_probe: Some(healthz("/healthz?js-enabled-only=true", monitor, 30, 3)),
        startup_probe: Some(healthz("/healthz?js-enabled-only=true", monitor, 10, 90)),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(vec![
                        "nats-server".into(),
                        "--signal".into(),
                        format!("ldm={}", plan.pid_file),
                    ]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        security_context: Some(restricted_container()),
        ..Default::default()
    }
}

/// The pod's security context under the restricted Pod Security Standard.
fn restricted_pod() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(RUN_AS_USER),
        run_as_group: Some(RUN_AS_USER),
        fs_group: Some(RUN_AS_USER),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..Default::default()
    }
}

/// The Secret the route listener's certificate is mounted from: the named one, cert-manager's,
/// or the one the controller issues under its own route CA; all are `<name>-routes-tls` unless
/// secretRef names another.
pub fn route_secret_name(spec: &NatsClusterSpec, cluster: &str) -> String {
    match spec
        .routes
        .as_ref()
        .and_then(|r| r.tls.as_ref())
        .and_then(|t| t.secret_ref.as_ref())
    {
        Some(s) => s.name.clone(),
        None => format!("{cluster}-routes-tls"),
    }
}

/// The PVC template from jetstream.volumeClaimTemplate, carrying the server's labels so a
/// scale-down deletes only the PVCs it made (design §4.5).
fn claim_template(w: &ServerWorkload<'_>) -> Option<PersistentVolumeClaim> {
    let t = w.spec.jetstream.as_ref()?.volume_claim_template.as_ref()?;
    let mut labels = t
        .metadata
        .as_ref()
        .map(|m| m.labels.clone())
        .unwrap_or_default();
    labels.extend(labels::server(&w.owner.name, &w.plan.server_name));
    let annotations = t
        .metadata
        .as_ref()
        .map(|m| m.annotations.clone())
        .filter(|a| !a.is_empty());
    Some(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(DATA_VOLUME.into()),
            labels: Some(labels),
            annotations,
            ..Default::default()
        },
        spec: Some(t.spec.clone()),
        status: None,
    })
}

/// One server's StatefulSet, replicas 1, podTemplate merged over the rendered pod.
pub fn stateful_set(w: &ServerWorkload<'_>) -> Result<StatefulSet, ObjectsError> {
    let name = w.owner.name.as_str();
    let rendered = rendered_pod(w)?;
    let template = match w.spec.pod_template.as_ref() {
        Some(t) => pod_merge::merge(rendered, t).map_err(|reason| ObjectsError::PodTemplate {
            cluster: name.into(),
            reason,
        })?,
        None => rendered,
    };
    Ok(StatefulSet {
        metadata: w.owner.meta(
            w.plan.server_name.clone(),
            labels::server(name, &w.plan.server_name),
        ),
        spec: Some(StatefulSetSpec {
            replicas: Some(1),
            service_name: Some(names::headless_service(name)),
            selector: LabelSelector {
                match_labels: Some(labels::server_selector(name, &w.plan.server_name)),
                match_expressions: None,
            },
            template,
            volume_claim_templates: claim_template(w).map(|c| vec![c]),
            pod_management_policy: Some("Parallel".into()),
            ..Default::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests;
