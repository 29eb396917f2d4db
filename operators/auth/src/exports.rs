//! §5.4 Exports and imports: spec exports to JWT exports (the jetstream-stepdown preset expands
//! to two service exports), an import resolved from the export it names, activation tokens for
//! private exports signed by an account signing key, and the system account's prefixed imports.

use nats_api::auth::{
    Export as SpecExport, ExportAccess, ExportPreset, ExportType as SpecType, Import as SpecImport,
    ResponseType as SpecResponse,
};
use nats_claims::{ActivationClaims, Export, ExportType, Import, NKey, ResponseType};

use crate::presets::stepdown_api_prefix;

/// The service subjects the jetstream-stepdown preset exports.
pub const STEPDOWN_SUBJECTS: [&str; 2] = [
    "$JS.API.STREAM.LEADER.STEPDOWN.*",
    "$JS.API.CONSUMER.LEADER.STEPDOWN.*.*",
];

/// The export name each stepdown subject carries.
const STEPDOWN_NAMES: [&str; 2] = ["jetstream-stepdown-stream", "jetstream-stepdown-consumer"];

fn export_type(t: SpecType) -> ExportType {
    match t {
        SpecType::Stream => ExportType::Stream,
        SpecType::Service => ExportType::Service,
    }
}

fn response_type(t: SpecResponse) -> ResponseType {
    match t {
        SpecResponse::Singleton => ResponseType::Singleton,
        SpecResponse::Stream => ResponseType::Stream,
        SpecResponse::Chunked => ResponseType::Chunked,
    }
}

/// True where the account exports the jetstream-stepdown preset.
pub fn exports_stepdown(exports: &[SpecExport]) -> bool {
    exports
        .iter()
        .any(|e| e.preset == Some(ExportPreset::JetStreamStepdown))
}

/// The JWT exports of a NatsAccount's spec.
pub fn jwt_exports(exports: &[SpecExport]) -> Vec<Export> {
    let mut out = Vec::new();
    for e in exports {
        if e.preset == Some(ExportPreset::JetStreamStepdown) {
            for (subject, name) in STEPDOWN_SUBJECTS.iter().zip(STEPDOWN_NAMES) {
                out.push(Export::service(*subject).named(name));
            }
            continue;
        }
        let (Some(name), Some(t), Some(subject)) = (&e.name, e.type_, &e.subject) else {
            continue; // CEL admits only a preset or name, type and subject.
        };
        let mut x = match export_type(t) {
            ExportType::Stream => Export::stream(subject.clone()),
            ExportType::Service => Export::service(subject.clone()),
        }
        .named(name.clone());
        if let Some(r) = e.response_type {
            x = x.response_type(response_type(r));
        }
        if e.access == Some(ExportAccess::Private) {
            x = x.token_required();
        }
        out.push(x);
    }
    out
}

/// Why an import cannot be resolved (reason ImportsUnresolved).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error("account {exporter} has no export named {export}")]
    NoSuchExport { exporter: String, export: String },
    #[error("export {export} of account {exporter} is private and does not list this account")]
    NotAnImporter { exporter: String, export: String },
    #[error(
        "account {exporter} is under NatsOperator {exporter_operator}, not under this account's \
         NatsOperator {importer_operator}, whose servers cannot resolve it"
    )]
    ForeignOperator {
        exporter: String,
        exporter_operator: String,
        importer_operator: String,
    },
}

/// §5.4 within §5.1: an import resolves only under the importer's own NatsOperator. A NatsOperator
/// is the trust root of one NATS deployment, whose servers hold only the accounts it signed, so an
/// import of an account under another NatsOperator names a key no server of this one can resolve
/// (the Go reference refuses it too), and signing it would hand a tenant a JWT naming another
/// deployment's account. `exporter_operators` are the NatsOperators (`namespace/name`) the
/// exporter is known under: its operatorRef for an import by accountRef; for an import by
/// publicKey, those of every NatsAccount and NatsSystemAccount recording that key. None is an
/// account no object here describes, made elsewhere under this NatsOperator as the design allows
/// (an import by publicKey is for such an account): accepted, and the servers resolve it or not.
pub fn same_operator(
    exporter: &str,
    importer_operator: &str,
    exporter_operators: &[String],
) -> Result<(), ImportError> {
    match exporter_operators.first() {
        Some(other) if !exporter_operators.iter().any(|o| o == importer_operator) => {
            Err(ImportError::ForeignOperator {
                exporter: exporter.to_string(),
                exporter_operator: other.clone(),
                importer_operator: importer_operator.to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// The exporting account as the importer's reconcile sees it.
pub struct Exporter<'a> {
    /// Its namespace/name, for messages.
    pub name: &'a str,
    pub public_key: &'a str,
    pub exports: &'a [SpecExport],
}

/// Whether `importer` (kind NatsAccount in `namespace`/`name`, key `public_key`) is listed on
/// a private export.
pub fn lists_importer(
    export: &SpecExport,
    exporter_namespace: &str,
    namespace: &str,
    name: &str,
    public_key: Option<&str>,
) -> bool {
    export.importers.iter().any(|i| match &i.public_key {
        Some(k) => Some(k.as_str()) == public_key,
        None => {
            i.name.as_deref() == Some(name)
                && i.namespace.as_deref().unwrap_or(exporter_namespace) == namespace
        }
    })
}

/// Resolves an import by accountRef: subject, type and response type come from the export it
/// names; a private export needs this account listed and carries `activation`.
pub fn resolve_import(
    import: &SpecImport,
    exporter: &Exporter<'_>,
    listed: impl Fn(&SpecExport) -> bool,
    activation: Option<&str>,
) -> Result<Import, ImportError> {
    let export = exporter
        .exports
        .iter()
        .find(|e| e.name.as_deref() == Some(import.export.as_str()))
        .ok_or_else(|| ImportError::NoSuchExport {
            exporter: exporter.name.to_string(),
            export: import.export.clone(),
        })?;
    let (Some(t), Some(subject)) = (export.type_, &export.subject) else {
        return Err(ImportError::NoSuchExport {
            exporter: exporter.name.to_string(),
            export: import.export.clone(),
        });
    };
    let private = export.access == Some(ExportAccess::Private);
    if private && !listed(export) {
        return Err(ImportError::NotAnImporter {
            exporter: exporter.name.to_string(),
            export: import.export.clone(),
        });
    }
    let mut x = match export_type(t) {
        ExportType::Stream => Import::stream(exporter.public_key, subject.clone()),
        ExportType::Service => Import::service(exporter.public_key, subject.clone()),
    }
    .named(import.export.clone());
    if let Some(local) = &import.local_subject {
        x = x.local_subject(local.clone());
    }
    x.share = import.share.unwrap_or(false);
    x.allow_trace = import.allow_trace.unwrap_or(false);
    if private && let Some(token) = activation {
        x = x.token(token);
    }
    Ok(x)
}

/// status.imports for one resolved import: what the export gave it, and where its activation
/// came from (signed by the controller for an accountRef import, supplied for a publicKey one).
pub fn import_state(import: &SpecImport, resolved: &Import) -> nats_api::auth::ImportState {
    use nats_api::auth::ActivationSource;
    nats_api::auth::ImportState {
        export: Some(import.export.clone()),
        subject: Some(resolved.subject.clone()),
        // Where the import appears: its own subject unless it is remapped.
        local_subject: Some(if resolved.local_subject.is_empty() {
            resolved.subject.clone()
        } else {
            resolved.local_subject.clone()
        }),
        type_: resolved.import_type.map(|t| match t {
            ExportType::Stream => SpecType::Stream,
            ExportType::Service => SpecType::Service,
        }),
        activation: (!resolved.token.is_empty()).then_some(if import.account_ref.is_some() {
            ActivationSource::Signed
        } else {
            ActivationSource::Supplied
        }),
    }
}

/// An activation token letting `importer` import `export` (a private spec export), signed by a
/// signing key of the exporting account (activation_claims.go:34; accounts.go:3094-3108 accepts it).
pub fn sign_activation(
    exporter_key: &str,
    signing_key: &NKey,
    importer: &str,
    export: &SpecExport,
    issued_at: i64,
) -> Result<String, nats_claims::Error> {
    let subject = export.subject.clone().unwrap_or_default();
    let kind = export.type_.map(export_type).unwrap_or(ExportType::Stream);
    let mut claims = ActivationClaims::new(importer, subject, kind);
    if let Some(name) = &export.name {
        claims = claims.name(name.clone());
    }
    if signing_key.public_key() != exporter_key {
        claims = claims.issuer_account(exporter_key);
    }
    claims.encode_issued_at(signing_key, issued_at)
}

/// status.activations of an exporter: one token per importer of each private export, signed
/// where `importer_key` knows the importer's account key (by publicKey, or the NatsAccount's
/// recorded key); an importer without a key yet is listed unsigned (reason ActivationsUnsigned).
pub fn activations(
    exporter_key: &str,
    exporter_namespace: &str,
    signing_key: &NKey,
    exports: &[SpecExport],
    importer_key: impl Fn(&nats_api::auth::Importer) -> Option<String>,
    issued_at: i64,
) -> Result<Vec<nats_api::auth::ActivationToken>, nats_claims::Error> {
    let mut out = Vec::new();
    for e in exports
        .iter()
        .filter(|e| e.access == Some(ExportAccess::Private))
    {
        for i in &e.importers {
            let importer = match (&i.public_key, &i.name) {
                (Some(k), _) => k.clone(),
                // `<kind>/<namespace>/<name>`, as status.activations lists an importer object.
                (None, Some(n)) => format!(
                    "{}/{}/{n}",
                    match i.kind {
                        Some(nats_api::auth::AccountKind::NatsSystemAccount) => "NatsSystemAccount",
                        _ => "NatsAccount",
                    },
                    i.namespace.as_deref().unwrap_or(exporter_namespace)
                ),
                (None, None) => continue,
            };
            let key = importer_key(i);
            let token = match &key {
                Some(k) => Some(sign_activation(exporter_key, signing_key, k, e, issued_at)?),
                None => None,
            };
            out.push(nats_api::auth::ActivationToken {
                export: e.name.clone().unwrap_or_default(),
                importer,
                public_key: key,
                token,
            });
        }
    }
    Ok(out)
}

/// The system account's imports of every account that exports jetstream-stepdown, under
/// `$JS.<key>.API`, so the system balancer moves that account's leaders.
pub fn stepdown_imports<'a>(exporters: impl IntoIterator<Item = &'a str>) -> Vec<Import> {
    let mut out = Vec::new();
    for key in exporters {
        let prefix = stepdown_api_prefix(key);
        for (subject, name) in STEPDOWN_SUBJECTS.iter().zip(STEPDOWN_NAMES) {
            let local = subject.replacen("$JS.API", &prefix, 1);
            out.push(
                Import::service(key, *subject)
                    .named(name)
                    .local_subject(local),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::auth::Importer;
    use nats_claims::KeyKind;
    use rstest::rstest;

    fn export(name: &str, t: SpecType, subject: &str, private: bool) -> SpecExport {
        SpecExport {
            name: Some(name.into()),
            type_: Some(t),
            subject: Some(subject.into()),
            access: Some(if private {
                ExportAccess::Private
            } else {
                ExportAccess::Public
            }),
            importers: if private {
                vec![Importer {
                    name: Some("billing".into()),
                    namespace: Some("team-b".into()),
                    ..Importer::default()
                }]
            } else {
                vec![]
            },
            ..SpecExport::default()
        }
    }

    fn stepdown() -> SpecExport {
        SpecExport {
            preset: Some(ExportPreset::JetStreamStepdown),
            ..SpecExport::default()
        }
    }

    #[test]
    fn jetstream_stepdown_expands_to_the_two_service_exports() {
        let x = jwt_exports(&[stepdown()]);
        let got: Vec<_> = x
            .iter()
            .map(|e| (e.subject.as_str(), e.export_type))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "$JS.API.STREAM.LEADER.STEPDOWN.*",
                    Some(ExportType::Service)
                ),
                (
                    "$JS.API.CONSUMER.LEADER.STEPDOWN.*.*",
                    Some(ExportType::Service)
                ),
            ]
        );
        assert!(x.iter().all(|e| !e.token_req));
    }

    #[rstest]
    #[case::public_stream(
        export("feed", SpecType::Stream, "orders.feed.>", false),
        ExportType::Stream,
        false
    )]
    #[case::private_service_requires_a_token(
        export("quote", SpecType::Service, "orders.quote", true),
        ExportType::Service,
        true
    )]
    fn an_export_maps_type_and_access(
        #[case] e: SpecExport,
        #[case] t: ExportType,
        #[case] token: bool,
    ) {
        let x = jwt_exports(std::slice::from_ref(&e));
        assert_eq!(x.len(), 1);
        assert_eq!(x[0].export_type, Some(t));
        assert_eq!(x[0].token_req, token);
        assert_eq!(Some(&x[0].name), e.name.as_ref());
    }

    fn import(name: &str) -> SpecImport {
        SpecImport {
            export: name.into(),
            local_subject: Some("billing.quote".into()),
            ..SpecImport::default()
        }
    }

    // "An import names an export, not a subject; the subject, type and response type come from
    // the exporting account."
    #[rstest]
    #[case::subject_and_type_from_the_export("feed", true, Ok(("orders.feed.>", ExportType::Stream, false)))]
    #[case::private_export_listing_the_importer_carries_its_activation("quote", true, Ok(("orders.quote", ExportType::Service, true)))]
    #[case::private_export_not_listing_the_importer("quote", false, Err(ImportError::NotAnImporter { exporter: "team-a/orders".into(), export: "quote".into() }))]
    #[case::no_such_export("nope", true, Err(ImportError::NoSuchExport { exporter: "team-a/orders".into(), export: "nope".into() }))]
    fn an_import_resolves_from_its_export(
        #[case] name: &str,
        #[case] listed: bool,
        #[case] want: Result<(&str, ExportType, bool), ImportError>,
    ) {
        let exports = [
            export("feed", SpecType::Stream, "orders.feed.>", false),
            export("quote", SpecType::Service, "orders.quote", true),
        ];
        let exporter = Exporter {
            name: "team-a/orders",
            public_key: "AEXPORTER",
            exports: &exports,
        };
        let got = resolve_import(&import(name), &exporter, |_| listed, Some("tok"));
        let got = got.map(|i| {
            assert_eq!(i.account, "AEXPORTER");
            assert_eq!(i.local_subject, "billing.quote");
            (i.subject, i.import_type.unwrap(), !i.token.is_empty())
        });
        assert_eq!(got, want.map(|(s, t, tok)| (s.to_string(), t, tok)));
    }

    // "An import names an export": of an account under the importer's own NatsOperator, the
    // only one its servers trust (§5.1); the Go reference refuses the others too.
    #[rstest]
    #[case::an_account_ref_under_the_same_operator("team-a/orders", &["nats-system/demo"], true)]
    #[case::an_account_ref_under_another_operator("team-a/orders", &["nats-system/elsewhere"], false)]
    #[case::same_name_in_another_namespace_is_another_operator("team-a/orders", &["team-a/demo"], false)]
    #[case::a_public_key_no_object_here_records("AOUTSIDE", &[], true)]
    #[case::a_public_key_recorded_only_under_another_operator("AFOREIGN", &["nats-system/elsewhere"], false)]
    #[case::a_public_key_recorded_under_this_operator_too("ABOTH", &["nats-system/elsewhere", "nats-system/demo"], true)]
    fn an_import_crosses_no_natsoperator(
        #[case] exporter: &str,
        #[case] operators: &[&str],
        #[case] admitted: bool,
    ) {
        let operators: Vec<String> = operators.iter().map(|o| o.to_string()).collect();
        let got = same_operator(exporter, "nats-system/demo", &operators);
        match got {
            Ok(()) => assert!(admitted, "{exporter} under {operators:?} was admitted"),
            Err(e) => {
                assert!(!admitted, "{exporter} under {operators:?} was refused: {e}");
                assert_eq!(
                    e,
                    ImportError::ForeignOperator {
                        exporter: exporter.into(),
                        exporter_operator: operators[0].clone(),
                        importer_operator: "nats-system/demo".into(),
                    }
                );
                let m = e.to_string();
                assert!(
                    m.contains(&operators[0]) && m.contains("nats-system/demo"),
                    "{m}"
                );
            }
        }
    }

    #[test]
    fn import_status_records_what_the_export_gave() {
        let exports = [export("quote", SpecType::Service, "orders.quote", true)];
        let exporter = Exporter {
            name: "team-a/orders",
            public_key: "AEXPORTER",
            exports: &exports,
        };
        let mut i = import("quote");
        i.account_ref = Some(nats_api::auth::AccountReference {
            kind: nats_api::auth::AccountKind::NatsAccount,
            name: "orders".into(),
            namespace: Some("team-a".into()),
        });
        let resolved = resolve_import(&i, &exporter, |_| true, Some("tok")).unwrap();
        let st = import_state(&i, &resolved);
        assert_eq!(st.subject.as_deref(), Some("orders.quote"));
        assert_eq!(st.local_subject.as_deref(), Some("billing.quote"));
        assert_eq!(st.type_, Some(SpecType::Service));
        assert_eq!(
            st.activation,
            Some(nats_api::auth::ActivationSource::Signed)
        );
        // Not remapped: it appears at its own subject (story 05's status reads so).
        i.local_subject = None;
        let resolved = resolve_import(&i, &exporter, |_| true, Some("tok")).unwrap();
        let st = import_state(&i, &resolved);
        assert_eq!(st.local_subject.as_deref(), Some("orders.quote"));
    }

    #[rstest]
    #[case::by_name_and_namespace(Importer { name: Some("billing".into()), namespace: Some("team-b".into()), ..Importer::default() }, "team-b", "billing", None, true)]
    #[case::namespace_defaults_to_the_exporters(Importer { name: Some("billing".into()), ..Importer::default() }, "team-a", "billing", None, true)]
    #[case::other_namespace_is_not_listed(Importer { name: Some("billing".into()), ..Importer::default() }, "team-b", "billing", None, false)]
    #[case::by_public_key(Importer { public_key: Some("ABILL".into()), ..Importer::default() }, "team-b", "x", Some("ABILL"), true)]
    fn importer_listing(
        #[case] importer: Importer,
        #[case] ns: &str,
        #[case] name: &str,
        #[case] key: Option<&str>,
        #[case] want: bool,
    ) {
        let e = SpecExport {
            importers: vec![importer],
            ..SpecExport::default()
        };
        assert_eq!(lists_importer(&e, "team-a", ns, name, key), want);
    }

    #[test]
    fn activation_is_signed_by_an_account_signing_key_for_the_exporter() {
        let exporter = NKey::generate(KeyKind::Account);
        let signing = NKey::generate(KeyKind::Account);
        let importer = NKey::generate(KeyKind::Account).public_key();
        let e = export("quote", SpecType::Service, "orders.quote", true);
        let token = sign_activation(
            &exporter.public_key(),
            &signing,
            &importer,
            &e,
            1_700_000_000,
        )
        .unwrap();
        let c: ActivationClaims = nats_claims::decode(&token).unwrap();
        assert_eq!(c.subject, importer);
        assert_eq!(c.issuer, signing.public_key());
        assert_eq!(c.nats.issuer_account, exporter.public_key());
        assert_eq!(c.nats.import_subject, "orders.quote");
        assert_eq!(c.nats.import_type, Some(ExportType::Service));
    }

    // "A private export lists its importers, and the controller mints each an activation token."
    #[test]
    fn each_listed_importer_gets_a_token_once_its_key_is_known() {
        let exporter = NKey::generate(KeyKind::Account);
        let signing = NKey::generate(KeyKind::Account);
        let billing = NKey::generate(KeyKind::Account).public_key();
        let partner = NKey::generate(KeyKind::Account).public_key();
        let mut quote = export("quote", SpecType::Service, "orders.quote", true);
        quote.importers.push(Importer {
            public_key: Some(partner.clone()),
            ..Importer::default()
        });
        quote.importers.push(Importer {
            name: Some("later".into()),
            ..Importer::default()
        });
        let exports = [
            quote,
            export("feed", SpecType::Stream, "orders.feed.>", false),
        ];
        let got = activations(
            &exporter.public_key(),
            "team-a",
            &signing,
            &exports,
            |i| match (&i.public_key, i.name.as_deref()) {
                (Some(k), _) => Some(k.clone()),
                (None, Some("billing")) => Some(billing.clone()),
                _ => None,
            },
            1_700_000_000,
        )
        .unwrap();
        let rows: Vec<_> = got
            .iter()
            .map(|a| (a.export.as_str(), a.importer.as_str(), a.token.is_some()))
            .collect();
        assert_eq!(
            rows,
            [
                ("quote", "NatsAccount/team-b/billing", true),
                ("quote", partner.as_str(), true),
                ("quote", "NatsAccount/team-a/later", false),
            ]
        );
        let c: ActivationClaims = nats_claims::decode(got[0].token.as_ref().unwrap()).unwrap();
        assert_eq!(c.subject, billing);
    }

    #[test]
    fn system_account_imports_each_stepdown_export_under_its_prefix() {
        let imports = stepdown_imports(["AONE"]);
        let got: Vec<_> = imports
            .iter()
            .map(|i| {
                (
                    i.account.as_str(),
                    i.subject.as_str(),
                    i.local_subject.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "AONE",
                    "$JS.API.STREAM.LEADER.STEPDOWN.*",
                    "$JS.AONE.API.STREAM.LEADER.STEPDOWN.*"
                ),
                (
                    "AONE",
                    "$JS.API.CONSUMER.LEADER.STEPDOWN.*.*",
                    "$JS.AONE.API.CONSUMER.LEADER.STEPDOWN.*.*"
                ),
            ]
        );
    }
}
