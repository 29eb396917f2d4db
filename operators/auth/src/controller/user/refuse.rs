//! What a NatsUser pass refuses: an account not admitted, to its NatsOperator or to this
//! namespace (AccountNotAdmitted, §7), and a key another user of the account holds
//! (PublicKeyInUse; the older keeps it).

use controller_kit::blocked::Blocked;
use controller_kit::conditions::Decided;
use kube::ResourceExt;
use nats_api::auth::{NatsUser, condition, reason};

use super::gather::AccountView;
use super::stop::Stop;
use crate::controller::Context;
use crate::controller::refs::kind_name;
use crate::controller::time::created;
use crate::grants;
use crate::uniqueness::{Holder, check_unique};

/// Admission: the account's own to its NatsOperator, and this namespace's to the account (the
/// grants of the account's namespace, from the index).
pub(super) fn admission(ctx: &Context, u: &NatsUser, view: &AccountView) -> Result<(), Stop> {
    let ns = u.namespace().unwrap_or_default();
    let grants = if view.namespace == ns {
        vec![]
    } else {
        ctx.index.grants_in(&view.namespace)
    };
    let kind = kind_name(view.kind);
    grants::user_admission(
        &ns,
        kind,
        &view.namespace,
        &view.name,
        view.admitted,
        &grants,
    )
    .map_err(|t| {
        let message = if view.admitted {
            t.to_string()
        } else {
            format!(
                "{} is not admitted to its NatsOperator; no user JWT signed",
                view.desc
            )
        };
        Stop::Refused(vec![
            Blocked::new(t.reason(), message).condition(condition::READY),
        ])
    })
}

/// PublicKeyInUse: `public_key` unique among the users of the account (in the index).
pub(super) fn key_in_use(
    ctx: &Context,
    u: &NatsUser,
    view: &AccountView,
    public_key: &str,
    resolved: &Decided,
) -> Result<(), Stop> {
    let holder = |o: &NatsUser, public_key: String| Holder {
        name: format!(
            "NatsUser {}/{}",
            o.namespace().unwrap_or_default(),
            o.name_any()
        ),
        public_key,
        created: created(o),
    };
    let others: Vec<Holder> = ctx
        .index
        .users_holding(view.kind, &view.namespace, &view.name, public_key)
        .iter()
        .filter_map(|o| Some(holder(o, o.status.as_ref()?.public_key.clone()?)))
        .collect();
    let me = holder(u, public_key.to_string());
    check_unique(&me, &others, None).map_err(|e| {
        Stop::KeyInUse(vec![
            Blocked::new(reason::PUBLIC_KEY_IN_USE, e.to_string()).condition(condition::READY),
            resolved.clone(),
        ])
    })
}
