//! Someone other than the admin: a ServiceAccount's bearer token from the TokenRequest API (the
//! ServiceAccount's `token` subresource, what the kubelet mounts into a pod), and a kubeconfig
//! that authenticates with it (the admin's server and CA), written into the instance directory. A
//! binary given that kubeconfig is that ServiceAccount to the RBAC authorizer, as its pod would be.

use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::{Api, Client};

use super::{ApiServer, ApiServerError, io, launch};

/// How long a token lasts: longer than any test (the server refuses less than ten minutes).
const TOKEN_SECONDS: i64 = 3600;

/// A ServiceAccount's identity: its kubeconfig and a client loaded from it.
#[derive(Clone)]
pub struct ServiceAccountIdentity {
    namespace: String,
    name: String,
    kubeconfig: PathBuf,
    client: Client,
}

impl std::fmt::Debug for ServiceAccountIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the token: the kubeconfig's path says where it is.
        f.debug_struct("ServiceAccountIdentity")
            .field("user", &self.username())
            .field("kubeconfig", &self.kubeconfig)
            .finish()
    }
}

impl ServiceAccountIdentity {
    /// The user the server sees: `system:serviceaccount:<namespace>:<name>`.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// `namespace/name`.
    pub fn service_account(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The kubeconfig authenticating with the token (for a binary's `KUBECONFIG`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A client authenticated as the ServiceAccount.
    pub fn client(&self) -> Client {
        self.client.clone()
    }
}

impl ApiServer {
    /// The identity of the existing ServiceAccount `namespace`/`name`: a token requested for it
    /// (as the admin) and a kubeconfig with that token, `sa-<namespace>-<name>.kubeconfig` in the
    /// instance directory.
    pub async fn service_account_identity(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ServiceAccountIdentity, ApiServerError> {
        let refused = |reason: String| ApiServerError::Token {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            reason,
        };
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                // None: the server's own audience, which its authenticator accepts.
                audiences: None,
                expiration_seconds: Some(TOKEN_SECONDS),
                bound_object_ref: None,
            }),
            ..TokenRequest::default()
        };
        let answered = Api::<ServiceAccount>::namespaced(self.client(), namespace)
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|e| refused(e.to_string()))?;
        let token = answered
            .status
            .and_then(|s| s.token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| refused("the TokenRequest came back without a token".to_owned()))?;
        let path = self
            .root()
            .join(format!("sa-{namespace}-{name}.kubeconfig"));
        let ca = &self.pki().ca_cert;
        std::fs::write(&path, kubeconfig(self.url(), ca, namespace, name, &token))
            .map_err(io("write a ServiceAccount's kubeconfig", &path))?;
        let client = launch::client_of(&path, self.url()).await?;
        Ok(ServiceAccountIdentity {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            kubeconfig: path,
            client,
        })
    }
}

/// A kubeconfig for `url` trusting `ca`, as the ServiceAccount with `token`, its default
/// namespace the ServiceAccount's own (as in its pod).
fn kubeconfig(url: &str, ca: &Path, namespace: &str, name: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: \"{url}\"
    certificate-authority: \"{ca}\"
users:
- name: {namespace}.{name}
  user:
    token: \"{token}\"
contexts:
- name: local
  context: {{cluster: local, user: {namespace}.{name}, namespace: {namespace}}}
current-context: local
",
        ca = ca.display(),
    )
}
