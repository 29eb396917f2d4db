//! Damage to files at rest: one bit flipped, or the tail cut off, in every file a glob names.
//! Applied to a store whose server is down, on or off the layer.

use std::path::{Path, PathBuf};

use crate::FaultFsError;

/// How a file is damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corruption {
    /// The lowest bit of the byte in the middle of the file flipped (a block file's middle is
    /// inside a message record, whose checksum then fails).
    Bitflip,
    /// The second half of the file cut off (a torn tail: the last records gone, one cut short).
    Truncate,
}

impl std::str::FromStr for Corruption {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bitflip" => Ok(Corruption::Bitflip),
            "truncate" => Ok(Corruption::Truncate),
            other => Err(format!(
                "corruption kind {other:?} is neither bitflip nor truncate"
            )),
        }
    }
}

/// What was done to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The file, relative to the store's root.
    pub path: PathBuf,
    pub kind: Corruption,
    /// Its length before.
    pub len_before: u64,
    /// The flipped byte's offset (bitflip) or the new length (truncate).
    pub at: u64,
}

/// Whether `path` (relative, `/`-separated) matches `glob`: `*` is any run of characters
/// within one path segment, `**` any run across segments, `?` one character.
pub fn glob_matches(glob: &str, path: &str) -> bool {
    fn go(g: &[u8], p: &[u8]) -> bool {
        match g {
            [] => p.is_empty(),
            [b'*', b'*', rest @ ..] => {
                let rest = rest.strip_prefix(b"/").unwrap_or(rest);
                (0..=p.len()).any(|i| go(rest, &p[i..]))
            }
            [b'*', rest @ ..] => (0..=p.len())
                .take_while(|i| *i == 0 || p[i - 1] != b'/')
                .any(|i| go(rest, &p[i..])),
            [b'?', rest @ ..] => !p.is_empty() && p[0] != b'/' && go(rest, &p[1..]),
            [c, rest @ ..] => p.first() == Some(c) && go(rest, &p[1..]),
        }
    }
    go(glob.as_bytes(), path.as_bytes())
}

/// Every regular file under `root` whose relative path matches `glob`, sorted.
pub fn matching_files(root: &Path, glob: &str) -> Result<Vec<PathBuf>, FaultFsError> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| FaultFsError::io(&dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| FaultFsError::io(&dir, e))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| FaultFsError::io(&path, e))?;
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file()
                && let Ok(rel) = path.strip_prefix(root)
                && glob_matches(glob, &rel.to_string_lossy())
            {
                out.push(rel.to_path_buf());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Damages the file at `root/rel` as `kind` says, and syncs it.
pub fn damage(root: &Path, rel: &Path, kind: Corruption) -> Result<Damage, FaultFsError> {
    use std::os::unix::fs::FileExt;
    let path = root.join(rel);
    let io = |e| FaultFsError::io(&path, e);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let at = match kind {
        Corruption::Bitflip => {
            if len == 0 {
                return Err(FaultFsError::Empty(path));
            }
            let at = len / 2;
            let mut b = [0u8; 1];
            file.read_exact_at(&mut b, at).map_err(io)?;
            b[0] ^= 1;
            file.write_all_at(&b, at).map_err(io)?;
            at
        }
        Corruption::Truncate => {
            let at = len / 2;
            file.set_len(at).map_err(io)?;
            at
        }
    };
    file.sync_all().map_err(io)?;
    Ok(Damage {
        path: rel.to_path_buf(),
        kind,
        len_before: len,
        at,
    })
}

/// Damages every file under `root` matching `glob`; refuses a glob that matches nothing, so a
/// scenario never passes on damage that was not done.
pub fn corrupt_dir(root: &Path, glob: &str, kind: Corruption) -> Result<Vec<Damage>, FaultFsError> {
    let files = matching_files(root, glob)?;
    if files.is_empty() {
        return Err(FaultFsError::NoMatch {
            root: root.to_path_buf(),
            glob: glob.to_string(),
        });
    }
    files.iter().map(|rel| damage(root, rel, kind)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::star_in_segment("*.blk", "1.blk", true)]
    #[case::star_stops_at_slash("*.blk", "msgs/1.blk", false)]
    #[case::double_star_crosses("**/*.blk", "jetstream/APP/streams/ORDERS/msgs/1.blk", true)]
    #[case::double_star_zero_segments("**/1.blk", "1.blk", true)]
    #[case::stream_named(
        "**/streams/ORDERS/msgs/*.blk",
        "jetstream/APP/streams/ORDERS/msgs/12.blk",
        true
    )]
    #[case::other_stream(
        "**/streams/ORDERS/msgs/*.blk",
        "jetstream/APP/streams/OTHER/msgs/12.blk",
        false
    )]
    #[case::question("?.idx", "1.idx", true)]
    #[case::question_one_char("?.idx", "12.idx", false)]
    #[case::literal("meta.inf", "meta.inf", true)]
    fn globs(#[case] glob: &str, #[case] path: &str, #[case] want: bool) {
        assert_eq!(glob_matches(glob, path), want, "{glob} vs {path}");
    }

    #[test]
    fn bitflip_flips_one_bit_in_the_middle_and_truncate_halves() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("msgs")).unwrap();
        std::fs::write(dir.path().join("msgs/1.blk"), b"abcdefgh").unwrap();
        std::fs::write(dir.path().join("msgs/2.blk"), b"0123456789").unwrap();
        let d = corrupt_dir(dir.path(), "msgs/1.blk", Corruption::Bitflip).unwrap();
        assert_eq!(d[0].at, 4);
        assert_eq!(
            std::fs::read(dir.path().join("msgs/1.blk")).unwrap(),
            b"abcddfgh"
        );
        let d = corrupt_dir(dir.path(), "**/2.blk", Corruption::Truncate).unwrap();
        assert_eq!((d[0].len_before, d[0].at), (10, 5));
        assert_eq!(
            std::fs::read(dir.path().join("msgs/2.blk")).unwrap(),
            b"01234"
        );
    }

    #[test]
    fn a_glob_matching_nothing_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = corrupt_dir(dir.path(), "**/*.blk", Corruption::Bitflip).unwrap_err();
        assert!(matches!(err, FaultFsError::NoMatch { .. }), "{err}");
    }
}
