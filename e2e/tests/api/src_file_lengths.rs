//! Every source file of the workspace is at most [`MAX_LINES`] lines: a file a newcomer can read
//! in one sitting. Every `.rs` file under a `src/` directory counts (libraries, binaries, their
//! inline tests and `tests.rs` files alike); `tests/`, `benches/` and `target/` do not. The
//! failure names each longer file with its length: split it along its ideas.

use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MAX_LINES: usize = 700;

/// Every `.rs` file under `root` that lies below a `src` directory, with its line count, in
/// path order. Hidden directories and `target` are not entered.
fn source_files(root: &Path) -> Vec<(PathBuf, usize)> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs")
                && path
                    .strip_prefix(root)
                    .is_ok_and(|rel| rel.components().any(|c| c.as_os_str() == "src"))
            {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
                found.push((rel, text.lines().count()));
            }
        }
    }
    found.sort();
    found
}

/// The files of `files` longer than `max` lines, one line each: `path: N lines`.
fn too_long(files: &[(PathBuf, usize)], max: usize) -> Vec<String> {
    files
        .iter()
        .filter(|(_, lines)| *lines > max)
        .map(|(path, lines)| format!("{}: {lines} lines", path.display()))
        .collect()
}

#[test]
fn every_src_file_is_at_most_700_lines() {
    let workspace = sim::checkout::root();
    let workspace = workspace.canonicalize().expect("the workspace directory");
    let files = source_files(&workspace);
    assert!(
        files.len() > 100,
        "only {} source files found: the walk lost its way",
        files.len()
    );
    let long = too_long(&files, MAX_LINES);
    assert!(
        long.is_empty(),
        "{} src file(s) over {MAX_LINES} lines, split each along its ideas:\n{}",
        long.len(),
        long.join("\n")
    );
}

#[test]
fn a_src_file_of_701_lines_is_named_and_tests_and_target_are_not_read() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lines = |n: usize| "x\n".repeat(n);
    let files = [
        ("crate/src/long.rs", lines(701)),
        ("crate/src/deep/at_limit.rs", lines(700)),
        ("crate/src/notes.md", lines(900)),
        ("crate/tests/long_test.rs", lines(900)),
        ("target/debug/build/src/generated.rs", lines(900)),
        (".hidden/src/long.rs", lines(900)),
    ];
    for (path, text) in &files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("the directories");
        std::fs::write(path, text).expect("a file");
    }
    let found = source_files(dir.path());
    assert_eq!(
        found,
        vec![
            (PathBuf::from("crate/src/deep/at_limit.rs"), 700),
            (PathBuf::from("crate/src/long.rs"), 701),
        ]
    );
    assert_eq!(
        too_long(&found, MAX_LINES),
        vec!["crate/src/long.rs: 701 lines".to_string()]
    );
}
