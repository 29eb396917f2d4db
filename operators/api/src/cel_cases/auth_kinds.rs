//! CEL rows of the `auth` group: NatsOperator, NatsSystemAccount, NatsAccount and NatsUser, every
//! rule with accepted rows beside the refused ones, creates and transitions (updates, with `old`).
//!
//! Rows cover only rules that are CEL (`x-kubernetes-validations`); bounds the OpenAPI schema
//! enforces are not rows here.

use super::Expect::{Accepted, Refused};
use super::{Case, create, update};

const OP: &str = "NatsOperator";
const SYS: &str = "NatsSystemAccount";
const ACC: &str = "NatsAccount";
const USER: &str = "NatsUser";

/// The rows of the auth kinds.
pub fn cases() -> Vec<Case> {
    let mut rows = Vec::new();
    rows.extend(operator());
    rows.extend(system_account());
    rows.extend(account());
    rows.extend(user());
    rows
}

fn operator() -> Vec<Case> {
    vec![
        create(
            "operator: generated keys, only systemAccountRef",
            OP,
            auth!("NatsOperator", "  systemAccountRef:\n    name: system\n"),
            Accepted,
        ),
        create(
            "operator: jwt (offline identity) with a signing key",
            OP,
            auth!(
                "NatsOperator",
                "  systemAccountRef:\n    name: system\n  jwt: eyJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.sig\n  keys:\n    signing:\n      - name: one\n        secretKeyRef:\n          name: op-signing\n"
            ),
            Accepted,
        ),
        create(
            "operator: keys.identity XOR jwt",
            OP,
            auth!(
                "NatsOperator",
                "  systemAccountRef:\n    name: system\n  jwt: eyJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.sig\n  keys:\n    identity:\n      secretKeyRef:\n        name: op-identity\n    signing:\n      - name: one\n        secretKeyRef:\n          name: op-signing\n"
            ),
            Refused("set at most one of jwt"),
        ),
        create(
            "operator: jwt requires at least one signing key",
            OP,
            auth!(
                "NatsOperator",
                "  systemAccountRef:\n    name: system\n  jwt: eyJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.sig\n"
            ),
            Refused("jwt (an identity kept offline) requires at least one signing key"),
        ),
        create(
            "operator: adopted identity and signing keys",
            OP,
            auth!(
                "NatsOperator",
                "  systemAccountRef:\n    name: system\n  keys:\n    identity:\n      secretKeyRef:\n        name: op-identity\n    signing:\n      - name: one\n        secretKeyRef:\n          name: op-signing\n"
            ),
            Accepted,
        ),
        create(
            "operator: a NATS operator's signing key takes no scope",
            OP,
            auth!(
                "NatsOperator",
                "  systemAccountRef:\n    name: system\n  keys:\n    signing:\n      - name: one\n        secretKeyRef:\n          name: op-signing\n        scope:\n          role: ops\n"
            ),
            Refused("takes no scope"),
        ),
    ]
}

fn system_account() -> Vec<Case> {
    vec![
        create(
            "system account: generated keys",
            SYS,
            auth!("NatsSystemAccount", "  operatorRef:\n    name: demo\n"),
            Accepted,
        ),
        create(
            "system account: publicKey XOR keys.identity",
            SYS,
            auth!(
                "NatsSystemAccount",
                "  operatorRef:\n    name: demo\n  publicKey: AAQ46SBQEJLFFE4ABG6PJOOIDX53J3BVEMDXZVXU5X26P3NM6UY2K7IG\n  keys:\n    identity:\n      secretKeyRef:\n        name: sys-identity\n    signing:\n      - name: one\n        secretKeyRef:\n          name: sys-signing\n"
            ),
            Refused("set at most one of publicKey"),
        ),
        create(
            "system account: publicKey requires a signing key",
            SYS,
            auth!(
                "NatsSystemAccount",
                "  operatorRef:\n    name: demo\n  publicKey: AAQ46SBQEJLFFE4ABG6PJOOIDX53J3BVEMDXZVXU5X26P3NM6UY2K7IG\n"
            ),
            Refused("requires at least one signing key"),
        ),
        create(
            "system account: publicKey with a signing key",
            SYS,
            auth!(
                "NatsSystemAccount",
                "  operatorRef:\n    name: demo\n  publicKey: AAQ46SBQEJLFFE4ABG6PJOOIDX53J3BVEMDXZVXU5X26P3NM6UY2K7IG\n  keys:\n    signing:\n      - name: one\n        secretKeyRef:\n          name: sys-signing\n"
            ),
            Accepted,
        ),
    ]
}

fn account() -> Vec<Case> {
    vec![
        create(
            "account: publicKey XOR keys.identity",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  publicKey: ABOMU37MGCC63NB3BPDKBGJLJEJPFTYWQMVZOGQOTOAY5WQJAAMV3ODH\n  keys:\n    identity:\n      secretKeyRef:\n        name: acc-identity\n    signing:\n      - name: one\n        secretKeyRef:\n          name: acc-signing\n"
            ),
            Refused("set at most one of publicKey"),
        ),
        create(
            "account: publicKey requires a signing key",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  publicKey: ABOMU37MGCC63NB3BPDKBGJLJEJPFTYWQMVZOGQOTOAY5WQJAAMV3ODH\n"
            ),
            Refused("requires at least one signing key"),
        ),
        create(
            "account: publicKey with a scoped signing key",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  publicKey: ABOMU37MGCC63NB3BPDKBGJLJEJPFTYWQMVZOGQOTOAY5WQJAAMV3ODH\n  keys:\n    signing:\n      - name: one\n        secretKeyRef:\n          name: acc-signing\n        scope:\n          role: reader\n          permissions:\n            subscribe:\n              allow: [\"orders.>\"]\n"
            ),
            Accepted,
        ),
        create(
            "account: limits.jetstream account-wide",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  limits:\n    connections: 200\n    jetstream:\n      memoryStorage: 1Gi\n      diskStorage: 50Gi\n      streams: 20\n"
            ),
            Accepted,
        ),
        create(
            "account: limits.jetstream by tiers",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  limits:\n    jetstream:\n      tiers:\n        - name: R1\n          diskStorage: 10Gi\n        - name: R3\n          diskStorage: 30Gi\n"
            ),
            Accepted,
        ),
        create(
            "account: limits.jetstream account-wide XOR tiers",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  limits:\n    jetstream:\n      diskStorage: 50Gi\n      tiers:\n        - name: R3\n          diskStorage: 30Gi\n"
            ),
            Refused("either account-wide limits or tiers"),
        ),
        create(
            "account: export preset jetstream-stepdown alone",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  exports:\n    - preset: jetstream-stepdown\n"
            ),
            Accepted,
        ),
        create(
            "account: export preset XOR name+type+subject",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  exports:\n    - preset: jetstream-stepdown\n      name: stepdown\n"
            ),
            Refused("either preset alone, or name, type and subject"),
        ),
        create(
            "account: export without preset needs name, type and subject",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  exports:\n    - name: results\n      type: Stream\n"
            ),
            Refused("either preset alone, or name, type and subject"),
        ),
        create(
            "account: public Stream export and private Service export with an importer",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  exports:\n    - name: results\n      type: Stream\n      subject: checks.results.>\n      access: Public\n    - name: execute\n      type: Service\n      subject: checks.execute.*\n      responseType: Singleton\n      access: Private\n      importers:\n        - kind: NatsAccount\n          name: core\n          namespace: team-core\n        - publicKey: ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP\n"
            ),
            Accepted,
        ),
        create(
            "account: responseType only for a Service export",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  exports:\n    - name: results\n      type: Stream\n      subject: checks.results.>\n      responseType: Stream\n"
            ),
            Refused("responseType is set only on an export of type Service"),
        ),
        create(
            "account: importers only for a Private export",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  exports:\n    - name: execute\n      type: Service\n      subject: checks.execute.*\n      access: Public\n      importers:\n        - kind: NatsAccount\n          name: core\n"
            ),
            Refused("importers are listed only on an export with access Private"),
        ),
        create(
            "account: an importer is kind+name or publicKey, not both",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  exports:\n    - name: execute\n      type: Service\n      subject: checks.execute.*\n      access: Private\n      importers:\n        - kind: NatsAccount\n          name: core\n          publicKey: ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP\n"
            ),
            Refused("an importer is either kind and name"),
        ),
        create(
            "account: an importer by publicKey takes no namespace",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  exports:\n    - name: execute\n      type: Service\n      subject: checks.execute.*\n      access: Private\n      importers:\n        - publicKey: ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP\n          namespace: team-core\n"
            ),
            Refused("an importer by publicKey takes no namespace"),
        ),
        create(
            "account: imports by accountRef and by publicKey with subject, type and activation",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  imports:\n    - accountRef:\n        kind: NatsAccount\n        name: monitoring\n        namespace: team-monitoring\n      export: check-results\n      localSubject: upstream.checks.>\n    - publicKey: ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP\n      export: rates\n      subject: partner.rates.>\n      type: Service\n      share: true\n      activation:\n        secretKeyRef:\n          name: partner-rates-activation\n          key: activation.jwt\n"
            ),
            Accepted,
        ),
        create(
            "account: import accountRef XOR publicKey (both)",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  imports:\n    - accountRef:\n        kind: NatsAccount\n        name: monitoring\n      publicKey: ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP\n      export: check-results\n      subject: checks.>\n      type: Stream\n"
            ),
            Refused("exactly one of accountRef and publicKey"),
        ),
        create(
            "account: import accountRef XOR publicKey (neither)",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  imports:\n    - export: check-results\n"
            ),
            Refused("exactly one of accountRef and publicKey"),
        ),
        create(
            "account: import subject and type only with publicKey",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  imports:\n    - accountRef:\n        kind: NatsAccount\n        name: monitoring\n      export: check-results\n      subject: checks.results.>\n"
            ),
            Refused("subject and type are set only on an import by publicKey"),
        ),
        create(
            "account: import by publicKey needs subject and type",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  imports:\n    - publicKey: ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP\n      export: rates\n"
            ),
            Refused("an import by publicKey needs subject and type"),
        ),
        create(
            "account: import activation only with publicKey",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  imports:\n    - accountRef:\n        kind: NatsAccount\n        name: monitoring\n      export: execute\n      activation:\n        secretKeyRef:\n          name: execute-activation\n"
            ),
            Refused("activation is set only on an import by publicKey"),
        ),
        create(
            "account: import share only for Service",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  imports:\n    - publicKey: ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP\n      export: prices\n      subject: partner.prices.>\n      type: Stream\n      share: true\n"
            ),
            Refused("share is set only on an import of type Service"),
        ),
        create(
            "account: import allowTrace only for Stream",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  imports:\n    - publicKey: ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP\n      export: rates\n      subject: partner.rates.>\n      type: Service\n      allowTrace: true\n"
            ),
            Refused("allowTrace is set only on an import of type Stream"),
        ),
        create(
            "account: import allowTrace on a Stream import",
            ACC,
            auth!(
                "NatsAccount",
                "  operatorRef:\n    name: demo\n  imports:\n    - publicKey: ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP\n      export: prices\n      subject: partner.prices.>\n      type: Stream\n      allowTrace: true\n"
            ),
            Accepted,
        ),
    ]
}

fn user() -> Vec<Case> {
    vec![
        create(
            "user: permissions with credentials",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  permissions:\n    publish:\n      allow: [\"orders.>\"]\n  connectionTypes: [STANDARD, WEBSOCKET]\n  credentials:\n    secretKeyRef:\n      name: orders-app-creds\n"
            ),
            Accepted,
        ),
        create(
            "user: publicKey XOR credentials",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  publicKey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4\n  credentials:\n    secretKeyRef:\n      name: orders-app-creds\n"
            ),
            Refused("set at most one of publicKey"),
        ),
        create(
            "user: preset XOR permissions",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  preset: readonly\n  permissions:\n    publish:\n      allow: [\"orders.>\"]\n"
            ),
            Refused("set at most one of preset and permissions"),
        ),
        create(
            "user: role alone, publicKey alone",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  role: reader\n  publicKey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4\n"
            ),
            Accepted,
        ),
        create(
            "user: role excludes permissions",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  role: reader\n  permissions:\n    subscribe:\n      allow: [\"orders.>\"]\n"
            ),
            Refused("role takes its permissions"),
        ),
        create(
            "user: role excludes connectionTypes",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  role: reader\n  connectionTypes: [MQTT]\n"
            ),
            Refused("role takes its permissions"),
        ),
        create(
            "user: role excludes preset",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  role: reader\n  preset: readonly\n"
            ),
            Refused("role takes its permissions"),
        ),
        create(
            "user: preset cluster-controller needs a NatsSystemAccount",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  preset: cluster-controller\n"
            ),
            Refused("need accountRef.kind NatsSystemAccount"),
        ),
        create(
            "user: preset jetstream-controller on a NatsSystemAccount",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsSystemAccount\n    name: system\n  preset: jetstream-controller\n  credentials:\n    secretKeyRef:\n      name: jetstream-controller-creds\n"
            ),
            Accepted,
        ),
        create(
            "user: preset auth-controller needs a NatsSystemAccount",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  preset: auth-controller\n"
            ),
            Refused("need accountRef.kind NatsSystemAccount"),
        ),
        create(
            "user: preset readonly needs a NatsAccount",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsSystemAccount\n    name: system\n  preset: readonly\n"
            ),
            Refused("need accountRef.kind NatsAccount"),
        ),
        create(
            "user: preset leafnode on a NatsAccount",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: edge\n  preset: leafnode\n"
            ),
            Accepted,
        ),
        update(
            "user: accountRef is immutable",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  preset: readonly\n"
            ),
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: billing\n  preset: readonly\n"
            ),
            Refused("accountRef cannot change"),
        ),
        update(
            "user: publicKey may change (a client rotating its key)",
            USER,
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  publicKey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4\n"
            ),
            auth!(
                "NatsUser",
                "  accountRef:\n    kind: NatsAccount\n    name: orders\n  publicKey: UCK2GGZ3AKDLVG2MMFKKAYTAMWKPVJ6ADPEF3FBNB7BXQUPOL5DDXMKZ\n"
            ),
            Accepted,
        ),
    ]
}
