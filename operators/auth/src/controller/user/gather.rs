//! What a NatsUser pass reads of its account: the NatsAccount or NatsSystemAccount its
//! accountRef names, from the index (a system account's JWT from its NatsOperator's status),
//! and that account's signing keys.

use std::sync::Arc;

use controller_kit::conditions::Decided;
use nats_api::auth::{AccountKind, Distribution, GeneratedKind, Keys, NatsUser, reason};

use super::stop::{Stop, not_ready};
use crate::controller::Context;
use crate::controller::jwt::jwt_hash;
use crate::controller::refs::{account_of, kind_name, operator_of_system_account};
use crate::controller::seeds::{self, Resolved, Subject, kept};

/// What a user needs of its account.
pub(super) struct AccountView {
    pub kind: AccountKind,
    pub namespace: String,
    pub name: String,
    /// "Kind namespace/name".
    pub desc: String,
    pub public_key: Option<String>,
    /// The account JWT in force (the system account's from its NatsOperator's status).
    pub jwt: Option<String>,
    pub distribution: Option<Distribution>,
    keys: Option<Keys>,
    offline: bool,
    /// The account's own admission to its NatsOperator.
    pub admitted: bool,
    generated: GeneratedKind,
    /// The account's UID and resourceVersion as the index holds it: what its keys were read at
    /// ([`crate::controller::seeds::kept`]).
    version: String,
}

/// The user's account from the index (`None`: not found).
pub(super) fn account(ctx: &Context, u: &NatsUser) -> Option<AccountView> {
    let (kind, namespace, name) = account_of(u);
    let desc = format!("{} {namespace}/{name}", kind_name(kind));
    let view =
        |public_key, jwt, distribution, keys, offline, admitted, generated, version| AccountView {
            kind,
            namespace: namespace.clone(),
            name: name.clone(),
            desc: desc.clone(),
            public_key,
            jwt,
            distribution,
            keys,
            offline,
            admitted,
            generated,
            version,
        };
    match kind {
        AccountKind::NatsAccount => {
            let a = ctx.index.account(&namespace, &name)?;
            let st = a.status.as_ref();
            Some(view(
                st.and_then(|s| s.public_key.clone()),
                st.and_then(|s| s.jwt.clone()),
                st.and_then(|s| s.distribution.clone()),
                a.spec.keys.clone(),
                a.spec.public_key.is_some(),
                ctx.index.account_admitted(&a),
                GeneratedKind::Account,
                kept::version_of(&*a),
            ))
        }
        AccountKind::NatsSystemAccount => {
            let a = ctx.index.system_account(&namespace, &name)?;
            let (op_ns, op_name) = operator_of_system_account(&a);
            let jwt = ctx
                .index
                .operator(&op_ns, &op_name)
                .and_then(|o| o.status.clone()?.system_account?.jwt);
            // The count is of the JWT in force only where its hash says so.
            let distribution = a
                .status
                .as_ref()
                .filter(|s| s.jwt_hash.is_some() && s.jwt_hash == jwt.as_deref().map(jwt_hash))
                .and_then(|s| s.distribution.clone());
            Some(view(
                a.status.as_ref().and_then(|s| s.public_key.clone()),
                jwt,
                distribution,
                a.spec.keys.clone(),
                a.spec.public_key.is_some(),
                true,
                GeneratedKind::SystemAccount,
                kept::version_of(&*a),
            ))
        }
    }
}

/// The account's public key (KeysPending until it records one) and its signing keys, read,
/// never generated here (KeysPending while they are not there); kept for the next user of the
/// account while the account is at the same version ([`seeds::kept`]).
pub(super) async fn account_keys(
    ctx: &Context,
    view: &AccountView,
    resolved: &Decided,
) -> Result<(String, Arc<Resolved>), Stop> {
    let Some(account_pk) = view.public_key.clone() else {
        let m = format!("waiting for {} to record its public key", view.desc);
        return Err(not_ready(reason::KEYS_PENDING, m, resolved));
    };
    let read = || async {
        let subject = Subject {
            kind: view.generated,
            namespace: &view.namespace,
            name: &view.name,
            keys: view.keys.as_ref(),
            offline: view.offline.then(|| account_pk.clone()),
            recorded: Some(&account_pk),
            may_generate: false,
        };
        seeds::resolve(ctx, subject).await?.map_err(|e| {
            let m = format!("{}: {}", view.desc, e.message());
            not_ready(reason::KEYS_PENDING, m, resolved)
        })
    };
    let keys = ctx
        .kept_keys
        .or_read(&view.desc, &view.version, read)
        .await?;
    Ok((account_pk, keys))
}
