//! A NatsAccount's imports, each resolved from the export it names: by public key (subject and
//! type from the spec, the activation token from a Secret), or by reference to an exporting
//! account from the index, across namespaces only through a grant (§7), with the activation
//! token the exporter signed into its status for this account's key; either only of an account
//! under this account's own NatsOperator ([`exports::same_operator`]).
//!
//! An import that does not resolve (no grant, another NatsOperator's account, no such export,
//! not listed, no valid activation, an exporter with no key or no token for this account yet) is
//! left out: the account is signed and pushed without it, Ready False with reason
//! ImportsUnresolved naming it, so withdrawing what admitted an import (a grant, a listing, the
//! export) removes it from the JWT on every server on the next pass. None holds the account
//! unsigned: a JWT kept as it was would keep an import withdrawn meanwhile on the servers, and a
//! tenant could keep it there by adding an import that never resolves.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use nats_api::auth::{AccountKind, ExportType, ImportState, NatsAccount};
use nats_claims::Import;

use crate::controller::Context;
use crate::controller::error::{Error, kube_err};
use crate::controller::refs::{kind_name, operator_of};
use crate::exports::{self, Exporter};
use crate::grants::{Referrer, Target};

const AUTH: &str = nats_api::auth::GROUP;

/// The imports of the account JWT and status.imports, and why each import left out of them does
/// not resolve.
pub(super) struct Imports {
    pub imports: Vec<Import>,
    pub states: Vec<ImportState>,
    pub refused: Vec<String>,
}

/// One import, resolved or why not (left out of the JWT: the account is signed without it).
enum Resolution {
    Resolved(Import),
    Refused(String),
}

/// Every import resolved, or refused and left out (ImportsUnresolved naming each).
pub(super) async fn resolve(
    ctx: &Context,
    acct: &NatsAccount,
    public_key: &str,
) -> Result<Imports, Error> {
    let mut out = Imports {
        imports: vec![],
        states: vec![],
        refused: vec![],
    };
    for imp in &acct.spec.imports {
        match resolve_one(ctx, acct, public_key, imp).await? {
            Resolution::Resolved(i) => {
                out.states.push(exports::import_state(imp, &i));
                out.imports.push(i);
            }
            Resolution::Refused(why) => out.refused.push(why),
        }
    }
    Ok(out)
}

/// The importer's NatsOperator, `namespace/name`.
fn own_operator(acct: &NatsAccount) -> String {
    let (ns, name) = operator_of(acct);
    format!("{ns}/{name}")
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
        return Ok(Resolution::Refused(why));
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
    let recorded = ctx.index.operators_recording(exporter);
    if let Err(e) = exports::same_operator(exporter, &own_operator(acct), &recorded) {
        return Ok(Resolution::Refused(format!("import {}: {e}", imp.export)));
    }
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
            Some(f) => Resolution::Refused(format!(
                "import {}: the activation token in Secret {secret_name} key {} {f}",
                imp.export,
                act.key()
            )),
        },
        _ => Resolution::Refused(format!(
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
    let (exporter, ex_pk) = match exporter(ctx, acct, &ex_ns, imp, r) {
        Ok(found) => found,
        Err(why) => return Resolution::Refused(why),
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
        Err(e) => return Resolution::Refused(format!("import {}: {e}", imp.export)),
        Ok(i) => i,
    };
    let private = exporter.spec.exports.iter().any(|e| {
        e.name.as_deref() == Some(imp.export.as_str())
            && e.access == Some(nats_api::auth::ExportAccess::Private)
    });
    if private && i.token.is_empty() {
        return Resolution::Refused(format!(
            "import {}: waiting for {exporter_name} to sign this account's activation token",
            imp.export
        ));
    }
    Resolution::Resolved(i)
}

/// The exporting account `r` names in `ex_ns` and its public key, where a grant admits the
/// reference from the importer's namespace and it is under the importer's NatsOperator (a
/// system account exports nothing here), or why not.
fn exporter(
    ctx: &Context,
    acct: &NatsAccount,
    ex_ns: &str,
    imp: &nats_api::auth::Import,
    r: &nats_api::auth::AccountReference,
) -> Result<(Arc<NatsAccount>, String), String> {
    let ns = acct.namespace().unwrap_or_default();
    let kind = kind_name(r.kind);
    let from = Referrer {
        group: AUTH,
        kind: "NatsAccount",
        namespace: &ns,
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
    let (op_ns, op_name) = operator_of(&exporter);
    let exporter_name = format!("{ex_ns}/{}", r.name);
    let under = [format!("{op_ns}/{op_name}")];
    if let Err(e) = exports::same_operator(&exporter_name, &own_operator(acct), &under) {
        return Err(format!("import {}: {e}", imp.export));
    }
    match exporter.status.as_ref().and_then(|s| s.public_key.clone()) {
        Some(pk) => Ok((exporter, pk)),
        None => Err(format!(
            "import {}: {kind} {ex_ns}/{} has no public key yet",
            imp.export, r.name
        )),
    }
}
