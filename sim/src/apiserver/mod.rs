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

mod binaries;
mod cel_judge;
mod pki;
mod process;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::{Api, Client, Config};
use tokio::time::Instant;

pub use binaries::{
    ApiextensionsUnavailable, Binaries, ENV_APIEXTENSIONS_APISERVER, ENV_CACHE, ENV_ETCD,
    ENV_KUBE_APISERVER, apiextensions_binary, binaries, cache_root,
};
pub use cel_judge::CelJudgeError;
pub use pki::Pki;
use process::{Proc, free_ports};

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

/// Everything that can go wrong starting or driving a test API server.
#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    #[error("{what} binary not found at {}: {hint}", path.display())]
    BinaryMissing {
        what: &'static str,
        path: PathBuf,
        hint: &'static str,
    },
    #[error(transparent)]
    Apiextensions(#[from] ApiextensionsUnavailable),
    #[error("failed to {what} ({}): {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to generate the test PKI's {what}: {source}")]
    Pki {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("failed to start {what} ({}): {source}", program.display())]
    Spawn {
        what: &'static str,
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} exited during startup ({status}); log {}:\n{tail}", log.display())]
    Exited {
        what: &'static str,
        status: std::process::ExitStatus,
        log: PathBuf,
        tail: String,
    },
    #[error("{what} not ready within {waited:?} (last: {last}); log {}:\n{tail}", log.display())]
    NotReady {
        what: &'static str,
        waited: Duration,
        last: String,
        log: PathBuf,
        tail: String,
    },
    #[error("failed to load the instance kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("failed to build a client for {url}: {source}")]
    Client { url: String, source: kube::Error },
    #[error("the apiserver refused CRD {name}: {source}")]
    CrdRefused { name: String, source: kube::Error },
    #[error("CRD {name} not Established within {waited:?}; conditions: {conditions}")]
    CrdNotEstablished {
        name: String,
        waited: Duration,
        conditions: String,
    },
    #[error("failed to create namespace {name}: {source}")]
    Namespace { name: String, source: kube::Error },
    #[error(transparent)]
    CelJudge(#[from] CelJudgeError),
    #[error("the apiserver refused the CEL judge's webhook configuration: {0}")]
    CelJudgeRefused(kube::Error),
    #[error("the CEL judge not in force within {waited:?} (last: {last})")]
    CelJudgeNotInForce { waited: Duration, last: String },
}

/// A running etcd + API server pair. Dropping it kills both.
pub struct ApiServer {
    flavor: Flavor,
    client: Client,
    kubeconfig: PathBuf,
    url: String,
    pki: Pki,
    /// kube-apiserver 1.20's stand-in for the CRDs' CEL rules, once CRDs are installed judged.
    judge: tokio::sync::Mutex<Option<cel_judge::CelJudge>>,
    // Field order is drop order: the server goes before its etcd, and both before the directory.
    server: Proc,
    etcd: Proc,
    dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("flavor", &self.flavor)
            .field("url", &self.url)
            .field("server_pid", &self.server.pid())
            .field("etcd_pid", &self.etcd.pid())
            .field("dir", &self.dir())
            .finish()
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        // A failing test's logs are the evidence: keep the directory and say where it is.
        if std::thread::panicking()
            && let Some(dir) = self.dir.take()
        {
            self.server.kill();
            self.etcd.kill();
            eprintln!(
                "{} logs kept in {}",
                self.flavor.name(),
                keep_without_etcd_data(dir).display()
            );
        }
    }
}

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
        let bins = binaries()?;
        let program = match flavor {
            Flavor::Kube120 => bins.kube_apiserver.clone(),
            Flavor::Apiextensions136 => apiextensions_binary()?,
        };
        let dir = tempfile::Builder::new()
            .prefix("nats-operators-apiserver-")
            .tempdir()
            .map_err(io("create the instance directory", &std::env::temp_dir()))?;
        let root = dir.path().to_path_buf();
        let pki_dir = root.join("pki");
        std::fs::create_dir_all(&pki_dir).map_err(io("create the PKI directory", &pki_dir))?;
        let pki = pki::generate(&pki_dir)?;

        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once(flavor, &bins.etcd, &program, &root, &pki).await {
                Ok((etcd, server, url, kubeconfig, client)) => {
                    return Ok(Self {
                        flavor,
                        client,
                        kubeconfig,
                        url,
                        pki,
                        judge: tokio::sync::Mutex::new(None),
                        server,
                        etcd,
                        dir: Some(dir),
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

    async fn start_once(
        flavor: Flavor,
        etcd_bin: &Path,
        program: &Path,
        root: &Path,
        pki: &Pki,
    ) -> Result<(Proc, Proc, String, PathBuf, Client), ApiServerError> {
        let [client_port, peer_port, secure_port] = free_ports::<3>()?;
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let data = root.join("etcd-data");
        if data.exists() {
            std::fs::remove_dir_all(&data)
                .map_err(io("clear etcd data of a failed attempt", &data))?;
        }
        let etcd_args = [
            "--name=default".to_owned(),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
        ];
        let mut etcd = Proc::spawn("etcd", etcd_bin, &etcd_args, root.join("etcd.log"))?;
        wait_etcd(&mut etcd, &etcd_url).await?;

        let cert_dir = root.join("certs");
        let p = |path: &Path| path.display().to_string();
        let mut args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={secure_port}"),
            format!("--cert-dir={}", cert_dir.display()),
            format!("--tls-cert-file={}", p(&pki.server_cert)),
            format!("--tls-private-key-file={}", p(&pki.server_key)),
            format!("--client-ca-file={}", p(&pki.ca_cert)),
        ];
        match flavor {
            Flavor::Kube120 => args.extend([
                "--advertise-address=127.0.0.1".to_owned(),
                "--insecure-port=0".to_owned(),
                "--authorization-mode=RBAC".to_owned(),
                "--service-account-issuer=https://kubernetes.default.svc".to_owned(),
                format!("--service-account-key-file={}", p(&pki.service_account_pub)),
                format!(
                    "--service-account-signing-key-file={}",
                    p(&pki.service_account_key)
                ),
                "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
                // No controller-manager creates default ServiceAccounts, so Pods would be refused.
                "--disable-admission-plugins=ServiceAccount".to_owned(),
                "--profiling=false".to_owned(),
            ]),
            Flavor::Apiextensions136 => {
                // The standalone server wants a kubeconfig for delegated authn/authz and admission informers;
                // nothing answers it. Client certificates of system:masters are authorized without asking.
                let fake = root.join("unreachable.kubeconfig");
                std::fs::write(&fake, UNREACHABLE_KUBECONFIG)
                    .map_err(io("write a kubeconfig", &fake))?;
                args.extend([
                    "--authentication-skip-lookup".to_owned(),
                    format!("--authentication-kubeconfig={}", p(&fake)),
                    format!("--authorization-kubeconfig={}", p(&fake)),
                    format!("--kubeconfig={}", p(&fake)),
                    "--disable-admission-plugins=NamespaceLifecycle,MutatingAdmissionPolicy,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook".to_owned(),
                    "--profiling=false".to_owned(),
                ]);
            }
        }
        let mut server = Proc::spawn(flavor.name(), program, &args, root.join("server.log"))?;

        let url = format!("https://127.0.0.1:{secure_port}");
        let kubeconfig = root.join("kubeconfig");
        std::fs::write(&kubeconfig, admin_kubeconfig(&url, pki))
            .map_err(io("write the kubeconfig", &kubeconfig))?;
        let loaded =
            Kubeconfig::read_from(&kubeconfig).map_err(|source| ApiServerError::Kubeconfig {
                path: kubeconfig.clone(),
                source,
            })?;
        let config = Config::from_custom_kubeconfig(loaded, &KubeConfigOptions::default())
            .await
            .map_err(|source| ApiServerError::Kubeconfig {
                path: kubeconfig.clone(),
                source,
            })?;
        let client = Client::try_from(config).map_err(|source| ApiServerError::Client {
            url: url.clone(),
            source,
        })?;
        let readyz = match flavor {
            Flavor::Kube120 => "/readyz",
            // Its informers watch core objects through the unreachable kubeconfig and never sync.
            Flavor::Apiextensions136 => "/readyz?exclude=informer-sync",
        };
        wait_server(&mut server, &client, readyz).await?;
        Ok((etcd, server, url, kubeconfig, client))
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
        self.dir.as_ref().map(|d| d.path())
    }

    /// PIDs of (etcd, server).
    pub fn pids(&self) -> (u32, u32) {
        (self.etcd.pid(), self.server.pid())
    }

    /// The last `lines` lines of the server's log.
    pub fn server_log_tail(&self, lines: usize) -> String {
        self.server.log_tail(lines)
    }

    /// Creates every CRD, then waits until each is Established (its custom resources are served).
    /// On kube-apiserver 1.20 their CEL rules are then judged at every create and update of a
    /// custom resource, as a cluster of today judges them ([`cel_judge`]).
    pub async fn install_crds(
        &self,
        crds: &[CustomResourceDefinition],
    ) -> Result<(), ApiServerError> {
        self.install_crds_unjudged(crds).await?;
        // No CRDs, nothing to judge (and a webhook rule must name a group).
        if self.flavor == Flavor::Kube120 && !crds.is_empty() {
            self.judge_cel(crds).await?;
        }
        Ok(())
    }

    /// [`ApiServer::install_crds`] without the CEL judge on kube-apiserver 1.20: for a test that
    /// writes what the CEL rules refuse, as a server before CEL (Kubernetes < 1.25) stores it, to
    /// see what a controller makes of it.
    pub async fn install_crds_unjudged(
        &self,
        crds: &[CustomResourceDefinition],
    ) -> Result<(), ApiServerError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for crd in crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            match api.create(&PostParams::default(), crd).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(source) => return Err(ApiServerError::CrdRefused { name, source }),
            }
        }
        let deadline = Instant::now() + ESTABLISH_DEADLINE;
        for crd in crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            loop {
                let conditions = match api.get_status(&name).await {
                    Ok(got) => got.status.and_then(|s| s.conditions).unwrap_or_default(),
                    Err(source) => return Err(ApiServerError::CrdRefused { name, source }),
                };
                if conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                {
                    break;
                }
                if Instant::now() >= deadline {
                    let conditions = conditions
                        .iter()
                        .map(|c| {
                            format!(
                                "{}={} ({})",
                                c.type_,
                                c.status,
                                c.message.as_deref().unwrap_or("")
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(ApiServerError::CrdNotEstablished {
                        name,
                        waited: ESTABLISH_DEADLINE,
                        conditions,
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        }
        Ok(())
    }

    /// Starts the CEL judge (once), has it judge `crds`, registers it for their groups and waits
    /// until the apiserver calls it (a dry-run probe it always refuses).
    async fn judge_cel(&self, crds: &[CustomResourceDefinition]) -> Result<(), ApiServerError> {
        use base64::Engine as _;
        use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::api::{Patch, PatchParams};

        let mut slot = self.judge.lock().await;
        if slot.is_none() {
            let read = |path: &Path| {
                std::fs::read_to_string(path).map_err(io("read the serving certificate", path))
            };
            let (cert, key) = (read(&self.pki.server_cert)?, read(&self.pki.server_key)?);
            *slot = Some(cel_judge::CelJudge::start(&cert, &key).await?);
        }
        let Some(judge) = slot.as_ref() else {
            return Ok(());
        };
        judge.judge(crds);
        let ca = std::fs::read(&self.pki.ca_cert).map_err(io("read the CA", &self.pki.ca_cert))?;
        let ca = base64::engine::general_purpose::STANDARD.encode(ca);
        let webhook = |name: &str, rules: serde_json::Value, selector: serde_json::Value| {
            serde_json::json!({
                "name": name,
                "clientConfig": {"url": judge.url(), "caBundle": ca},
                "rules": rules,
                "objectSelector": selector,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 30,
            })
        };
        let config = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "sim-cel-judge"},
            "webhooks": [
                webhook(
                    "cel.judge.sim.nats.mikluko.io",
                    serde_json::json!([{
                        "apiGroups": judge.groups(),
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["*"],
                    }]),
                    serde_json::json!({}),
                ),
                webhook(
                    "probe.judge.sim.nats.mikluko.io",
                    serde_json::json!([{
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["configmaps"],
                    }]),
                    serde_json::json!({"matchLabels": {cel_judge::PROBE_LABEL: "true"}}),
                ),
            ],
        });
        Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .patch(
                "sim-cel-judge",
                &PatchParams::apply("sim").force(),
                &Patch::Apply(&config),
            )
            .await
            .map_err(ApiServerError::CelJudgeRefused)?;
        // The apiserver reads webhook configurations through an informer: probe until it calls.
        let probe: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {
                "generateName": "cel-judge-probe-",
                "labels": {cel_judge::PROBE_LABEL: "true"},
            },
        }))
        .unwrap_or_default();
        let configmaps: Api<ConfigMap> = Api::namespaced(self.client.clone(), "default");
        let deadline = Instant::now() + ESTABLISH_DEADLINE;
        loop {
            let last = match configmaps
                .create(
                    &PostParams {
                        dry_run: true,
                        ..PostParams::default()
                    },
                    &probe,
                )
                .await
            {
                Err(kube::Error::Api(s)) if s.message.contains(cel_judge::PROBE_REFUSAL) => {
                    return Ok(());
                }
                Ok(_) => "the probe was admitted".to_string(),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(ApiServerError::CelJudgeNotInForce {
                    waited: ESTABLISH_DEADLINE,
                    last,
                });
            }
            tokio::time::sleep(POLL).await;
        }
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

/// Whether a failed start was a lost race for a port (worth another attempt with fresh ports).
fn port_taken(err: &ApiServerError) -> bool {
    match err {
        ApiServerError::Exited { tail, .. } | ApiServerError::NotReady { tail, .. } => {
            tail.contains("address already in use")
        }
        _ => false,
    }
}

async fn wait_etcd(etcd: &mut Proc, url: &str) -> Result<(), ApiServerError> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| not_ready(etcd, Duration::ZERO, e.to_string()))?;
    let health = format!("{url}/health");
    let start = Instant::now();
    loop {
        if let Some(status) = etcd.exited() {
            return Err(exited(etcd, status));
        }
        let last = match http.get(&health).send().await {
            Ok(resp) if resp.status().is_success() => return Ok(()),
            Ok(resp) => format!("HTTP {}", resp.status()),
            Err(e) => e.to_string(),
        };
        if start.elapsed() >= START_DEADLINE {
            return Err(not_ready(etcd, START_DEADLINE, last));
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn wait_server(
    server: &mut Proc,
    client: &Client,
    readyz: &str,
) -> Result<(), ApiServerError> {
    let start = Instant::now();
    loop {
        if let Some(status) = server.exited() {
            return Err(exited(server, status));
        }
        let request = http_get(readyz);
        let last = match tokio::time::timeout(Duration::from_secs(5), client.request_text(request))
            .await
        {
            Ok(Ok(body)) if body.trim() == "ok" => return Ok(()),
            Ok(Ok(body)) => body,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "readyz timed out".to_owned(),
        };
        if start.elapsed() >= START_DEADLINE {
            return Err(not_ready(server, START_DEADLINE, last));
        }
        tokio::time::sleep(POLL).await;
    }
}

fn http_get(path: &str) -> http::Request<Vec<u8>> {
    let mut request = http::Request::new(Vec::new());
    // A path and query always parse as a URI; the fallback only keeps this function infallible.
    *request.uri_mut() = path.parse().unwrap_or_default();
    request
}

fn exited(proc: &Proc, status: std::process::ExitStatus) -> ApiServerError {
    ApiServerError::Exited {
        what: proc.name,
        status,
        log: proc.log.clone(),
        tail: proc.log_tail(20),
    }
}

fn not_ready(proc: &Proc, waited: Duration, last: String) -> ApiServerError {
    ApiServerError::NotReady {
        what: proc.name,
        waited,
        last,
        log: proc.log.clone(),
        tail: proc.log_tail(20),
    }
}

fn admin_kubeconfig(url: &str, pki: &Pki) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: \"{url}\"
    certificate-authority: \"{ca}\"
users:
- name: admin
  user:
    client-certificate: \"{cert}\"
    client-key: \"{key}\"
contexts:
- name: local
  context: {{cluster: local, user: admin}}
current-context: local
",
        ca = pki.ca_cert.display(),
        cert = pki.admin_cert.display(),
        key = pki.admin_key.display(),
    )
}

/// A kubeconfig pointing at a port nothing listens on, for the standalone server's delegation flags.
const UNREACHABLE_KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: none
  cluster: {server: \"http://127.0.0.1:1\"}
users:
- name: none
  user: {token: none}
contexts:
- name: none
  context: {cluster: none, user: none}
current-context: none
";
