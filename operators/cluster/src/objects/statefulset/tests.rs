use super::*;
use crate::objects::testing::{owner, spec};
use crate::plan::{ClusterInputs, KubernetesLayout, ResolvedLeafRemote, plan_servers};

fn build(yaml: &str) -> StatefulSet {
    build_with(yaml, vec![])
}

fn build_with(yaml: &str, leaf_remotes: Vec<ResolvedLeafRemote>) -> StatefulSet {
    let s = spec(yaml);
    let plans = plan_servers(
        &ClusterInputs {
            name: "demo",
            spec: &s,
            trust: None,
            account_preloads: vec![],
            leaf_remotes,
        },
        &KubernetesLayout {
            name: "demo".into(),
            namespace: "nats".into(),
            cluster_domain: "cluster.local".into(),
        },
    )
    .expect("plans");
    let o = owner();
    stateful_set(&ServerWorkload {
        owner: &o,
        spec: &s,
        plan: plans.last().expect("a plan"),
        revision: "abc",
    })
    .expect("sts")
}

fn pod(sts: &StatefulSet) -> (ObjectMeta, PodSpec) {
    let t = sts.spec.clone().expect("spec").template;
    (t.metadata.expect("meta"), t.spec.expect("pod"))
}

fn container<'a>(p: &'a PodSpec, name: &str) -> Option<&'a Container> {
    p.containers.iter().find(|c| c.name == name)
}

const BASE: &str = "version: 2.15.1\nreplicas: 3\n";

#[test]
fn one_replica_behind_the_headless_service_naming_the_revision() {
    let sts = build(BASE);
    assert_eq!(sts.metadata.name.as_deref(), Some("demo-2"));
    let s = sts.spec.clone().expect("spec");
    assert_eq!(s.replicas, Some(1));
    assert_eq!(s.service_name.as_deref(), Some("demo-headless"));
    assert_eq!(
        s.selector.match_labels.expect("sel")[labels::SERVER],
        "demo-2"
    );
    let (meta, _) = pod(&sts);
    assert_eq!(meta.annotations.expect("ann")[REVISION_ANNOTATION], "abc");
    assert_eq!(meta.labels.expect("labels")[labels::SERVER], "demo-2");
    assert_eq!(
        sts.metadata.owner_references.expect("owner")[0].controller,
        Some(true)
    );
}

#[test]
fn pods_meet_the_restricted_standard_and_mount_no_token() {
    let (_, p) = pod(&build(BASE));
    assert_eq!(p.automount_service_account_token, Some(false));
    let psc = p.security_context.clone().expect("psc");
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(
        psc.seccomp_profile.expect("seccomp").type_,
        "RuntimeDefault"
    );
    for c in &p.containers {
        let sc = c.security_context.clone().expect("sc");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{}", c.name);
        assert_eq!(
            sc.capabilities.expect("caps").drop,
            Some(vec!["ALL".to_string()])
        );
    }
}

#[test]
fn lame_duck_before_stop_within_the_grace_period() {
    let (_, p) = pod(&build(BASE));
    assert_eq!(p.termination_grace_period_seconds, Some(300));
    let nats = container(&p, NATS_CONTAINER).expect("nats");
    let cmd = nats
        .lifecycle
        .clone()
        .and_then(|l| l.pre_stop)
        .and_then(|h| h.exec)
        .and_then(|e| e.command)
        .expect("preStop");
    assert_eq!(
        cmd,
        vec!["nats-server", "--signal", "ldm=/var/run/nats/nats.pid"]
    );
}

#[rstest::rstest]
#[case(BASE, &["client", "cluster", "monitor"])]
#[case(
    "version: 2.15.1\nreplicas: 1\nauth: {trustRef: {name: t}}\ngateway: {discovery: Explicit, remotes: [{name: w, url: 'nats://w:7222'}], tls: {secretRef: {name: gw}}}\nleafnodes: {}\n",
    &["client", "cluster", "monitor", "gateway", "leafnodes"]
)]
fn ports_follow_the_rendered_listeners(#[case] yaml: &str, #[case] names: &[&str]) {
    let (_, p) = pod(&build(yaml));
    let got: Vec<String> = container(&p, NATS_CONTAINER)
        .and_then(|c| c.ports.clone())
        .expect("ports")
        .into_iter()
        .filter_map(|p| p.name)
        .collect();
    assert_eq!(got, names);
}

#[test]
fn gomemlimit_resources_and_probes() {
    let (_, p) = pod(&build(
        "version: 2.15.1\nreplicas: 1\nresources: {limits: {memory: 2Gi}, requests: {cpu: 500m}}\n",
    ));
    let nats = container(&p, NATS_CONTAINER).expect("nats");
    let env = nats.env.clone().expect("env");
    assert_eq!(env[0].name, "GOMEMLIMIT");
    assert_eq!(env[0].value.as_deref(), Some("1932735283B"));
    let r = nats.resources.clone().expect("resources");
    assert_eq!(r.limits.expect("limits")["memory"].0, "2Gi");
    let probe_path = |p: Option<Probe>| p.and_then(|p| p.http_get).and_then(|h| h.path);
    assert_eq!(
        probe_path(nats.readiness_probe.clone()).as_deref(),
        Some("/healthz")
    );
    assert!(
        probe_path(nats.liveness_probe.clone())
            .expect("liveness")
            .starts_with("/healthz")
    );
    assert_eq!(nats.image.as_deref(), Some("docker.io/library/nats:2.15.1"));
}

#[test]
fn a_bad_memory_limit_names_its_field() {
    let s = spec("version: 2.15.1\nreplicas: 1\nresources: {limits: {memory: 100m}}\n");
    // Planned from a valid spec; the bad limit is only in the spec the pod is built from.
    let plan = plan_servers(
        &ClusterInputs {
            name: "demo",
            spec: &spec("version: 2.15.1\nreplicas: 1\n"),
            trust: None,
            account_preloads: vec![],
            leaf_remotes: vec![],
        },
        &KubernetesLayout {
            name: "demo".into(),
            namespace: "nats".into(),
            cluster_domain: "cluster.local".into(),
        },
    )
    .expect("plans")
    .remove(0);
    let o = owner();
    let e = stateful_set(&ServerWorkload {
        owner: &o,
        spec: &s,
        plan: &plan,
        revision: "abc",
    })
    .unwrap_err();
    assert!(matches!(e, ObjectsError::Quantity { .. }), "{e:?}");
    assert!(
        e.to_string().contains("spec.resources.limits.memory"),
        "{e}"
    );
}

#[test]
fn the_image_is_pinned_by_digest_when_spec_image_names_one() {
    let d = format!("sha256:{}", "a".repeat(64));
    let s = spec(&format!(
        "version: 2.15.1\nreplicas: 1\nimage: {{repository: reg/nats, digest: '{d}'}}\n"
    ));
    assert_eq!(nats_image(&s), format!("reg/nats@{d}"));
}

#[rstest::rstest]
#[case(BASE, true, Some(exporter_defaults::MEMORY_LIMIT))]
#[case(
    "version: 2.15.1\nreplicas: 1\nexporter: {enabled: false}\n",
    false,
    None
)]
#[case(
    "version: 2.15.1\nreplicas: 1\nexporter: {resources: {limits: {memory: 64Mi}}}\n",
    true,
    Some("64Mi")
)]
fn the_exporter_sidecar(#[case] yaml: &str, #[case] present: bool, #[case] mem: Option<&str>) {
    let (_, p) = pod(&build(yaml));
    let e = container(&p, EXPORTER_CONTAINER);
    assert_eq!(e.is_some(), present);
    if let Some(e) = e {
        let image = e.image.clone().expect("image");
        assert!(image.contains("@sha256:"), "{image}");
        let args = e.args.clone().expect("args");
        assert_eq!(
            args.last().map(String::as_str),
            Some("http://127.0.0.1:8222")
        );
        let limit = e
            .resources
            .clone()
            .and_then(|r| r.limits)
            .and_then(|l| l.get("memory").cloned())
            .map(|q| q.0);
        assert_eq!(limit.as_deref(), mem);
    }
}

#[test]
fn the_default_exporter_image_has_a_real_digest() {
    let (_, digest) = DEFAULT_EXPORTER_IMAGE
        .split_once("@sha256:")
        .expect("digest");
    assert_eq!(digest.len(), 64);
    assert!(digest.chars().all(|c| c.is_ascii_hexdigit()));
}

#[rstest::rstest]
#[case(BASE, true)]
#[case(
    "version: 2.15.1\nreplicas: 1\npodTemplate: {spec: {affinity: {nodeAffinity: {}}}}\n",
    false
)]
fn pods_prefer_distinct_nodes_unless_pod_template_sets_affinity(
    #[case] yaml: &str,
    #[case] spread: bool,
) {
    let (_, p) = pod(&build(yaml));
    let anti = p.affinity.and_then(|a| a.pod_anti_affinity);
    assert_eq!(anti.is_some(), spread);
    if let Some(a) = anti {
        let t = &a
            .preferred_during_scheduling_ignored_during_execution
            .expect("preferred")[0];
        assert_eq!(t.pod_affinity_term.topology_key, "kubernetes.io/hostname");
        assert!(
            a.required_during_scheduling_ignored_during_execution
                .is_none()
        );
    }
}

fn volume<'a>(p: &'a PodSpec, name: &str) -> Option<&'a Volume> {
    p.volumes.as_ref()?.iter().find(|v| v.name == name)
}

#[test]
fn tls_secrets_mount_where_the_plan_reads_them() {
    let (_, p) = pod(&build(
        "version: 2.15.1\nreplicas: 1\ntls: {secretRef: {name: client-cert}}\nauth: {trustRef: {name: t}}\ngateway: {discovery: Explicit, remotes: [{name: w, url: 'nats://w:7222'}], tls: {secretRef: {name: gw-cert}}}\n",
    ));
    let secret = |v: &str| {
        volume(&p, v)
            .and_then(|v| v.secret.clone())
            .and_then(|s| s.secret_name)
    };
    assert_eq!(secret("tls-client").as_deref(), Some("client-cert"));
    assert_eq!(secret("tls-routes").as_deref(), Some("demo-routes-tls"));
    assert_eq!(secret("tls-gateway").as_deref(), Some("gw-cert"));
    // The route CA's key is mounted by no pod.
    assert!(p.volumes.iter().flatten().all(|v| {
        v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) != Some("demo-routes-ca")
    }));
    let nats = container(&p, NATS_CONTAINER).expect("nats");
    let mount = |v: &str| {
        nats.volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == v)
            .map(|m| m.mount_path.clone())
    };
    assert_eq!(mount("tls-routes").as_deref(), Some("/etc/nats-tls/routes"));
    assert_eq!(mount("config").as_deref(), Some("/etc/nats"));
    assert_eq!(mount("data").as_deref(), Some("/data"));
}

#[test]
fn route_tls_off_mounts_no_route_secret() {
    let (_, p) = pod(&build(
        "version: 2.15.1\nreplicas: 1\nroutes: {tls: {enabled: false}}\n",
    ));
    assert!(volume(&p, "tls-routes").is_none());
}

#[test]
fn leaf_remotes_are_projected_beside_nats_conf() {
    let sts = build_with(
        "version: 2.15.1\nreplicas: 1\nleafRemotes: [{connectionRef: {name: a}}]\n",
        vec![ResolvedLeafRemote {
            index: 0,
            urls: vec!["nats-leaf://hub:7422".into()],
            has_credentials: true,
            has_ca: true,
            local_account: None,
        }],
    );
    let (_, p) = pod(&sts);
    let sources = volume(&p, CONFIG_VOLUME)
        .and_then(|v| v.projected.clone())
        .and_then(|p| p.sources)
        .expect("sources");
    assert_eq!(
        sources[0].config_map.as_ref().map(|c| c.name.as_str()),
        Some("demo-0-config")
    );
    let secret = sources[1].secret.clone().expect("secret");
    assert_eq!(secret.name, "demo-leaf-remotes");
    let paths: Vec<String> = secret
        .items
        .expect("items")
        .into_iter()
        .map(|i| i.path)
        .collect();
    assert_eq!(
        paths,
        vec![
            "leaf-remotes/remote-0.creds",
            "leaf-remotes/remote-0-ca.crt"
        ]
    );
    // Without remotes, no Secret is projected.
    let (_, p) = pod(&build(BASE));
    let sources = volume(&p, CONFIG_VOLUME)
        .and_then(|v| v.projected.clone())
        .and_then(|p| p.sources)
        .expect("sources");
    assert_eq!(sources.len(), 1);
}

#[test]
fn the_claim_template_passes_through_with_the_server_labels() {
    let sts = build(
        "version: 2.15.1\nreplicas: 1\njetstream:\n  volumeClaimTemplate:\n    metadata: {labels: {team: a}}\n    spec: {storageClassName: fast, resources: {requests: {storage: 10Gi}}}\n",
    );
    let claims = sts
        .spec
        .clone()
        .and_then(|s| s.volume_claim_templates)
        .expect("claims");
    assert_eq!(claims.len(), 1);
    let l = claims[0].metadata.labels.clone().expect("labels");
    assert_eq!(l[labels::SERVER], "demo-0");
    assert_eq!(l["team"], "a");
    assert_eq!(
        claims[0]
            .spec
            .clone()
            .and_then(|s| s.storage_class_name)
            .as_deref(),
        Some("fast")
    );
    let (_, p) = pod(&sts);
    assert!(
        volume(&p, DATA_VOLUME).is_none(),
        "the claim provides the data volume"
    );
    let (_, p) = pod(&build(BASE));
    assert!(
        volume(&p, DATA_VOLUME)
            .and_then(|v| v.empty_dir.clone())
            .is_some()
    );
}

#[test]
fn pod_template_merges_over_the_rendered_pod() {
    let sts = build(
        "version: 2.15.1\nreplicas: 1\npodTemplate:\n  metadata: {labels: {team: a}, annotations: {note: x}}\n  spec:\n    priorityClassName: high\n    containers:\n    - name: nats\n      env: [{name: EXTRA, value: '1'}]\n    - name: extra\n      image: busybox\n",
    );
    let (meta, p) = pod(&sts);
    let l = meta.labels.expect("labels");
    assert_eq!(l["team"], "a");
    assert_eq!(l[labels::SERVER], "demo-0");
    let a = meta.annotations.expect("ann");
    assert_eq!(a["note"], "x");
    assert_eq!(a[REVISION_ANNOTATION], "abc");
    assert_eq!(p.priority_class_name.as_deref(), Some("high"));
    let nats = container(&p, NATS_CONTAINER).expect("nats");
    assert!(nats.image.is_some(), "merged, not replaced");
    assert!(nats.env.iter().flatten().any(|e| e.name == "EXTRA"));
    assert!(container(&p, "extra").is_some());
}
