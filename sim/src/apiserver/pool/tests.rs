//! The pool against the real binaries: a pair lent, written to and let go comes back to the
//! next borrower as it was lent; a panicking borrower's pair is retired, its logs kept; every
//! pair stops when the pool does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{
    Namespace, Secret, Service, ServiceAccount, ServicePort, ServiceSpec,
};
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use nix::sys::signal::kill;
use nix::unistd::Pid;

use super::{Pool, View};
use crate::apiserver::{ApiServer, binaries, launch, seed};
use crate::wait::poll;

const DEADLINE: Duration = Duration::from_secs(60);

fn alive(pid: u32) -> bool {
    kill(Pid::from_raw(pid as i32), None).is_ok()
}

/// The seed of every CRD, as the API tier's servers boot over it.
async fn seed_dir() -> (seed::Seed, Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>){
    let crds = nats_api::crds::all();
    let bins = binaries().unwrap_or_else(|e| panic!("{e}"));
    let seed = seed::seed(
        &bins,
        &launch::kube_120_runtime_config(),
        &crds,
        &seed::seeds_root(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    (seed, crds)
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    }
}

/// What a test leaves: a namespace with a Secret and a ServiceAccount that asked something, a
/// Service holding a cluster IP, the CEL judge's webhook; the ServiceAccount's user.
async fn write_what_a_test_writes(
    api: &ApiServer,
    crds: &[k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition],
) -> String {
    api.install_crds(crds)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    api.create_namespace("lent")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let client = api.client();
    let secret = Secret {
        metadata: meta("left", Some("lent")),
        ..Secret::default()
    };
    create(&client, secret).await;
    let service = Service {
        metadata: meta("holds-an-ip", Some("lent")),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 4222,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    create(&client, service).await;
    let account = ServiceAccount {
        metadata: meta("probe", Some("lent")),
        ..ServiceAccount::default()
    };
    create(&client, account).await;
    let sa = api
        .service_account_identity("lent", "probe")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let _refused = Api::<Secret>::namespaced(sa.client(), "lent")
        .list(&ListParams::default())
        .await;
    let user = sa.username();
    assert!(
        !api.audit_of(&user)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty()
    );
    user
}

/// Creates `obj` in the namespace `lent`, as the admin.
async fn create<K>(client: &kube::Client, obj: K)
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), "lent")
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating a {}: {e}", K::kind(&())));
}

async fn names<K>(api: Api<K>) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .collect()
}

/// A pool served in the test's runtime, in a temp directory of its own, until [`Served::stop`].
struct Served {
    socket: PathBuf,
    view: View,
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<()>,
    parent: tempfile::TempDir,
}

impl Served {
    fn start() -> Self {
        let parent = tempfile::tempdir().expect("temp dir");
        let pool = Pool::open(parent.path()).unwrap_or_else(|e| panic!("{e}"));
        let (socket, view) = (pool.socket(), pool.view());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(pool.serve_until(async {
            let _ = stopped.await;
        }));
        Served {
            socket,
            view,
            stop,
            serving,
            parent,
        }
    }

    /// Stops the pool; its parent directory, which holds what a retired pair kept.
    async fn stop(self) -> tempfile::TempDir {
        let _ = self.stop.send(());
        self.serving.await.expect("the pool served");
        self.parent
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lent_pair_comes_back_to_the_next_borrower_as_it_was_lent() {
    let pool = Served::start();
    let (socket, view) = (pool.socket.clone(), pool.view.clone());
    let (seed, crds) = seed_dir().await;

    let first = ApiServer::lent(&socket, &seed.dir)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(first.is_lent());
    let client = first.client();
    let namespaces_before = names(Api::<Namespace>::all(client.clone())).await;
    let services_before = names(Api::<Service>::all(client.clone())).await;
    let user = write_what_a_test_writes(&first, &crds).await;
    let pids = first.pids();
    drop(first);
    poll("the pair back in the pool, reset", DEADLINE, || async {
        Ok((view.idle() == 1).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    let second = ApiServer::lent(&socket, &seed.dir)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(second.pids(), pids, "the same pair lent again");
    let client = second.client();
    assert_eq!(
        names(Api::<Namespace>::all(client.clone())).await,
        namespaces_before
    );
    assert_eq!(
        names(Api::<Service>::all(client.clone())).await,
        services_before
    );
    assert!(
        names(Api::<Secret>::all(client.clone()))
            .await
            .iter()
            .all(|n| n != "left")
    );
    assert_eq!(
        names(Api::<ValidatingWebhookConfiguration>::all(client.clone())).await,
        Vec::<String>::new(),
        "the first borrower's CEL judge is gone"
    );
    assert!(
        second
            .audit_of(&user)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty(),
        "the audit log read from where the second lease began"
    );
    // What the first wrote, written again: its names and its cluster IP are free.
    let user_again = write_what_a_test_writes(&second, &crds).await;
    assert_eq!(user_again, user);
    drop(second);

    let _parent = pool.stop().await;
    assert_eq!(view.booted(), 1, "one pair for both leases");
    assert!(
        !alive(pids.0) && !alive(pids.1),
        "the pool's pair stopped with it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_borrowers_pair_is_retired_with_its_logs_kept() {
    let pool = Served::start();
    let (socket, view) = (pool.socket.clone(), pool.view.clone());
    let (seed, _crds) = seed_dir().await;

    let (tx, rx) = std::sync::mpsc::channel::<((u32, u32), PathBuf)>();
    let (sock, dir) = (socket.clone(), seed.dir.clone());
    let failing = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        runtime.block_on(async move {
            let api = ApiServer::lent(&sock, &dir)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let root = api.dir().map(Path::to_path_buf).unwrap_or_default();
            let _ = tx.send((api.pids(), root));
            panic!("a failing test, holding its pair");
        })
    });
    assert!(failing.join().is_err(), "the borrower panicked");
    let (pids, root) = rx.recv().expect("the failing borrower's pair");
    assert!(
        !alive(pids.0) && !alive(pids.1),
        "retired: stopped before the answer"
    );
    assert_eq!(view.retired(), 1);
    assert!(
        root.join("server.log").exists() && root.join("audit-policy.yaml").exists(),
        "the retired pair's directory kept: {}",
        root.display()
    );
    assert!(!root.join("etcd-data").exists(), "without etcd's data");

    // The next borrower gets another pair.
    let next = ApiServer::lent(&socket, &seed.dir)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(next.pids(), pids);
    drop(next);
    let _parent = pool.stop().await;
    assert!(
        root.join("server.log").exists(),
        "kept after the pool ended"
    );
    let _ = std::fs::remove_dir_all(&root);
}
