//! Reading an OCI image archive back, independently of scripts/image.py, which wrote it: a ustar
//! reader, the layout (`oci-layout`, `index.json`, `blobs/sha256/…`) with every descriptor's size
//! and digest checked, the layer's `diff_id` checked after `gzip -dc` (the system's gzip), and an
//! ELF reader that says whether a binary asks for a program interpreter or a shared library.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::Value;
use sha2::{Digest as _, Sha256};

pub const MT_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MT_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MT_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MT_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// One member of a tar archive.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// `b'0'` a regular file, `b'5'` a directory, anything else as the header says.
    pub kind: u8,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub data: Vec<u8>,
}

fn octal(field: &[u8], what: &str) -> Result<u64, String> {
    let text = String::from_utf8_lossy(field);
    let digits = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if digits.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(digits, 8).map_err(|e| format!("{what} {digits:?}: {e}"))
}

fn text(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// The members of a ustar archive, which must end with its two zero blocks. PAX and GNU
/// extension headers are refused: neither archive needs them.
pub fn read_tar(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    let mut entries = vec![];
    let mut at = 0;
    loop {
        let header = bytes
            .get(at..at + 512)
            .ok_or_else(|| format!("truncated at byte {at}: no end-of-archive blocks"))?;
        if header.iter().all(|&b| b == 0) {
            let second = bytes.get(at + 512..at + 1024);
            if second.is_none_or(|b| b.iter().any(|&x| x != 0)) {
                return Err(format!(
                    "byte {at}: one zero block, not the two that end an archive"
                ));
            }
            return Ok(entries);
        }
        let sum: u64 = header
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u64::from(b)
                }
            })
            .sum();
        if octal(&header[148..156], "checksum")? != sum {
            return Err(format!("byte {at}: header checksum mismatch"));
        }
        if &header[257..262] != b"ustar" {
            return Err(format!("byte {at}: not a ustar header"));
        }
        let kind = header[156];
        if matches!(kind, b'x' | b'g' | b'L' | b'K') {
            return Err(format!("byte {at}: extension header {:?}", kind as char));
        }
        let prefix = text(&header[345..500]);
        let name = match prefix.as_str() {
            "" => text(&header[..100]),
            p => format!("{p}/{}", text(&header[..100])),
        };
        let size = usize::try_from(octal(&header[124..136], "size")?)
            .map_err(|e| format!("{name}: size: {e}"))?;
        let data = bytes
            .get(at + 512..at + 512 + size)
            .ok_or_else(|| format!("{name}: truncated content"))?
            .to_vec();
        entries.push(Entry {
            name,
            kind,
            mode: u32::try_from(octal(&header[100..108], "mode")?).map_err(|e| e.to_string())?,
            uid: octal(&header[108..116], "uid")?,
            gid: octal(&header[116..124], "gid")?,
            data,
        });
        at += 512 + size.div_ceil(512) * 512;
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// An image read from an OCI layout archive, every blob verified.
#[derive(Debug)]
pub struct Oci {
    pub index: Value,
    pub manifest: Value,
    pub manifest_digest: String,
    pub config: Value,
    /// Each layer uncompressed: a tar.
    pub layers: Vec<Vec<u8>>,
    /// Every member name of the archive.
    pub members: Vec<String>,
}

fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("gzip -dc: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("gzip: no stdin")?;
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("gzip -dc: {e}"))?;
    writer
        .join()
        .map_err(|_| "gzip: the writer panicked".to_string())?
        .map_err(|e| format!("gzip -dc: writing: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "gzip -dc: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out.stdout)
}

/// Reads the archive: one manifest in the index, its config and layers, each descriptor's blob
/// present with the size and digest it names, each layer's uncompressed digest its `diff_id`.
pub fn read_oci(archive: &[u8]) -> Result<Oci, String> {
    let entries = read_tar(archive)?;
    let members: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
    let files: BTreeMap<String, Vec<u8>> = entries
        .into_iter()
        .filter(|e| e.kind == b'0')
        .map(|e| (e.name.trim_start_matches("./").to_string(), e.data))
        .collect();
    let json = |name: &str| -> Result<Value, String> {
        let bytes = files.get(name).ok_or_else(|| format!("no {name}"))?;
        serde_json::from_slice(bytes).map_err(|e| format!("{name}: {e}"))
    };
    let layout = json("oci-layout")?;
    if layout["imageLayoutVersion"] != "1.0.0" {
        return Err(format!("oci-layout: {layout}"));
    }
    let blob = |desc: &Value, media_type: &str| -> Result<Vec<u8>, String> {
        if desc["mediaType"] != media_type {
            return Err(format!("descriptor {desc}: mediaType is not {media_type}"));
        }
        let digest_text = desc["digest"]
            .as_str()
            .ok_or(format!("{desc}: no digest"))?;
        let hex = digest_text
            .strip_prefix("sha256:")
            .ok_or(format!("{digest_text}: not sha256"))?;
        let bytes = files
            .get(&format!("blobs/sha256/{hex}"))
            .ok_or(format!("{digest_text}: no such blob"))?;
        if desc["size"].as_u64() != Some(bytes.len() as u64) {
            return Err(format!(
                "{digest_text}: {} bytes, not {}",
                bytes.len(),
                desc["size"]
            ));
        }
        if digest(bytes) != digest_text {
            return Err(format!(
                "{digest_text}: the blob hashes to {}",
                digest(bytes)
            ));
        }
        Ok(bytes.clone())
    };
    let index = json("index.json")?;
    if index["schemaVersion"] != 2 || index["mediaType"] != MT_INDEX {
        return Err(format!("index.json: {index}"));
    }
    let manifests = index["manifests"]
        .as_array()
        .ok_or("index.json: no manifests")?;
    let [desc] = manifests.as_slice() else {
        return Err(format!(
            "index.json: {} manifests, not one",
            manifests.len()
        ));
    };
    let manifest: Value = serde_json::from_slice(&blob(desc, MT_MANIFEST)?)
        .map_err(|e| format!("the manifest: {e}"))?;
    if manifest["schemaVersion"] != 2 || manifest["mediaType"] != MT_MANIFEST {
        return Err(format!("the manifest: {manifest}"));
    }
    let config: Value = serde_json::from_slice(&blob(&manifest["config"], MT_CONFIG)?)
        .map_err(|e| format!("the config: {e}"))?;
    let diff_ids = config["rootfs"]["diff_ids"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let layer_descs = manifest["layers"].as_array().cloned().unwrap_or_default();
    if config["rootfs"]["type"] != "layers" || diff_ids.len() != layer_descs.len() {
        return Err(format!(
            "config rootfs {} for {} layers",
            config["rootfs"],
            layer_descs.len()
        ));
    }
    let mut layers = vec![];
    for (desc, diff_id) in layer_descs.iter().zip(&diff_ids) {
        let tar = gunzip(&blob(desc, MT_LAYER)?)?;
        if digest(&tar) != *diff_id {
            return Err(format!(
                "layer {}: uncompressed {} is not its diff_id {diff_id}",
                desc["digest"],
                digest(&tar)
            ));
        }
        layers.push(tar);
    }
    Ok(Oci {
        manifest_digest: desc["digest"].as_str().unwrap_or_default().to_string(),
        index,
        manifest,
        config,
        layers,
        members,
    })
}

/// `Err` naming the program interpreter or the first shared library an ELF binary asks for.
pub fn require_static(elf: &[u8]) -> Result<(), String> {
    if elf.get(..4) != Some(b"\x7fELF") || elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    let bad = || "truncated ELF headers".to_string();
    let phoff = usize::try_from(u64_at(0x20).ok_or_else(bad)?).map_err(|e| e.to_string())?;
    let phentsize = usize::from(u16_at(0x36).ok_or_else(bad)?);
    let phnum = usize::from(u16_at(0x38).ok_or_else(bad)?);
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let p_type = elf
            .get(ph..ph + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(bad)?;
        let offset = usize::try_from(u64_at(ph + 8).ok_or_else(bad)?).map_err(|e| e.to_string())?;
        let size = usize::try_from(u64_at(ph + 32).ok_or_else(bad)?).map_err(|e| e.to_string())?;
        match p_type {
            3 => {
                let interp = elf.get(offset..offset + size).ok_or_else(bad)?;
                return Err(format!("PT_INTERP {}", text(interp)));
            }
            2 => {
                for entry in (offset..offset + size).step_by(16) {
                    match u64_at(entry).ok_or_else(bad)? {
                        0 => break,
                        1 => return Err("DT_NEEDED: it needs a shared library".into()),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[test]
fn a_tar_missing_its_end_blocks_is_refused() {
    // What umoci 0.4.7's `insert` writes for a small file: header and content, no padding, no
    // end-of-archive blocks (the reason scripts/image.py writes its own tars).
    let mut tar = vec![0u8; 512];
    tar[..3].copy_from_slice(b"bin");
    tar[257..262].copy_from_slice(b"ustar");
    tar[124..135].copy_from_slice(b"00000000014");
    tar[148..156].copy_from_slice(b"        ");
    let sum: u32 = tar.iter().map(|&b| u32::from(b)).sum();
    tar[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    tar.extend_from_slice(b"#!/bin/true\n");
    let err = read_tar(&tar).expect_err("a truncated archive");
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn a_dynamically_linked_binary_is_refused_naming_its_interpreter() {
    // This test binary is linked the ordinary way: it asks for ld-linux.
    let me = std::fs::read("/proc/self/exe").expect("reading /proc/self/exe");
    let err = require_static(&me).expect_err("a dynamically linked test binary");
    assert!(err.starts_with("PT_INTERP /"), "{err}");
}
