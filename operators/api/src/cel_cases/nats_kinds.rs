//! CEL rows of the `nats` group: every rule of NatsConnection, NatsReferenceGrant,
//! NatsOperatorTrust and NatsAccountTrust, each with accepted rows next to refused ones so a rule
//! that refuses everything (or nothing) fails the table.

use super::Expect::{Accepted, Refused};
use super::{Case, create};

/// A `nats.mikluko.io` object of kind `$kind` named `$name` with the spec lines `$spec`.
macro_rules! nats {
    ($kind:literal, $name:literal, $spec:literal) => {
        concat!(
            "apiVersion: nats.mikluko.io/v1beta1\nkind: ",
            $kind,
            "\nmetadata:\n  name: ",
            $name,
            "\nspec:\n",
            $spec
        )
    };
}

/// The rows of the nats kinds.
pub fn cases() -> Vec<Case> {
    let mut rows = Vec::new();
    rows.extend(connection_and_grant());
    rows.extend(trusts());
    rows
}

fn connection_and_grant() -> Vec<Case> {
    vec![
        create(
            "connection: one server is enough",
            "NatsConnection",
            nats!(
                "NatsConnection",
                "conn-one",
                "  servers: [\"nats://demo.nats.svc:4222\"]\n"
            ),
            Accepted,
        ),
        create(
            "connection: servers, tls.ca and credentials together",
            "NatsConnection",
            nats!(
                "NatsConnection",
                "conn-full",
                r#"  servers: ["tls://hub-0.example.com:4222", "tls://hub-1.example.com:4222"]
  tls:
    ca:
      secretKeyRef: {name: hub-ca}
  credentials:
    secretKeyRef: {name: app-creds, key: app.creds}
"#
            ),
            Accepted,
        ),
        create(
            "connection: servers must list at least one NATS URL",
            "NatsConnection",
            nats!("NatsConnection", "conn-empty", "  servers: []\n"),
            Refused("spec.servers must list at least one NATS URL"),
        ),
        create(
            "grant: one from and one to",
            "NatsReferenceGrant",
            nats!(
                "NatsReferenceGrant",
                "grant-ok",
                r#"  from:
  - {group: jetstream.nats.mikluko.io, kind: NatsStream, namespace: team-a}
  to:
  - {group: nats.mikluko.io, kind: NatsConnection, name: shared}
"#
            ),
            Accepted,
        ),
        create(
            "grant: to without a name admits every object of the kind",
            "NatsReferenceGrant",
            nats!(
                "NatsReferenceGrant",
                "grant-kind",
                r#"  from:
  - {group: cluster.nats.mikluko.io, kind: NatsCluster, namespace: edge}
  to:
  - {group: nats.mikluko.io, kind: NatsOperatorTrust}
"#
            ),
            Accepted,
        ),
        create(
            "grant: from must list at least one referrer",
            "NatsReferenceGrant",
            nats!(
                "NatsReferenceGrant",
                "grant-nofrom",
                r#"  from: []
  to:
  - {group: nats.mikluko.io, kind: NatsConnection}
"#
            ),
            Refused("spec.from must list at least one referrer"),
        ),
        create(
            "grant: to must list at least one target",
            "NatsReferenceGrant",
            nats!(
                "NatsReferenceGrant",
                "grant-noto",
                r#"  from:
  - {group: jetstream.nats.mikluko.io, kind: NatsStream, namespace: team-a}
  to: []
"#
            ),
            Refused("spec.to must list at least one target"),
        ),
    ]
}

fn trusts() -> Vec<Case> {
    vec![
        create(
            "operator trust: operatorRef alone",
            "NatsOperatorTrust",
            nats!(
                "NatsOperatorTrust",
                "ot-ref",
                "  operatorRef: {name: main}\n"
            ),
            Accepted,
        ),
        create(
            "operator trust: literal operatorJWT with systemAccountJWT",
            "NatsOperatorTrust",
            nats!(
                "NatsOperatorTrust",
                "ot-literal",
                "  operatorJWT: eyJ0eXAiOiJKV1QifQ.op.sig\n  systemAccountJWT: eyJ0eXAiOiJKV1QifQ.sys.sig\n"
            ),
            Accepted,
        ),
        create(
            "operator trust: operatorRef and literal JWTs are exclusive",
            "NatsOperatorTrust",
            nats!(
                "NatsOperatorTrust",
                "ot-both",
                "  operatorRef: {name: main}\n  operatorJWT: eyJ0eXAiOiJKV1QifQ.op.sig\n  systemAccountJWT: eyJ0eXAiOiJKV1QifQ.sys.sig\n"
            ),
            Refused("set exactly one of spec.operatorRef and the literal"),
        ),
        create(
            "operator trust: neither operatorRef nor literal JWTs",
            "NatsOperatorTrust",
            nats!("NatsOperatorTrust", "ot-none", "  {}\n"),
            Refused("set exactly one of spec.operatorRef and the literal"),
        ),
        create(
            "operator trust: operatorJWT without systemAccountJWT",
            "NatsOperatorTrust",
            nats!(
                "NatsOperatorTrust",
                "ot-half",
                "  operatorJWT: eyJ0eXAiOiJKV1QifQ.op.sig\n"
            ),
            Refused("spec.operatorJWT and spec.systemAccountJWT are set together"),
        ),
        create(
            "operator trust: systemAccountJWT without operatorJWT",
            "NatsOperatorTrust",
            nats!(
                "NatsOperatorTrust",
                "ot-half-sys",
                "  systemAccountJWT: eyJ0eXAiOiJKV1QifQ.sys.sig\n"
            ),
            Refused("spec.operatorJWT and spec.systemAccountJWT are set together"),
        ),
        create(
            "account trust: accountRef alone",
            "NatsAccountTrust",
            nats!(
                "NatsAccountTrust",
                "at-ref",
                "  accountRef: {name: app, namespace: team-a}\n"
            ),
            Accepted,
        ),
        create(
            "account trust: publicKey alone",
            "NatsAccountTrust",
            nats!(
                "NatsAccountTrust",
                "at-key",
                "  publicKey: ADU2SKHB4XZB6AZ6U7CA32PNWVS7Y7WKL2N3U3EJVHVIKZGEQJ2F6HAB\n"
            ),
            Accepted,
        ),
        create(
            "account trust: publicKey with a jwt copy",
            "NatsAccountTrust",
            nats!(
                "NatsAccountTrust",
                "at-key-jwt",
                "  publicKey: ADU2SKHB4XZB6AZ6U7CA32PNWVS7Y7WKL2N3U3EJVHVIKZGEQJ2F6HAB\n  jwt: eyJ0eXAiOiJKV1QifQ.acc.sig\n"
            ),
            Accepted,
        ),
        create(
            "account trust: accountRef and publicKey are exclusive",
            "NatsAccountTrust",
            nats!(
                "NatsAccountTrust",
                "at-both",
                "  accountRef: {name: app}\n  publicKey: ADU2SKHB4XZB6AZ6U7CA32PNWVS7Y7WKL2N3U3EJVHVIKZGEQJ2F6HAB\n"
            ),
            Refused("set exactly one of spec.accountRef and spec.publicKey"),
        ),
        create(
            "account trust: neither accountRef nor publicKey",
            "NatsAccountTrust",
            nats!("NatsAccountTrust", "at-none", "  {}\n"),
            Refused("set exactly one of spec.accountRef and spec.publicKey"),
        ),
        create(
            "account trust: jwt only with publicKey (not with accountRef)",
            "NatsAccountTrust",
            nats!(
                "NatsAccountTrust",
                "at-ref-jwt",
                "  accountRef: {name: app}\n  jwt: eyJ0eXAiOiJKV1QifQ.acc.sig\n"
            ),
            Refused("spec.jwt is set only together with spec.publicKey"),
        ),
    ]
}
