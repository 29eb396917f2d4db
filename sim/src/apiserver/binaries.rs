//! Where the API-server binaries are: the cache `scripts/install-apiserver.sh` fills, or env overrides.

use std::path::{Path, PathBuf};

use super::ApiServerError;

/// Overrides the cache root (default `${XDG_CACHE_HOME:-$HOME/.cache}/nats-operators`), as in the script.
pub const ENV_CACHE: &str = crate::install::CACHE_ENV;
/// Overrides the etcd binary.
pub const ENV_ETCD: &str = "NATS_OPERATORS_ETCD";
/// Overrides the kube-apiserver 1.20 binary.
pub const ENV_KUBE_APISERVER: &str = "NATS_OPERATORS_KUBE_APISERVER";
/// Overrides the apiextensions-apiserver 1.36 binary.
pub const ENV_APIEXTENSIONS_APISERVER: &str = "NATS_OPERATORS_APIEXTENSIONS_APISERVER";

const INSTALL_HINT: &str =
    "run scripts/install-apiserver.sh (from the repository root) to build and cache it";

/// The binaries of the required API tier: etcd and kube-apiserver 1.20.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// etcd 3.4, the store of both servers.
    pub etcd: PathBuf,
    /// kube-apiserver v1.20.2.
    pub kube_apiserver: PathBuf,
}

/// Why the 1.36 apiextensions-apiserver cannot be used.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ApiextensionsUnavailable {
    /// The install script tried and the build from Debian sid failed: tests needing it skip with this reason.
    #[error("apiextensions-apiserver 1.36 did not build on this machine ({reason}); see {log}")]
    BuildFailed { reason: String, log: PathBuf },
    /// Nobody ran the install script (or it was interrupted): tests needing it fail with the instruction.
    #[error("apiextensions-apiserver 1.36 not found at {path}: {INSTALL_HINT}")]
    NotInstalled { path: PathBuf },
}

/// The cache root `scripts/install-apiserver.sh` installs into.
pub fn cache_root() -> PathBuf {
    crate::install::cache_root().unwrap_or_else(|_| PathBuf::from(".cache").join("nats-operators"))
}

fn located(env: Option<&str>, default: PathBuf) -> PathBuf {
    env.and_then(std::env::var_os)
        .map(PathBuf::from)
        .unwrap_or(default)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// etcd and kube-apiserver 1.20, or an error telling the user to run `scripts/install-apiserver.sh`.
pub fn binaries() -> Result<Binaries, ApiServerError> {
    binaries_in(&cache_root(), true)
}

/// [`binaries`] under a given cache root, with or without the env overrides.
pub(super) fn binaries_in(root: &Path, env: bool) -> Result<Binaries, ApiServerError> {
    let bin = root.join("kube-apiserver-1.20").join("bin");
    let etcd = located(env.then_some(ENV_ETCD), bin.join("etcd"));
    let kube_apiserver = located(
        env.then_some(ENV_KUBE_APISERVER),
        bin.join("kube-apiserver"),
    );
    for (what, path) in [("etcd", &etcd), ("kube-apiserver 1.20", &kube_apiserver)] {
        if !is_executable(path) {
            return Err(ApiServerError::BinaryMissing {
                what,
                path: path.clone(),
                hint: INSTALL_HINT,
            });
        }
    }
    Ok(Binaries {
        etcd,
        kube_apiserver,
    })
}

/// kubectl 1.20 (Debian's `kubernetes-client`, which `scripts/install-apiserver.sh kubectl`
/// unpacks into the cache), if installed.
pub fn kubectl() -> Option<PathBuf> {
    let path = cache_root()
        .join("kubectl-1.20")
        .join("bin")
        .join("kubectl");
    is_executable(&path).then_some(path)
}

/// The apiextensions-apiserver 1.36 binary, or why there is none (built-and-failed vs never installed).
pub fn apiextensions_binary() -> Result<PathBuf, ApiextensionsUnavailable> {
    apiextensions_binary_in(&cache_root(), true)
}

/// [`apiextensions_binary`] under a given cache root, with or without the env override.
pub(super) fn apiextensions_binary_in(
    root: &Path,
    env: bool,
) -> Result<PathBuf, ApiextensionsUnavailable> {
    let dir = root.join("apiextensions-apiserver-1.36");
    let path = located(
        env.then_some(ENV_APIEXTENSIONS_APISERVER),
        dir.join("bin").join("apiextensions-apiserver"),
    );
    if is_executable(&path) {
        return Ok(path);
    }
    match std::fs::read_to_string(dir.join("build-failed")) {
        Ok(reason) => Err(ApiextensionsUnavailable::BuildFailed {
            reason: reason.trim().to_owned(),
            log: dir.join("build.log"),
        }),
        Err(_) => Err(ApiextensionsUnavailable::NotInstalled { path }),
    }
}
