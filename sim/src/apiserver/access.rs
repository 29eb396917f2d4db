//! What the RBAC authorizer allows a user, asked of the server as the admin (a
//! SubjectAccessReview), so the asking leaves no refusal of that user in the audit log. RBAC
//! objects take effect once the authorizer's cache has them, a moment after they are written: a
//! test that just installed them waits here before it acts as the user.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

use super::{ApiServer, ApiServerError, POLL};

/// One request to authorize: `verb` on `group`'s `resource` (`name/subresource` allowed as
/// `resource/subresource`), in `namespace` (None: cluster-wide), on the object `name` (None: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = match self.group.as_str() {
            "" => String::new(),
            g => format!(".{g}"),
        };
        let named = match &self.name {
            Some(n) => format!(" {n}"),
            None => String::new(),
        };
        match &self.namespace {
            Some(ns) => write!(f, "{} {}{group}{named} in {ns}", self.verb, self.resource),
            None => write!(
                f,
                "{} {}{group}{named} cluster-wide",
                self.verb, self.resource
            ),
        }
    }
}

impl ApiServer {
    /// Whether the authorizer allows `user` (a ServiceAccount's username) `access` now.
    pub async fn allows(&self, user: &str, access: &Access) -> Result<bool, ApiServerError> {
        let (resource, subresource) = match access.resource.split_once('/') {
            Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
            None => (access.resource.clone(), None),
        };
        let mut groups = vec![
            "system:serviceaccounts".to_owned(),
            "system:authenticated".to_owned(),
        ];
        if let Some(ns) = user
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .map(|(ns, _)| ns)
        {
            groups.push(format!("system:serviceaccounts:{ns}"));
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.to_owned()),
                groups: Some(groups),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(access.verb.clone()),
                    group: Some(access.group.clone()),
                    resource: Some(resource),
                    subresource,
                    namespace: access.namespace.clone(),
                    name: access.name.clone(),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| ApiServerError::AccessReview {
                access: access.to_string(),
                source,
            })?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }

    /// Waits up to `within` until the authorizer allows `user` every one of `accesses`; the
    /// first still refused when the time is up is the error.
    pub async fn wait_allowed(
        &self,
        user: &str,
        accesses: &[Access],
        within: Duration,
    ) -> Result<(), ApiServerError> {
        let deadline = tokio::time::Instant::now() + within;
        for access in accesses {
            while !self.allows(user, access).await? {
                if tokio::time::Instant::now() >= deadline {
                    return Err(ApiServerError::NotAllowed {
                        user: user.to_owned(),
                        access: access.to_string(),
                        waited: within,
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        }
        Ok(())
    }
}
