//! The inode table behind the FUSE side: which path each inode lives at (none once unlinked),
//! the backing file its open handles share, the handles, and each inode's bytes not yet
//! durable ([`Unsynced`]). The FUSE operations ([`crate::passthrough`]) ask it; the layer's
//! controller ([`crate::FaultFs`]) persists and drops through it.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo};

use crate::volatile::{Durable, Unsynced};

/// One inode: where it lives in the backing directory (none once unlinked) and, while open,
/// the backing file every handle of it reads and writes through.
#[derive(Debug)]
struct Node {
    rel: Option<PathBuf>,
    file: Option<Arc<File>>,
    open: u32,
}

/// Counters the layer reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub writes: u64,
    pub fsyncs: u64,
}

/// Everything the mounted filesystem and its controller share.
#[derive(Debug)]
pub(crate) struct State {
    backing: PathBuf,
    nodes: HashMap<u64, Node>,
    paths: HashMap<PathBuf, u64>,
    next_ino: u64,
    pub(crate) unsynced: HashMap<u64, Unsynced>,
    handles: HashMap<u64, u64>,
    next_fh: u64,
    pub(crate) counters: Counters,
}

impl State {
    pub(crate) fn new(backing: PathBuf) -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            INodeNo::ROOT.0,
            Node {
                rel: Some(PathBuf::new()),
                file: None,
                open: 0,
            },
        );
        let mut paths = HashMap::new();
        paths.insert(PathBuf::new(), INodeNo::ROOT.0);
        State {
            backing,
            nodes,
            paths,
            next_ino: INodeNo::ROOT.0 + 1,
            unsynced: HashMap::new(),
            handles: HashMap::new(),
            next_fh: 1,
            counters: Counters::default(),
        }
    }

    pub(crate) fn backing(&self) -> &Path {
        &self.backing
    }

    /// Where inode `ino` lives now, relative to the root; `None` once unlinked.
    pub(crate) fn path_of(&self, ino: u64) -> Option<PathBuf> {
        self.nodes.get(&ino).and_then(|n| n.rel.clone())
    }

    pub(crate) fn ino_for(&mut self, rel: &Path) -> u64 {
        if let Some(ino) = self.paths.get(rel) {
            return *ino;
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.paths.insert(rel.to_path_buf(), ino);
        self.nodes.insert(
            ino,
            Node {
                rel: Some(rel.to_path_buf()),
                file: None,
                open: 0,
            },
        );
        ino
    }

    pub(crate) fn rel(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        self.nodes
            .get(&ino.0)
            .and_then(|n| n.rel.clone())
            .ok_or(Errno::ENOENT)
    }

    pub(crate) fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.rel(parent)?.join(name))
    }

    pub(crate) fn abs(&self, rel: &Path) -> PathBuf {
        self.backing.join(rel)
    }

    /// The backing file of an open inode.
    pub(crate) fn file(&self, ino: INodeNo) -> Result<Arc<File>, Errno> {
        self.nodes
            .get(&ino.0)
            .and_then(|n| n.file.clone())
            .ok_or(Errno::EBADF)
    }

    pub(crate) fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let node = self.nodes.get(&ino).ok_or(Errno::ENOENT)?;
        let meta = match (&node.file, &node.rel) {
            (Some(f), _) => f.metadata(),
            (None, Some(rel)) => std::fs::symlink_metadata(self.abs(rel)),
            (None, None) => return Err(Errno::ENOENT),
        }
        .map_err(Errno::from)?;
        let size = self.unsynced.get(&ino).map_or(meta.len(), Unsynced::size);
        let time = |s: i64, ns: i64| {
            UNIX_EPOCH + Duration::from_secs(s.max(0) as u64) + Duration::from_nanos(ns as u64)
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: time(meta.atime(), meta.atime_nsec()),
            mtime: time(meta.mtime(), meta.mtime_nsec()),
            ctime: time(meta.ctime(), meta.ctime_nsec()),
            crtime: SystemTime::UNIX_EPOCH,
            kind: FileType::from_std(meta.file_type()).unwrap_or(FileType::RegularFile),
            perm: (meta.mode() & 0o7777) as u16,
            nlink: meta.nlink() as u32,
            uid: meta.uid(),
            gid: meta.gid(),
            rdev: meta.rdev() as u32,
            blksize: 4096,
            flags: 0,
        })
    }

    /// Opens `ino`'s backing file if no handle has, and hands out a new handle.
    pub(crate) fn open_handle(&mut self, ino: u64) -> Result<u64, Errno> {
        let needs_file = self.nodes.get(&ino).ok_or(Errno::ENOENT)?.file.is_none();
        if needs_file {
            let rel = self.rel(INodeNo(ino))?;
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.abs(&rel))
                .map_err(Errno::from)?;
            if let Some(n) = self.nodes.get_mut(&ino) {
                n.file = Some(Arc::new(file));
            }
        }
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.open += 1;
        }
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, ino);
        Ok(fh)
    }

    /// Handle `fh` of `ino` is released: the last handle closes the backing file, and an
    /// inode no path names any more goes with its unsynced bytes.
    pub(crate) fn release_handle(&mut self, ino: u64, fh: u64) {
        self.handles.remove(&fh);
        let mut gone = false;
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.open = n.open.saturating_sub(1);
            if n.open == 0 {
                n.file = None;
                gone = n.rel.is_none();
            }
        }
        if gone {
            self.nodes.remove(&ino);
            self.unsynced.remove(&ino);
        }
    }

    pub(crate) fn truncate(&mut self, ino: u64, size: u64) -> Result<(), Errno> {
        let durable_len = self.durable_len(ino)?;
        self.unsynced
            .entry(ino)
            .or_insert_with(|| Unsynced::over(durable_len))
            .truncate(size);
        Ok(())
    }

    pub(crate) fn durable_len(&self, ino: u64) -> Result<u64, Errno> {
        let node = self.nodes.get(&ino).ok_or(Errno::ENOENT)?;
        match (&node.file, &node.rel) {
            (Some(f), _) => f.durable_len().map_err(Errno::from),
            (None, Some(rel)) => std::fs::metadata(self.abs(rel))
                .map(|m| m.len())
                .map_err(Errno::from),
            (None, None) => Err(Errno::ENOENT),
        }
    }

    /// The path `rel` no longer names `ino`: unlinked, or replaced by a rename. An inode no
    /// handle holds has nothing left to read its unsynced bytes, so they go.
    pub(crate) fn detach(&mut self, rel: &Path) {
        if let Some(ino) = self.paths.remove(rel)
            && let Some(n) = self.nodes.get_mut(&ino)
        {
            n.rel = None;
            if n.open == 0 {
                self.nodes.remove(&ino);
                self.unsynced.remove(&ino);
            }
        }
    }

    /// Moves `from` and everything under it to `to` in the path index.
    pub(crate) fn moved(&mut self, from: &Path, to: &Path) {
        let moving: Vec<(PathBuf, u64)> = self
            .paths
            .iter()
            .filter(|(p, _)| p.starts_with(from))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        for (old, ino) in moving {
            self.paths.remove(&old);
            let new = match old.strip_prefix(from) {
                Ok(rest) if rest.as_os_str().is_empty() => to.to_path_buf(),
                Ok(rest) => to.join(rest),
                Err(_) => continue,
            };
            self.paths.insert(new.clone(), ino);
            if let Some(n) = self.nodes.get_mut(&ino) {
                n.rel = Some(new);
            }
        }
    }

    /// Makes the unsynced bytes of the file at `rel` durable, as an fsync would.
    pub(crate) fn persist_path(&mut self, rel: &Path) -> io::Result<()> {
        let Some(ino) = self.paths.get(rel).copied() else {
            return Ok(());
        };
        if let Some(u) = self.unsynced.remove(&ino) {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.abs(rel))?;
            u.persist(&file)?;
        }
        Ok(())
    }
}
