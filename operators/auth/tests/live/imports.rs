//! Live: story 05's account wiring on a real 3-server operator-mode cluster. core (team-core)
//! imports monitoring's (team-monitoring) public stream export and its private service export;
//! the grants of the story admit both accounts and the cross-namespace imports; the controller's
//! activation token, signed by monitoring's account signing key, lets core reach the private
//! service, and an account the export does not list, importing without a token, is refused by the
//! server.

use crate::common;

use std::time::Duration;

use auth_controller::exports::{self, Exporter, ImportError};
use auth_controller::grants;
use common::*;
use futures::StreamExt as _;
use nats_api::auth::{
    AccountKind, AccountReference, GeneratedKind, NatsAccount, NatsUser, NatsUserSpec,
};
use nats_api::nats::NatsReferenceGrant;
use nats_claims::Import;

const STORY: &str = "05-account-wiring";

fn user_of(account: &str) -> NatsUser {
    NatsUser::new(
        &format!("{account}-app"),
        NatsUserSpec {
            account_ref: AccountReference {
                kind: AccountKind::NatsAccount,
                name: account.into(),
                namespace: None,
            },
            permissions: None,
            preset: None,
            connection_types: vec![],
            role: None,
            public_key: None,
            credentials: None,
        },
    )
}

#[tokio::test]
async fn an_importer_reaches_a_private_service_export_through_its_activation() {
    let monitoring_obj: NatsAccount =
        story_manifest(STORY, "02-monitoring.yaml", "NatsAccount").remove(0);
    let core_obj: NatsAccount = story_manifest(STORY, "03-core.yaml", "NatsAccount").remove(0);
    let mut grants_by_ns: Vec<NatsReferenceGrant> =
        story_manifest(STORY, "01-namespaces-and-grants.yaml", "NatsReferenceGrant");
    grants_by_ns.extend(story_manifest::<NatsReferenceGrant>(
        STORY,
        "02-monitoring.yaml",
        "NatsReferenceGrant",
    ));
    let ns = |a: &NatsAccount| a.metadata.namespace.clone().unwrap();

    // Tenancy: both accounts are admitted to demo; core's import of monitoring crosses namespaces
    // under the core-imports grant, and would not without it.
    for a in [&monitoring_obj, &core_obj] {
        grants::account_admission(&ns(a), "nats-system", "demo", &grants_by_ns).unwrap();
    }
    let from = grants::Referrer {
        group: nats_api::auth::GROUP,
        kind: "NatsAccount",
        namespace: "team-core",
    };
    let to = grants::Target {
        group: nats_api::auth::GROUP,
        kind: "NatsAccount",
        namespace: "team-monitoring",
        name: "monitoring",
    };
    assert!(controller_kit::grants::admits(&grants_by_ns, from, to));
    let without: Vec<_> = grants_by_ns
        .iter()
        .filter(|g| g.metadata.namespace.as_deref() != Some("team-monitoring"))
        .cloned()
        .collect();
    assert!(!controller_kit::grants::admits(&without, from, to));

    let plane = Plane::start().await;
    let monitoring = Acct::new(GeneratedKind::Account, "monitoring");
    let core = Acct::new(GeneratedKind::Account, "core");
    let stranger = Acct::new(GeneratedKind::Account, "stranger");

    // core's imports by accountRef, resolved from monitoring's exports; the private one carries
    // the activation monitoring's signing key signs for core.
    let execute = monitoring_obj
        .spec
        .exports
        .iter()
        .find(|e| e.name.as_deref() == Some("execute"))
        .unwrap();
    // status.activations of monitoring: core is listed on execute and its key is recorded.
    let core_pk = core.public_key();
    let activations = exports::activations(
        &monitoring.public_key(),
        "team-monitoring",
        &monitoring.keys.signing,
        &monitoring_obj.spec.exports,
        |i| (i.name.as_deref() == Some("core")).then(|| core_pk.clone()),
        now_secs(),
    )
    .unwrap();
    assert_eq!(activations.len(), 1);
    assert_eq!(
        (
            activations[0].export.as_str(),
            activations[0].importer.as_str()
        ),
        ("execute", "NatsAccount/team-core/core")
    );
    let token = activations[0].token.clone().unwrap();
    assert!(execute.importers.len() == 1);
    let exporter = Exporter {
        name: "team-monitoring/monitoring",
        public_key: &monitoring.public_key(),
        exports: &monitoring_obj.spec.exports,
    };
    let core_key = core.public_key();
    let imports: Vec<Import> = core_obj
        .spec
        .imports
        .iter()
        .filter(|i| i.account_ref.is_some())
        .map(|i| {
            exports::resolve_import(
                i,
                &exporter,
                |e| {
                    exports::lists_importer(
                        e,
                        "team-monitoring",
                        "team-core",
                        "core",
                        Some(&core_key),
                    )
                },
                Some(&token),
            )
            .unwrap()
        })
        .collect();
    assert_eq!(imports.len(), 2);
    assert!(
        imports
            .iter()
            .any(|i| i.subject == "checks.execute.*" && !i.token.is_empty())
    );

    // stranger is not listed: the pure core refuses its import; signed anyway without a token,
    // the server refuses it too.
    let stranger_import = nats_api::auth::Import {
        account_ref: Some(AccountReference {
            kind: AccountKind::NatsAccount,
            name: "monitoring".into(),
            namespace: Some("team-monitoring".into()),
        }),
        export: "execute".into(),
        ..Default::default()
    };
    let refused = exports::resolve_import(&stranger_import, &exporter, |_| false, None);
    assert!(
        matches!(refused, Err(ImportError::NotAnImporter { .. })),
        "{refused:?}"
    );
    let forced = Import::service(monitoring.public_key(), "checks.execute.*");

    for (acct, spec, imports) in [
        (&monitoring, &monitoring_obj.spec, vec![]),
        (&core, &core_obj.spec, imports),
        (&stranger, &core_obj.spec, vec![forced]),
    ] {
        let mut spec = spec.clone();
        if acct.name == "stranger" {
            spec.imports.clear();
        }
        let jwt = plane.sign_account(acct, &spec, imports).await;
        plane.push(&jwt).await;
    }

    let connect_as = |acct: &Acct, name: &str| {
        let creds = acct.creds(&user_of(name));
        let topo = &plane.topo;
        async move {
            sim::wait::poll("user connects", DEADLINE, || async {
                let (c, _) = connect(topo, &creds, None).await;
                c.map(Some).map_err(|e| e.to_string())
            })
            .await
            .unwrap()
        }
    };
    let mon = connect_as(&monitoring, "monitoring").await;
    let core_client = connect_as(&core, "core").await;
    let stranger_client = connect_as(&stranger, "stranger").await;

    // monitoring answers its private service.
    let mut service = mon.subscribe("checks.execute.*").await.unwrap();
    let responder = mon.clone();
    tokio::spawn(async move {
        while let Some(msg) = service.next().await {
            if let Some(reply) = msg.reply {
                let _ = responder
                    .publish(reply, format!("ran {}", msg.subject).into())
                    .await;
            }
        }
    });
    mon.flush().await.unwrap();

    let answer = sim::wait::poll(
        "core reaches execute through its activation",
        DEADLINE,
        || async {
            match tokio::time::timeout(
                Duration::from_secs(2),
                core_client.request("checks.execute.disk", "go".into()),
            )
            .await
            {
                Ok(Ok(m)) => Ok(Some(m)),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("no answer".into()),
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(&answer.payload[..], b"ran checks.execute.disk");

    // The public stream export arrives under core's localSubject.
    let mut upstream = core_client.subscribe("upstream.checks.>").await.unwrap();
    core_client.flush().await.unwrap();
    // Interest may take a moment to reach monitoring's account: publish until one arrives.
    let deadline = std::time::Instant::now() + DEADLINE;
    let got = loop {
        mon.publish("checks.results.disk", "ok".into())
            .await
            .unwrap();
        mon.flush().await.unwrap();
        match tokio::time::timeout(Duration::from_millis(500), upstream.next()).await {
            Ok(Some(m)) => break m,
            _ if std::time::Instant::now() > deadline => panic!("core received no check results"),
            _ => continue,
        }
    };
    assert_eq!(got.subject.as_str(), "upstream.checks.disk");

    // Without an activation the server drops the import: the stranger's request has no responder.
    let denied = tokio::time::timeout(
        Duration::from_secs(3),
        stranger_client.request("checks.execute.disk", "go".into()),
    )
    .await;
    assert!(
        !matches!(denied, Ok(Ok(_))),
        "an unlisted account without a token reached the private export"
    );
}
