//! The chart against a real kube-apiserver (1.20, the sim's; the real RBAC and admission chain, no
//! kubelet): `helm install`, `helm upgrade` to a changed values file and to changed CRDs, `helm
//! test` (the test plays the kubelet for its pod), and `helm uninstall`, after which nothing the
//! chart made remains: not an object, not a CRD (the upgrade's values drop `crds.keep`), not the
//! release's own Secrets.
//!
//! kube-apiserver 1.20 predates x-kubernetes-validations: its OpenAPI refuses the field and its
//! server-side apply cannot type it, so Helm is run with `--disable-openapi-validation` and
//! client-side apply here (the apiserver drops the field on write, as `install_crds` relies on),
//! and the values turn the chart's Kubernetes version check off. On 1.34 and later neither is
//! needed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::chart::{self, Helm, NAMESPACE, RELEASE, release_args};
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::Value;
use sim::apiserver::ApiServer;
use sim::testkit::wait_until;

const SELECTOR: &str = "app.kubernetes.io/instance=nats-operators";

/// Every kind the chart writes, as kube-apiserver 1.20 serves them (PodDisruptionBudget from
/// policy/v1beta1 there, as the chart renders it for a server without policy/v1).
const KINDS: [(&str, &str, &str, &str); 11] = [
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    ),
    ("apps", "v1", "Deployment", "deployments"),
    ("", "v1", "Service", "services"),
    ("", "v1", "ServiceAccount", "serviceaccounts"),
    ("", "v1", "Pod", "pods"),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
    ),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
    ),
    (
        "policy",
        "v1beta1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    ),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
    ),
];

fn resource(kind: &str) -> ApiResource {
    let (group, version, kind, plural) = KINDS
        .iter()
        .find(|k| k.2 == kind)
        .unwrap_or_else(|| panic!("no kind {kind}"));
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Every object of the release on the server, as `Kind namespace/name`.
async fn on_the_server(client: &Client) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, _, kind, _) in KINDS {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind));
        let list = api
            .list(&ListParams::default().labels(SELECTOR))
            .await
            .unwrap_or_else(|e| panic!("listing {kind}: {e}"));
        for o in list.items {
            out.insert(match o.metadata.namespace.as_deref() {
                Some(ns) => format!("{kind} {ns}/{}", o.metadata.name.unwrap_or_default()),
                None => format!("{kind} {}", o.metadata.name.unwrap_or_default()),
            });
        }
    }
    out
}

/// What an offline render of `values` says the release holds (hooks aside: `helm test` makes its
/// pod, and deletes it once it succeeded).
fn rendered(helm: &Helm, values: &[&Path]) -> BTreeSet<String> {
    let text = helm
        .template(values, RELEASE, NAMESPACE)
        .unwrap_or_else(|e| panic!("{e}"));
    chart::documents(&text)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .filter(|d| d.value["metadata"]["annotations"]["helm.sh/hook"].is_null())
        .map(|d| d.describe())
        .collect()
}

/// The chart copied with one CRD changed (natsconnections' short name), to prove that `helm
/// upgrade` to the real chart brings the CRD back to what the types generate.
fn chart_with_an_older_crd(dir: &Path) -> PathBuf {
    let copy = dir.join("nats-operators");
    copy_dir(&chart::chart_dir(), &copy);
    let crd = copy.join("files/crds/natsconnections.nats.mikluko.io.yaml");
    let text = std::fs::read_to_string(&crd).expect("the CRD file");
    assert!(text.contains("    - natsconn\n"));
    std::fs::write(
        &crd,
        text.replace("    - natsconn\n", "    - natsconnold\n"),
    )
    .expect("written");
    copy
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

async fn short_names(client: &Client) -> Value {
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("CustomResourceDefinition"));
    let crd = api
        .get("natsconnections.nats.mikluko.io")
        .await
        .expect("the NatsConnection CRD");
    crd.data["spec"]["names"]["shortNames"].clone()
}

fn diff(have: &BTreeSet<String>, want: &BTreeSet<String>) -> String {
    format!(
        "missing on the server: {:#?}\nnot in the render: {:#?}",
        want.difference(have).collect::<Vec<_>>(),
        have.difference(want).collect::<Vec<_>>()
    )
}

/// `helm test`, with the test playing the kubelet: once the hook's pod exists, its status says
/// it succeeded. Returns the pod's arguments (the URLs it would fetch).
async fn helm_test(helm: &Helm, client: &Client, kubeconfig: &Path) -> Vec<String> {
    let child = helm
        .spawn_test(RELEASE, NAMESPACE, kubeconfig)
        .expect("helm.py test starts");
    let pods: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &resource("Pod"));
    let name = format!("{RELEASE}-test");
    let pod = wait_until(
        "the helm test pod",
        Duration::from_secs(30),
        || async { pods.get_opt(&name).await.ok().flatten() },
        Option::is_some,
    )
    .await
    .expect("the test pod");
    let args: Vec<String> =
        serde_json::from_value(pod.data["spec"]["containers"][0]["args"].clone())
            .unwrap_or_default();
    pods.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .expect("the test pod's status written");
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("joined")
        .expect("helm.py test ran");
    assert!(
        out.status.success(),
        "helm test failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until(
        "the succeeded test pod deleted (hook-succeeded)",
        Duration::from_secs(30),
        || async { matches!(pods.get_opt(&name).await, Ok(None)) },
        |gone| *gone,
    )
    .await;
    args
}

#[tokio::test]
async fn install_upgrade_test_and_uninstall_leave_nothing_behind() {
    let Some(helm) = Helm::find() else { return };
    let api = ApiServer::kube_1_20()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for ns in [NAMESPACE, "apps"] {
        api.create_namespace(ns)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let client = api.client();
    let kubeconfig = api.kubeconfig().display().to_string();
    let install_values = chart::testdata_dir().join("sim-install-values.yaml");
    let upgrade_values = chart::testdata_dir().join("sim-upgrade-values.yaml");
    let scratch = tempfile::tempdir().expect("temp dir");
    let older = chart_with_an_older_crd(scratch.path());

    // Install (from the chart with the older CRD): the server holds what the render says.
    let values = [install_values.display().to_string()];
    let older_path = older.display().to_string();
    helm.run_args(&release_args("install", &older_path, &kubeconfig, &values))
        .unwrap_or_else(|e| panic!("helm install: {e}"));
    let want = rendered(&helm, &[&install_values]);
    let have = on_the_server(&client).await;
    assert_eq!(have, want, "after install: {}", diff(&have, &want));
    assert_eq!(
        want.iter()
            .filter(|o| o.starts_with("CustomResourceDefinition"))
            .count(),
        16
    );
    assert_eq!(
        short_names(&client).await,
        serde_json::json!(["natsconnold"])
    );

    // Upgrade to the real chart and changed values: the auth controller goes, Roles replace the
    // ClusterRoles, the cluster controller scales, the CRD is the types' again.
    let values = [
        install_values.display().to_string(),
        upgrade_values.display().to_string(),
    ];
    let chart_path = chart::chart_dir().display().to_string();
    helm.run_args(&release_args("upgrade", &chart_path, &kubeconfig, &values))
        .unwrap_or_else(|e| panic!("helm upgrade: {e}"));
    let want = rendered(&helm, &[&install_values, &upgrade_values]);
    let have = on_the_server(&client).await;
    assert_eq!(have, want, "after upgrade: {}", diff(&have, &want));
    assert!(!have.iter().any(|o| o.contains("-auth")), "{have:#?}");
    assert!(
        have.contains("Role apps/nats-operators-cluster"),
        "{have:#?}"
    );
    assert_eq!(short_names(&client).await, serde_json::json!(["natsconn"]));
    let deployments: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &resource("Deployment"));
    let cluster = deployments
        .get("nats-operators-cluster")
        .await
        .expect("the cluster controller's Deployment");
    assert_eq!(cluster.data["spec"]["replicas"], 3);
    let image = cluster.data["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    assert_eq!(
        image,
        "localhost/nats-operators/cluster-controller@sha256:00000000000000000000000000000000000000000000000000000000000000aa"
    );

    // helm test: its pod asks every enabled controller's metrics Service.
    let args = helm_test(&helm, &client, api.kubeconfig()).await;
    let urls: Vec<&String> = args.iter().filter(|a| a.starts_with("http://")).collect();
    assert_eq!(
        urls,
        [
            "http://nats-operators-cluster-metrics.nats-system.svc:8080/metrics",
            "http://nats-operators-jetstream-metrics.nats-system.svc:8080/metrics"
        ]
    );

    // Uninstall: nothing remains.
    helm.run_args(&[
        "uninstall",
        RELEASE,
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        NAMESPACE,
        "--wait",
    ])
    .unwrap_or_else(|e| panic!("helm uninstall: {e}"));
    wait_until(
        "every object of the release gone",
        Duration::from_secs(60),
        || on_the_server(&client),
        BTreeSet::is_empty,
    )
    .await;
    let secrets: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Secret"), "secrets"),
    );
    let releases = secrets
        .list(&ListParams::default().labels("owner=helm,name=nats-operators"))
        .await
        .expect("listing Secrets");
    assert!(
        releases.items.is_empty(),
        "the release's Secrets remain: {:?}",
        releases
            .items
            .iter()
            .map(|s| s.metadata.name.clone())
            .collect::<Vec<_>>()
    );
}
