//! cert-manager, as far as the stories use it, played by the conformance run: the
//! `cert-manager.io/v1` Certificate kind ([`certificate_crd`]) and an issuer ([`run`]) that, for
//! every Certificate the cluster controller renders, writes the Secret its `spec.secretName`
//! names (`tls.crt`, `tls.key`, `ca.crt`, the shape and annotations cert-manager gives it),
//! signed by one CA per issuer name ([`Issuers`]). So the controller's own certManager path runs
//! unchanged: it creates the Certificates, the pods mount the Secrets.
//!
//! The same CAs sign what a story leaves to "the platform's private CA" (story 06's
//! `west-gateway-tls` beside east's issuer `nats-gateway-ca`: [`super::fixtures`]), so peers
//! verify each other as they would in production.
//!
//! A Secret is issued again when the Certificate asks for other names or another issuer than
//! the Secret's annotations record. rcgen, as the sim's PKIs use it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::watcher;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use serde_json::{Value, json};

/// The field manager the issuer writes Secrets as.
const MANAGER: &str = "cert-manager";

/// cert-manager's Certificate kind, schemaless: what the apiserver needs to store the
/// Certificates the cluster controller renders (as the controller's API tests install it).
pub fn certificate_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "certificates.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io",
            "names": {"kind": "Certificate", "plural": "certificates", "singular": "certificate", "listKind": "CertificateList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

/// A CA of the run: its certificate and key.
pub struct Ca {
    key: KeyPair,
    cert: rcgen::Certificate,
}

impl Ca {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Result<Self, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("conformance {name}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key)?;
        Ok(Self { key, cert })
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A certificate and its key (PEM) of `params`, signed by this CA.
    pub fn sign(&self, params: CertificateParams) -> Result<(String, String), rcgen::Error> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// A certificate and its key (PEM) for `request`, signed by this CA.
    pub fn issue(&self, request: &Request) -> Result<(String, String), rcgen::Error> {
        let key = KeyPair::generate()?;
        let cert = leaf_params(request)?.signed_by(&key, &self.cert, &self.key)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// The CAs of the run, one per issuer name, made when first asked for.
#[derive(Default)]
pub struct Issuers {
    cas: Mutex<BTreeMap<String, Arc<Ca>>>,
}

impl Issuers {
    /// The CA of issuer `name`.
    pub fn ca(&self, name: &str) -> Result<Arc<Ca>, rcgen::Error> {
        let mut cas = self.cas.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ca) = cas.get(name) {
            return Ok(ca.clone());
        }
        let ca = Arc::new(Ca::new(name)?);
        cas.insert(name.into(), ca.clone());
        Ok(ca)
    }
}

/// What a Certificate asks for, read off its object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub namespace: String,
    pub certificate: String,
    pub secret_name: String,
    pub issuer: String,
    pub issuer_kind: String,
    pub dns_names: Vec<String>,
    pub usages: Vec<String>,
}

impl Request {
    /// The request of a Certificate object (its JSON), or what it lacks.
    pub fn of(certificate: &Value) -> Result<Self, String> {
        let text = |pointer: &str| {
            certificate
                .pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let list = |pointer: &str| -> Vec<String> {
            certificate
                .pointer(pointer)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let need = |pointer: &str| text(pointer).ok_or_else(|| format!("no {pointer}"));
        Ok(Self {
            namespace: need("/metadata/namespace")?,
            certificate: need("/metadata/name")?,
            secret_name: need("/spec/secretName")?,
            issuer: need("/spec/issuerRef/name")?,
            issuer_kind: text("/spec/issuerRef/kind").unwrap_or_else(|| "Issuer".into()),
            dns_names: list("/spec/dnsNames"),
            usages: list("/spec/usages"),
        })
    }

    /// The annotations cert-manager writes on the Secret, which say what it was issued for.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        [
            ("cert-manager.io/certificate-name", self.certificate.clone()),
            ("cert-manager.io/issuer-name", self.issuer.clone()),
            ("cert-manager.io/issuer-kind", self.issuer_kind.clone()),
            ("cert-manager.io/alt-names", self.dns_names.join(",")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Whether the Secret with `annotations` was issued for this request.
    pub fn issued_by(&self, annotations: Option<&BTreeMap<String, String>>) -> bool {
        annotations.is_some_and(|a| self.annotations().iter().all(|(k, v)| a.get(k) == Some(v)))
    }

    /// The Secret cert-manager writes for this request: the certificate `crt` and key `key`
    /// issued, and the CA that signed them.
    pub fn secret(&self, crt: &str, key: &str, ca: &str) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": self.secret_name,
                "namespace": self.namespace,
                "annotations": self.annotations(),
            },
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": crt, "tls.key": key, "ca.crt": ca},
        })
    }
}

/// The leaf certificate's parameters for `request`: its names (the first is also the common
/// name) and its usages as cert-manager maps them.
pub fn leaf_params(request: &Request) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::default();
    if let Some(first) = request.dns_names.first() {
        params.distinguished_name.push(DnType::CommonName, first);
    }
    params.subject_alt_names = request
        .dns_names
        .iter()
        .map(|n| n.clone().try_into().map(SanType::DnsName))
        .collect::<Result<_, _>>()?;
    for usage in &request.usages {
        match usage.as_str() {
            "digital signature" => params.key_usages.push(KeyUsagePurpose::DigitalSignature),
            "key encipherment" => params.key_usages.push(KeyUsagePurpose::KeyEncipherment),
            "server auth" => params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth),
            "client auth" => params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth),
            _ => {}
        }
    }
    if request.usages.is_empty() {
        // cert-manager's default usages.
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
    }
    Ok(params)
}

fn certificates(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate");
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// Installs the Certificate kind and waits until the apiserver serves it.
pub async fn install(client: &kube::Client) -> Result<(), String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition =
        serde_json::from_value(certificate_crd()).map_err(|e| e.to_string())?;
    crds.patch(
        "certificates.cert-manager.io",
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await
    .map_err(|e| format!("the Certificate CRD: {e}"))?;
    sim::wait::poll(
        "the Certificate kind served",
        Duration::from_secs(30),
        || {
            let api = certificates(client);
            async move {
                match api.list(&Default::default()).await {
                    Ok(_) => Ok(Some(())),
                    Err(e) => Err(e.to_string()),
                }
            }
        },
    )
    .await
    .map_err(|e| e.to_string())
}

/// Issues the Secret of one Certificate unless the Secret was already issued for it.
async fn issue(
    client: &kube::Client,
    issuers: &Issuers,
    certificate: &Value,
) -> Result<bool, String> {
    let request = Request::of(certificate)?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &request.namespace);
    let existing = secrets
        .get_opt(&request.secret_name)
        .await
        .map_err(|e| e.to_string())?;
    if existing
        .as_ref()
        .is_some_and(|s| request.issued_by(s.metadata.annotations.as_ref()))
    {
        return Ok(false);
    }
    let ca = issuers.ca(&request.issuer).map_err(|e| e.to_string())?;
    let (crt, key) = ca.issue(&request).map_err(|e| e.to_string())?;
    let secret = request.secret(&crt, &key, &ca.pem());
    secrets
        .patch(
            &request.secret_name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(true)
}

/// How long after a Certificate appears or changes its Secret is written: cert-manager's
/// issuance takes seconds too, and a story shows what a NatsCluster reads meanwhile (story 06's
/// east held, GatewayCertificateNotReady).
pub const ISSUANCE: Duration = Duration::from_secs(10);

/// Issues every Certificate's Secret, [`ISSUANCE`] after the Certificate appears or changes,
/// until aborted; `say` gets a line per Secret issued.
pub async fn run(
    client: kube::Client,
    issuers: Arc<Issuers>,
    say: impl Fn(&str) + Send + Sync + 'static,
) {
    let say = Arc::new(say);
    let in_flight: Arc<Mutex<std::collections::BTreeSet<String>>> = Default::default();
    let mut events = watcher(certificates(&client), watcher::Config::default()).boxed();
    while let Some(event) = events.next().await {
        let o = match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
            Ok(_) => continue,
            Err(e) => {
                say(&format!("  the issuer's watch of Certificates: {e}"));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let Ok(value) = serde_json::to_value(&o) else {
            continue;
        };
        let key = value.to_string();
        if !in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone())
        {
            continue;
        }
        let (client, issuers, say, in_flight) = (
            client.clone(),
            issuers.clone(),
            say.clone(),
            in_flight.clone(),
        );
        tokio::spawn(async move {
            tokio::time::sleep(ISSUANCE).await;
            let name = format!(
                "{}/{}",
                o.metadata.namespace.as_deref().unwrap_or_default(),
                o.metadata.name.as_deref().unwrap_or_default()
            );
            match issue(&client, &issuers, &value).await {
                Ok(true) => say(&format!(
                    "  issued the Secret of Certificate {name} (issuer {})",
                    value["spec"]["issuerRef"]["name"]
                        .as_str()
                        .unwrap_or_default(),
                )),
                Ok(false) => {}
                Err(e) => say(&format!(
                    "  the issuer could not issue Certificate {name}: {e}"
                )),
            }
            in_flight
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway_certificate() -> Value {
        json!({
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": {"name": "prod-east-gateway-tls", "namespace": "nats-system"},
            "spec": {
                "secretName": "prod-east-gateway-tls",
                "issuerRef": {"name": "nats-gateway-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
                "dnsNames": ["prod-east-gateway.nats-system.svc", "gw.prod-east.example.net"],
                "usages": ["digital signature", "key encipherment", "server auth", "client auth"],
            }
        })
    }

    #[test]
    fn a_certificate_asks_for_its_secret_names_and_usages() {
        let r = Request::of(&gateway_certificate()).expect("a request");
        assert_eq!(
            r,
            Request {
                namespace: "nats-system".into(),
                certificate: "prod-east-gateway-tls".into(),
                secret_name: "prod-east-gateway-tls".into(),
                issuer: "nats-gateway-ca".into(),
                issuer_kind: "ClusterIssuer".into(),
                dns_names: vec![
                    "prod-east-gateway.nats-system.svc".into(),
                    "gw.prod-east.example.net".into()
                ],
                usages: vec![
                    "digital signature".into(),
                    "key encipherment".into(),
                    "server auth".into(),
                    "client auth".into()
                ],
            }
        );
        let params = leaf_params(&r).expect("params");
        assert_eq!(
            params.extended_key_usages,
            [
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth
            ]
        );
        assert_eq!(
            params.key_usages,
            [
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment
            ]
        );
        assert_eq!(params.subject_alt_names.len(), 2);
    }

    #[rstest::rstest]
    #[case::no_secret_name("/spec/secretName", "no /spec/secretName")]
    #[case::no_issuer("/spec/issuerRef", "no /spec/issuerRef/name")]
    #[case::no_namespace("/metadata/namespace", "no /metadata/namespace")]
    fn a_certificate_without_what_it_needs_is_named(#[case] drop: &str, #[case] why: &str) {
        let mut c = gateway_certificate();
        let (parent, key) = drop.rsplit_once('/').expect("a pointer");
        c.pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .expect("parent")
            .remove(key);
        assert_eq!(Request::of(&c), Err(why.to_string()));
    }

    #[test]
    fn the_secret_has_cert_managers_shape_and_is_issued_again_for_other_names() {
        let r = Request::of(&gateway_certificate()).expect("a request");
        let issuers = Issuers::default();
        let ca = issuers.ca("nats-gateway-ca").expect("a CA");
        assert!(Arc::ptr_eq(
            &ca,
            &issuers.ca("nats-gateway-ca").expect("the same CA")
        ));
        let (crt, key) = ca.issue(&r).expect("issued");
        let secret = r.secret(&crt, &key, &ca.pem());
        assert_eq!(secret["metadata"]["name"], "prod-east-gateway-tls");
        assert_eq!(secret["metadata"]["namespace"], "nats-system");
        assert_eq!(secret["type"], "kubernetes.io/tls");
        for k in ["tls.crt", "tls.key", "ca.crt"] {
            assert!(
                secret["stringData"][k]
                    .as_str()
                    .is_some_and(|p| p.starts_with("-----BEGIN")),
                "{k}"
            );
        }
        let written: BTreeMap<String, String> =
            serde_json::from_value(secret["metadata"]["annotations"].clone()).expect("annotations");
        assert_eq!(
            written["cert-manager.io/alt-names"],
            "prod-east-gateway.nats-system.svc,gw.prod-east.example.net"
        );
        assert!(r.issued_by(Some(&written)));
        assert!(!r.issued_by(None));
        let mut other = r.clone();
        other.dns_names.push("gw.other.example.net".into());
        assert!(
            !other.issued_by(Some(&written)),
            "new names, a new certificate"
        );
        let mut moved = r.clone();
        moved.issuer = "another-ca".into();
        assert!(!moved.issued_by(Some(&written)), "another issuer");
    }
}
