//! The Prometheus Operator's kinds (monitoring.coreos.com/v1) as far as the chart writes them,
//! for strict decoding: no k8s-openapi type exists for them. Every field the chart renders is here
//! and nothing else, so a typo'd or unexpected field fails the decode.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::Deserialize;

/// A ServiceMonitor: which Services Prometheus scrapes, and how.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceMonitor {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ServiceMonitorSpec,
}

/// `spec` of a [`ServiceMonitor`].
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceMonitorSpec {
    pub selector: LabelSelector,
    pub namespace_selector: Option<NamespaceSelector>,
    pub endpoints: Vec<Endpoint>,
}

/// The namespaces a [`ServiceMonitor`] looks for Services in.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceSelector {
    pub any: Option<bool>,
    pub match_names: Option<Vec<String>>,
}

/// One scraped port of the selected Services.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Endpoint {
    pub port: String,
    pub path: Option<String>,
    pub interval: Option<String>,
    pub scrape_timeout: Option<String>,
    /// `https` when the metrics are served over TLS.
    pub scheme: Option<Scheme>,
    pub tls_config: Option<TlsConfig>,
}

/// How an [`Endpoint`] is scraped.
#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    Http,
    Https,
}

/// An [`Endpoint`]'s TLS settings (the Prometheus Operator's SafeTLSConfig, the fields a user
/// of the chart sets).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsConfig {
    pub ca: Option<SecretOrConfigMap>,
    pub cert: Option<SecretOrConfigMap>,
    pub key_secret: Option<KeySelector>,
    pub server_name: Option<String>,
    pub insecure_skip_verify: Option<bool>,
}

/// A key of a Secret or of a ConfigMap.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretOrConfigMap {
    pub secret: Option<KeySelector>,
    pub config_map: Option<KeySelector>,
}

/// `name` and `key` of a Secret or ConfigMap.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySelector {
    pub name: String,
    pub key: String,
}

/// A PrometheusRule: alerting and recording rules.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusRule {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: RuleSpec,
}

/// `spec` of a [`PrometheusRule`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub groups: Vec<RuleGroup>,
}

/// A group of rules evaluated together.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleGroup {
    pub name: String,
    pub rules: Vec<Rule>,
}

/// One alerting rule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub alert: String,
    pub expr: String,
    #[serde(rename = "for")]
    pub for_: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}
