//! CRDs on a test API server: created, waited for until Established, and on kube-apiserver 1.20
//! judged by the CEL judge ([`super::cel_judge`]) through a validating webhook, as a cluster of
//! today judges their rules.

use std::path::Path;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tokio::time::Instant;

use super::cel_judge::{self, CelJudge};
use super::{ApiServer, ApiServerError, ESTABLISH_DEADLINE, Flavor, POLL, io};

impl ApiServer {
    /// Creates every CRD, then waits until each is Established (its custom resources are served).
    /// On kube-apiserver 1.20 their CEL rules are then judged at every create and update of a
    /// custom resource, as a cluster of today judges them ([`cel_judge`]).
    pub async fn install_crds(
        &self,
        crds: &[CustomResourceDefinition],
    ) -> Result<(), ApiServerError> {
        self.install_crds_unjudged(crds).await?;
        // No CRDs, nothing to judge (and a webhook rule must name a group).
        if self.flavor == Flavor::Kube120 && !crds.is_empty() {
            self.judge_cel(crds).await?;
        }
        Ok(())
    }

    /// [`ApiServer::install_crds`] without the CEL judge on kube-apiserver 1.20: for a test that
    /// writes what the CEL rules refuse, as a server before CEL (Kubernetes < 1.25) stores it, to
    /// see what a controller makes of it.
    pub async fn install_crds_unjudged(
        &self,
        crds: &[CustomResourceDefinition],
    ) -> Result<(), ApiServerError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for crd in crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            match api.create(&PostParams::default(), crd).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(source) => return Err(ApiServerError::CrdRefused { name, source }),
            }
        }
        let names: Vec<String> = crds
            .iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect();
        self.wait_established(&names).await
    }

    /// Waits until each CRD of `names` is Established (its custom resources are served), as one
    /// installed by someone else (Helm) must be before a controller watches its kind.
    pub async fn wait_established(&self, names: &[String]) -> Result<(), ApiServerError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let deadline = Instant::now() + ESTABLISH_DEADLINE;
        for name in names {
            let name = name.clone();
            loop {
                let conditions = match api.get_status(&name).await {
                    Ok(got) => got.status.and_then(|s| s.conditions).unwrap_or_default(),
                    Err(source) => return Err(ApiServerError::CrdRefused { name, source }),
                };
                if conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                {
                    break;
                }
                if Instant::now() >= deadline {
                    let conditions = conditions
                        .iter()
                        .map(|c| {
                            format!(
                                "{}={} ({})",
                                c.type_,
                                c.status,
                                c.message.as_deref().unwrap_or("")
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(ApiServerError::CrdNotEstablished {
                        name,
                        waited: ESTABLISH_DEADLINE,
                        conditions,
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        }
        Ok(())
    }

    /// Starts the CEL judge (once), has it judge `crds`, registers it for their groups and waits
    /// until the apiserver calls it (a dry-run probe it always refuses).
    async fn judge_cel(&self, crds: &[CustomResourceDefinition]) -> Result<(), ApiServerError> {
        let mut slot = self.judge.lock().await;
        if slot.is_none() {
            *slot = Some(self.start_judge().await?);
        }
        let Some(judge) = slot.as_ref() else {
            return Ok(());
        };
        judge.judge(crds);
        self.register_judge(judge).await?;
        self.wait_judge_in_force().await
    }

    /// The CEL judge, serving with the apiserver's own serving certificate.
    async fn start_judge(&self) -> Result<CelJudge, ApiServerError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(io("read the serving certificate", path))
        };
        let (cert, key) = (read(&self.pki.server_cert)?, read(&self.pki.server_key)?);
        Ok(CelJudge::start(&cert, &key).await?)
    }

    /// The webhook configuration that sends every create and update of the judged groups to
    /// the judge, and the probe ConfigMaps it always refuses.
    async fn register_judge(&self, judge: &CelJudge) -> Result<(), ApiServerError> {
        use base64::Engine as _;
        let ca = std::fs::read(&self.pki.ca_cert).map_err(io("read the CA", &self.pki.ca_cert))?;
        let ca = base64::engine::general_purpose::STANDARD.encode(ca);
        let webhook = |name: &str, rules: serde_json::Value, selector: serde_json::Value| {
            serde_json::json!({
                "name": name,
                "clientConfig": {"url": judge.url(), "caBundle": ca},
                "rules": rules,
                "objectSelector": selector,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 30,
            })
        };
        let config = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "sim-cel-judge"},
            "webhooks": [
                webhook(
                    "cel.judge.sim.nats.mikluko.io",
                    serde_json::json!([{
                        "apiGroups": judge.groups(),
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["*"],
                    }]),
                    serde_json::json!({}),
                ),
                webhook(
                    "probe.judge.sim.nats.mikluko.io",
                    serde_json::json!([{
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["configmaps"],
                    }]),
                    serde_json::json!({"matchLabels": {cel_judge::PROBE_LABEL: "true"}}),
                ),
            ],
        });
        Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .patch(
                "sim-cel-judge",
                &PatchParams::apply("sim").force(),
                &Patch::Apply(&config),
            )
            .await
            .map_err(ApiServerError::CelJudgeRefused)?;
        Ok(())
    }

    /// The apiserver reads webhook configurations through an informer: a dry-run probe is
    /// created until the judge's refusal comes back.
    async fn wait_judge_in_force(&self) -> Result<(), ApiServerError> {
        let probe: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {
                "generateName": "cel-judge-probe-",
                "labels": {cel_judge::PROBE_LABEL: "true"},
            },
        }))
        .unwrap_or_default();
        let configmaps: Api<ConfigMap> = Api::namespaced(self.client.clone(), "default");
        let deadline = Instant::now() + ESTABLISH_DEADLINE;
        loop {
            let last = match configmaps
                .create(
                    &PostParams {
                        dry_run: true,
                        ..PostParams::default()
                    },
                    &probe,
                )
                .await
            {
                Err(kube::Error::Api(s)) if s.message.contains(cel_judge::PROBE_REFUSAL) => {
                    return Ok(());
                }
                Ok(_) => "the probe was admitted".to_string(),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(ApiServerError::CelJudgeNotInForce {
                    waited: ESTABLISH_DEADLINE,
                    last,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
