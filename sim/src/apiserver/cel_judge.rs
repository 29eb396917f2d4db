//! The CRDs' CEL rules at apply on kube-apiserver 1.20, which predates CEL and drops
//! `x-kubernetes-validations`: a validating admission webhook, served from the test process on
//! 127.0.0.1 over TLS, judges every create and update of our custom resources with kube-cel (the
//! offline evaluator the CEL table is checked against), so an object no real cluster of today
//! would store is refused here too, whichever way a test writes it.
//!
//! As on a real apiserver: the object is judged after schema defaulting; an update is refused
//! only for rule failures its old object did not have (validation ratcheting, GA in 1.33);
//! status writes are not judged. The webhook fails closed (`failurePolicy: Fail`).
//!
//! Written here rather than taken from a crate: no crate serves an AdmissionReview endpoint
//! without a web framework, and this one needs only hyper's HTTP/1 server over tokio-rustls.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_cel::RootContext;
use rustls_pki_types::pem::PemObject as _;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The label of the ConfigMap a dry-run probe writes to learn that the webhook is in force.
pub(super) const PROBE_LABEL: &str = "sim.nats.mikluko.io/cel-judge-probe";
/// The message the judge refuses a probe with.
pub(super) const PROBE_REFUSAL: &str = "cel judge in force";

/// One kind's rules, compiled once, and root context, as its CRD declares them.
struct Kind {
    compiled: kube_cel::CompiledSchema,
    root: RootContext,
}

impl Kind {
    fn new(schema: &Value, root: RootContext) -> Kind {
        Kind {
            compiled: kube_cel::compile_schema(schema),
            root,
        }
    }
}

/// The kinds judged, by (group, version, kind).
type Kinds = BTreeMap<(String, String, String), Kind>;

/// The running webhook; its task stops when this is dropped.
pub(super) struct CelJudge {
    kinds: Arc<RwLock<Kinds>>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CelJudge {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why the judge could not start.
#[derive(Debug, thiserror::Error)]
pub enum CelJudgeError {
    #[error("reading the serving certificate for the CEL judge: {0}")]
    Certificate(String),
    #[error("binding the CEL judge to 127.0.0.1: {0}")]
    Bind(std::io::Error),
}

impl CelJudge {
    /// Serves on a free port of 127.0.0.1 with the PEM certificate chain and key given.
    pub(super) async fn start(cert_pem: &str, key_pem: &str) -> Result<CelJudge, CelJudgeError> {
        let certs = rustls_pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CelJudgeError::Certificate(e.to_string()))?;
        let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| CelJudgeError::Certificate(e.to_string()))?;
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| CelJudgeError::Certificate(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| CelJudgeError::Certificate(e.to_string()))?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(CelJudgeError::Bind)?;
        let addr = listener.local_addr().map_err(CelJudgeError::Bind)?;
        let kinds: Arc<RwLock<Kinds>> = Arc::default();
        let served = kinds.clone();
        let task = tokio::spawn(async move {
            let validator = Arc::new(kube_cel::Validator::new());
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, kinds, validator) =
                    (acceptor.clone(), served.clone(), validator.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        answer(req, kinds.clone(), validator.clone())
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Ok(CelJudge { kinds, addr, task })
    }

    /// Judges the custom resources of `crds` from now on (every served version).
    pub(super) fn judge(&self, crds: &[CustomResourceDefinition]) {
        let mut kinds = self.kinds.write().unwrap_or_else(|p| p.into_inner());
        kinds.extend(kinds_of(crds));
    }

    /// The groups of the kinds judged.
    pub(super) fn groups(&self) -> Vec<String> {
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        let mut groups: Vec<String> = kinds.keys().map(|(g, _, _)| g.clone()).collect();
        groups.dedup();
        groups
    }

    /// The URL the apiserver calls.
    pub(super) fn url(&self) -> String {
        format!("https://{}/validate", self.addr)
    }
}

/// The kinds `crds` declare, every version with a schema.
fn kinds_of(crds: &[CustomResourceDefinition]) -> Kinds {
    let mut kinds = Kinds::new();
    for crd in crds {
        for version in &crd.spec.versions {
            let Some(schema) = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| serde_json::to_value(s).ok())
            else {
                continue;
            };
            let root = RootContext {
                api_version: format!("{}/{}", crd.spec.group, version.name),
                api_group: crd.spec.group.clone(),
                kind: crd.spec.names.kind.clone(),
            };
            kinds.insert(
                (
                    crd.spec.group.clone(),
                    version.name.clone(),
                    crd.spec.names.kind.clone(),
                ),
                Kind::new(&schema, root),
            );
        }
    }
    kinds
}

async fn answer(
    req: Request<Incoming>,
    kinds: Arc<RwLock<Kinds>>,
    validator: Arc<kube_cel::Validator>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ok(bad_request(&format!("reading the request: {e}"))),
    };
    let review: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return Ok(bad_request(&format!("not an AdmissionReview: {e}"))),
    };
    let request = &review["request"];
    let verdict = {
        let kinds = kinds.read().unwrap_or_else(|p| p.into_inner());
        judge(request, &kinds, &validator)
    };
    let mut response = json!({"uid": request["uid"], "allowed": verdict.is_ok()});
    if let Err(message) = verdict {
        response["status"] = refusal(request, &message);
    }
    let out = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    });
    Ok(Response::new(Full::new(Bytes::from(out.to_string()))))
}

/// The Status a refusal answers with, as kube-apiserver's own validation writes one: with
/// `details` naming the object and the cause, which is what kubectl prints (kubectl 1.20 prints
/// only "The request is invalid" for an Invalid status without them).
fn refusal(request: &Value, message: &str) -> Value {
    let name = request["name"]
        .as_str()
        .or_else(|| {
            request
                .pointer("/object/metadata/name")
                .and_then(Value::as_str)
        })
        .unwrap_or_default();
    json!({
        "code": 422,
        "reason": "Invalid",
        "message": message,
        "details": {
            "name": name,
            "group": request["kind"]["group"],
            "kind": request["kind"]["kind"],
            "causes": [{"reason": "FieldValueInvalid", "field": "spec", "message": message}],
        },
    })
}

fn bad_request(message: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(message.to_string())));
    *r.status_mut() = hyper::StatusCode::BAD_REQUEST;
    r
}

/// The verdict on one admission request: `Err` with the refusal's message.
fn judge(request: &Value, kinds: &Kinds, validator: &kube_cel::Validator) -> Result<(), String> {
    let object = &request["object"];
    if object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(PROBE_LABEL))
        .is_some()
    {
        return Err(PROBE_REFUSAL.into());
    }
    let key = (
        request["kind"]["group"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        request["kind"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        request["kind"]["kind"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    );
    let Some(kind) = kinds.get(&key) else {
        return Ok(());
    };
    let old = request.get("oldObject").filter(|o| o.is_object());
    verdict(validator, kind, object, old)
}

/// kube-cel's verdict, with an update's failures its old object already had let through.
fn verdict(
    validator: &kube_cel::Validator,
    kind: &Kind,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), String> {
    let failures = |obj: &Value, old: Option<&Value>| -> Vec<String> {
        match validator.validate_compiled_with_context(&kind.compiled, obj, old, Some(&kind.root)) {
            Ok(()) => vec![],
            Err(errors) => errors.into_vec().iter().map(ToString::to_string).collect(),
        }
    };
    let now = failures(object, old);
    if now.is_empty() {
        return Ok(());
    }
    // Ratcheting: what the stored object already failed is no reason to refuse its update.
    let before = old.map(|o| failures(o, None)).unwrap_or_default();
    let new: Vec<String> = now.into_iter().filter(|f| !before.contains(f)).collect();
    if new.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} is invalid (the CRD's CEL rules, judged by the sim for kube-apiserver 1.20): {}",
        kind.root.kind,
        new.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds() -> Kinds {
        kinds_of(&nats_api::crds::all())
    }

    fn request(op: &str, object: Value, old: Option<Value>) -> Value {
        json!({
            "uid": "u",
            "operation": op,
            "kind": {"group": "cluster.nats.mikluko.io", "version": "v1beta1", "kind": "NatsCluster"},
            "object": object,
            "oldObject": old,
        })
    }

    fn cluster(spec: Value) -> Value {
        json!({
            "apiVersion": "cluster.nats.mikluko.io/v1beta1",
            "kind": "NatsCluster",
            "metadata": {"name": "demo", "namespace": "nats"},
            "spec": spec,
        })
    }

    #[test]
    fn a_valid_object_passes_and_an_invalid_one_is_refused_naming_the_rule() {
        let (kinds, v) = (kinds(), kube_cel::Validator::new());
        let ok = cluster(json!({"version": "2.15.1", "replicas": 3}));
        assert_eq!(judge(&request("CREATE", ok, None), &kinds, &v), Ok(()));
        // A leaf node listener with no auth is refused by the CRD (cel_cases: leafnodes need auth).
        let leaf = cluster(json!({"version": "2.15.1", "replicas": 3, "leafnodes": {}}));
        let refused = judge(&request("CREATE", leaf.clone(), None), &kinds, &v);
        assert!(
            refused.as_ref().is_err_and(|m| m.contains("NatsCluster")),
            "{refused:?}"
        );
    }

    #[test]
    fn an_update_is_refused_only_for_what_its_old_object_did_not_fail() {
        let (kinds, v) = (kinds(), kube_cel::Validator::new());
        let leaf = cluster(json!({"version": "2.15.1", "replicas": 3, "leafnodes": {}}));
        let mut relabelled = leaf.clone();
        relabelled["metadata"]["labels"] = json!({"team": "a"});
        assert_eq!(
            judge(&request("UPDATE", relabelled, Some(leaf)), &kinds, &v),
            Ok(())
        );
        let ok = cluster(json!({"version": "2.15.1", "replicas": 3}));
        let broken = cluster(json!({"version": "2.15.1", "replicas": 3, "leafnodes": {}}));
        assert!(judge(&request("UPDATE", broken, Some(ok)), &kinds, &v).is_err());
    }

    #[test]
    fn other_kinds_pass_and_the_probe_is_refused() {
        let (kinds, v) = (kinds(), kube_cel::Validator::new());
        let cm = json!({
            "uid": "u", "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "object": {"metadata": {"name": "x"}},
        });
        assert_eq!(judge(&cm, &kinds, &v), Ok(()));
        let mut probe = cm.clone();
        probe["object"]["metadata"]["labels"] = json!({PROBE_LABEL: "true"});
        assert_eq!(judge(&probe, &kinds, &v), Err(PROBE_REFUSAL.to_string()));
    }
}
