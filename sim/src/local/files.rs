//! What a local server reads from its directory: its nats.conf, the files beside it (TLS
//! material, leaf remotes) and the plan its config was rendered from.

use std::path::Path;

use cluster_controller::lifecycle::{DesiredServer, LifecycleError};
use cluster_controller::render::ServerPlan;

use super::failed;
use crate::server::process::CONFIG_FILE;

/// Beside the config: the revision and plan it was rendered from (see
/// [`ServerLifecycle::stored_plan`](cluster_controller::lifecycle::ServerLifecycle::stored_plan)).
pub const PLAN_FILE: &str = "plan.json";

fn write_file(path: &Path, contents: &[u8], object: &str) -> Result<(), LifecycleError> {
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

/// Writes the server's files, then its plan, then its config into `dir`.
pub(super) fn write_server_files(dir: &Path, server: &DesiredServer) -> Result<(), LifecycleError> {
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
