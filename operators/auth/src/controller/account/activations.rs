//! Activation tokens for a NatsAccount's private exports: signed by its active signing key for
//! each importer the export lists (the importer's key from the index), a token of before kept
//! while it is still right (the same export, importer and key).

use kube::ResourceExt;
use nats_api::auth::{AccountKind, ActivationToken, NatsAccount, NatsAccountStatus, reason};

use super::stop::{Stop, not_ready};
use crate::controller::Context;
use crate::controller::seeds::Resolved;
use crate::exports;

/// status.activations, and how many tokens are still unsigned (an importer without a key).
pub(super) struct Activations {
    pub tokens: Vec<ActivationToken>,
    pub unsigned: usize,
    pub minted: usize,
}

/// The activation tokens of this pass (InvalidKeys without a signing key that signs them).
pub(super) fn sign(
    ctx: &Context,
    acct: &NatsAccount,
    keys: &Resolved,
    prev: &NatsAccountStatus,
    now: i64,
) -> Result<Activations, Stop> {
    let Some(signer) = keys.active() else {
        return Err(not_ready(
            reason::INVALID_KEYS,
            "no signing key that is not retiring and not scoped signs activations".into(),
        ));
    };
    let ns = acct.namespace().unwrap_or_default();
    let importer_key = |i: &nats_api::auth::Importer| -> Option<String> {
        if i.kind != Some(AccountKind::NatsAccount) {
            return None;
        }
        let i_ns = i.namespace.clone().unwrap_or_else(|| ns.clone());
        let importer = ctx.index.account(&i_ns, i.name.as_deref()?)?;
        importer.status.as_ref()?.public_key.clone()
    };
    let mut tokens = exports::activations(
        &keys.public_key,
        &ns,
        &signer.key,
        &acct.spec.exports,
        importer_key,
        now,
    )
    .map_err(|e| {
        not_ready(
            reason::INVALID_KEYS,
            format!("signing activation tokens: {e}"),
        )
    })?;
    for a in &mut tokens {
        if let Some(p) = prev.activations.iter().find(|p| same_activation(p, a)) {
            a.token = p.token.clone();
        }
    }
    let unsigned = tokens.iter().filter(|a| a.token.is_none()).count();
    Ok(Activations {
        minted: tokens.len() - unsigned,
        unsigned,
        tokens,
    })
}

/// The same importer of the same export under the same key: its token stays.
fn same_activation(prev: &ActivationToken, now: &ActivationToken) -> bool {
    prev.export == now.export
        && prev.importer == now.importer
        && prev.public_key == now.public_key
        && prev.token.is_some()
        && now.public_key.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(export: &str, key: Option<&str>, token: Option<&str>) -> ActivationToken {
        ActivationToken {
            export: export.into(),
            importer: "NatsAccount/team-core/core".into(),
            public_key: key.map(str::to_string),
            token: token.map(str::to_string),
        }
    }

    #[test]
    fn an_activation_token_is_kept_only_for_the_same_export_and_importer_key() {
        let prev = tok("execute", Some("AK"), Some("t"));
        assert!(same_activation(
            &prev,
            &tok("execute", Some("AK"), Some("new"))
        ));
        assert!(!same_activation(
            &prev,
            &tok("execute", Some("AOTHER"), Some("new"))
        ));
        assert!(!same_activation(
            &prev,
            &tok("other", Some("AK"), Some("new"))
        ));
        assert!(!same_activation(
            &tok("execute", Some("AK"), None),
            &tok("execute", Some("AK"), Some("n"))
        ));
    }
}
