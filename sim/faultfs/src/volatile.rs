//! What a file holds that no fsync has made durable: the bytes written since its last fsync (as
//! extents over its durable contents), and its size. Pure: no FUSE, no I/O but through the
//! [`Durable`] a caller hands in, so the rules are tested as a table.
//!
//! The model is the page cache of a power loss: a read sees the latest write; an fsync makes
//! the file's contents and size durable as they read then; a loss returns the file to what its
//! last fsync made durable. A truncate is part of a file's contents (its size), volatile like a
//! write, so a loss can bring back bytes a truncate cut.

use std::collections::BTreeMap;
use std::io;

/// A file's durable bytes (the backing file), read and written by offset.
pub trait Durable {
    /// The durable length.
    fn durable_len(&self) -> io::Result<u64>;
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes everything written durable (fsync).
    fn sync(&self) -> io::Result<()>;
}

impl Durable for std::fs::File {
    fn durable_len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }
    fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self, data, offset)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        std::fs::File::set_len(self, len)
    }
    fn sync(&self) -> io::Result<()> {
        self.sync_all()
    }
}

/// The unsynced state of one file: present only while the file has unsynced changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unsynced {
    /// Written bytes by offset; extents never overlap or touch (adjacent writes merge).
    extents: BTreeMap<u64, Vec<u8>>,
    /// The size the file reads as.
    size: u64,
    /// Durable bytes from here on read as zeros (a truncate below them since the last fsync).
    hidden_from: Option<u64>,
}

impl Unsynced {
    /// A file about to change whose durable length is `durable_len`.
    pub fn over(durable_len: u64) -> Self {
        Unsynced {
            extents: BTreeMap::new(),
            size: durable_len,
            hidden_from: None,
        }
    }

    /// The size the file reads as.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes held in memory that a loss would drop.
    pub fn bytes(&self) -> u64 {
        self.extents.values().map(|e| e.len() as u64).sum()
    }

    /// Records a write of `data` at `offset`.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = offset + data.len() as u64;
        // Every extent that overlaps or touches [offset, end) merges into one.
        let touching: Vec<u64> = self
            .extents
            .range(..=end)
            .filter(|(start, e)| **start + e.len() as u64 >= offset)
            .map(|(start, _)| *start)
            .collect();
        let new_start = touching.first().map_or(offset, |s| (*s).min(offset));
        let mut new_end = end;
        for s in &touching {
            new_end = new_end.max(s + self.extents[s].len() as u64);
        }
        let mut merged = vec![0u8; (new_end - new_start) as usize];
        for s in &touching {
            if let Some(e) = self.extents.remove(s) {
                let at = (s - new_start) as usize;
                merged[at..at + e.len()].copy_from_slice(&e);
            }
        }
        let at = (offset - new_start) as usize;
        merged[at..at + data.len()].copy_from_slice(data);
        self.extents.insert(new_start, merged);
        self.size = self.size.max(end);
    }

    /// Records a truncate (or extension) to `size`.
    pub fn truncate(&mut self, size: u64) {
        if size < self.size {
            self.hidden_from = Some(self.hidden_from.map_or(size, |h| h.min(size)));
            let beyond: Vec<u64> = self.extents.range(size..).map(|(s, _)| *s).collect();
            for s in beyond {
                self.extents.remove(&s);
            }
            if let Some((start, e)) = self.extents.range_mut(..size).next_back() {
                let keep = (size - start) as usize;
                if e.len() > keep {
                    e.truncate(keep);
                }
            }
        }
        self.size = size;
    }

    /// Reads `len` bytes at `offset` as the file reads now: durable bytes under the written
    /// ones, zeros past what is durable or hidden, nothing past the size.
    pub fn read(&self, durable: &dyn Durable, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        read(Some(self), durable, offset, len)
    }

    /// Makes the file durable as it reads now (what an fsync does): durable bytes a truncate hid
    /// are cut, the written extents land, the size is set, and the durable file is synced.
    pub fn persist(self, durable: &dyn Durable) -> io::Result<()> {
        if let Some(h) = self.hidden_from {
            durable.set_len(h.min(durable.durable_len()?))?;
        }
        for (start, e) in &self.extents {
            durable.write_all_at(e, *start)?;
        }
        durable.set_len(self.size)?;
        durable.sync()
    }
}

/// Reads a file with or without unsynced state (see [`Unsynced::read`]).
pub fn read(
    unsynced: Option<&Unsynced>,
    durable: &dyn Durable,
    offset: u64,
    len: usize,
) -> io::Result<Vec<u8>> {
    let size = match unsynced {
        Some(u) => u.size,
        None => durable.durable_len()?,
    };
    if offset >= size {
        return Ok(Vec::new());
    }
    let end = size.min(offset + len as u64);
    let mut buf = vec![0u8; (end - offset) as usize];
    let visible_end = unsynced
        .and_then(|u| u.hidden_from)
        .map_or(end, |h| h.min(end));
    if visible_end > offset {
        let want = (visible_end - offset) as usize;
        let mut got = 0;
        while got < want {
            let n = durable.read_at(&mut buf[got..want], offset + got as u64)?;
            if n == 0 {
                break;
            }
            got += n;
        }
    }
    if let Some(u) = unsynced {
        for (start, e) in u.extents.range(..end) {
            let e_end = start + e.len() as u64;
            if e_end <= offset {
                continue;
            }
            let from = offset.max(*start);
            let to = end.min(e_end);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&e[(from - start) as usize..(to - start) as usize]);
        }
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use std::cell::RefCell;

    /// A durable file in memory that counts syncs.
    #[derive(Default)]
    struct Mem {
        bytes: RefCell<Vec<u8>>,
        syncs: RefCell<u32>,
    }

    impl Durable for Mem {
        fn durable_len(&self) -> io::Result<u64> {
            Ok(self.bytes.borrow().len() as u64)
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            let b = self.bytes.borrow();
            let from = (offset as usize).min(b.len());
            let n = buf.len().min(b.len() - from);
            buf[..n].copy_from_slice(&b[from..from + n]);
            Ok(n)
        }
        fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
            let mut b = self.bytes.borrow_mut();
            let end = offset as usize + data.len();
            if b.len() < end {
                b.resize(end, 0);
            }
            b[offset as usize..end].copy_from_slice(data);
            Ok(())
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.bytes.borrow_mut().resize(len as usize, 0);
            Ok(())
        }
        fn sync(&self) -> io::Result<()> {
            *self.syncs.borrow_mut() += 1;
            Ok(())
        }
    }

    /// One operation on a file.
    #[derive(Clone, Copy, Debug)]
    enum Op {
        Write(u64, &'static str),
        Truncate(u64),
        Fsync,
        Loss,
    }

    /// Runs `ops` over a durable file holding `durable`; returns (what the file reads, what is durable).
    fn run(durable: &str, ops: &[Op]) -> (String, String) {
        let mem = Mem::default();
        *mem.bytes.borrow_mut() = durable.as_bytes().to_vec();
        let mut u: Option<Unsynced> = None;
        for op in ops {
            match *op {
                Op::Write(at, s) => u
                    .get_or_insert_with(|| Unsynced::over(mem.durable_len().unwrap()))
                    .write(at, s.as_bytes()),
                Op::Truncate(n) => u
                    .get_or_insert_with(|| Unsynced::over(mem.durable_len().unwrap()))
                    .truncate(n),
                Op::Fsync => {
                    if let Some(x) = u.take() {
                        x.persist(&mem).unwrap();
                    }
                }
                Op::Loss => u = None,
            }
        }
        let reads = read(u.as_ref(), &mem, 0, 1 << 20).unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).replace('\0', "_");
        (text(&reads), text(&mem.bytes.borrow()))
    }

    use Op::*;

    #[rstest]
    #[case::unsynced_write_reads("a write reads back before any fsync", "", &[Write(0, "abc")], "abc", "")]
    #[case::loss_drops_unsynced("a write, no fsync, a loss: gone", "", &[Write(0, "abc"), Loss], "", "")]
    #[case::fsync_keeps("a write, fsync, a loss: kept", "", &[Write(0, "abc"), Fsync, Loss], "abc", "abc")]
    #[case::only_since_fsync("only what followed the last fsync is lost", "", &[Write(0, "abc"), Fsync, Write(3, "def"), Loss], "abc", "abc")]
    #[case::overwrite_lost("an unsynced overwrite of durable bytes is lost", "hello", &[Write(1, "EL"), Loss], "hello", "hello")]
    #[case::overwrite_reads("an overwrite reads over the durable bytes", "hello", &[Write(1, "EL")], "hELlo", "hello")]
    #[case::appends_merge("appends merge into one extent and land together", "", &[Write(0, "ab"), Write(2, "cd"), Write(4, "ef"), Fsync], "abcdef", "abcdef")]
    #[case::overlap("overlapping writes: the later wins", "", &[Write(0, "aaaa"), Write(2, "bbbb"), Write(1, "c")], "acbbbb", "")]
    #[case::sparse("a write past the end leaves zeros", "ab", &[Write(4, "z")], "ab__z", "ab")]
    #[case::truncate_volatile("a truncate is volatile: a loss brings the cut bytes back", "hello", &[Truncate(2), Loss], "hello", "hello")]
    #[case::truncate_synced("a synced truncate is durable", "hello", &[Truncate(2), Fsync, Loss], "he", "he")]
    #[case::truncate_then_extend("bytes a truncate cut read as zeros when the file grows again", "hello", &[Truncate(1), Write(3, "X")], "h__X", "hello")]
    #[case::truncate_extend_sync("and are zeros on disk once synced", "hello", &[Truncate(1), Write(3, "X"), Fsync], "h__X", "h__X")]
    #[case::truncate_cuts_unsynced("a truncate trims unsynced writes too", "", &[Write(0, "abcdef"), Truncate(3), Write(5, "Z")], "abc__Z", "")]
    #[case::extend_by_truncate("a truncate up extends with zeros", "ab", &[Truncate(4), Fsync], "ab__", "ab__")]
    fn the_page_cache_of_a_power_loss(
        #[case] what: &str,
        #[case] durable: &str,
        #[case] ops: &[Op],
        #[case] reads: &str,
        #[case] on_disk: &str,
    ) {
        let (r, d) = run(durable, ops);
        assert_eq!((r.as_str(), d.as_str()), (reads, on_disk), "{what}");
    }

    #[test]
    fn a_read_window_inside_a_file() {
        let mem = Mem::default();
        *mem.bytes.borrow_mut() = b"0123456789".to_vec();
        let mut u = Unsynced::over(10);
        u.write(4, b"ab");
        assert_eq!(u.read(&mem, 3, 4).unwrap(), b"3ab6");
        assert_eq!(u.read(&mem, 8, 10).unwrap(), b"89");
        assert_eq!(u.read(&mem, 10, 4).unwrap(), b"");
        assert_eq!(u.bytes(), 2);
    }

    #[test]
    fn persist_syncs_the_durable_file() {
        let mem = Mem::default();
        let mut u = Unsynced::over(0);
        u.write(0, b"x");
        u.persist(&mem).unwrap();
        assert_eq!(*mem.syncs.borrow(), 1);
    }
}
