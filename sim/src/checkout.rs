//! The checkout a test or the `sim` runs in, and the workspace's binaries, found at run time.
//!
//! Not `env!("CARGO_MANIFEST_DIR")` nor `env!("CARGO_BIN_EXE_…")` alone: those are the paths of the
//! build, compiled in, and cargo does not build a unit again because its checkout moved. The gate
//! keeps the workspace's own build between fresh clones (`scripts/build_cache.py`), so a unit of an
//! earlier clone, found fresh, would read that clone's files and run its binaries (or fail where the
//! clone is gone). At run time the checkout is:
//!
//! 1. the workspace above `CARGO_MANIFEST_DIR` of the process's environment (cargo and nextest set it
//!    for a test, `cargo run` for a binary),
//! 2. else the workspace above the running executable (`target/debug/sim`, `target/debug/deps/…`),
//! 3. else the workspace above the build's `CARGO_MANIFEST_DIR` (a binary copied out of its checkout).
//!
//! "The workspace above" a directory is its nearest ancestor (itself included) whose `Cargo.toml`
//! declares `[workspace]`. No crate answers this: `cargo metadata` would run cargo from a test.

use std::path::{Path, PathBuf};

/// The workspace root of this checkout (the directory holding the workspace's `Cargo.toml`).
pub fn root() -> PathBuf {
    let from_env = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let from_exe = std::env::current_exe().ok();
    let built = Path::new(env!("CARGO_MANIFEST_DIR"));
    [from_env.as_deref(), from_exe.as_deref()]
        .into_iter()
        .flatten()
        .find_map(workspace_above)
        .or_else(|| workspace_above(built))
        .unwrap_or_else(|| built.parent().unwrap_or(built).to_path_buf())
}

/// `path` relative to the workspace root (an absolute `path` stays as it is).
pub fn path(path: impl AsRef<Path>) -> PathBuf {
    root().join(path)
}

/// The executable of the workspace's binary `$name` for an integration test of its package, found
/// at run time ([`bin_exe`]): `sim::bin_exe!("cluster-controller")`.
#[macro_export]
macro_rules! bin_exe {
    ($name:literal) => {
        $crate::checkout::bin_exe($name, env!(concat!("CARGO_BIN_EXE_", $name)))
    };
}

/// The nearest ancestor of `dir` (itself included) whose `Cargo.toml` declares `[workspace]`.
pub fn workspace_above(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| {
            std::fs::read_to_string(d.join("Cargo.toml"))
                .is_ok_and(|manifest| declares_workspace(&manifest))
        })
        .map(Path::to_path_buf)
}

/// Whether a `Cargo.toml`'s text declares the `[workspace]` table (a line of its own).
fn declares_workspace(manifest: &str) -> bool {
    manifest.lines().any(|line| line.trim() == "[workspace]")
}

/// The executable of the workspace's binary `name` of this build, for an integration test:
/// nextest's `NEXTEST_BIN_EXE_<name>`, else the binary beside the test's own executable
/// (`target/<profile>/deps/<test>` → `target/<profile>/<name>`), else `built`, the
/// `env!("CARGO_BIN_EXE_<name>")` the test was compiled with.
pub fn bin_exe(name: &str, built: &'static str) -> PathBuf {
    if let Some(p) = std::env::var_os(format!("NEXTEST_BIN_EXE_{name}")) {
        return PathBuf::from(p);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| beside_deps(&exe, name))
        .unwrap_or_else(|| PathBuf::from(built))
}

/// `target/<profile>/<name>` for an executable in `target/<profile>/deps/`, if that file exists.
fn beside_deps(exe: &Path, name: &str) -> Option<PathBuf> {
    let deps = exe.parent()?;
    if deps.file_name()? != "deps" {
        return None;
    }
    let candidate = deps
        .parent()?
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    candidate.is_file().then_some(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::workspace_table("[workspace]\nmembers = [\"a\"]\n", true)]
    #[case::indented("  [workspace]  \n", true)]
    #[case::package_only("[package]\nname = \"a\"\n", false)]
    #[case::sub_table_only("[workspace.dependencies]\nx = \"1\"\n", false)]
    #[case::in_a_comment("# [workspace]\n", false)]
    fn a_manifest_declares_the_workspace(#[case] manifest: &str, #[case] want: bool) {
        assert_eq!(declares_workspace(manifest), want);
    }

    #[test]
    fn the_root_is_the_workspace_above_the_crate() {
        let root = root();
        assert!(root.join("sim").join("Cargo.toml").is_file(), "{root:?}");
        assert!(declares_workspace(
            &std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default()
        ));
    }

    #[test]
    fn the_workspace_above_a_nested_dir_and_none_above_a_bare_one() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("member/src")).unwrap();
        std::fs::write(
            ws.join("Cargo.toml"),
            "[workspace]\nmembers = [\"member\"]\n",
        )
        .unwrap();
        std::fs::write(ws.join("member/Cargo.toml"), "[package]\nname = \"m\"\n").unwrap();
        assert_eq!(workspace_above(&ws.join("member/src")), Some(ws.clone()));
        assert_eq!(workspace_above(&ws), Some(ws));
        assert_eq!(workspace_above(&dir.path().join("elsewhere")), None);
    }

    #[test]
    fn a_binary_beside_deps_only_when_it_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let deps = dir.path().join("debug/deps");
        std::fs::create_dir_all(&deps).unwrap();
        std::fs::write(dir.path().join("debug/tool"), "").unwrap();
        assert_eq!(
            beside_deps(&deps.join("t-0123456789abcdef"), "tool"),
            Some(dir.path().join("debug/tool"))
        );
        assert_eq!(beside_deps(&deps.join("t-0123456789abcdef"), "other"), None);
        assert_eq!(beside_deps(&dir.path().join("debug/t"), "tool"), None);
    }
}
