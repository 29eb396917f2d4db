//! The harness against the real binaries: it starts, serves the admin, and leaves no process behind.

use std::path::Path;

use k8s_openapi::api::core::v1::{Namespace, Pod, ResourceQuota};
use kube::Api;
use kube::api::PostParams;
use nix::sys::signal::kill;
use nix::unistd::Pid;

use super::binaries::{apiextensions_binary_in, binaries_in};
use super::launch::KUBE_120_APIS;
use super::{ApiServer, ApiServerError, ApiextensionsUnavailable, Flavor, apiextensions_binary};

fn alive(pid: u32) -> bool {
    // Signal 0 only checks existence; the PIDs are reaped on drop, so a dead one is gone (ESRCH).
    kill(Pid::from_raw(pid as i32), None).is_ok()
}

async fn version(server: &ApiServer) -> String {
    let mut request = http::Request::new(Vec::new());
    *request.uri_mut() = "/version".parse().expect("static path");
    let body = server
        .client()
        .request_text(request)
        .await
        .expect("GET /version");
    let v: serde_json::Value = serde_json::from_str(&body).expect("version JSON");
    v["gitVersion"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn an_empty_cache_names_the_install_script() {
    let root = tempfile::tempdir().expect("temp dir");
    let err = binaries_in(root.path(), false).expect_err("nothing installed");
    assert!(
        matches!(err, ApiServerError::BinaryMissing { what: "etcd", .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("scripts/install-apiserver.sh"),
        "{err}"
    );

    let err = apiextensions_binary_in(root.path(), false).expect_err("nothing installed");
    assert!(
        matches!(err, ApiextensionsUnavailable::NotInstalled { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("scripts/install-apiserver.sh"),
        "{err}"
    );
}

#[test]
fn a_failed_apiextensions_build_is_a_reason_not_a_missing_install() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("apiextensions-apiserver-1.36");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("build-failed"),
        "build from Debian sid failed: undefined: foo\n",
    )
    .expect("write");
    let err = apiextensions_binary_in(root.path(), false).expect_err("not built");
    match &err {
        ApiextensionsUnavailable::BuildFailed { reason, .. } => {
            assert!(reason.ends_with("undefined: foo"), "{err}")
        }
        other => panic!("expected BuildFailed, got {other}"),
    }
}

#[test]
fn a_present_kube_apiserver_is_found() {
    let root = tempfile::tempdir().expect("temp dir");
    let bin = root.path().join("kube-apiserver-1.20").join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    for name in ["etcd", "kube-apiserver"] {
        std::fs::write(bin.join(name), "#!/bin/sh\n").expect("write");
        set_executable(&bin.join(name));
    }
    let found = binaries_in(root.path(), false).expect("both present");
    assert_eq!(found.kube_apiserver, bin.join("kube-apiserver"));
    assert_eq!(found.etcd, bin.join("etcd"));
}

fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[tokio::test]
async fn kube_1_20_serves_the_admin_and_dies_with_its_handle() {
    let server = ApiServer::kube_1_20()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(version(&server).await, "v1.20.2");
    server
        .create_namespace("harness")
        .await
        .expect("create namespace");
    let ns: Api<Namespace> = Api::all(server.client());
    assert!(
        ns.get_opt("harness")
            .await
            .expect("get namespace")
            .is_some()
    );
    assert!(server.kubeconfig().is_file());

    let (etcd, apiserver) = server.pids();
    let dir = server.dir().expect("instance dir").to_path_buf();
    assert!(alive(etcd) && alive(apiserver));
    drop(server);
    assert!(!alive(etcd), "etcd {etcd} survived the drop");
    assert!(
        !alive(apiserver),
        "kube-apiserver {apiserver} survived the drop"
    );
    assert!(!dir.exists(), "instance dir {} left behind", dir.display());
}

#[tokio::test]
async fn kube_1_20_serves_only_the_api_groups_of_the_tier_and_enforces_no_quota() {
    let server = ApiServer::kube_1_20()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let client = server.client();
    let mut served: Vec<String> = client
        .list_core_api_versions()
        .await
        .expect("GET /api")
        .versions;
    for group in client.list_api_groups().await.expect("GET /apis").groups {
        served.extend(group.versions.into_iter().map(|v| v.group_version));
    }
    served.sort();
    let mut wanted: Vec<String> = KUBE_120_APIS.iter().map(|gv| gv.to_string()).collect();
    wanted.sort();
    assert_eq!(served, wanted);

    // ResourceQuota admission is off: a quota of no Pods refuses none.
    server.create_namespace("quota").await.expect("namespace");
    let quota: ResourceQuota = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "none"},
        "spec": {"hard": {"pods": "0"}},
    }))
    .expect("a quota");
    Api::<ResourceQuota>::namespaced(client.clone(), "quota")
        .create(&PostParams::default(), &quota)
        .await
        .expect("quota created");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "none"}]},
    }))
    .expect("a pod");
    Api::<Pod>::namespaced(client, "quota")
        .create(&PostParams::default(), &pod)
        .await
        .expect("a Pod admitted beside a quota of none");
}

#[tokio::test]
async fn two_instances_run_side_by_side() {
    let (a, b) = tokio::join!(ApiServer::kube_1_20(), ApiServer::kube_1_20());
    let (a, b) = (
        a.unwrap_or_else(|e| panic!("{e}")),
        b.unwrap_or_else(|e| panic!("{e}")),
    );
    assert_ne!(a.url(), b.url());
    a.create_namespace("only-in-a")
        .await
        .expect("create namespace");
    let in_b: Api<Namespace> = Api::all(b.client());
    assert!(
        in_b.get_opt("only-in-a")
            .await
            .expect("get namespace")
            .is_none(),
        "instances share etcd"
    );
}

#[tokio::test]
async fn a_panicking_test_still_kills_its_servers() {
    let server = ApiServer::kube_1_20()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (etcd, apiserver) = server.pids();
    let dir = server.dir().expect("instance dir").to_path_buf();
    let outcome = std::panic::AssertUnwindSafe(async move {
        let _held = server;
        panic!("a failing test");
    });
    let joined = tokio::spawn(futures::FutureExt::catch_unwind(outcome))
        .await
        .expect("join");
    assert!(joined.is_err(), "the body panicked");
    assert!(
        !alive(etcd) && !alive(apiserver),
        "processes survived a panic"
    );
    // The logs of a failed test are kept for reading; this one is ours to clean.
    assert!(
        dir.join("server.log").is_file(),
        "logs of a panicking test are kept"
    );
    assert!(!dir.join("etcd-data").exists(), "etcd data is not kept");
    std::fs::remove_dir_all(&dir).expect("clean kept dir");
}

#[tokio::test]
async fn apiextensions_1_36_serves_crds_where_it_is_built() {
    match apiextensions_binary() {
        Err(ApiextensionsUnavailable::BuildFailed { reason, .. }) => {
            eprintln!("SKIP apiextensions-apiserver 1.36 harness test: {reason}");
            return;
        }
        Err(e @ ApiextensionsUnavailable::NotInstalled { .. }) => panic!("{e}"),
        Ok(_) => {}
    }
    let server = ApiServer::start(Flavor::Apiextensions136)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(version(&server).await.starts_with("v1.36."));
    let (etcd, apiserver) = server.pids();
    drop(server);
    assert!(!alive(etcd) && !alive(apiserver));
}

/// NatsClusters in the namespace `nats` of `server`, once `crds` are installed and judged.
async fn judged_clusters(
    server: &ApiServer,
    crds: &[k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition],
) -> Api<kube::api::DynamicObject> {
    server
        .install_crds(crds)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    server
        .create_namespace("nats")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Api::namespaced_with(server.client(), "nats", &nats_clusters(crds))
}

/// The API resource of the NatsCluster CRD among `crds`.
fn nats_clusters(
    crds: &[k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition],
) -> kube::api::ApiResource {
    let crd = crds
        .iter()
        .find(|c| c.spec.names.kind == "NatsCluster")
        .expect("the NatsCluster CRD");
    super::crd_api_resource(crd)
}

/// On kube-apiserver 1.20 the CRDs' CEL rules are judged at apply, by every way of writing: a
/// NatsCluster with a leaf node listener and no auth is refused at create, an update breaking a
/// rule is refused, status writes are not judged, and an update of an object that already broke
/// a rule (stored before the judge was in force) is let through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_1_20_judges_the_crds_cel_rules_at_apply() {
    use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
    let server = ApiServer::kube_1_20()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let crds = nats_api::crds::all();
    let api = judged_clusters(&server, &crds).await;
    let cluster = |name: &str, spec: serde_json::Value| -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.nats.mikluko.io/v1beta1",
            "kind": "NatsCluster",
            "metadata": {"name": name, "namespace": "nats"},
            "spec": spec,
        }))
        .expect("an object")
    };
    let ok = serde_json::json!({"version": "2.15.1", "replicas": 3});
    let leaf = serde_json::json!({"version": "2.15.1", "replicas": 3, "leafnodes": {}});

    let refused = api
        .create(&PostParams::default(), &cluster("leaf", leaf.clone()))
        .await
        .expect_err("a leaf listener without auth is refused");
    assert!(
        refused.to_string().contains("CEL rules"),
        "refused by the judge: {refused}"
    );

    api.create(&PostParams::default(), &cluster("demo", ok))
        .await
        .expect("a valid NatsCluster is stored");
    let broken = api
        .patch(
            "demo",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&cluster("demo", leaf.clone())),
        )
        .await
        .expect_err("an update breaking a rule is refused");
    assert!(broken.to_string().contains("CEL rules"), "{broken}");
    let status = api
        .patch_status(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"observedGeneration": 1}})),
        )
        .await;
    assert!(status.is_ok(), "status is not judged: {status:?}");

    // Stored by a server with no judge (as one before CEL would), then updated: ratcheting.
    let bare = ApiServer::kube_1_20()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    bare.install_crds_unjudged(&crds)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    bare.create_namespace("nats")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let bare_api: Api<DynamicObject> =
        Api::namespaced_with(bare.client(), "nats", &nats_clusters(&crds));
    bare_api
        .create(&PostParams::default(), &cluster("leaf", leaf.clone()))
        .await
        .expect("no judge: stored");
    bare.install_crds(&crds)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut relabelled = cluster("leaf", leaf);
    relabelled.metadata.labels = Some([("team".to_string(), "a".to_string())].into());
    bare_api
        .patch(
            "leaf",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&relabelled),
        )
        .await
        .expect("what the stored object already failed does not refuse its update");
    assert!(
        bare_api
            .create(
                &PostParams::default(),
                &cluster(
                    "leaf-2",
                    serde_json::json!({"version": "2.15.1", "replicas": 3, "leafnodes": {}})
                )
            )
            .await
            .is_err(),
        "judged from then on"
    );
}

/// A server over a seed: the seed is made once (a second ask finds it), and a server booted
/// over a copy serves every CRD's kind at once, takes the CEL judge as a fresh one does, and
/// writes nothing back to the seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_over_a_seed_serves_every_crd_and_takes_the_judge() {
    use kube::api::{DynamicObject, ListParams};
    let crds = nats_api::crds::all();
    let bins = super::binaries().unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().expect("a seeds directory");
    let made = super::seed::seed(&bins, "test", &crds, root.path())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .dir;
    let mark = |dir: &Path| std::fs::metadata(dir.join("seeded")).and_then(|m| m.modified());
    let first = mark(&made).expect("the seed is marked made");
    let again = super::seed::seed(&bins, "test", &crds, root.path())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .dir;
    assert_eq!(again, made);
    assert_eq!(
        mark(&again).ok(),
        Some(first),
        "the seed was not made again"
    );

    let server = ApiServer::launch_in(Flavor::Kube120, &std::env::temp_dir(), Some(&made))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for crd in &crds {
        let api: Api<DynamicObject> = Api::all_with(server.client(), &super::crd_api_resource(crd));
        api.list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("{} is served: {e}", crd.spec.names.kind));
    }
    let api = judged_clusters(&server, &crds).await;
    let leaf: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "cluster.nats.mikluko.io/v1beta1",
        "kind": "NatsCluster",
        "metadata": {"name": "leaf", "namespace": "nats"},
        "spec": {"version": "2.15.1", "replicas": 3, "leafnodes": {}},
    }))
    .expect("an object");
    let refused = api
        .create(&PostParams::default(), &leaf)
        .await
        .expect_err("a leaf listener without auth is refused");
    assert!(refused.to_string().contains("CEL rules"), "{refused}");
    drop(server);
    // The seed is as it was made: the namespace went to the instance's copy only.
    let second = ApiServer::launch_in(Flavor::Kube120, &std::env::temp_dir(), Some(&made))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let namespaces: Api<Namespace> = Api::all(second.client());
    assert!(
        namespaces.get_opt("nats").await.expect("a GET").is_none(),
        "the first instance's namespace is not in the seed"
    );
}
