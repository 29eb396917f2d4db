//! What can go wrong starting or driving a test API server, naming the process, file or object.

use std::path::PathBuf;
use std::time::Duration;

use super::binaries::ApiextensionsUnavailable;
use super::cel_judge::CelJudgeError;

/// Everything that can go wrong starting or driving a test API server.
#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    #[error("{what} binary not found at {}: {hint}", path.display())]
    BinaryMissing {
        what: &'static str,
        path: PathBuf,
        hint: &'static str,
    },
    #[error(transparent)]
    Apiextensions(#[from] ApiextensionsUnavailable),
    #[error("failed to {what} ({}): {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to generate the test PKI's {what}: {source}")]
    Pki {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("failed to start {what} ({}): {source}", program.display())]
    Spawn {
        what: &'static str,
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} exited during startup ({status}); log {}:\n{tail}", log.display())]
    Exited {
        what: &'static str,
        status: std::process::ExitStatus,
        log: PathBuf,
        tail: String,
    },
    #[error("{what} not ready within {waited:?} (last: {last}); log {}:\n{tail}", log.display())]
    NotReady {
        what: &'static str,
        waited: Duration,
        last: String,
        log: PathBuf,
        tail: String,
    },
    #[error("failed to load the kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("failed to build a client for {url}: {source}")]
    Client { url: String, source: kube::Error },
    #[error("the apiserver refused CRD {name}: {source}")]
    CrdRefused { name: String, source: kube::Error },
    #[error("CRD {name} not Established within {waited:?}; conditions: {conditions}")]
    CrdNotEstablished {
        name: String,
        waited: Duration,
        conditions: String,
    },
    #[error("failed to create namespace {name}: {source}")]
    Namespace { name: String, source: kube::Error },
    #[error("the audit log {}, line {line}, does not parse: {source}", path.display())]
    AuditLog {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("no token for ServiceAccount {namespace}/{name}: {reason}")]
    Token {
        namespace: String,
        name: String,
        reason: String,
    },
    #[error("the SubjectAccessReview of {access} failed: {source}")]
    AccessReview { access: String, source: kube::Error },
    #[error("{user} is still not allowed to {access} after {waited:?}")]
    NotAllowed {
        user: String,
        access: String,
        waited: Duration,
    },
    #[error(transparent)]
    CelJudge(#[from] CelJudgeError),
    #[error("the apiserver refused the CEL judge's webhook configuration: {0}")]
    CelJudgeRefused(kube::Error),
    #[error("the CEL judge not in force within {waited:?} (last: {last})")]
    CelJudgeNotInForce { waited: Duration, last: String },
    #[error("the apiserver pool at {}: {what}", socket.display())]
    Pool { socket: PathBuf, what: String },
    #[error("resetting the pool's apiserver at {url}: {what}")]
    Reset { url: String, what: String },
}
