//! The sim's filesystem fault layer: a server's JetStream store placed on a filesystem that
//! keeps every byte written since the last fsync of each file in memory, so the sim can do what
//! a power loss does — drop them — and can damage a file at rest (one bit flipped, the tail cut).
//!
//! # The model
//!
//! A passthrough over a real backing directory ([`FaultFs::mount`]):
//! - **File contents and sizes are volatile until that file is fsynced.** A write lands in memory
//!   ([`volatile::Unsynced`]), a read sees it, `fsync`/`fdatasync` of the file writes what it
//!   holds to the backing file and syncs that; a write through a handle opened `O_SYNC` or
//!   `O_DSYNC` is synced the same way before it returns. `close` does not sync (nor does the kernel's
//!   writeback: there is none, the pessimistic model Jepsen's LazyFS also takes). A truncate is
//!   a change of contents, volatile like a write: after a loss the bytes it cut are back.
//! - **Names are durable at once**: create, mkdir, unlink, rmdir, rename and chmod reach the
//!   backing directory when they are made, as a journaling filesystem commits metadata. A file
//!   created and written but never fsynced is there after a loss, with what its last fsync left
//!   (nothing: it is empty). A rename carries the file's unsynced bytes with it (they belong to
//!   the inode); a file unlinked, or replaced by a rename, while no handle holds it loses them
//!   at once, and one still open keeps them until its last close. `fsync` of a directory is a
//!   no-op.
//! - **[`FaultFs::lose_unsynced`]** drops every unsynced byte of every file: each file is again
//!   exactly what its last fsync made durable. The caller first SIGKILLs the processes using the
//!   store, as a power loss stops them.
//! - **[`FaultFs::corrupt`]** (and [`corrupt_dir`] for a store not on the layer) damages files
//!   at rest: it first makes the matched file's unsynced bytes durable (the server is down; its
//!   page cache would reach the disk), then flips a bit or cuts the tail.
//!
//! The kernel caches nothing of it: every file is opened with `FOPEN_DIRECT_IO` and attributes
//! and entries have a zero TTL, so a loss is seen at once. Hard links, symlinks, xattrs and
//! `renameat2` flags are not served (nats-server uses none of them).
//!
//! # Why FUSE, and why `fuser`
//!
//! The fault has to sit below nats-server's own fsync calls and see each one per file, without
//! changing the server: a filesystem does, an `LD_PRELOAD` shim does not reach a static Go
//! binary (Go makes its syscalls itself), and a block device fault (dm-flakey, dm-log-writes)
//! needs a kernel module, a loop device and a filesystem on it per server, and drops writes
//! per device flush rather than per file. FUSE is in every Linux kernel, needs only
//! `/dev/fuse` and root (which the sim's CI has), and is served from the sim's own process, so a
//! scenario controls the fault directly. `fuser` is the maintained pure-Rust FUSE crate: without
//! its `libfuse` feature it links no C library and, as root, mounts with `mount(2)` itself, so
//! nothing beyond the crate is installed (no libfuse, no `fusermount3`). A store that asks for no
//! fault is a plain directory: the layer costs nothing where a scenario does not use it.
//!
//! Where FUSE is not available ([`available`]: no `/dev/fuse`, or not root) the callers skip,
//! saying why.

pub mod corrupt;
mod inodes;
mod passthrough;
pub mod volatile;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use corrupt::{Corruption, Damage, corrupt_dir, glob_matches};
pub use inodes::Counters;

use inodes::State;
use passthrough::FaultFilesystem;

#[derive(Debug, thiserror::Error)]
pub enum FaultFsError {
    #[error("the fault layer is not available here: {0}")]
    Unavailable(String),
    #[error("mounting the fault layer at {mountpoint}: {source}")]
    Mount {
        mountpoint: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no file under {root} matches {glob:?}")]
    NoMatch { root: PathBuf, glob: String },
    #[error("{0} is empty: there is no bit to flip")]
    Empty(PathBuf),
}

impl FaultFsError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        FaultFsError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Whether this process can mount the layer: `/dev/fuse` opens read-write and the process runs as
/// root (mounting without `fusermount3` needs `CAP_SYS_ADMIN`). The error says which is missing.
pub fn available() -> Result<(), FaultFsError> {
    let unavailable = |why: String| Err(FaultFsError::Unavailable(why));
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return unavailable(format!("/dev/fuse cannot be opened ({e})"));
    }
    if !nix::unistd::geteuid().is_root() {
        return unavailable(
            "the process is not root, and mounting FUSE without fusermount3 needs root".into(),
        );
    }
    Ok(())
}

/// What a loss dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loss {
    /// Files that had unsynced bytes.
    pub files: usize,
    /// Unsynced bytes written to them.
    pub bytes: u64,
    /// Each such file (relative to the store; `None` once unlinked) with its unsynced bytes,
    /// most first.
    pub by_file: Vec<(Option<PathBuf>, u64)>,
}

/// A mounted fault layer: `mountpoint` serves `backing`. Unmounted when dropped.
pub struct FaultFs {
    state: Arc<Mutex<State>>,
    mountpoint: PathBuf,
    session: Option<fuser::BackgroundSession>,
}

impl std::fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultFs")
            .field("mountpoint", &self.mountpoint)
            .finish()
    }
}

impl FaultFs {
    /// Mounts the layer at `mountpoint` (an existing, empty directory) over `backing` (an
    /// existing directory, which holds what is durable).
    pub fn mount(backing: &Path, mountpoint: &Path) -> Result<FaultFs, FaultFsError> {
        available()?;
        let state = Arc::new(Mutex::new(State::new(backing.to_path_buf())));
        let fs = FaultFilesystem {
            state: state.clone(),
        };
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("faultfs".into()),
            fuser::MountOption::NoAtime,
        ];
        config.n_threads = Some(1);
        let mount_err = |source| FaultFsError::Mount {
            mountpoint: mountpoint.to_path_buf(),
            source,
        };
        let session = fuser::Session::new(fs, mountpoint, &config)
            .and_then(fuser::Session::spawn)
            .map_err(mount_err)?;
        Ok(FaultFs {
            state,
            mountpoint: mountpoint.to_path_buf(),
            session: Some(session),
        })
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The backing directory: what is durable.
    pub fn backing(&self) -> PathBuf {
        self.lock().backing().to_path_buf()
    }

    /// Bytes written and not yet fsynced, over every file.
    pub fn unsynced_bytes(&self) -> u64 {
        self.lock().unsynced.values().map(|u| u.bytes()).sum()
    }

    /// Writes and fsyncs the layer has served.
    pub fn counters(&self) -> Counters {
        self.lock().counters
    }

    /// Drops every byte written since each file's last fsync, as a power loss does. The
    /// processes using the store must be dead first (SIGKILLed): a process still writing would
    /// go on from a state no disk ever held.
    pub fn lose_unsynced(&self) -> Loss {
        let mut s = self.lock();
        let mut by_file: Vec<(Option<PathBuf>, u64)> = s
            .unsynced
            .iter()
            .filter(|(_, u)| u.bytes() > 0)
            .map(|(ino, u)| (s.path_of(*ino), u.bytes()))
            .collect();
        by_file.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        s.unsynced.clear();
        Loss {
            files: by_file.len(),
            bytes: by_file.iter().map(|(_, b)| b).sum(),
            by_file,
        }
    }

    /// Damages every file of the store matching `glob` (relative to the store's root). Each
    /// matched file's unsynced bytes are made durable first (see the crate doc); the server
    /// using the store must be down.
    pub fn corrupt(&self, glob: &str, kind: Corruption) -> Result<Vec<Damage>, FaultFsError> {
        let backing = self.backing();
        let files = corrupt::matching_files(&backing, glob)?;
        {
            let mut s = self.lock();
            for rel in &files {
                s.persist_path(rel)
                    .map_err(|e| FaultFsError::io(&backing.join(rel), e))?;
            }
        }
        corrupt_dir(&backing, glob, kind)
    }

    /// Unmounts, lazily when a process still holds a file open (the mount then goes once it
    /// closes them). Dropping does the same.
    pub fn unmount(mut self) {
        self.unmount_now();
    }

    fn unmount_now(&mut self) {
        if let Some(session) = self.session.take()
            && let Err(e) = session.umount_and_join()
        {
            tracing::debug!(mountpoint = %self.mountpoint.display(), "unmount: {e}; detaching");
            let _ = nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

impl Drop for FaultFs {
    fn drop(&mut self) {
        self.unmount_now();
    }
}
