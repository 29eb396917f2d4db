//! Launching one etcd + API server pair: free ports, etcd started and healthy, the server's
//! flags for its flavor, the admin's kubeconfig and client, the server ready. One attempt; the
//! caller tries again with fresh ports when a port was lost to another process.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::time::Instant;

use super::apiserver_pki::Pki;
use super::audit;
use super::child_process::{Proc, free_ports};
use super::{ApiServerError, Flavor, POLL, START_DEADLINE, io};

/// What one attempt started.
pub(super) struct Launched {
    pub(super) etcd: Proc,
    pub(super) server: Proc,
    /// etcd's client URL (`http://127.0.0.1:<port>`).
    pub(super) etcd_url: String,
    pub(super) url: String,
    pub(super) kubeconfig: PathBuf,
    pub(super) client: Client,
}

/// The etcd of an attempt: its binary, its data directory, and the seed copied there first
/// (none: it starts empty).
#[derive(Clone, Copy)]
pub(super) struct Etcd<'a> {
    pub(super) bin: &'a Path,
    pub(super) data: &'a Path,
    pub(super) seed: Option<&'a Path>,
}

/// Starts etcd, then the `flavor` server `program` over it, under `root`; returns once the
/// server answers ready for the admin.
pub(super) async fn attempt(
    flavor: Flavor,
    etcd: Etcd<'_>,
    program: &Path,
    root: &Path,
    pki: &Pki,
) -> Result<Launched, ApiServerError> {
    let [client_port, peer_port, secure_port] = free_ports::<3>()?;
    let (etcd, etcd_url) = start_etcd(etcd, root, client_port, peer_port).await?;
    let args = server_args(flavor, &etcd_url, secure_port, root, pki)?;
    let mut server = Proc::spawn(flavor.name(), program, &args, root.join("server.log"))?;
    let url = format!("https://127.0.0.1:{secure_port}");
    let (kubeconfig, client) = admin_client(&url, root, pki).await?;
    wait_server(&mut server, &client, readyz(flavor)).await?;
    Ok(Launched {
        etcd,
        server,
        etcd_url,
        url,
        kubeconfig,
        client,
    })
}

/// etcd on `client_port` and `peer_port`, its data fresh in `data` (a copy of the seed where
/// it has one), its log under `root`, once healthy. Over a seed's data etcd keeps the member
/// it recorded, whose peer address names a port of the seed's etcd: a member alone never
/// dials a peer.
async fn start_etcd(
    Etcd { bin, data, seed }: Etcd<'_>,
    root: &Path,
    client_port: u16,
    peer_port: u16,
) -> Result<(Proc, String), ApiServerError> {
    let etcd_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    if data.exists() {
        std::fs::remove_dir_all(data).map_err(io("clear etcd data of a failed attempt", data))?;
    }
    if let Some(seed) = seed {
        super::seed::copy_tree(seed, data)?;
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
    let mut etcd = Proc::spawn("etcd", bin, &etcd_args, root.join("etcd.log"))?;
    wait_etcd(&mut etcd, &etcd_url).await?;
    Ok((etcd, etcd_url))
}

/// The server's flags: etcd, the secure port and the PKI, then what its flavor needs (the
/// standalone server's delegation kubeconfig is written under `root`).
fn server_args(
    flavor: Flavor,
    etcd_url: &str,
    secure_port: u16,
    root: &Path,
    pki: &Pki,
) -> Result<Vec<String>, ApiServerError> {
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
        Flavor::Kube120 => {
            args.extend([
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
                // Only the API groups of KUBE_120_APIS: every other group's storage, watch cache
                // and OpenAPI paths go, and the OpenAPI spec the server rebuilds and re-encodes at
                // boot and after each CRD is Established is smaller. Measured with the flag below
                // (kube-apiserver CPU s, 6 boots each, interleaved with the old flags on a loaded
                // machine): ready 2.9 -> 1.9, all 16 CRDs Established and settled 3.8 -> 3.2.
                format!("--runtime-config={}", kube_120_runtime_config()),
                // Priority and fairness needs flowcontrol.apiserver.k8s.io, which is off (the
                // server refuses to start otherwise); its periodic bookkeeping was a quarter of an
                // idle server's CPU (0.40 -> 0.30 CPU s per 20 s). Max-in-flight limits instead.
                "--enable-priority-and-fairness=false".to_owned(),
                // ServiceAccount: no controller-manager creates default ServiceAccounts, so Pods
                // would be refused. ResourceQuota: nothing here makes a quota, and under load its
                // evaluation timed out ("resource quota evaluation timed out"), refusing creates.
                // LimitRanger: nothing makes a LimitRange, and with none cached it lists them live
                // at a Pod or PVC create (at most every 30 s per namespace), a loopback request
                // whose failure refuses the create as Forbidden. Priority, DefaultStorageClass,
                // PersistentVolumeClaimResize, RuntimeClass: their informers watch scheduling,
                // storage and node.k8s.io, which are off; left on, the server never passed
                // readyz's informer-sync (measured). CPU saved by these: none measurable.
                "--disable-admission-plugins=ServiceAccount,ResourceQuota,LimitRanger,Priority,DefaultStorageClass,PersistentVolumeClaimResize,RuntimeClass".to_owned(),
                // A controller reference with blockOwnerDeletion needs `update` on the owner's
                // `finalizers`, as where this plugin runs (OpenShift): the chart's RBAC must say so.
                // The admin (system:masters) passes it anyway.
                "--enable-admission-plugins=OwnerReferencesPermissionEnforcement".to_owned(),
                "--profiling=false".to_owned(),
            ]);
            args.extend(audit::flags(root)?);
        }
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
    Ok(args)
}

/// The API groups kube-apiserver 1.20 serves: what the controllers, the chart (Helm installs it
/// here), kubectl and the tests use. Anything else (batch, autoscaling, storage, scheduling,
/// certificates, node, flowcontrol, every beta twin of a GA group) is off.
pub(super) const KUBE_120_APIS: &[&str] = &[
    "v1",
    // StatefulSets; the chart's Deployments.
    "apps/v1",
    // PodDisruptionBudgets (policy/v1 is 1.21's; the chart picks v1beta1 here).
    "policy/v1beta1",
    // NetworkPolicies.
    "networking.k8s.io/v1",
    // Leader election's Leases.
    "coordination.k8s.io/v1",
    // The controllers' Events.
    "events.k8s.io/v1",
    "rbac.authorization.k8s.io/v1",
    "apiextensions.k8s.io/v1",
    // The CEL judge's ValidatingWebhookConfiguration.
    "admissionregistration.k8s.io/v1",
    // The aggregator's own APIServices.
    "apiregistration.k8s.io/v1",
    // TokenReviews.
    "authentication.k8s.io/v1",
    // SubjectAccessReviews (`Access`, `kubectl auth can-i`).
    "authorization.k8s.io/v1",
    // The EndpointSlice the server itself writes for the `kubernetes` Service.
    "discovery.k8s.io/v1beta1",
];

/// `--runtime-config`'s value: every group off, then each of [`KUBE_120_APIS`] on.
pub(super) fn kube_120_runtime_config() -> String {
    std::iter::once("api/all=false".to_owned())
        .chain(KUBE_120_APIS.iter().map(|gv| format!("{gv}=true")))
        .collect::<Vec<_>>()
        .join(",")
}

/// The admin's kubeconfig for `url`, written under `root`, and a client loaded from it.
async fn admin_client(
    url: &str,
    root: &Path,
    pki: &Pki,
) -> Result<(PathBuf, Client), ApiServerError> {
    let kubeconfig = root.join("kubeconfig");
    std::fs::write(&kubeconfig, admin_kubeconfig(url, pki))
        .map_err(io("write the kubeconfig", &kubeconfig))?;
    let client = client_of(&kubeconfig, url).await?;
    Ok((kubeconfig, client))
}

/// A client loaded from the kubeconfig at `path` (of the server at `url`), as a binary given
/// `KUBECONFIG=path` loads it.
pub(crate) async fn client_of(path: &Path, url: &str) -> Result<Client, ApiServerError> {
    let loaded = Kubeconfig::read_from(path).map_err(|source| ApiServerError::Kubeconfig {
        path: path.to_path_buf(),
        source,
    })?;
    let config = Config::from_custom_kubeconfig(loaded, &KubeConfigOptions::default())
        .await
        .map_err(|source| ApiServerError::Kubeconfig {
            path: path.to_path_buf(),
            source,
        })?;
    Client::try_from(config).map_err(|source| ApiServerError::Client {
        url: url.to_owned(),
        source,
    })
}

/// The readiness endpoint that tells the flavor is up.
fn readyz(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Kube120 => "/readyz",
        // Its informers watch core objects through the unreachable kubeconfig and never sync.
        Flavor::Apiextensions136 => "/readyz?exclude=informer-sync",
    }
}

/// Whether a failed start was a lost race for a port (worth another attempt with fresh ports).
pub(super) fn port_taken(err: &ApiServerError) -> bool {
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
