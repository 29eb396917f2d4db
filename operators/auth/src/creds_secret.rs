//! §5.3 The creds Secret a NatsUser names in `credentials.secretKeyRef`: the controller writes it
//! only where it is absent (and then creates it, controlled by the user) or already controlled by
//! this very NatsUser (its UID in a controller owner reference), and deletes it only then.
//!
//! Anything else — an account's identity Secret, an application's Secret, the creds of another
//! user, a Secret left by an earlier NatsUser of the same name — is another owner's: the user reads
//! Ready False, reason SecretConflict, naming the Secret, and nothing is read from it, written to
//! it or deleted. Whoever may write a NatsUser must not be able to reach a Secret through the
//! controller that they could not touch themselves.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// What the controller may do with the creds Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredsSecret {
    /// No Secret by that name: create it, controlled by the user.
    Absent,
    /// Controlled by this NatsUser: read it, rewrite it, delete it with the user.
    Controlled,
}

/// The Secret exists and this NatsUser does not control it (reason SecretConflict).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "Secret {secret} named by credentials.secretKeyRef {holder}; the controller writes creds only to a Secret it creates for this NatsUser — name another Secret, or delete this one"
)]
pub struct CredsConflict {
    pub secret: String,
    /// Who controls it, as a phrase ("is controlled by NatsAccount orders").
    pub holder: String,
}

/// Decides what may be done with the Secret `secret`, found with `owners` (None: absent), for
/// the NatsUser of UID `user_uid`.
pub fn creds_secret(
    secret: &str,
    owners: Option<&[OwnerReference]>,
    user_uid: &str,
) -> Result<CredsSecret, CredsConflict> {
    let Some(owners) = owners else {
        return Ok(CredsSecret::Absent);
    };
    let controller = owners.iter().find(|o| o.controller == Some(true));
    let conflict = |holder: String| CredsConflict {
        secret: secret.to_string(),
        holder,
    };
    match controller {
        Some(o) if !user_uid.is_empty() && o.uid == user_uid && o.kind == "NatsUser" => {
            Ok(CredsSecret::Controlled)
        }
        Some(o) if o.kind == "NatsUser" => Err(conflict(format!(
            "is controlled by another NatsUser {} (uid {})",
            o.name, o.uid
        ))),
        Some(o) => Err(conflict(format!("is controlled by {} {}", o.kind, o.name))),
        None => Err(conflict("exists and has no controller".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn owner(kind: &str, name: &str, uid: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: "auth.nats.mikluko.io/v1beta1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: Some(controller),
            block_owner_deletion: None,
        }
    }

    #[rstest]
    #[case::absent(None, Ok(CredsSecret::Absent))]
    #[case::ours(Some(vec![owner("NatsUser", "app", "u-1", true)]), Ok(CredsSecret::Controlled))]
    #[case::ours_among_others(
        Some(vec![owner("ConfigMap", "x", "c-1", false), owner("NatsUser", "app", "u-1", true)]),
        Ok(CredsSecret::Controlled)
    )]
    #[case::no_owner(Some(vec![]), Err("exists and has no controller"))]
    #[case::owner_not_controller(
        Some(vec![owner("NatsUser", "app", "u-1", false)]),
        Err("exists and has no controller")
    )]
    #[case::earlier_user_of_the_name(
        Some(vec![owner("NatsUser", "app", "u-0", true)]),
        Err("is controlled by another NatsUser app (uid u-0)")
    )]
    #[case::another_user(
        Some(vec![owner("NatsUser", "other", "u-2", true)]),
        Err("is controlled by another NatsUser other (uid u-2)")
    )]
    #[case::another_kind_same_uid(
        Some(vec![owner("NatsAccount", "orders", "u-1", true)]),
        Err("is controlled by NatsAccount orders")
    )]
    #[case::an_app(
        Some(vec![owner("Deployment", "web", "d-1", true)]),
        Err("is controlled by Deployment web")
    )]
    fn who_may_write_the_creds_secret(
        #[case] owners: Option<Vec<OwnerReference>>,
        #[case] want: Result<CredsSecret, &str>,
    ) {
        let got = creds_secret("s", owners.as_deref(), "u-1");
        match (got, want) {
            (Ok(g), Ok(w)) => assert_eq!(g, w),
            (Err(g), Err(w)) => {
                assert_eq!(g.holder, w);
                assert!(g.to_string().starts_with("Secret s named by"));
            }
            (g, w) => panic!("got {g:?}, want {w:?}"),
        }
    }

    #[test]
    fn a_user_without_a_uid_controls_nothing() {
        let owners = [owner("NatsUser", "app", "", true)];
        assert!(creds_secret("s", Some(&owners), "").is_err());
    }
}
