//! The FUSE side: a passthrough over the backing directory whose file contents and sizes go
//! through [`Unsynced`] until an fsync (or a write through a handle opened `O_SYNC`/`O_DSYNC`,
//! which is durable on return), and whose namespace operations (create, mkdir, unlink,
//! rmdir, rename, chmod) reach the backing directory at once.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use nix::libc;

use crate::volatile::{self, Durable, Unsynced};

/// Attributes and entries are never cached by the kernel: a loss changes sizes under it.
const TTL: Duration = Duration::ZERO;

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

    fn ino_for(&mut self, rel: &Path) -> u64 {
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

    fn rel(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        self.nodes
            .get(&ino.0)
            .and_then(|n| n.rel.clone())
            .ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.rel(parent)?.join(name))
    }

    fn abs(&self, rel: &Path) -> PathBuf {
        self.backing.join(rel)
    }

    /// The backing file of an open inode.
    fn file(&self, ino: INodeNo) -> Result<Arc<File>, Errno> {
        self.nodes
            .get(&ino.0)
            .and_then(|n| n.file.clone())
            .ok_or(Errno::EBADF)
    }

    fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
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
    fn open_handle(&mut self, ino: u64) -> Result<u64, Errno> {
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

    fn truncate(&mut self, ino: u64, size: u64) -> Result<(), Errno> {
        let durable_len = self.durable_len(ino)?;
        self.unsynced
            .entry(ino)
            .or_insert_with(|| Unsynced::over(durable_len))
            .truncate(size);
        Ok(())
    }

    fn durable_len(&self, ino: u64) -> Result<u64, Errno> {
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
    fn detach(&mut self, rel: &Path) {
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
    fn moved(&mut self, from: &Path, to: &Path) {
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

/// The filesystem the FUSE session serves.
pub(crate) struct FaultFilesystem {
    pub(crate) state: Arc<Mutex<State>>,
}

impl FaultFilesystem {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state as consistent as its last operation.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry(&self, rel: PathBuf, reply: ReplyEntry) {
        let mut s = self.lock();
        if let Err(e) = std::fs::symlink_metadata(s.abs(&rel)) {
            return reply.error(Errno::from(e));
        }
        let ino = s.ino_for(&rel);
        match s.attr(ino) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }
}

fn o_flag(flags: OpenFlags, flag: i32) -> bool {
    flags.0 & flag != 0
}

impl Filesystem for FaultFilesystem {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let rel = match self.lock().child(parent, name) {
            Ok(r) => r,
            Err(e) => return reply.error(e),
        };
        self.entry(rel, reply);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.lock().attr(ino.0) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut s = self.lock();
        let result = (|| {
            if let Some(mode) = mode {
                let rel = s.rel(ino)?;
                std::fs::set_permissions(s.abs(&rel), std::fs::Permissions::from_mode(mode))
                    .map_err(Errno::from)?;
            }
            if let Some(size) = size {
                s.truncate(ino.0, size)?;
            }
            s.attr(ino.0)
        })();
        match result {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let rel = {
            let s = self.lock();
            let rel = match s.child(parent, name) {
                Ok(r) => r,
                Err(e) => return reply.error(e),
            };
            let abs = s.abs(&rel);
            if let Err(e) = std::fs::create_dir(&abs).and_then(|()| {
                std::fs::set_permissions(&abs, std::fs::Permissions::from_mode(mode & !umask))
            }) {
                return reply.error(Errno::from(e));
            }
            rel
        };
        self.entry(rel, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.lock();
        let result = s.child(parent, name).and_then(|rel| {
            std::fs::remove_file(s.abs(&rel)).map_err(Errno::from)?;
            s.detach(&rel);
            Ok(())
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.lock();
        let result = s.child(parent, name).and_then(|rel| {
            std::fs::remove_dir(s.abs(&rel)).map_err(Errno::from)?;
            s.detach(&rel);
            Ok(())
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.bits() != 0 {
            // RENAME_NOREPLACE / RENAME_EXCHANGE: nats-server uses neither.
            return reply.error(Errno::EINVAL);
        }
        let mut s = self.lock();
        let result = (|| {
            let from = s.child(parent, name)?;
            let to = s.child(newparent, newname)?;
            std::fs::rename(s.abs(&from), s.abs(&to)).map_err(Errno::from)?;
            if from == to {
                // A rename onto itself changes nothing (rename(2)).
                return Ok(());
            }
            s.detach(&to);
            s.moved(&from, &to);
            Ok(())
        })();
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut s = self.lock();
        let result = s.open_handle(ino.0).and_then(|fh| {
            if o_flag(flags, libc::O_TRUNC) {
                s.truncate(ino.0, 0)?;
            }
            Ok(fh)
        });
        match result {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut s = self.lock();
        let result = (|| {
            let rel = s.child(parent, name)?;
            let mut opts = OpenOptions::new();
            opts.read(true).write(true).mode(mode & !umask);
            if flags & libc::O_EXCL != 0 {
                opts.create_new(true);
            } else {
                opts.create(true);
            }
            // Created (or found) in the backing directory now: the name is durable, its
            // contents are not.
            drop(opts.open(s.abs(&rel)).map_err(Errno::from)?);
            let ino = s.ino_for(&rel);
            let fh = s.open_handle(ino)?;
            if flags & libc::O_TRUNC != 0 {
                s.truncate(ino, 0)?;
            }
            Ok((s.attr(ino)?, fh))
        })();
        match result {
            Ok((a, fh)) => reply.created(
                &TTL,
                &a,
                Generation(0),
                FileHandle(fh),
                FopenFlags::FOPEN_DIRECT_IO,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let s = self.lock();
        let result = s.file(ino).and_then(|f| {
            volatile::read(s.unsynced.get(&ino.0), f.as_ref(), offset, size as usize)
                .map_err(Errno::from)
        });
        match result {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = self.lock();
        let result = s.durable_len(ino.0).and_then(|len| {
            s.unsynced
                .entry(ino.0)
                .or_insert_with(|| Unsynced::over(len))
                .write(offset, data);
            s.counters.writes += 1;
            // O_SYNC and O_DSYNC (O_SYNC carries the O_DSYNC bit) make every write durable on
            // return, as nats-server's atomic file writes ask (writeAtomically).
            if o_flag(flags, libc::O_DSYNC) {
                s.counters.fsyncs += 1;
                let file = s.file(ino)?;
                if let Some(u) = s.unsynced.remove(&ino.0) {
                    u.persist(file.as_ref()).map_err(Errno::from)?;
                }
            }
            Ok(())
        });
        match result {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2) is not fsync(2): what was written stays unsynced.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let mut s = self.lock();
        s.handles.remove(&fh.0);
        let mut gone = false;
        if let Some(n) = s.nodes.get_mut(&ino.0) {
            n.open = n.open.saturating_sub(1);
            if n.open == 0 {
                n.file = None;
                gone = n.rel.is_none();
            }
        }
        if gone {
            s.nodes.remove(&ino.0);
            s.unsynced.remove(&ino.0);
        }
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut s = self.lock();
        s.counters.fsyncs += 1;
        let result = s.file(ino).and_then(|f| match s.unsynced.remove(&ino.0) {
            Some(u) => u.persist(f.as_ref()).map_err(Errno::from),
            None => f.sync_all().map_err(Errno::from),
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut s = self.lock();
        let result = (|| {
            let rel = s.rel(ino)?;
            let mut names: Vec<(std::ffi::OsString, FileType)> = std::fs::read_dir(s.abs(&rel))
                .map_err(Errno::from)?
                .filter_map(Result::ok)
                .map(|e| {
                    let kind = e
                        .file_type()
                        .ok()
                        .and_then(FileType::from_std)
                        .unwrap_or(FileType::RegularFile);
                    (e.file_name(), kind)
                })
                .collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            let mut entries = vec![
                (ino.0, FileType::Directory, std::ffi::OsString::from(".")),
                (ino.0, FileType::Directory, std::ffi::OsString::from("..")),
            ];
            for (name, kind) in names {
                let child = s.ino_for(&rel.join(&name));
                entries.push((child, kind, name));
            }
            Ok(entries)
        })();
        match result {
            Ok(entries) => {
                for (i, (child, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
                    if reply.add(INodeNo(*child), (i + 1) as u64, *kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Namespace operations are durable at once; there is nothing to sync.
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let backing = self.lock().backing.clone();
        match nix::sys::statvfs::statvfs(&backing) {
            Ok(v) => reply.statfs(
                v.blocks(),
                v.blocks_free(),
                v.blocks_available(),
                v.files(),
                v.files_free(),
                v.block_size() as u32,
                v.name_max() as u32,
                v.fragment_size() as u32,
            ),
            Err(e) => reply.error(Errno::from_i32(e as i32)),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let mut s = self.lock();
        let end = offset + length;
        let result = s.attr(ino.0).and_then(|a| {
            if end > a.size {
                s.truncate(ino.0, end)
            } else {
                Ok(())
            }
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
