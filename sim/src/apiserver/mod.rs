//! A real API server for the API test tier: etcd plus either a genuine kube-apiserver 1.20 (full core API,
//! no CEL) or the standalone apiextensions-apiserver 1.36 (enforces CEL, serves CRDs only), on 127.0.0.1
//! with free ports, a temp directory and PKI of its own per instance.
//!
//! ```no_run
//! # async fn f() -> Result<(), sim::apiserver::ApiServerError> {
//! let server = sim::apiserver::ApiServer::start(sim::apiserver::Flavor::Kube120).await?;
//! let client = server.client(); // admin (system:masters) via client certificate
//! # Ok(()) }
//! ```
//!
//! Both processes are killed by PID when the [`ApiServer`] is dropped (pass, fail or panic). After a panic
//! the instance directory (logs, kubeconfig) is kept and its path printed. The binaries come from
//! `scripts/install-apiserver.sh`; see [`binaries`].
//!
//! Here: the running pair and its start (with fresh ports when one was lost); [`launch`] one
//! attempt at starting it; [`crds`] installing CRDs and the CEL judge ([`cel_judge`]) over them;
//! [`identity`] a ServiceAccount's token and kubeconfig, to be someone other than the admin;
//! [`access`] what RBAC allows one, asked of the authorizer; [`audit`] what ServiceAccounts asked
//! and what they were answered; [`error`] what can go wrong;
//! [`apiserver_pki`] its certificates; [`child_process`] its child processes; [`pool`] the pairs a
//! test run boots once and lends to its tests one at a time, reset between them.

mod access;
pub(crate) mod apiserver_pki;
mod audit;
mod binaries;
mod cel_judge;
pub(crate) mod child_process;
mod crds;
mod error;
mod identity;
pub(crate) mod launch;
pub mod pool;
mod seed;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, ObjectMeta, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};

pub use access::Access;
pub use apiserver_pki::Pki;
pub use audit::AuditEvent;
pub use binaries::{
    ApiextensionsUnavailable, Binaries, ENV_APIEXTENSIONS_APISERVER, ENV_CACHE, ENV_ETCD,
    ENV_KUBE_APISERVER, apiextensions_binary, binaries, cache_root, kubectl,
};
pub use cel_judge::CelJudgeError;
pub use error::ApiServerError;
pub use identity::ServiceAccountIdentity;

use child_process::Proc;
use launch::{Launched, port_taken};

/// How long etcd and then the server may take to answer ready. Generous: the machine may be busy compiling.
const START_DEADLINE: Duration = Duration::from_secs(120);
/// How long installed CRDs may take to become Established.
const ESTABLISH_DEADLINE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);
/// Attempts with fresh ports when another process took a port between picking and binding it.
const PORT_ATTEMPTS: usize = 3;

/// Which API server runs in front of etcd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// kube-apiserver v1.20.2: the full core API (namespaces, Secrets, RBAC, apps/v1, leases), SSA, status;
    /// CRD `x-kubernetes-validations` are dropped, not enforced.
    Kube120,
    /// apiextensions-apiserver 1.36: CRDs and their custom resources only, with CEL rules enforced.
    Apiextensions136,
}

impl Flavor {
    fn name(self) -> &'static str {
        match self {
            Flavor::Kube120 => "kube-apiserver 1.20",
            Flavor::Apiextensions136 => "apiextensions-apiserver 1.36",
        }
    }
}

/// A running etcd + API server pair: its own (dropping it kills both), or one lent by the run's
/// [`pool`] (dropping it hands the pair back, to be reset for the next test).
pub struct ApiServer {
    flavor: Flavor,
    client: Client,
    kubeconfig: PathBuf,
    url: String,
    pki: Pki,
    /// kube-apiserver 1.20's stand-in for the CRDs' CEL rules, once CRDs are installed judged.
    judge: tokio::sync::Mutex<Option<cel_judge::CelJudge>>,
    held: Held,
}

/// Whose the pair's processes are.
enum Held {
    Own(Own),
    Lent(pool::lease::Lease),
}

/// A pair this process started.
struct Own {
    // Field order is drop order: the server goes before its etcd, and both before the directory.
    server: Proc,
    etcd: Proc,
    /// etcd's client URL.
    etcd_url: String,
    /// etcd's data directory ([`etcd_data_dir`]).
    etcd_data: PathBuf,
    /// etcd's data in memory ([`etcd_data_dir`]), removed once etcd is gone.
    etcd_mem: Option<tempfile::TempDir>,
    dir: Option<tempfile::TempDir>,
}

impl Own {
    /// Kills the server, then its etcd (so that nothing writes while etcd stops), by PID.
    fn stop(&mut self) {
        self.server.kill();
        self.etcd.kill();
    }
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (etcd_pid, server_pid) = self.pids();
        f.debug_struct("ApiServer")
            .field("flavor", &self.flavor)
            .field("url", &self.url)
            .field("server_pid", &server_pid)
            .field("etcd_pid", &etcd_pid)
            .field("lent", &self.is_lent())
            .field(
                "etcd_data",
                &match &self.held {
                    Held::Own(own) => own.etcd_mem.as_ref().map(|d| d.path()),
                    Held::Lent(_) => None,
                },
            )
            .field("dir", &self.dir())
            .finish()
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        // A failing test's logs are the evidence: keep the directory and say where it is (a lent
        // pair's lease does the same through its pool, in its own drop).
        if let Held::Own(own) = &mut self.held
            && std::thread::panicking()
            && let Some(dir) = own.dir.take()
        {
            own.stop();
            eprintln!(
                "{} logs kept in {}",
                self.flavor.name(),
                keep_without_etcd_data(dir).display()
            );
        }
    }
}

/// Where etcd keeps its data: a fresh directory in `/dev/shm` (memory) where it can make one,
/// else `root/etcd-data`. A test's etcd needs no durability, and on disk each of its writes
/// waits for an fsync: with other tests writing hundreds of megabytes beside it (image
/// imports, 2,000 Secrets), one fsync can wait seconds, long enough for a controller under test
/// to miss its Lease's renew deadline. In memory an fsync returns at once. The directory is
/// removed when the server is dropped.
fn etcd_data_dir(root: &Path) -> (PathBuf, Option<tempfile::TempDir>) {
    match tempfile::Builder::new()
        .prefix("nats-operators-etcd-")
        .tempdir_in(MEMORY_DIR)
    {
        Ok(mem) => (mem.path().join("data"), Some(mem)),
        Err(_) => (root.join("etcd-data"), None),
    }
}

/// A tmpfs every Linux machine mounts.
const MEMORY_DIR: &str = "/dev/shm";

/// Keeps an instance directory for reading after a failure, minus etcd's data (preallocated WAL files,
/// ~64 MiB each) that nobody reads and that would fill the disk over many failing runs.
fn keep_without_etcd_data(dir: tempfile::TempDir) -> PathBuf {
    let _ = std::fs::remove_dir_all(dir.path().join("etcd-data"));
    dir.keep()
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ApiServerError {
    let path = path.to_path_buf();
    move |source| ApiServerError::Io { what, path, source }
}

impl ApiServer {
    /// etcd + kube-apiserver 1.20.
    pub async fn kube_1_20() -> Result<Self, ApiServerError> {
        Self::start(Flavor::Kube120).await
    }

    /// etcd + apiextensions-apiserver 1.36.
    pub async fn apiextensions_1_36() -> Result<Self, ApiServerError> {
        Self::start(Flavor::Apiextensions136).await
    }

    /// Starts etcd and the chosen server, and returns once the server answers `/readyz` for the admin.
    pub async fn start(flavor: Flavor) -> Result<Self, ApiServerError> {
        Self::start_in(flavor, &std::env::temp_dir()).await
    }

    /// [`ApiServer::start`] with the instance directory (etcd's data, PKI, kubeconfig, logs) made
    /// under `parent`; it goes when the server is dropped.
    pub async fn start_in(flavor: Flavor, parent: &Path) -> Result<Self, ApiServerError> {
        Self::launch_in(flavor, parent, None).await
    }

    /// etcd + kube-apiserver 1.20 under `parent` (as [`ApiServer::start_in`]), etcd started over
    /// a copy of a [`seed`] holding `crds`, made first where this machine has none: the CRDs are
    /// there and Established when it returns, without the CEL judge
    /// ([`ApiServer::install_crds`] adds it; its creates find the CRDs there).
    pub async fn start_seeded(
        parent: &Path,
        crds: &[CustomResourceDefinition],
    ) -> Result<Self, ApiServerError> {
        let apis = launch::kube_120_runtime_config();
        let seed = seed::seed(&binaries()?, &apis, crds, &seed::seeds_root()).await?;
        match pool::socket() {
            // The seed stays held until the pool's pair has copied it.
            Some(socket) => Self::lent(&socket, &seed.dir).await,
            None => Self::launch_in(Flavor::Kube120, parent, Some(&seed.dir)).await,
        }
    }

    /// A pair over `seed` lent by the pool at `socket` ([`pool`]).
    async fn lent(socket: &Path, seed: &Path) -> Result<Self, ApiServerError> {
        let lease = pool::lease::Lease::take(socket, seed).await?;
        let kubeconfig = lease.root().join("kubeconfig");
        let client = launch::client_of(&kubeconfig, lease.url()).await?;
        Ok(Self {
            flavor: Flavor::Kube120,
            client,
            url: lease.url().to_owned(),
            pki: Pki::at(&lease.root().join("pki")),
            kubeconfig,
            judge: tokio::sync::Mutex::new(None),
            held: Held::Lent(lease),
        })
    }

    pub(crate) async fn launch_in(
        flavor: Flavor,
        parent: &Path,
        seed: Option<&Path>,
    ) -> Result<Self, ApiServerError> {
        let bins = binaries()?;
        let program = match flavor {
            Flavor::Kube120 => bins.kube_apiserver.clone(),
            Flavor::Apiextensions136 => apiextensions_binary()?,
        };
        let dir = tempfile::Builder::new()
            .prefix("nats-operators-apiserver-")
            .tempdir_in(parent)
            .map_err(io("create the instance directory", parent))?;
        let root = dir.path().to_path_buf();
        let pki_dir = root.join("pki");
        std::fs::create_dir_all(&pki_dir).map_err(io("create the PKI directory", &pki_dir))?;
        let pki = apiserver_pki::generate(&pki_dir)?;
        let (etcd_data, etcd_mem) = etcd_data_dir(&root);

        let mut attempt = 0;
        loop {
            attempt += 1;
            let etcd = launch::Etcd {
                bin: &bins.etcd,
                data: &etcd_data,
                seed,
            };
            match launch::attempt(flavor, etcd, &program, &root, &pki).await {
                Ok(Launched {
                    etcd,
                    server,
                    etcd_url,
                    url,
                    kubeconfig,
                    client,
                }) => {
                    return Ok(Self {
                        flavor,
                        client,
                        kubeconfig,
                        url,
                        pki,
                        judge: tokio::sync::Mutex::new(None),
                        held: Held::Own(Own {
                            server,
                            etcd,
                            etcd_url,
                            etcd_data,
                            etcd_mem,
                            dir: Some(dir),
                        }),
                    });
                }
                Err(err) if attempt < PORT_ATTEMPTS && port_taken(&err) => continue,
                Err(err) => {
                    // Keep the logs the error points at.
                    keep_without_etcd_data(dir);
                    return Err(err);
                }
            }
        }
    }

    /// A client authenticated as admin (group system:masters) by client certificate.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The kubeconfig of the admin (client certificate paths inside the instance directory).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The server's base URL, `https://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The instance's PKI files (CA, serving and admin certificates).
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// The instance directory (PKI, kubeconfig, etcd data, logs).
    pub fn dir(&self) -> Option<&Path> {
        match &self.held {
            Held::Own(own) => own.dir.as_ref().map(|d| d.path()),
            Held::Lent(_) => Some(self.root()),
        }
    }

    /// The instance directory while the server runs (the admin's kubeconfig is written there).
    pub(crate) fn root(&self) -> &Path {
        self.kubeconfig.parent().unwrap_or(Path::new("."))
    }

    /// PIDs of (etcd, server).
    pub fn pids(&self) -> (u32, u32) {
        match &self.held {
            Held::Own(own) => (own.etcd.pid(), own.server.pid()),
            Held::Lent(lease) => lease.pids(),
        }
    }

    /// Stops a pair of this process's own, the server before its etcd, and gives etcd's data
    /// directory (removed when the `ApiServer` is dropped); `None` for a lent pair.
    pub(super) fn stop_own(&mut self) -> Option<PathBuf> {
        match &mut self.held {
            Held::Own(own) => {
                own.stop();
                Some(own.etcd_data.clone())
            }
            Held::Lent(_) => None,
        }
    }

    /// etcd's client URL, for a pair of this process's own.
    pub(crate) fn etcd_url(&self) -> Option<&str> {
        match &self.held {
            Held::Own(own) => Some(&own.etcd_url),
            Held::Lent(_) => None,
        }
    }

    /// Stops a pair of this process's own and keeps its directory (without etcd's data) for
    /// reading; where it is.
    pub(crate) fn keep(mut self) -> Option<PathBuf> {
        let Held::Own(own) = &mut self.held else {
            return None;
        };
        own.stop();
        own.dir.take().map(keep_without_etcd_data)
    }

    /// Where this server's audit log starts for its holder: 0 for a pair of its own, the log's
    /// length when lent for a pool's.
    fn audit_from(&self) -> u64 {
        match &self.held {
            Held::Own(_) => 0,
            Held::Lent(lease) => lease.audit_from(),
        }
    }

    /// Whether this pair is lent by the run's [`pool`] (its processes are not this test's to stop).
    pub fn is_lent(&self) -> bool {
        matches!(self.held, Held::Lent(_))
    }

    /// Creates a namespace (kube-apiserver only); an existing one is fine.
    pub async fn create_namespace(&self, name: &str) -> Result<(), ApiServerError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(source) => Err(ApiServerError::Namespace {
                name: name.to_owned(),
                source,
            }),
        }
    }
}

/// The API resource of a CRD's storage version (the first served one if none is marked), for
/// `Api<DynamicObject>`.
pub fn crd_api_resource(crd: &CustomResourceDefinition) -> ApiResource {
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .or_else(|| crd.spec.versions.iter().find(|v| v.served))
        .or_else(|| crd.spec.versions.first())
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let gvk = GroupVersionKind::gvk(&crd.spec.group, &version, &crd.spec.names.kind);
    ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural)
}
