//! Images without a registry: one static binary in an otherwise empty OCI image, made with umoci
//! and archived for `ctr images import` (the node's pause image and the nats-server image).
//!
//! Used for the node's pause image (measured: imported, sandboxes run on it).

use std::path::{Path, PathBuf};

use super::NodeError;

fn umoci(args: &[&str]) -> Result<(), NodeError> {
    super::sh("image", "umoci", args).map(drop)
}

/// An image archive and the digest of its manifest: what a pod names as `repository@digest`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Archive {
    pub path: PathBuf,
    pub digest: String,
}

/// The manifest digest of the image tagged `tag` in an OCI layout's `index.json`.
pub fn manifest_digest(index_json: &str, tag: &str) -> Option<String> {
    let index: serde_json::Value = serde_json::from_str(index_json).ok()?;
    index["manifests"]
        .as_array()?
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)?["digest"]
        .as_str()
        .filter(|d| d.starts_with("sha256:"))
        .map(str::to_string)
}

/// An OCI archive in `dir` holding `binary` as `/<name>`, its entrypoint, tagged `tag`.
pub fn single_binary(
    dir: &Path,
    binary: &Path,
    name: &str,
    tag: &str,
) -> Result<Archive, NodeError> {
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
    let index = layout.join("index.json");
    let digest = std::fs::read_to_string(&index)
        .ok()
        .and_then(|text| manifest_digest(&text, tag))
        .ok_or_else(|| NodeError::Part {
            part: "image",
            message: format!("no manifest tagged {tag} in {}", index.display()),
        })?;
    let archive = dir.join(format!("{name}.tar"));
    let (layout_dir, archive_path) = (layout.display().to_string(), archive.display().to_string());
    super::sh(
        "image",
        "tar",
        &["-C", &layout_dir, "-cf", &archive_path, "."],
    )?;
    let _ = std::fs::remove_dir_all(&bundle);
    Ok(Archive {
        path: archive,
        digest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_digest_is_the_tagged_manifests() {
        let a = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let b = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
        let index = |entries: &[(&str, &str)]| {
            let manifests: Vec<_> = entries
                .iter()
                .map(|(d, t)| serde_json::json!({"mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": d, "size": 1, "annotations": {"org.opencontainers.image.ref.name": t}}))
                .collect();
            serde_json::json!({"schemaVersion": 2, "manifests": manifests}).to_string()
        };
        let cases: Vec<(&str, String, &str, Option<&str>)> = vec![
            ("one image", index(&[(a, "2.15.1")]), "2.15.1", Some(a)),
            (
                "the tagged one of two",
                index(&[(a, "x"), (b, "2.15.1")]),
                "2.15.1",
                Some(b),
            ),
            ("no such tag", index(&[(a, "x")]), "2.15.1", None),
            (
                "not a sha256 digest",
                index(&[("md5:00", "2.15.1")]),
                "2.15.1",
                None,
            ),
            ("not JSON", "{".to_string(), "2.15.1", None),
            ("no manifests", "{}".to_string(), "2.15.1", None),
        ];
        for (name, text, tag, want) in cases {
            assert_eq!(manifest_digest(&text, tag).as_deref(), want, "{name}");
        }
    }
}
