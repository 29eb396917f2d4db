//! The SBOM `just image` writes beside each archive (scripts/sbom.py): CycloneDX, the image as its
//! subject, the image's two files by their sha256, and the crates compiled into the binary — its
//! normal dependencies for the target, no build-time crate (proc macros, build scripts) and no
//! dev dependency — each registry crate with its purl, licence and Cargo.lock's checksum.

use std::collections::BTreeMap;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{BINARY, CREATED, VERSION, build, read};

#[test]
fn the_sbom_names_the_image_its_files_and_the_crates_in_the_binary() {
    let Some(built) = build(false) else { return };
    let path = built
        .dir
        .path()
        .join(format!("{BINARY}-{VERSION}.cdx.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/image.py writes it)", path.display()));
    let bom: Value = serde_json::from_str(&text).expect("the SBOM is JSON");
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.5");
    assert!(
        bom["serialNumber"]
            .as_str()
            .is_some_and(|s| s.starts_with("urn:uuid:")),
        "{}",
        bom["serialNumber"]
    );
    assert_eq!(bom["metadata"]["timestamp"], CREATED);
    let subject = &bom["metadata"]["component"];
    assert_eq!(subject["type"], "container");
    assert_eq!(
        subject["name"],
        built.name.split(':').next().unwrap_or_default()
    );
    assert_eq!(subject["version"], VERSION);

    let components: BTreeMap<String, &Value> = bom["components"]
        .as_array()
        .expect("components")
        .iter()
        .map(|c| (c["name"].as_str().unwrap_or_default().to_string(), c))
        .collect();

    // The image's files, each by the sha256 of the bytes the archive holds.
    let image = read(&built);
    let mut in_layers = BTreeMap::new();
    for layer in &image.layers {
        for e in crate::oci::read_tar(layer).expect("a layer's tar") {
            if e.kind == b'0' {
                in_layers.insert(format!("/{}", e.name), hex::encode(Sha256::digest(&e.data)));
            }
        }
    }
    for (path, sha) in &in_layers {
        let c = components
            .get(path)
            .unwrap_or_else(|| panic!("the SBOM lists no {path}"));
        assert_eq!(c["hashes"][0]["alg"], "SHA-256");
        assert_eq!(c["hashes"][0]["content"], sha.as_str(), "{path}");
    }
    assert_eq!(components[&format!("/{BINARY}")]["type"], "application");

    // What the binary is built from, and only that.
    for name in [
        BINARY,
        "nats-api",
        "controller-kit",
        "kube",
        "tokio",
        "rustls",
    ] {
        assert!(components.contains_key(name), "the SBOM lists no {name}");
    }
    for name in ["serde_derive", "rstest", "testcontainers", "proptest", "cc"] {
        assert!(
            !components.contains_key(name),
            "{name} is no part of the binary, yet listed"
        );
    }
    let lock = std::fs::read_to_string(crate::workspace_root().join("Cargo.lock"))
        .expect("reading Cargo.lock");
    let kube = components["kube"];
    let version = kube["version"].as_str().expect("kube's version");
    assert_eq!(kube["purl"], format!("pkg:cargo/kube@{version}").as_str());
    let checksum = kube["hashes"][0]["content"].as_str().expect("a checksum");
    assert!(
        lock.contains(&format!(
            "name = \"kube\"\nversion = \"{version}\"\nsource = \"registry+"
        )) && lock.contains(&format!("checksum = \"{checksum}\"")),
        "kube's checksum is Cargo.lock's"
    );
    assert!(
        kube["licenses"][0]["expression"]
            .as_str()
            .is_some_and(|l| l.contains("Apache-2.0")),
        "{}",
        kube["licenses"]
    );

    // Every listed crate is in the dependency graph, reached from the binary.
    let deps = bom["dependencies"].as_array().expect("dependencies");
    let by_ref: BTreeMap<&str, Vec<&str>> = deps
        .iter()
        .map(|d| {
            (
                d["ref"].as_str().unwrap_or_default(),
                d["dependsOn"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default(),
            )
        })
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![subject["bom-ref"].as_str().expect("the image's bom-ref")];
    while let Some(r) = todo.pop() {
        if seen.insert(r) {
            todo.extend(by_ref.get(r).cloned().unwrap_or_default());
        }
    }
    for c in components.values() {
        let r = c["bom-ref"].as_str().unwrap_or_default();
        assert!(seen.contains(r), "{r} is listed but reached from nothing");
    }
    eprintln!(
        "figure: the SBOM of {BINARY} lists {} components",
        components.len()
    );
}
