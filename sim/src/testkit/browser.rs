//! Headless Chromium (Debian's `chromium`, `scripts/install-browser.sh`) for the report page's
//! browser check: the DOM a page renders to (`--dump-dom`) and a PNG of it (`--screenshot`),
//! each from a fresh profile, offline, with a deadline; the process is killed by its PID if it
//! overstays.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::KillOnDrop;
use crate::wait::poll;

/// How long one Chromium run gets (a cold start on a loaded 2-core machine takes a few seconds).
pub const DEADLINE: Duration = Duration::from_secs(90);

/// The flags every run takes: headless, no sandbox (root in a container), nothing fetched or
/// synced behind the page's back.
pub const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
];

/// The Chromium binary on `PATH`, or why there is none.
pub fn chromium() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err("no chromium on PATH (scripts/install-browser.sh installs Debian's package)".into())
}

/// What one run printed: its stdout (the DOM, for `--dump-dom`) and its stderr (its log).
#[derive(Debug, Clone)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
}

/// Runs Chromium on `page` with `extra` flags in a fresh profile under `work`; its output once
/// it exited 0.
pub async fn run(page: &Path, extra: &[String], work: &Path) -> Result<Output, String> {
    let bin = chromium()?;
    let profile = tempfile::tempdir_in(work).map_err(|e| format!("a profile dir: {e}"))?;
    let out_path = work.join(format!("chromium-{}.out", std::process::id()));
    let err_path = work.join(format!("chromium-{}.err", std::process::id()));
    let file = |p: &Path| std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    let url = format!("file://{}", page.display());
    let mut child = KillOnDrop::new(
        Command::new(&bin)
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(file(&out_path)?)
            .stderr(file(&err_path)?)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?,
    );
    let proc = &mut child.0;
    let status = poll(&format!("chromium renders {url}"), DEADLINE, || {
        let exited = proc.try_wait().map_err(|e| e.to_string());
        async move { exited }
    })
    .await
    .map_err(|e| e.to_string())?;
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let out = Output {
        stdout: read(&out_path),
        stderr: read(&err_path),
    };
    if !status.success() {
        return Err(format!("chromium exited with {status}: {}", out.stderr));
    }
    Ok(out)
}

/// The DOM `page` renders to.
pub async fn dump_dom(page: &Path, work: &Path) -> Result<Output, String> {
    run(page, &["--dump-dom".to_string()], work).await
}

/// A PNG of `page` at `width` × `height` CSS pixels, written to `png`.
pub async fn screenshot(
    page: &Path,
    png: &Path,
    (width, height): (u32, u32),
    work: &Path,
) -> Result<Output, String> {
    let out = run(
        page,
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size={width},{height}"),
        ],
        work,
    )
    .await?;
    let bytes = std::fs::read(png).map_err(|e| format!("{}: {e}", png.display()))?;
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(format!("{} is not a PNG", png.display()));
    }
    Ok(out)
}

/// The lines of a Chromium log that say the page went wrong: console errors and resources it
/// could not load (a page that needs nothing fetched has none).
pub fn page_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| {
            l.contains("CONSOLE")
                || l.contains("Failed to load resource")
                || l.contains("Uncaught")
                || l.contains("net::ERR_")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_and_load_failures_are_page_errors_and_browser_chatter_is_not() {
        let log = "[1:2:ERROR:dbus/bus.cc(408)] Failed to connect to the bus\n\
                   [3:4:INFO:CONSOLE(1)] \"Uncaught ReferenceError: x\", source: file:///r.html (1)\n\
                   [5:6:ERROR:net] Failed to load resource: net::ERR_FILE_NOT_FOUND\n";
        let errs = page_errors(log);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("Uncaught"));
    }
}
