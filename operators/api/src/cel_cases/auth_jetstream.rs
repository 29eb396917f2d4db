//! CEL rows of the `auth` and `jetstream` groups: every rule with accepted rows beside the
//! refused ones, creates and transitions (updates, with `old`).
//!
//! Rows cover only rules that are CEL (`x-kubernetes-validations`); bounds the OpenAPI schema
//! enforces (replicas 1..5, history 1..64, at most 1000 exports, pool names as DNS labels,
//! `to.serverTags` of at least one tag) are not rows here.

use super::{Case, Expect, create, update};

/// A whole object of `$group` and `$kind` named `demo` in namespace `team`, with `$spec` (YAML
/// lines indented by two) as its spec.
macro_rules! obj {
    ($group:literal, $kind:literal, $spec:literal) => {
        obj!($group, $kind, "demo", $spec)
    };
    ($group:literal, $kind:literal, $name:literal, $spec:literal) => {
        concat!(
            "apiVersion: ",
            $group,
            "/v1beta1\nkind: ",
            $kind,
            "\nmetadata:\n  name: ",
            $name,
            "\n  namespace: team\nspec:\n",
            $spec
        )
    };
}

macro_rules! auth {
    ($kind:literal, $spec:literal) => {
        obj!("auth.nats.mikluko.io", $kind, $spec)
    };
}

macro_rules! js {
    ($kind:literal, $spec:literal) => {
        obj!("jetstream.nats.mikluko.io", $kind, $spec)
    };
    ($kind:literal, $name:literal, $spec:literal) => {
        obj!("jetstream.nats.mikluko.io", $kind, $name, $spec)
    };
}

use Expect::{Accepted, Refused};

/// The rows of the auth and jetstream kinds.
pub fn cases() -> Vec<Case> {
    let mut rows = Vec::new();
    rows.extend(operator());
    rows.extend(system_account());
    rows.extend(account());
    rows.extend(user());
    rows.extend(stream());
    rows.extend(consumer());
    rows.extend(buckets());
    rows.extend(balancers());
    rows.extend(evacuation());
    rows
}

const OP: &str = "NatsOperator";
const SYS: &str = "NatsSystemAccount";
const ACC: &str = "NatsAccount";
const USER: &str = "NatsUser";
const STREAM: &str = "NatsStream";
const CONSUMER: &str = "NatsConsumer";
const KV: &str = "NatsKeyValue";
const OBJ: &str = "NatsObjectStore";
const BAL: &str = "NatsBalancer";
const SYSBAL: &str = "NatsSystemBalancer";
const EVAC: &str = "NatsClusterEvacuation";

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

fn stream() -> Vec<Case> {
    vec![
        create(
            "stream: a new stream with its config",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  name: ORDERS\n  subjects: [\"orders.>\"]\n  storage: File\n  replicas: 3\n  maxAge: 720h\n  duplicates: 2m\n  retention: Limits\n"
            ),
            Accepted,
        ),
        update(
            "stream: storage is immutable",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  storage: File\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  storage: Memory\n"
            ),
            Refused("storage cannot change once set"),
        ),
        update(
            "stream: storage cannot be removed once set",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  storage: Memory\n"
            ),
            js!("NatsStream", "  connectionRef:\n    name: orders\n"),
            Refused("storage cannot change once set"),
        ),
        update(
            "stream: storage filled in by late initialization",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  adoptionPolicy: AdoptOrCreate\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  adoptionPolicy: AdoptOrCreate\n  storage: File\n  replicas: 1\n"
            ),
            Accepted,
        ),
        update(
            "stream: mirror is immutable",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  mirror:\n    name: ORDERS\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  mirror:\n    name: ORDERS_EU\n"
            ),
            Refused("mirror cannot change once set"),
        ),
        update(
            "stream: allowMsgCounter is immutable",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgCounter: true\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgCounter: false\n"
            ),
            Refused("allowMsgCounter cannot change once set"),
        ),
        update(
            "stream: persistMode is immutable",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  persistMode: Default\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  persistMode: Async\n"
            ),
            Refused("persistMode cannot change once set"),
        ),
        update(
            "stream: retention cannot move to WorkQueue",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  retention: Limits\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  retention: WorkQueue\n"
            ),
            Refused("retention cannot change to or from WorkQueue"),
        ),
        update(
            "stream: retention cannot move from WorkQueue (omitted reads Limits)",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  retention: WorkQueue\n"
            ),
            js!("NatsStream", "  connectionRef:\n    name: orders\n"),
            Refused("retention cannot change to or from WorkQueue"),
        ),
        update(
            "stream: retention Limits to Interest is allowed",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  retention: Limits\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  retention: Interest\n"
            ),
            Accepted,
        ),
        update(
            "stream: sealed is one-way (false to true)",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  sealed: false\n  denyDelete: false\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  sealed: true\n  denyDelete: true\n"
            ),
            Accepted,
        ),
        update(
            "stream: sealed cannot be turned off",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  sealed: true\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  sealed: false\n"
            ),
            Refused("sealed cannot be turned off"),
        ),
        update(
            "stream: denyDelete cannot be turned off",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  denyDelete: true\n"
            ),
            js!("NatsStream", "  connectionRef:\n    name: orders\n"),
            Refused("denyDelete cannot be turned off"),
        ),
        update(
            "stream: denyPurge cannot be turned off",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  denyPurge: true\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  denyPurge: false\n"
            ),
            Refused("denyPurge cannot be turned off"),
        ),
        update(
            "stream: allowMsgTTL cannot be turned off",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgTTL: true\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgTTL: false\n"
            ),
            Refused("allowMsgTTL cannot be turned off"),
        ),
        update(
            "stream: allowMsgSchedules cannot be turned off",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgSchedules: true\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgSchedules: false\n"
            ),
            Refused("allowMsgSchedules cannot be turned off"),
        ),
        update(
            "stream: allowMsgSchedules and allowMsgTTL may be turned on",
            STREAM,
            js!("NatsStream", "  connectionRef:\n    name: orders\n"),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgSchedules: true\n  allowMsgTTL: true\n"
            ),
            Accepted,
        ),
        update(
            "stream: connectionRef is immutable",
            STREAM,
            js!("NatsStream", "  connectionRef:\n    name: orders\n"),
            js!("NatsStream", "  connectionRef:\n    name: billing\n"),
            Refused("connectionRef cannot change"),
        ),
        update(
            "stream: the server-side name is immutable",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  name: ORDERS\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  name: ORDERS_V2\n"
            ),
            Refused("server-side name"),
        ),
        update(
            "stream: spec.name written as metadata.name keeps the server-side name",
            STREAM,
            js!(
                "NatsStream",
                "orders",
                "  connectionRef:\n    name: orders\n"
            ),
            js!(
                "NatsStream",
                "orders",
                "  connectionRef:\n    name: orders\n  name: orders\n  maxMsgs: 1000\n"
            ),
            Accepted,
        ),
        update(
            "stream: dropping spec.name changes the server-side name to metadata.name",
            STREAM,
            js!(
                "NatsStream",
                "orders",
                "  connectionRef:\n    name: orders\n  name: ORDERS\n"
            ),
            js!(
                "NatsStream",
                "orders",
                "  connectionRef:\n    name: orders\n"
            ),
            Refused("server-side name"),
        ),
    ]
}

fn consumer() -> Vec<Case> {
    vec![
        create(
            "consumer: by stream with connectionRef",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  stream: ARCHIVE\n  deliverPolicy: New\n  ackPolicy: None\n  deliverSubject: payments.archive.tail\n  heartbeat: 5s\n  flowControl: true\n"
            ),
            Accepted,
        ),
        create(
            "consumer: by streamRef, connection inherited",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  ackPolicy: Explicit\n  ackWait: 30s\n  backOff: [1s, 5s, 30s]\n  maxDeliver: 5\n  filterSubject: payments.ledger.>\n"
            ),
            Accepted,
        ),
        create(
            "consumer: stream XOR streamRef (both)",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  stream: LEDGER\n  streamRef:\n    name: ledger\n"
            ),
            Refused("set exactly one of stream"),
        ),
        create(
            "consumer: stream XOR streamRef (neither)",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  ackPolicy: Explicit\n"
            ),
            Refused("set exactly one of stream"),
        ),
        create(
            "consumer: by stream needs connectionRef",
            CONSUMER,
            js!("NatsConsumer", "  stream: LEDGER\n"),
            Refused("needs connectionRef"),
        ),
        create(
            "consumer: by streamRef takes no connectionRef",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  streamRef:\n    name: ledger\n"
            ),
            Refused("inherits the NatsStream's connection"),
        ),
        create(
            "consumer: filterSubject XOR filterSubjects",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  filterSubject: a.>\n  filterSubjects: [\"b.>\", \"c.>\"]\n"
            ),
            Refused("set at most one of filterSubject and filterSubjects"),
        ),
        update(
            "consumer: stream is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  stream: LEDGER\n"
            ),
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  stream: ARCHIVE\n"
            ),
            Refused("stream cannot change"),
        ),
        update(
            "consumer: streamRef is immutable",
            CONSUMER,
            js!("NatsConsumer", "  streamRef:\n    name: ledger\n"),
            js!("NatsConsumer", "  streamRef:\n    name: archive\n"),
            Refused("streamRef cannot change"),
        ),
        update(
            "consumer: connectionRef is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  stream: LEDGER\n"
            ),
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: modern\n  stream: LEDGER\n"
            ),
            Refused("connectionRef cannot change"),
        ),
        update(
            "consumer: deliverPolicy is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: All\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: New\n"
            ),
            Refused("deliverPolicy cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: deliverPolicy changes with recreateOnImmutableChange",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: All\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  recreateOnImmutableChange: true\n  deliverPolicy: ByStartSequence\n  optStartSeq: 1000\n"
            ),
            Accepted,
        ),
        update(
            "consumer: ackPolicy is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  ackPolicy: Explicit\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  ackPolicy: None\n"
            ),
            Refused("ackPolicy cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: replayPolicy is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  replayPolicy: Instant\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  replayPolicy: Original\n"
            ),
            Refused("replayPolicy cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: optStartSeq is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: ByStartSequence\n  optStartSeq: 10\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: ByStartSequence\n  optStartSeq: 20\n"
            ),
            Refused("optStartSeq cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: optStartTime is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: ByStartTime\n  optStartTime: \"2026-01-01T00:00:00Z\"\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: ByStartTime\n  optStartTime: \"2026-02-01T00:00:00Z\"\n"
            ),
            Refused("optStartTime cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: heartbeat is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverSubject: tail\n  heartbeat: 5s\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverSubject: tail\n  heartbeat: 10s\n"
            ),
            Refused("heartbeat cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: flowControl is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverSubject: tail\n  flowControl: true\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverSubject: tail\n  flowControl: false\n"
            ),
            Refused("flowControl cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: maxWaiting is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  maxWaiting: 512\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  maxWaiting: 64\n"
            ),
            Refused("maxWaiting cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: mutable fields change (maxAckPending, ackWait, description)",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  ackPolicy: Explicit\n  maxAckPending: 1000\n  ackWait: 30s\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  ackPolicy: Explicit\n  maxAckPending: 5000\n  ackWait: 1m\n  description: projector\n"
            ),
            Accepted,
        ),
        update(
            "consumer: the server-side name is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  name: projector\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  name: projector-v2\n"
            ),
            Refused("server-side name"),
        ),
    ]
}

fn buckets() -> Vec<Case> {
    vec![
        create(
            "key-value: a bucket",
            KV,
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  history: 5\n  ttl: 24h\n  maxValueSize: 64Ki\n  storage: File\n  replicas: 3\n"
            ),
            Accepted,
        ),
        update(
            "key-value: storage is immutable",
            KV,
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  storage: File\n"
            ),
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  storage: Memory\n"
            ),
            Refused("storage cannot change once set"),
        ),
        update(
            "key-value: history and ttl change",
            KV,
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  storage: File\n  history: 5\n"
            ),
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  storage: File\n  history: 10\n  ttl: 1h\n"
            ),
            Accepted,
        ),
        update(
            "key-value: connectionRef is immutable",
            KV,
            js!("NatsKeyValue", "  connectionRef:\n    name: legacy\n"),
            js!("NatsKeyValue", "  connectionRef:\n    name: modern\n"),
            Refused("connectionRef cannot change"),
        ),
        update(
            "key-value: the bucket name is immutable",
            KV,
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  name: sessions\n"
            ),
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  name: sessions2\n"
            ),
            Refused("bucket name"),
        ),
        update(
            "object store: storage is immutable",
            OBJ,
            js!(
                "NatsObjectStore",
                "  connectionRef:\n    name: legacy\n  storage: File\n"
            ),
            js!(
                "NatsObjectStore",
                "  connectionRef:\n    name: legacy\n  storage: Memory\n"
            ),
            Refused("storage cannot change once set"),
        ),
        update(
            "object store: ttl, maxBytes and compression change",
            OBJ,
            js!(
                "NatsObjectStore",
                "  connectionRef:\n    name: legacy\n  storage: File\n"
            ),
            js!(
                "NatsObjectStore",
                "  connectionRef:\n    name: legacy\n  storage: File\n  ttl: 2160h\n  maxBytes: 50Gi\n  compression: true\n"
            ),
            Accepted,
        ),
        update(
            "object store: connectionRef is immutable",
            OBJ,
            js!("NatsObjectStore", "  connectionRef:\n    name: legacy\n"),
            js!("NatsObjectStore", "  connectionRef:\n    name: modern\n"),
            Refused("connectionRef cannot change"),
        ),
    ]
}

fn balancers() -> Vec<Case> {
    vec![
        create(
            "balancer: pools, moves and the default interval",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  pools:\n    - name: hot\n      selector:\n        matchLabels:\n          tier: hot\n  moves:\n    leader: true\n    placement: false\n"
            ),
            Accepted,
        ),
        create(
            "balancer: interval 2m",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 2m\n"
            ),
            Accepted,
        ),
        create(
            "balancer: interval 0s is below the 5s floor",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 0s\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        create(
            "balancer: interval 1ns, a hot loop, is below the floor",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 1ns\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        create(
            "balancer: interval 4999ms is just below the floor",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 4999ms\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        create(
            "balancer: interval 5s, the floor itself, is accepted",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 5s\n"
            ),
            Accepted,
        ),
        update(
            "balancer: lowering interval below the floor is refused",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 1m\n"
            ),
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 1s\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        update(
            "balancer: raising the interval from the floor is accepted",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 5s\n"
            ),
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 10m\n"
            ),
            Accepted,
        ),
        create(
            "balancer: the pool name default is reserved",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  pools:\n    - name: default\n      selector:\n        matchLabels:\n          tier: hot\n"
            ),
            Refused("reserved"),
        ),
        update(
            "balancer: connectionRef is immutable",
            BAL,
            js!("NatsBalancer", "  connectionRef:\n    name: orders\n"),
            js!("NatsBalancer", "  connectionRef:\n    name: billing\n"),
            Refused("connectionRef cannot change"),
        ),
        update(
            "balancer: pools, moves and interval change",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 1m\n"
            ),
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 30s\n  moves:\n    placement: true\n  pools:\n    - name: cold\n      selector:\n        matchLabels:\n          tier: cold\n"
            ),
            Accepted,
        ),
        create(
            "system balancer: placement moves on",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  moves:\n    leader: true\n    placement: true\n  interval: 1m\n"
            ),
            Accepted,
        ),
        create(
            "system balancer: interval 0 is below the 5s floor",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: \"0\"\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        create(
            "system balancer: interval 500ms is below the floor",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 500ms\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        create(
            "system balancer: interval 5s, the floor itself, is accepted",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 5s\n"
            ),
            Accepted,
        ),
        update(
            "system balancer: lowering interval below the floor is refused",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 1m\n"
            ),
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 2s\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        update(
            "system balancer: lowering the interval to the floor is accepted",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 1m\n"
            ),
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 5s\n"
            ),
            Accepted,
        ),
        update(
            "system balancer: connectionRef is immutable",
            SYSBAL,
            js!("NatsSystemBalancer", "  connectionRef:\n    name: system\n"),
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system-west\n"
            ),
            Refused("connectionRef cannot change"),
        ),
    ]
}

fn evacuation() -> Vec<Case> {
    vec![
        create(
            "evacuation: from a cluster to tagged servers",
            EVAC,
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            Accepted,
        ),
        update(
            "evacuation: from is immutable",
            EVAC,
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-north\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            Refused("from cannot change"),
        ),
        update(
            "evacuation: to is immutable",
            EVAC,
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\", \"disk:ssd\"]\n"
            ),
            Refused("to cannot change"),
        ),
        update(
            "evacuation: connectionRef is immutable",
            EVAC,
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system-2\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            Refused("connectionRef cannot change"),
        ),
        update(
            "evacuation: an unchanged spec is accepted",
            EVAC,
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            Accepted,
        ),
    ]
}
