//! A NatsAccount's imports, each resolved from the export it names: by public key (subject and
//! type from the spec, the activation token from a Secret), or by reference to an exporting
//! account from the index, across namespaces only through a grant (§7), with the activation
//! token the exporter signed into its status for this account's key.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use nats_api::auth::{AccountKind, ExportType, ImportState, NatsAccount, reason};
use nats_claims::Import;

use super::stop::{Stop, unresolved_conds};
use crate::controller::Context;
use crate::controller::error::{Error, kube_err};
use crate::controller::refs::kind_name;
use crate::exports::{self, Exporter};
use crate::grants::{Referrer, Target};

const AUTH: &str = nats_api::auth::GROUP;

/// The imports of the account JWT and status.imports.
pub(super) struct Imports {
    pub imports: Vec<Import>,
    pub states: Vec<ImportState>,
}

/// One import, resolved or why not.
enum Resolution {
    Resolved(Import),
    Unresolved(String),
}

/// Every import resolved (ImportsUnresolved naming each that is not).
pub(super) async fn resolve(
    ctx: &Context,
    acct: &NatsAccount,
    public_key: &str,
) -> Result<Imports, Stop> {
    let mut out = Imports {
        imports: vec![],
        states: vec![],
    };
    let mut unresolved: Vec<String> = Vec::new();
    for imp in &acct.spec.imports {
        match resolve_one(ctx, acct, public_key, imp).await? {
            Resolution::Resolved(i) => {
                out.states.push(exports::import_state(imp, &i));
                out.imports.push(i);
            }
            Resolution::Unresolved(why) => unresolved.push(why),
        }
    }
    if !unresolved.is_empty() {
        let m = unresolved.join("; ");
        let conds = unresolved_conds(reason::IMPORTS_UNRESOLVED, m.clone(), m);
        return Err(Stop::Refused(conds));
    }
    Ok(out)
}

async fn resolve_one(
    ctx: &Context,
    acct: &NatsAccount,
    public_key: &str,
    imp: &nats_api::auth::Import,
) -> Result<Resolution, Error> {
    if let Some(exporter) = &imp.public_key {
        return by_public_key(ctx, acct, public_key, imp, exporter).await;
    }
    let Some(r) = &imp.account_ref else {
        let why = format!("import {} names no account", imp.export);
        return Ok(Resolution::Unresolved(why));
    };
    Ok(by_account_ref(ctx, acct, public_key, imp, r))
}

/// An import by public key: subject and type from the spec, activation from a Secret.
async fn by_public_key(
    ctx: &Context,
    acct: &NatsAccount,
    public_key: &str,
    imp: &nats_api::auth::Import,
    exporter: &str,
) -> Result<Resolution, Error> {
    let ns = acct.namespace().unwrap_or_default();
    let subject = imp.subject.clone().unwrap_or_default();
    let mut i = match imp.type_ {
        Some(ExportType::Service) => Import::service(exporter.to_string(), subject),
        _ => Import::stream(exporter.to_string(), subject),
    }
    .named(imp.export.clone());
    if let Some(local) = &imp.local_subject {
        i = i.local_subject(local.clone());
    }
    i.share = imp.share.unwrap_or(false);
    i.allow_trace = imp.allow_trace.unwrap_or(false);
    let Some(act) = &imp.activation else {
        return Ok(Resolution::Resolved(i));
    };
    let secret_name = &act.secret_key_ref.name;
    let secret = Api::<Secret>::namespaced(ctx.shared.client.clone(), &ns)
        .get_opt(secret_name)
        .await
        .map_err(kube_err(format!("Secret {ns}/{secret_name}")))?;
    let token = secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(act.key()).map(|b| b.0.clone()))
        .map(|b| String::from_utf8_lossy(&b).trim().to_string());
    let expected = crate::supplied::Expected {
        exporter,
        importer: public_key,
        kind: match imp.type_ {
            Some(ExportType::Service) => nats_claims::ExportType::Service,
            _ => nats_claims::ExportType::Stream,
        },
        subject: imp.subject.as_deref().unwrap_or_default(),
        now: super::super::time::unix_now(),
    };
    Ok(match token {
        Some(t) if !t.is_empty() => match crate::supplied::fault(&t, &expected) {
            None => Resolution::Resolved(i.token(t)),
            Some(f) => Resolution::Unresolved(format!(
                "import {}: the activation token in Secret {secret_name} key {} {f}",
                imp.export,
                act.key()
            )),
        },
        _ => Resolution::Unresolved(format!(
            "import {}: activation Secret {secret_name} key {} not found",
            imp.export,
            act.key()
        )),
    })
}

/// An import by reference: the exporting account from the index, admitted across namespaces by
/// a grant in the exporter's, with the token it signed for `public_key` where the export is
/// private.
fn by_account_ref(
    ctx: &Context,
    acct: &NatsAccount,
    public_key: &str,
    imp: &nats_api::auth::Import,
    r: &nats_api::auth::AccountReference,
) -> Resolution {
    let (ns, name) = (acct.namespace().unwrap_or_default(), acct.name_any());
    let ex_ns = r.namespace.clone().unwrap_or_else(|| ns.clone());
    let (exporter, ex_pk) = match exporter(ctx, &ns, &ex_ns, imp, r) {
        Ok(found) => found,
        Err(why) => return Resolution::Unresolved(why),
    };
    let exporter_name = format!("{ex_ns}/{}", r.name);
    let token = exporter
        .status
        .as_ref()
        .and_then(|s| {
            s.activations
                .iter()
                .find(|a| a.export == imp.export && a.public_key.as_deref() == Some(public_key))
        })
        .and_then(|a| a.token.clone());
    let resolved = exports::resolve_import(
        imp,
        &Exporter {
            name: &exporter_name,
            public_key: &ex_pk,
            exports: &exporter.spec.exports,
        },
        |e| exports::lists_importer(e, &ex_ns, &ns, &name, Some(public_key)),
        token.as_deref(),
    );
    let i = match resolved {
        Err(e) => return Resolution::Unresolved(format!("import {}: {e}", imp.export)),
        Ok(i) => i,
    };
    let private = exporter.spec.exports.iter().any(|e| {
        e.name.as_deref() == Some(imp.export.as_str())
            && e.access == Some(nats_api::auth::ExportAccess::Private)
    });
    if private && i.token.is_empty() {
        return Resolution::Unresolved(format!(
            "import {}: waiting for {exporter_name} to sign this account's activation token",
            imp.export
        ));
    }
    Resolution::Resolved(i)
}

/// The exporting account `r` names in `ex_ns` and its public key, where a grant admits the
/// reference from `ns` (a system account exports nothing here), or why not.
fn exporter(
    ctx: &Context,
    ns: &str,
    ex_ns: &str,
    imp: &nats_api::auth::Import,
    r: &nats_api::auth::AccountReference,
) -> Result<(Arc<NatsAccount>, String), String> {
    let kind = kind_name(r.kind);
    let from = Referrer {
        group: AUTH,
        kind: "NatsAccount",
        namespace: ns,
    };
    let to = Target {
        group: AUTH,
        kind,
        namespace: ex_ns,
        name: &r.name,
    };
    if !ctx.index.admits(from, to) {
        return Err(format!(
            "import {}: no NatsReferenceGrant in {ex_ns} admits NatsAccount from {ns} to {kind} {}",
            imp.export, r.name
        ));
    }
    let exporter = match r.kind {
        AccountKind::NatsAccount => ctx.index.account(ex_ns, &r.name),
        AccountKind::NatsSystemAccount => None,
    };
    let Some(exporter) = exporter else {
        return Err(format!(
            "import {}: {kind} {ex_ns}/{} not found or exports nothing",
            imp.export, r.name
        ));
    };
    match exporter.status.as_ref().and_then(|s| s.public_key.clone()) {
        Some(pk) => Ok((exporter, pk)),
        None => Err(format!(
            "import {}: {kind} {ex_ns}/{} has no public key yet",
            imp.export, r.name
        )),
    }
}
