//! What a local server reads from its directory: its nats.conf, the files beside it (TLS
//! material, leaf remotes) and the plan its config was rendered from.

use std::path::Path;

use cluster_controller::render::ServerPlan;
use cluster_controller::server_lifecycle::{DesiredServer, ServerLifecycleError};

use super::failed;
use crate::server::server_process::CONFIG_FILE;

/// Beside the config: the revision and plan it was rendered from (see
/// [`ServerLifecycle::stored_plan`](cluster_controller::server_lifecycle::ServerLifecycle::stored_plan)).
pub const PLAN_FILE: &str = "plan.json";

fn write_file(path: &Path, contents: &[u8], object: &str) -> Result<(), ServerLifecycleError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            failed(
                "create directory",
                object,
                format!("{}: {e}", parent.display()),
            )
        })?;
    }
    std::fs::write(path, contents)
        .map_err(|e| failed("write file", object, format!("{}: {e}", path.display())))
}

/// The certificate files the server's plan names that neither come with it nor are on disk:
/// what a pod's missing Secret volume is, on which the kubelet keeps it in ContainerCreating.
pub(super) fn missing_tls_files(server: &DesiredServer) -> Vec<String> {
    fn paths(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s)
                if ["/tls.crt", "/tls.key", "/ca.crt"]
                    .iter()
                    .any(|f| s.ends_with(f)) =>
            {
                out.push(s.clone())
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| paths(x, out)),
            serde_json::Value::Object(o) => o.values().for_each(|x| paths(x, out)),
            _ => {}
        }
    }
    let mut named = Vec::new();
    paths(
        &serde_json::to_value(&server.plan).unwrap_or_default(),
        &mut named,
    );
    named.sort();
    named.dedup();
    named
        .into_iter()
        .filter(|p| !server.files.iter().any(|f| f.path == *p) && !Path::new(p).exists())
        .collect()
}

/// Writes the server's files, then its plan, then its config into `dir`.
pub(super) fn write_server_files(
    dir: &Path,
    server: &DesiredServer,
) -> Result<(), ServerLifecycleError> {
    let object = format!("server {}", server.plan.server_name);
    for f in &server.files {
        write_file(Path::new(&f.path), &f.contents, &object)?;
    }
    let plan = serde_json::json!({"revision": server.revision, "plan": server.plan});
    write_file(&dir.join(PLAN_FILE), plan.to_string().as_bytes(), &object)?;
    write_file(&dir.join(CONFIG_FILE), server.config.as_bytes(), &object)
}

/// The plan stored in `dir` when it is of `revision`.
pub(super) fn read_plan(dir: &Path, revision: &str) -> Option<ServerPlan> {
    let text = std::fs::read_to_string(dir.join(PLAN_FILE)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    if v.get("revision")?.as_str()? != revision {
        return None;
    }
    serde_json::from_value(v.get("plan")?.clone()).ok()
}
