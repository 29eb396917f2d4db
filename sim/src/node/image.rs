//! Images without a registry: one static binary in an otherwise empty OCI image, made with umoci
//! and archived for `ctr images import` (the node's pause image and the nats-server image).
//!
//! Used for the node's pause image (measured: imported, sandboxes run on it).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::NodeError;

fn umoci(args: &[&str]) -> Result<(), NodeError> {
    super::sh("image", "umoci", args).map(drop)
}

/// An OCI archive in `dir` holding `binary` as `/<name>`, its entrypoint, tagged `tag`.
pub fn single_binary(
    dir: &Path,
    binary: &Path,
    name: &str,
    tag: &str,
) -> Result<PathBuf, NodeError> {
    let layout = dir.join(format!("oci-{name}"));
    let bundle = dir.join(format!("bundle-{name}"));
    let image = format!("{}:{tag}", layout.display());
    let _ = std::fs::remove_dir_all(&layout);
    let _ = std::fs::remove_dir_all(&bundle);
    umoci(&["init", "--layout", &layout.display().to_string()])?;
    umoci(&["new", "--image", &image])?;
    umoci(&["unpack", "--image", &image, &bundle.display().to_string()])?;
    let target = bundle.join("rootfs").join(name);
    std::fs::copy(binary, &target).map_err(|source| NodeError::Io {
        what: "copy a binary into an image",
        path: target.clone(),
        source,
    })?;
    umoci(&["repack", "--image", &image, &bundle.display().to_string()])?;
    let entrypoint = format!("/{name}");
    umoci(&[
        "config",
        "--image",
        &image,
        "--config.entrypoint",
        &entrypoint,
        "--config.env",
        "PATH=/",
    ])?;
    let archive = dir.join(format!("{name}.tar"));
    let out = Command::new("tar")
        .arg("-C")
        .arg(&layout)
        .arg("-cf")
        .arg(&archive)
        .arg(".")
        .output()
        .map_err(|e| NodeError::Part {
            part: "image",
            message: format!("tar: {e}"),
        })?;
    if !out.status.success() {
        return Err(NodeError::Part {
            part: "image",
            message: format!("tar: {}", String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    let _ = std::fs::remove_dir_all(&bundle);
    Ok(archive)
}
