//! The image build started from a test is the build started from a shell: `scripts/image.py`
//! drops what cargo set for the crate whose test runs it (CARGO_PKG_NAME, CARGO_MANIFEST_DIR,
//! NEXTEST_*, ...). Without that, ring's build script (which asks to rerun when CARGO_PKG_NAME
//! and four others change, compared with cargo's own environment) reran, and everything above
//! it was rebuilt: 9 of the first image test's 10 minutes under load, after `.ci/run` had built
//! the same binaries from a shell. Nor is the build given SOURCE_DATE_EPOCH, which dates the
//! image only and on which ring's build script also reruns (the image tests give it, a shell
//! build does not: a gate's first image test took 250 s against 80).

use std::process::Command;

use crate::{BINARY, have, profile, workspace_root};

/// Whether a variable is one cargo or nextest set for this test (what a shell would not have).
fn set_for_this_test(name: &str) -> bool {
    [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "NEXTEST",
        "OUT_DIR",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

fn image_py(shell_like: bool, out: &std::path::Path) -> std::process::Output {
    let mut cmd = Command::new("python3");
    cmd.current_dir(workspace_root())
        .arg("scripts/image.py")
        .args(["--profile", &profile(), "--out"])
        .arg(out)
        .arg(BINARY);
    if shell_like {
        for (name, _) in std::env::vars_os() {
            if set_for_this_test(&name.to_string_lossy()) {
                cmd.env_remove(&name);
            }
        }
    } else {
        // As the image tests give it (`crate::build`), where `.ci/run`'s build has none.
        cmd.env("SOURCE_DATE_EPOCH", crate::EPOCH);
    }
    cmd.output().expect("running python3 scripts/image.py")
}

#[test]
fn a_build_from_a_test_is_the_build_from_a_shell() {
    if !have("python3") {
        eprintln!("SKIP: no python3 to run scripts/image.py");
        return;
    }
    assert!(
        std::env::var_os("CARGO_PKG_NAME").is_some(),
        "cargo sets CARGO_PKG_NAME for a test: the variable this test is about"
    );
    let dir = tempfile::tempdir().expect("a temp dir");
    // From this test's environment (a build, or cargo's no-op), then as from a shell.
    let first = image_py(false, dir.path());
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let second = image_py(true, dir.path());
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{said}");
    let compiled: Vec<&str> = said
        .lines()
        .filter(|l| l.trim_start().starts_with("Compiling"))
        .collect();
    assert!(
        compiled.is_empty(),
        "the same build from a shell's environment compiled again: {compiled:#?}"
    );
}
