//! The metrics port's serving certificate (`--metrics-tls-cert`, `--metrics-tls-key`: PEM files,
//! in a pod a mounted Secret): read at start, where a bad file stops the binary with what is
//! wrong in which file, and read again at the first handshake after either file changes, so a
//! rotated Secret (cert-manager renews before expiry; the kubelet swaps the mounted files) is
//! served without a restart. A rotation that leaves a pair which does not load keeps the last
//! good one and says so in the log.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// Why a serving certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no PEM of its kind.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The key does not sign for the certificate, or rustls refused the pair.
    #[error("{cert} with {key}: {message}")]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        message: String,
    },
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Reads the certificate chain at `cert` and the private key at `key`.
pub fn load(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let file = |path: &Path, message: String| TlsError::File {
        path: path.to_path_buf(),
        message,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| file(cert, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(file(cert, "no CERTIFICATE in the file".into()));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| file(key, e.to_string()))?;
    let pair = |message: String| TlsError::Pair {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        message,
    };
    let certified =
        CertifiedKey::from_der(chain, private, &provider()).map_err(|e| pair(e.to_string()))?;
    certified.keys_match().map_err(|e| pair(e.to_string()))?;
    Ok(certified)
}

#[derive(Debug)]
struct Loaded {
    stamps: (Option<SystemTime>, Option<SystemTime>),
    key: Arc<CertifiedKey>,
}

/// A certificate and key read from files, read again when they change.
#[derive(Debug)]
pub struct ServingCert {
    cert: PathBuf,
    key: PathBuf,
    loaded: Mutex<Loaded>,
}

impl ServingCert {
    /// Loads the pair now: an error here names the file and what is wrong.
    pub fn open(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Self, TlsError> {
        let (cert, key) = (cert.into(), key.into());
        let stamps = (modified(&cert), modified(&key));
        let certified = load(&cert, &key)?;
        Ok(Self {
            cert,
            key,
            loaded: Mutex::new(Loaded {
                stamps,
                key: Arc::new(certified),
            }),
        })
    }

    /// The pair to serve: read again when either file's modification time moved.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let stamps = (modified(&self.cert), modified(&self.key));
        if stamps != loaded.stamps {
            match load(&self.cert, &self.key) {
                Ok(k) => {
                    tracing::info!(cert = %self.cert.display(), "serving the renewed metrics certificate");
                    loaded.key = Arc::new(k);
                    loaded.stamps = stamps;
                }
                // Keep the last good pair; try again at the next handshake (the kubelet may be
                // half-way through swapping the files).
                Err(e) => {
                    tracing::warn!(error = %e, "the renewed metrics certificate does not load; serving the last one")
                }
            }
        }
        loaded.key.clone()
    }

    /// A TLS acceptor serving this pair (TLS 1.2 and 1.3, no client certificates).
    pub fn acceptor(self: Arc<Self>) -> Result<TlsAcceptor, TlsError> {
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Pair {
                cert: self.cert.clone(),
                key: self.key.clone(),
                message: e.to_string(),
            })?
            .with_no_client_auth()
            .with_cert_resolver(self);
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(dir: &Path, name: &str) -> (PathBuf, PathBuf, String) {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a cert");
        let (cert, key) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&cert, c.cert.pem()).expect("write");
        std::fs::write(&key, c.key_pair.serialize_pem()).expect("write");
        (cert, key, c.cert.pem())
    }

    #[test]
    fn a_bad_file_is_named_with_what_is_wrong() {
        let dir = tempfile::tempdir().expect("dir");
        let (cert, key, _) = pair(dir.path(), "a");
        let missing = dir.path().join("nope.crt");
        let e = ServingCert::open(&missing, &key)
            .expect_err("missing")
            .to_string();
        assert!(e.starts_with(&missing.display().to_string()), "{e}");
        let empty = dir.path().join("empty.crt");
        std::fs::write(&empty, "not pem").expect("write");
        let e = ServingCert::open(&empty, &key)
            .expect_err("empty")
            .to_string();
        assert!(e.contains("no CERTIFICATE"), "{e}");
        let (_, other_key, _) = pair(dir.path(), "b");
        let e = ServingCert::open(&cert, &other_key)
            .expect_err("mismatch")
            .to_string();
        assert!(e.contains(" with "), "a pair error names both files: {e}");
        ServingCert::open(&cert, &key).expect("a good pair loads");
    }

    #[test]
    fn a_renewed_pair_is_served_and_a_broken_one_keeps_the_last() {
        let dir = tempfile::tempdir().expect("dir");
        let (cert, key, _) = pair(dir.path(), "live");
        let serving = ServingCert::open(&cert, &key).expect("loads");
        let first = serving.current().cert[0].clone();
        // A renewal: new files in place, with a later modification time.
        let fresh =
            rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
        std::fs::write(&cert, fresh.cert.pem()).expect("write");
        std::fs::write(&key, fresh.key_pair.serialize_pem()).expect("write");
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        for p in [&cert, &key] {
            std::fs::File::options()
                .write(true)
                .open(p)
                .and_then(|f| f.set_modified(later))
                .expect("touch");
        }
        let second = serving.current().cert[0].clone();
        assert_ne!(first, second, "the renewed certificate is served");
        assert_eq!(second.as_ref(), fresh.cert.der().as_ref());
        // A half-written renewal: the last good pair stays.
        std::fs::write(&key, "garbage").expect("write");
        let later = later + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&key)
            .and_then(|f| f.set_modified(later))
            .expect("touch");
        assert_eq!(serving.current().cert[0], second);
    }
}
