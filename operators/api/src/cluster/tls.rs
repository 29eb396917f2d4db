//! Where a NatsCluster's listeners get their certificates: a Secret or cert-manager for the
//! client listener, route TLS on by default with a self-signed certificate.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::default_true;
use crate::common::SecretReference;

/// Where a listener's certificate comes from: exactly one of a Secret or cert-manager.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new("has(self.secretRef) != has(self.certManager)")
    .message("a listener's tls sets exactly one of secretRef and certManager"))]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    /// A `kubernetes.io/tls` Secret holding `tls.crt`, `tls.key` and, to verify peers or for
    /// clients to trust, `ca.crt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    /// Has cert-manager issue the certificate, for the names the listener is reached at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<CertManagerCertificate>,
}

/// A certificate cert-manager issues into the NatsCluster's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertManagerCertificate {
    /// The issuer, copied into the Certificate the cluster controller creates.
    pub issuer_ref: IssuerReference,
}

/// A cert-manager Issuer or ClusterIssuer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuerReference {
    /// Name of an Issuer in the NatsCluster's namespace, or of a ClusterIssuer.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Kind of the issuer: `Issuer` when omitted, or `ClusterIssuer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub kind: Option<String>,
    /// API group of the issuer: `cert-manager.io` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub group: Option<String>,
}

/// The route listener.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Routes {
    /// TLS on routes; omitted, on with a self-signed certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<RoutesTls>,
}

/// Route TLS: on unless turned off, self-signed (valid a year, reissued under the same CA key
/// from the Secret `<name>-routes-ca`) unless a certificate is named.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(
    validation = Rule::new("!(has(self.secretRef) && has(self.certManager))")
        .message("spec.routes.tls sets at most one of secretRef and certManager"),
    validation = Rule::new("!has(self.enabled) || self.enabled || (!has(self.secretRef) && !has(self.certManager))")
        .message("spec.routes.tls names a certificate only while route TLS is enabled"),
)]
#[serde(rename_all = "camelCase")]
pub struct RoutesTls {
    /// Route TLS on; false turns it off (routes have no authentication of their own).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// A `kubernetes.io/tls` Secret with the route certificate and `ca.crt`; omitted, self-signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    /// Has cert-manager issue the route certificate; omitted, self-signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<CertManagerCertificate>,
}

impl Default for RoutesTls {
    fn default() -> Self {
        Self {
            enabled: true,
            secret_ref: None,
            cert_manager: None,
        }
    }
}
