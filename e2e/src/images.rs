//! The controller images a run on a real Kubernetes imports: `scripts/image.py` builds them, as
//! `just image` does. Below both the node's run ([`crate::on_node`]) and k3s's
//! ([`crate::on_cluster`]), so neither needs the other.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The three controller images `scripts/image.py --profile image-test` builds into `out`
/// (the images tests' profile): each name with its archive.
pub fn controller_archives(out: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let root = crate::chart::workspace_root();
    let run = Command::new("python3")
        .current_dir(&root)
        .args(["scripts/image.py", "--profile", "image-test", "--out"])
        .arg(out)
        .output()
        .map_err(|e| format!("running python3 scripts/image.py: {e}"))?;
    let stdout = String::from_utf8_lossy(&run.stdout);
    if !run.status.success() {
        return Err(format!(
            "scripts/image.py: {}\n{stdout}\n{}",
            run.status,
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    let archives: Vec<(String, PathBuf)> = stdout
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match (words.first(), words.last()) {
                (Some(name), Some(path)) if path.ends_with(".oci.tar") => {
                    Some((name.to_string(), PathBuf::from(path)))
                }
                _ => None,
            }
        })
        .collect();
    if archives.len() != 3 {
        return Err(format!("three images from scripts/image.py:\n{stdout}"));
    }
    Ok(archives)
}
