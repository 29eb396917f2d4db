//! The FUSE side's operations: a passthrough over the backing directory whose file contents and
//! sizes go through [`Unsynced`] until an fsync (or a write through a handle opened
//! `O_SYNC`/`O_DSYNC`, which is durable on return), and whose namespace operations (create,
//! mkdir, unlink, rmdir, rename, chmod) reach the backing directory at once. Which inode lives
//! where, and its unsynced bytes, is the inode table's ([`crate::inodes`]).

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use nix::libc;

use crate::inodes::State;
use crate::volatile::{self, Unsynced};

/// Attributes and entries are never cached by the kernel: a loss changes sizes under it.
const TTL: Duration = Duration::ZERO;

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

    /// `unlink` and `rmdir`: `name` under `parent` removed by `remove` and its inode detached.
    fn remove(
        &self,
        parent: INodeNo,
        name: &OsStr,
        remove: fn(&Path) -> std::io::Result<()>,
        reply: ReplyEmpty,
    ) {
        let mut s = self.lock();
        let result = s.child(parent, name).and_then(|rel| {
            remove(&s.abs(&rel)).map_err(Errno::from)?;
            s.detach(&rel);
            Ok(())
        });
        match result {
            Ok(()) => reply.ok(),
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
        self.remove(parent, name, |p| std::fs::remove_file(p), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, |p| std::fs::remove_dir(p), reply);
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
        self.lock().release_handle(ino.0, fh.0);
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
        let backing = self.lock().backing().to_path_buf();
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
