//! kube-apiserver 1.20's audit log of what ServiceAccounts ask: every request a ServiceAccount
//! makes is recorded once it is answered, a watch once it started (its verb, resource, namespace
//! and name, the code the server answered and the authorizer's decision), and nothing else is
//! recorded, so the admin's requests of every other test cost
//! nothing. A test that runs a controller as its chart ServiceAccount reads here whether the RBAC
//! authorizer refused it anything, in the server's own words.

use std::path::Path;

use serde::Deserialize;

use super::{ApiServer, ApiServerError, io};

/// The policy: a ServiceAccount's requests at level Metadata (no bodies), once answered (and a
/// watch, which is answered when it ends, also once its response started).
const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: [\"system:serviceaccounts\"]
  - level: None
";

/// The audit flags of kube-apiserver 1.20 for an instance under `root` (the policy written there).
pub(super) fn flags(root: &Path) -> Result<Vec<String>, ApiServerError> {
    let policy = root.join("audit-policy.yaml");
    std::fs::write(&policy, POLICY).map_err(io("write the audit policy", &policy))?;
    Ok(vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log_path(root).display()),
        "--audit-log-format=json".to_owned(),
        // Written before the response is sent: read after a request, its event is there.
        "--audit-log-mode=blocking".to_owned(),
    ])
}

fn log_path(root: &Path) -> std::path::PathBuf {
    root.join("audit.log")
}

/// One answered request of the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// Who asked: `system:serviceaccount:<namespace>:<name>`.
    pub user: String,
    /// The API verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, …).
    pub verb: String,
    /// `resource`, or `resource/subresource`, with its group when it has one (`statefulsets.apps`).
    pub resource: String,
    /// The namespace asked in; empty for a cluster-wide or cluster-scoped request.
    pub namespace: String,
    /// The object's name; empty for a list, a watch or a create.
    pub name: String,
    /// The HTTP status the server answered.
    pub code: u16,
    /// The status reason of a failure (`Forbidden`, `NotFound`, …), empty for a success.
    pub reason: String,
    /// The authorizer's decision: `allow` or `forbid` (a 403 of admission is not a `forbid`).
    pub decision: String,
}

impl AuditEvent {
    /// Whether the request was refused as forbidden (403), by the authorizer or by admission.
    pub fn forbidden(&self) -> bool {
        self.code == 403 || self.decision == "forbid"
    }
}

impl std::fmt::Display for AuditEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = match (self.namespace.as_str(), self.name.as_str()) {
            ("", "") => "(cluster-wide)".to_owned(),
            (ns, "") => format!("in {ns}"),
            ("", name) => name.to_owned(),
            (ns, name) => format!("{ns}/{name}"),
        };
        write!(f, "{} {} {at}: {}", self.verb, self.resource, self.code)?;
        if !self.reason.is_empty() {
            write!(f, " {}", self.reason)?;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    #[serde(default, rename = "auditID")]
    audit_id: String,
    #[serde(default)]
    user: User,
    #[serde(default)]
    verb: String,
    #[serde(default)]
    object_ref: ObjectRef,
    #[serde(default)]
    response_status: Status,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Default, Deserialize)]
struct User {
    #[serde(default)]
    username: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    api_group: String,
}

#[derive(Default, Deserialize)]
struct Status {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    reason: String,
}

impl From<Line> for AuditEvent {
    fn from(mut l: Line) -> Self {
        let r = l.object_ref;
        let mut resource = r.resource;
        if !r.api_group.is_empty() {
            resource = format!("{resource}.{}", r.api_group);
        }
        if !r.subresource.is_empty() {
            resource = format!("{resource}/{}", r.subresource);
        }
        AuditEvent {
            user: l.user.username,
            verb: l.verb,
            resource,
            namespace: r.namespace,
            name: r.name,
            code: l.response_status.code,
            reason: l.response_status.reason,
            decision: l
                .annotations
                .remove("authorization.k8s.io/decision")
                .unwrap_or_default(),
        }
    }
}

/// The events of an audit log's text, one per request (a watch's end is left out once its start
/// is in). A last line cut short (being written) is left out; any other line that does not parse
/// is an error naming it.
fn parse(text: &str, path: &Path) -> Result<Vec<AuditEvent>, ApiServerError> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut out = Vec::with_capacity(lines.len());
    let mut seen = std::collections::HashSet::new();
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Line>(line) {
            Ok(l) if l.audit_id.is_empty() || seen.insert(l.audit_id.clone()) => out.push(l.into()),
            Ok(_) => {}
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => {}
            Err(source) => {
                return Err(ApiServerError::AuditLog {
                    path: path.to_path_buf(),
                    line: i + 1,
                    source,
                });
            }
        }
    }
    Ok(out)
}

impl ApiServer {
    /// Every answered request `user` made so far, in order (kube-apiserver 1.20 only: the
    /// standalone server keeps no audit log, and a ServiceAccount cannot log in to it).
    /// (A pair lent by the pool: what was asked since it was lent.)
    pub fn audit_of(&self, user: &str) -> Result<Vec<AuditEvent>, ApiServerError> {
        let path = log_path(self.root());
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            // Nothing audited yet: the server creates the file at the first event.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io("read the audit log", &path)(e)),
        };
        let from = usize::try_from(self.audit_from())
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let text = String::from_utf8_lossy(&bytes[from..]);
        Ok(parse(&text, &path)?
            .into_iter()
            .filter(|e| e.user == user)
            .collect())
    }

    /// The audit log's length now (bytes; 0 before its first event).
    pub(crate) fn audit_len(&self) -> u64 {
        std::fs::metadata(log_path(self.root()))
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// The requests of `user` refused as forbidden (403), in order: by the RBAC authorizer
    /// (decision `forbid`) or by an admission plugin that checks a permission of its own
    /// (OwnerReferencesPermissionEnforcement: `update` on an owner's `finalizers`).
    pub fn refused_to(&self, user: &str) -> Result<Vec<AuditEvent>, ApiServerError> {
        Ok(self
            .audit_of(user)?
            .into_iter()
            .filter(AuditEvent::forbidden)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"kind":"Event","stage":"ResponseComplete","verb":"list","user":{"username":"system:serviceaccount:ops:probe"},"objectRef":{"resource":"secrets","namespace":"ops","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","reason":"Forbidden","code":403},"annotations":{"authorization.k8s.io/decision":"forbid","authorization.k8s.io/reason":""}}
{"kind":"Event","auditID":"w","stage":"ResponseStarted","verb":"watch","user":{"username":"system:serviceaccount:ops:probe"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","auditID":"w","stage":"ResponseComplete","verb":"watch","user":{"username":"system:serviceaccount:ops:probe"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","stage":"ResponseComplete","verb":"patch","user":{"username":"system:serviceaccount:ops:probe"},"objectRef":{"resource":"natsclusters","namespace":"ops","name":"demo","apiGroup":"cluster.nats.mikluko.io","subresource":"status"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"system:serviceaccount:o"#;

    #[test]
    fn events_read_with_their_resource_group_and_subresource_once_each_a_cut_line_left_out() {
        let events = parse(LOG, Path::new("audit.log")).expect("parses");
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].to_string(), "list secrets in ops: 403 Forbidden");
        assert_eq!(events[0].decision, "forbid");
        assert_eq!(events[1].to_string(), "watch pods (cluster-wide): 200");
        assert_eq!(
            events[2].to_string(),
            "patch natsclusters.cluster.nats.mikluko.io/status ops/demo: 200"
        );
    }

    #[test]
    fn a_broken_line_before_the_last_names_its_number() {
        let text = "not json\n{\"verb\":\"get\"}\n";
        let err = parse(text, Path::new("audit.log")).expect_err("refused");
        assert!(err.to_string().contains("audit.log, line 1"), "{err}");
    }
}
