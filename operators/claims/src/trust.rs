//! Whether an issuer is allowed to sign a JWT, as nats-server decides it: an account by its
//! NATS operator's identity or signing keys, a user or activation by its account's identity or
//! signing keys (with `issuer_account` set), and a user of a scoped signing key carrying no
//! permissions of its own. Under a NATS operator with strict signing
//! (`strict_signing_key_usage`), identities sign nothing but themselves: accounts need an
//! operator signing key and users an account signing key (nats-server accounts.go, where a
//! strict operator's account identity is left out of the account's signers).

use crate::claims::{AccountClaims, ActivationClaims, OperatorClaims, UserClaims};
use crate::error::{Error, Result};

fn refuse(claim_type: &'static str, issuer: &str, subject: &str, reason: String) -> Error {
    Error::IssuerNotAllowed {
        claim_type,
        issuer: issuer.to_string(),
        subject: subject.to_string(),
        reason,
    }
}

pub fn check_account(operator: &OperatorClaims, account: &AccountClaims) -> Result<()> {
    if operator.did_sign(&account.issuer, &account.subject) {
        return Ok(());
    }
    let reason = if account.issuer == operator.subject {
        "the operator requires strict signing: accounts must be signed by a signing key".to_string()
    } else {
        format!(
            "neither the identity nor a signing key of operator {}",
            operator.subject
        )
    };
    Err(refuse("account", &account.issuer, &account.subject, reason))
}

/// `strict_signing` is the NATS operator's `strict_signing_key_usage`.
pub fn check_user(account: &AccountClaims, user: &UserClaims, strict_signing: bool) -> Result<()> {
    let issuer = &user.issuer;
    let issuer_account = &user.nats.issuer_account;
    if issuer == &account.subject {
        if strict_signing {
            return Err(refuse(
                "user",
                issuer,
                &user.subject,
                "the NATS operator requires strict signing: users must be signed by an account signing key"
                    .into(),
            ));
        }
        if !issuer_account.is_empty() && issuer_account != &account.subject {
            return Err(refuse(
                "user",
                issuer,
                &user.subject,
                format!("issuer_account {issuer_account} names another account"),
            ));
        }
        return Ok(());
    }
    if !account.did_sign(issuer, issuer_account) {
        return Err(refuse(
            "user",
            issuer,
            &user.subject,
            format!(
                "neither the identity nor a signing key of account {} (issuer_account {:?})",
                account.subject, issuer_account
            ),
        ));
    }
    if account.nats.signing_keys.scope(issuer).is_some() && !user.nats.permission_limits.is_empty()
    {
        return Err(refuse(
            "user",
            issuer,
            &user.subject,
            "a scoped signing key signs only users without permissions or limits of their own"
                .into(),
        ));
    }
    Ok(())
}

pub fn check_activation(exporter: &AccountClaims, activation: &ActivationClaims) -> Result<()> {
    if exporter.did_sign(&activation.issuer, &activation.nats.issuer_account) {
        return Ok(());
    }
    Err(refuse(
        "activation",
        &activation.issuer,
        &activation.subject,
        format!(
            "neither the identity nor a signing key of exporting account {}",
            exporter.subject
        ),
    ))
}
