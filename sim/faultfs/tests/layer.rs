//! The fault layer mounted for real (FUSE, root): what survives a loss, file by file, through
//! the kernel's own write, fsync, rename, unlink and truncate. Where FUSE is not available each
//! test prints why and returns.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use faultfs::{Corruption, FaultFs};

struct Mounted {
    fs: FaultFs,
    backing: PathBuf,
    mnt: PathBuf,
    _dir: tempfile::TempDir,
}

fn mounted(test: &str) -> Option<Mounted> {
    if let Err(e) = faultfs::available() {
        eprintln!("{test}: skipped: {e}");
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let backing = dir.path().join("backing");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&backing).expect("backing dir");
    std::fs::create_dir(&mnt).expect("mountpoint");
    let fs = FaultFs::mount(&backing, &mnt).expect("mount");
    Some(Mounted {
        fs,
        backing,
        mnt,
        _dir: dir,
    })
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"))
}

#[test]
fn a_write_without_fsync_is_gone_after_a_loss() {
    let Some(m) = mounted("a_write_without_fsync_is_gone_after_a_loss") else {
        return;
    };
    let p = m.mnt.join("1.blk");
    let mut f = File::create(&p).expect("create");
    f.write_all(b"unsynced").expect("write");
    drop(f);
    assert_eq!(read(&p), "unsynced", "a read sees the write");
    assert_eq!(
        read(&m.backing.join("1.blk")),
        "",
        "nothing reached the disk"
    );
    assert_eq!(m.fs.unsynced_bytes(), 8);
    let loss = m.fs.lose_unsynced();
    assert_eq!((loss.files, loss.bytes), (1, 8));
    assert_eq!(loss.by_file, vec![(Some(PathBuf::from("1.blk")), 8)]);
    assert_eq!(
        read(&p),
        "",
        "the name survives (created), its bytes do not"
    );
}

#[test]
fn a_write_then_fsync_is_kept_after_a_loss() {
    let Some(m) = mounted("a_write_then_fsync_is_kept_after_a_loss") else {
        return;
    };
    let p = m.mnt.join("1.blk");
    let mut f = File::create(&p).expect("create");
    f.write_all(b"synced").expect("write");
    f.sync_all().expect("fsync");
    f.write_all(b"+later").expect("write");
    drop(f);
    assert_eq!(read(&p), "synced+later");
    m.fs.lose_unsynced();
    assert_eq!(read(&p), "synced", "only what followed the fsync is lost");
    assert_eq!(read(&m.backing.join("1.blk")), "synced");
    let c = m.fs.counters();
    assert!(c.fsyncs >= 1 && c.writes >= 2, "{c:?}");
}

#[test]
fn a_write_through_an_o_sync_handle_is_durable_on_return() {
    use std::os::unix::fs::OpenOptionsExt;
    let Some(m) = mounted("a_write_through_an_o_sync_handle_is_durable_on_return") else {
        return;
    };
    // nats-server's atomic writes (snapshots, peer state): O_SYNC, write, close, rename.
    let tmp = m.mnt.join("snap.tmp");
    let mut f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .custom_flags(nix::libc::O_SYNC)
        .open(&tmp)
        .expect("open O_SYNC");
    f.write_all(b"snapshot").expect("write");
    drop(f);
    std::fs::rename(&tmp, m.mnt.join("snap")).expect("rename");
    assert_eq!(m.fs.unsynced_bytes(), 0);
    m.fs.lose_unsynced();
    assert_eq!(read(&m.mnt.join("snap")), "snapshot");
}

#[test]
fn fdatasync_counts_as_a_sync_and_appends_land_in_order() {
    let Some(m) = mounted("fdatasync_counts_as_a_sync_and_appends_land_in_order") else {
        return;
    };
    let p = m.mnt.join("log");
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .expect("open");
    for i in 0..100 {
        write!(f, "{i},").expect("append");
    }
    f.sync_data().expect("fdatasync");
    m.fs.lose_unsynced();
    let text = read(&p);
    assert!(
        text.starts_with("0,1,2,") && text.ends_with("98,99,"),
        "{text}"
    );
}

#[test]
fn a_rename_keeps_the_unsynced_bytes_with_the_file() {
    let Some(m) = mounted("a_rename_keeps_the_unsynced_bytes_with_the_file") else {
        return;
    };
    // The write-then-rename pattern without an fsync: the new name is durable at once, the
    // contents are not, so a loss leaves the new name empty.
    let tmp = m.mnt.join("meta.tmp");
    std::fs::write(&tmp, b"v2").expect("write");
    std::fs::rename(&tmp, m.mnt.join("meta.inf")).expect("rename");
    assert_eq!(read(&m.mnt.join("meta.inf")), "v2");
    assert!(!tmp.exists());
    m.fs.lose_unsynced();
    assert_eq!(read(&m.mnt.join("meta.inf")), "");
    // With the fsync before the rename, the contents survive under the new name.
    let mut f = File::create(&tmp).expect("create");
    f.write_all(b"v3").expect("write");
    f.sync_all().expect("fsync");
    drop(f);
    std::fs::rename(&tmp, m.mnt.join("meta.inf")).expect("rename");
    m.fs.lose_unsynced();
    assert_eq!(read(&m.mnt.join("meta.inf")), "v3");
    // A rename onto itself changes nothing.
    std::fs::rename(m.mnt.join("meta.inf"), m.mnt.join("meta.inf")).expect("rename onto itself");
    assert_eq!(read(&m.mnt.join("meta.inf")), "v3");
}

#[test]
fn a_directory_rename_moves_every_file_under_it() {
    let Some(m) = mounted("a_directory_rename_moves_every_file_under_it") else {
        return;
    };
    std::fs::create_dir_all(m.mnt.join("a/b")).expect("mkdir");
    std::fs::write(m.mnt.join("a/b/f"), b"x").expect("write");
    std::fs::rename(m.mnt.join("a"), m.mnt.join("z")).expect("rename dir");
    assert_eq!(read(&m.mnt.join("z/b/f")), "x");
    let mut f = OpenOptions::new()
        .append(true)
        .open(m.mnt.join("z/b/f"))
        .expect("open");
    f.write_all(b"y").expect("write");
    f.sync_all().expect("fsync");
    assert_eq!(read(&m.backing.join("z/b/f")), "xy");
}

#[test]
fn an_unlinked_file_is_gone_and_its_unsynced_bytes_with_it() {
    let Some(m) = mounted("an_unlinked_file_is_gone_and_its_unsynced_bytes_with_it") else {
        return;
    };
    std::fs::write(m.mnt.join("gone"), b"abc").expect("write");
    std::fs::remove_file(m.mnt.join("gone")).expect("unlink");
    assert!(
        !m.backing.join("gone").exists(),
        "an unlink is durable at once"
    );
    assert_eq!(m.fs.unsynced_bytes(), 0);
    std::fs::create_dir(m.mnt.join("d")).expect("mkdir");
    std::fs::remove_dir(m.mnt.join("d")).expect("rmdir");
    assert!(!m.backing.join("d").exists());
}

#[test]
fn a_truncate_is_volatile_until_fsync() {
    let Some(m) = mounted("a_truncate_is_volatile_until_fsync") else {
        return;
    };
    let p = m.mnt.join("t");
    let mut f = File::create(&p).expect("create");
    f.write_all(b"hello world").expect("write");
    f.sync_all().expect("fsync");
    f.set_len(5).expect("truncate");
    assert_eq!(read(&p), "hello");
    m.fs.lose_unsynced();
    assert_eq!(read(&p), "hello world", "the cut bytes are back");
    f.set_len(5).expect("truncate");
    f.sync_all().expect("fsync");
    m.fs.lose_unsynced();
    assert_eq!(read(&p), "hello");
    // Reads at an offset and seeks see the merged contents.
    let mut f = File::open(&p).expect("open");
    f.seek(SeekFrom::Start(1)).expect("seek");
    let mut s = String::new();
    f.read_to_string(&mut s).expect("read");
    assert_eq!(s, "ello");
}

#[test]
fn corrupt_persists_then_damages_what_the_server_would_read() {
    let Some(m) = mounted("corrupt_persists_then_damages_what_the_server_would_read") else {
        return;
    };
    std::fs::create_dir_all(m.mnt.join("streams/S/msgs")).expect("mkdir");
    std::fs::write(m.mnt.join("streams/S/msgs/1.blk"), b"abcdefgh").expect("write");
    let d =
        m.fs.corrupt("**/msgs/*.blk", Corruption::Truncate)
            .expect("corrupt");
    assert_eq!((d.len(), d[0].len_before, d[0].at), (1, 8, 4));
    m.fs.lose_unsynced();
    assert_eq!(read(&m.mnt.join("streams/S/msgs/1.blk")), "abcd");
    let d =
        m.fs.corrupt("streams/S/msgs/1.blk", Corruption::Bitflip)
            .expect("corrupt");
    assert_eq!(d[0].at, 2);
    assert_eq!(read(&m.mnt.join("streams/S/msgs/1.blk")), "abbd");
    assert!(m.fs.corrupt("**/*.idx", Corruption::Bitflip).is_err());
}

#[test]
fn statfs_reports_the_backing_filesystem() {
    let Some(m) = mounted("statfs_reports_the_backing_filesystem") else {
        return;
    };
    let on_layer = nix::sys::statvfs::statvfs(&m.mnt).expect("statvfs");
    assert!(on_layer.blocks() > 0 && on_layer.block_size() > 0);
}

#[test]
fn the_mount_goes_when_the_layer_drops() {
    let Some(m) = mounted("the_mount_goes_when_the_layer_drops") else {
        return;
    };
    std::fs::write(m.mnt.join("f"), b"x").expect("write");
    let mnt = m.mnt.clone();
    let mounts = || std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    assert!(mounts().contains(&*mnt.to_string_lossy()));
    m.fs.unmount();
    assert!(!mounts().contains(&*mnt.to_string_lossy()));
    assert!(
        !mnt.join("f").exists(),
        "the mountpoint is an empty directory again"
    );
}
