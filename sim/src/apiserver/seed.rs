//! etcd seeded with CRDs: a kube-apiserver 1.20 that boots over an etcd already holding its
//! CRDs, instead of being given them one by one after it is up.
//!
//! Each CRD a running kube-apiserver 1.20 is given makes it merge and serialise its whole
//! OpenAPI document again (JSON, protobuf, gzip), one CRD after another; a server that boots
//! over CRDs already stored builds that document once. Measured here (kube-apiserver CPU s, one
//! quiet run each): a fresh boot 2.0 to ready, 5.0 once the 16 CRDs are Established and it has
//! settled (4.8 s of wall); a boot over an etcd holding them 2.5 to ready and 3.0 settled (2.8 s
//! of wall). Nearly every API-tier test boots one with every CRD, so the tests' run spends
//! about 2 CPU s less per test.
//!
//! A seed is an etcd data directory made once per machine for a set of CRDs (and these binaries
//! and server flags): a fresh pair booted, the CRDs installed and Established, the server then
//! the etcd stopped, their data copied under the tools' cache ([`seeds_root`]). Each instance
//! copies the seed into its own data directory and starts its etcd over it; nothing else of the
//! seed's instance is kept (its PKI, ports, logs), and nothing in etcd depends on them: no
//! token controller writes ServiceAccount tokens here, the `kubernetes` Service's endpoints are
//! reconciled by the server that boots, and the CEL judge's webhook is registered per instance
//! after the boot ([`super::ApiServer::install_crds`]). A file lock per seed makes the first of
//! many tests asking at once build it and the others wait for it, and is held shared while an
//! instance copies the seed.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use sha2::{Digest, Sha256};

use super::binaries::{Binaries, cache_root};
use super::{ApiServer, ApiServerError, Flavor, io};

/// Part of every seed's key: bump when what a seed holds or how it is made changes.
const FORMAT: &str = "etcd-seed-1";
/// Seeds kept beside the one just made (the newest by modification time): a seed is about
/// 124 MB, nearly all of it etcd's WAL and the next segment it preallocates (64 MB each).
const KEEP: usize = 4;

/// Where seeds are kept: under the tools' cache, beside the binaries they were made with.
pub(super) fn seeds_root() -> PathBuf {
    cache_root().join("etcd-seeds")
}

/// The key of a seed of `crds` made with `bins` and a server serving `apis` (its
/// `--runtime-config`).
pub(super) fn key(bins: &Binaries, apis: &str, crds: &[CustomResourceDefinition]) -> String {
    let mut h = Sha256::new();
    h.update(FORMAT);
    for bin in [&bins.etcd, &bins.kube_apiserver] {
        h.update(bin.to_string_lossy().as_bytes());
        if let Ok(m) = std::fs::metadata(bin) {
            h.update(m.len().to_le_bytes());
            if let Ok(t) = m.modified()
                && let Ok(d) = t.duration_since(std::time::UNIX_EPOCH)
            {
                h.update(d.as_nanos().to_le_bytes());
            }
        }
    }
    h.update(apis);
    h.update(serde_json::to_vec(crds).unwrap_or_default());
    hex::encode(&h.finalize()[..12])
}

/// A seed made, held for reading: its directory, and its lock held shared while an instance
/// copies it (a prune elsewhere removes only a seed nobody holds).
pub(super) struct Seed {
    pub(super) dir: PathBuf,
    _held: File,
}

/// The seed of `crds` under `root` for a server serving `apis` ([`key`]), made first where
/// there is none.
pub(super) async fn seed(
    bins: &Binaries,
    apis: &str,
    crds: &[CustomResourceDefinition],
    root: &Path,
) -> Result<Seed, ApiServerError> {
    std::fs::create_dir_all(root).map_err(io("create the seeds' directory", root))?;
    let key = key(bins, apis, crds);
    let dir = root.join(&key);
    let lock_path = root.join(format!("{key}.lock"));
    loop {
        let making = locked(&lock_path, false).await?;
        if !dir.join(DONE).exists() {
            make(crds, &dir).await?;
            prune(root, &dir);
        }
        drop(making);
        let held = locked(&lock_path, true).await?;
        // Pruned elsewhere between the two locks: made again.
        if dir.join(DONE).exists() {
            return Ok(Seed { dir, _held: held });
        }
    }
}

/// The lock file `path`, locked exclusively or `shared`, once it may be.
async fn locked(path: &Path, shared: bool) -> Result<File, ApiServerError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io("open a seed's lock", path))?;
    let waited = tokio::task::spawn_blocking(move || {
        if shared {
            file.lock_shared()
        } else {
            file.lock()
        }
        .map(|()| file)
    })
    .await
    .map_err(|e| ApiServerError::Io {
        what: "wait for a seed's lock",
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    waited.map_err(io("lock a seed", path))
}

/// Written last into a seed: a directory without it is a seed whose making was cut short.
const DONE: &str = "seeded";

/// Makes the seed `dir` of `crds`: a fresh pair, the CRDs Established, both stopped, etcd's
/// data copied.
async fn make(crds: &[CustomResourceDefinition], dir: &Path) -> Result<(), ApiServerError> {
    let mut server = ApiServer::start(Flavor::Kube120).await?;
    server.install_crds_unjudged(crds).await?;
    // The server first, so that nothing writes while etcd stops; etcd's data is consistent on
    // disk at any kill (its WAL replays at the next start).
    let data = server.stop_own().ok_or_else(|| ApiServerError::Io {
        what: "make a seed of a pair of its own",
        path: dir.to_path_buf(),
        source: std::io::Error::other("the pair is a pool's"),
    })?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(io("clear a seed cut short", dir))?;
    }
    copy_tree(&data, dir)?;
    let done = dir.join(DONE);
    File::create(&done)
        .and_then(|mut f| f.write_all(b"etcd data of a kube-apiserver 1.20 with CRDs\n"))
        .map_err(io("mark a seed made", &done))?;
    Ok(())
}

/// Removes the seeds under `root` but `made` and the newest [`KEEP`] others, each only while
/// nobody holds its lock (an instance copying it, a process making it). Lock files stay: one
/// removed while another process waits on it would let a second maker in beside the first.
fn prune(root: &Path, made: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let mut seeds: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p != made && is_key(p))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    seeds.sort_by_key(|s| std::cmp::Reverse(s.0));
    for (_, old) in seeds.into_iter().skip(KEEP) {
        let Ok(lock) = File::open(old.with_extension("lock")) else {
            continue;
        };
        if lock.try_lock().is_ok() {
            let _ = std::fs::remove_dir_all(&old);
        }
    }
}

/// Whether `path` is named as a seed is ([`key`]).
fn is_key(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.len() == 24 && n.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Copies the directory tree `from` to `to` (files and directories only: etcd's data has no
/// links).
pub(super) fn copy_tree(from: &Path, to: &Path) -> Result<(), ApiServerError> {
    std::fs::create_dir_all(to).map_err(io("create a directory of a copy", to))?;
    let entries = std::fs::read_dir(from).map_err(io("read a directory to copy", from))?;
    for entry in entries {
        let entry = entry.map_err(io("read a directory to copy", from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(io("read a file's type", &src))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if src.file_name().is_some_and(|n| n != DONE) {
            std::fs::copy(&src, &dst).map_err(io("copy a file", &src))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_holds_every_file_and_directory_but_the_mark() {
        let from = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(from.path().join("member/wal")).expect("mkdir");
        std::fs::write(from.path().join("member/wal/0.wal"), b"wal").expect("write");
        std::fs::write(from.path().join(DONE), b"").expect("write");
        let to = tempfile::tempdir().expect("tempdir");
        let dst = to.path().join("data");
        copy_tree(from.path(), &dst).expect("copy");
        assert_eq!(
            std::fs::read(dst.join("member/wal/0.wal")).expect("read"),
            b"wal"
        );
        assert!(!dst.join(DONE).exists());
    }

    #[test]
    fn the_key_changes_with_the_crds() {
        let bins = Binaries {
            etcd: PathBuf::from("/nonexistent/etcd"),
            kube_apiserver: PathBuf::from("/nonexistent/kube-apiserver"),
        };
        let all = nats_api::crds::all();
        assert_eq!(key(&bins, "v1", &all), key(&bins, "v1", &all));
        assert_ne!(key(&bins, "v1", &all), key(&bins, "v1", &all[..1]));
        assert_ne!(key(&bins, "v1", &all), key(&bins, "v1", &[]));
        assert_ne!(key(&bins, "v1", &all), key(&bins, "v1,apps/v1", &all));
    }
}
