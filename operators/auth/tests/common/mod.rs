//! The auth plane of story 02 (docs/stories/02-auth-plane), signed by this crate's pure core and
//! served by a real 3-server nats-server cluster in operator mode (the sim): the NatsOperator,
//! its NatsSystemAccount and the system users read from the story's manifests, keys planned and
//! generated into Secrets as the controller does, JWTs built from the specs.

#![allow(dead_code)] // each test binary uses part of the plane

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::{Client, ConnectOptions, Event};
use auth_controller::account::{self, AccountInput, AccountSigningKey};
use auth_controller::keys::{self, IdentityPlan, SeedSource};
use auth_controller::{operator, push_rules, user};
use nats_api::auth::{
    GeneratedKind, NatsAccount, NatsAccountSpec, NatsOperator, NatsSystemAccount, NatsUser,
};
use nats_claims::{AccountClaims, Import, KeyKind, NKey, OperatorClaims, decode};
use nats_wire::{Collect, Wire};
use sim::{Auth, OperatorMode, Topology, TopologySpec};
use tokio::sync::mpsc;

pub const VERSION: &str = "2.15.1";
pub const DEADLINE: Duration = Duration::from_secs(10);

/// Reads every object of `kind` from a story 02 manifest.
pub fn manifest<T: serde::de::DeserializeOwned>(file: &str, kind: &str) -> Vec<T> {
    story_manifest("02-auth-plane", file, kind)
}

/// Reads every object of `kind` from a manifest of docs/stories/`story`.
pub fn story_manifest<T: serde::de::DeserializeOwned>(
    story: &str,
    file: &str,
    kind: &str,
) -> Vec<T> {
    sim::testkit::story_objects(format!("docs/stories/{story}/{file}"), kind)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The seeds of one object, generated through the key plan and read back from the generated
/// Secrets as the controller reads them.
pub struct KeySet {
    pub identity: NKey,
    pub signing: NKey,
}

pub fn generate_keys(kind: GeneratedKind, name: &str) -> KeySet {
    let plan = keys::key_plan(kind, name, None, false, None, &BTreeMap::new()).unwrap();
    let seed_kind = keys::seed_kind(kind);
    let through_secret = |which: &str, source: &SeedSource| {
        let SeedSource::Generate { secret } = source else {
            panic!("a fresh object generates its keys, got {source:?}")
        };
        let key = NKey::generate(seed_kind);
        let s = keys::generated_secret(kind, name, "nats-system", which, &key);
        assert_eq!(s.metadata.name.as_deref(), Some(secret.as_str()));
        let bytes = &s.data.as_ref().unwrap()["seed"].0;
        keys::read_seed(secret, "seed", seed_kind, bytes).unwrap()
    };
    let IdentityPlan::Seed(id_source) = &plan.identity else {
        panic!("identity is not offline")
    };
    KeySet {
        identity: through_secret(keys::IDENTITY, id_source),
        signing: through_secret(keys::SIGNING_1, &plan.signing[0].1),
    }
}

/// An account of the plane: its keys and the signing key list its JWT carries.
pub struct Acct {
    pub name: String,
    pub keys: KeySet,
}

impl Acct {
    pub fn new(kind: GeneratedKind, name: &str) -> Acct {
        Acct {
            name: name.into(),
            keys: generate_keys(kind, name),
        }
    }

    pub fn public_key(&self) -> String {
        self.keys.identity.public_key()
    }

    pub fn signing_keys(&self) -> Vec<AccountSigningKey> {
        vec![AccountSigningKey {
            public_key: self.keys.signing.public_key(),
            scope: None,
        }]
    }

    /// Creds for `user` (a NatsUser of this account), signed as the controller signs.
    pub fn creds(&self, u: &NatsUser) -> String {
        let seed = NKey::generate(KeyKind::User);
        let keys: Vec<_> = self
            .signing_keys()
            .into_iter()
            .map(|k| (k, false))
            .collect();
        let signer = user::signing_key_for(&u.spec, &keys).unwrap();
        assert_eq!(signer.public_key, self.keys.signing.public_key());
        let name = u.metadata.name.clone().unwrap_or_default();
        let claims = user::user_claims(&name, &u.spec, &seed.public_key(), &self.public_key());
        match user::issue(&claims, &self.keys.signing, Some(&seed), now()).unwrap() {
            user::Issued::Creds(text) => text.expose().to_string(),
            user::Issued::JwtOnly(_) => panic!("a seed gives creds"),
        }
    }
}

/// Story 02's trust roots on a running cluster.
pub struct Plane {
    pub operator: OperatorClaims,
    pub operator_signing: NKey,
    pub system: Acct,
    pub topo: Topology,
    /// The auth-controller system user, dialed with its preset's inbox.
    pub wire: Wire,
}

impl Plane {
    /// Signs the operator and system account of 01-trust-roots.yaml and starts 3 servers trusting them.
    pub async fn start() -> Plane {
        let ops: Vec<NatsOperator> = manifest("01-trust-roots.yaml", "NatsOperator");
        let sysas: Vec<NatsSystemAccount> = manifest("01-trust-roots.yaml", "NatsSystemAccount");
        let op = &ops[0];
        let sysa = &sysas[0];
        let op_name = op.metadata.name.clone().unwrap();
        let sys_name = sysa.metadata.name.clone().unwrap();
        assert_eq!(op.spec.system_account_ref.name, sys_name);
        assert_eq!(sysa.spec.operator_ref.name, op_name);

        let op_keys = generate_keys(GeneratedKind::Operator, &op_name);
        let system = Acct::new(GeneratedKind::SystemAccount, &sys_name);
        let operator = operator::operator_claims(
            &op_name,
            &op_keys.identity.public_key(),
            &[op_keys.signing.public_key()],
            &system.public_key(),
        );
        let operator_jwt = operator::sign_operator(&operator, &op_keys.identity, now()).unwrap();
        let sys_keys = system.signing_keys();
        let sys_claims = account::system_account_claims(
            AccountInput {
                name: &sys_name,
                public_key: &system.public_key(),
                signing_keys: &sys_keys,
                imports: vec![],
                revocations: &[],
                issued_at: now(),
            },
            &[],
        )
        .unwrap();
        assert_eq!(sys_claims.expires, 0, "a system account JWT never expires");
        let sys_jwt = sys_claims
            .encode_issued_at(&op_keys.signing, sys_claims.issued_at.max(now()))
            .unwrap();

        let spec = TopologySpec::cluster(3)
            .with_version(VERSION)
            .with_auth(Auth::Operator(OperatorMode {
                operator_jwt,
                system_account: system.public_key(),
                preload: vec![(system.public_key(), sys_jwt)],
            }));
        let topo = Topology::start(spec)
            .await
            .expect("operator-mode cluster starts");
        let auth_user = system_user("auth-controller");
        let (client, _events) =
            connect(&topo, &system.creds(&auth_user), Some("auth-controller")).await;
        let client = client.unwrap_or_else(|e| {
            panic!(
                "auth-controller user refused: {e}\n{}",
                topo.servers()[0].log_tail()
            )
        });
        Plane {
            operator,
            operator_signing: op_keys.signing,
            system,
            topo,
            wire: Wire::new(client),
        }
    }

    /// Signs an account from its spec, as the controller does: iat past anything the servers
    /// hold, signed by the NATS operator signing key, checked by the push guard.
    pub async fn sign_account(
        &self,
        acct: &Acct,
        spec: &NatsAccountSpec,
        imports: Vec<Import>,
    ) -> String {
        self.sign_account_with(
            &acct.name,
            &acct.public_key(),
            &acct.signing_keys(),
            spec,
            imports,
        )
        .await
    }

    /// [`Plane::sign_account`] for an account with any signing keys (scoped ones too).
    pub async fn sign_account_with(
        &self,
        name: &str,
        pk: &str,
        keys: &[AccountSigningKey],
        spec: &NatsAccountSpec,
        imports: Vec<Import>,
    ) -> String {
        let held = self
            .wire
            .claims_lookup(pk, Collect::expecting(3, DEADLINE))
            .await
            .unwrap();
        let held_iat = push_rules::held_issued_at(held.iter().filter_map(|a| a.jwt()));
        let iat = push_rules::issue_time(now(), &held_iat);
        let claims = account::account_claims(
            spec,
            AccountInput {
                name,
                public_key: pk,
                signing_keys: keys,
                imports,
                revocations: &[],
                issued_at: iat,
            },
        )
        .unwrap();
        let jwt = claims
            .encode_issued_at(&self.operator_signing, iat)
            .unwrap();
        let signed: AccountClaims = decode(&jwt).unwrap();
        push_rules::may_push(&self.operator, &signed, &held_iat).unwrap();
        jwt
    }

    /// Signs the system account again with the stepdown imports of `exporters` and pushes it.
    pub async fn resign_system_account(&self, exporters: &[String]) -> String {
        let held = self
            .wire
            .claims_lookup(&self.system.public_key(), Collect::expecting(3, DEADLINE))
            .await
            .unwrap();
        let held_iat = push_rules::held_issued_at(held.iter().filter_map(|a| a.jwt()));
        let iat = push_rules::issue_time(now(), &held_iat);
        let keys = self.system.signing_keys();
        let pk = self.system.public_key();
        let claims = account::system_account_claims(
            AccountInput {
                name: &self.system.name,
                public_key: &pk,
                signing_keys: &keys,
                imports: vec![],
                revocations: &[],
                issued_at: iat,
            },
            exporters,
        )
        .unwrap();
        let jwt = claims
            .encode_issued_at(&self.operator_signing, iat)
            .unwrap();
        let signed: AccountClaims = decode(&jwt).unwrap();
        push_rules::may_push(&self.operator, &signed, &held_iat).unwrap();
        self.push(&jwt).await;
        jwt
    }

    /// CLAIMS.UPDATE, every server answering 200.
    pub async fn push(&self, jwt: &str) {
        let answers = self
            .wire
            .claims_update(jwt, Collect::expecting(3, DEADLINE))
            .await
            .unwrap();
        assert!(answers.failures.is_empty(), "{:?}", answers.failures);
        assert!(
            answers.replies.iter().all(|r| r.data.code == 200),
            "{:?}",
            answers.replies
        );
    }
}

/// A NatsUser of 02-system-users.yaml.
pub fn system_user(name: &str) -> NatsUser {
    manifest::<NatsUser>("02-system-users.yaml", "NatsUser")
        .into_iter()
        .find(|u| u.metadata.name.as_deref() == Some(name))
        .unwrap()
}

/// A NatsUser of 04-orders.yaml.
pub fn orders_user(name: &str) -> NatsUser {
    manifest::<NatsUser>("04-orders.yaml", "NatsUser")
        .into_iter()
        .find(|u| u.metadata.name.as_deref() == Some(name))
        .unwrap()
}

/// The orders NatsAccount of 04-orders.yaml.
pub fn orders_account() -> NatsAccount {
    manifest::<NatsAccount>("04-orders.yaml", "NatsAccount").remove(0)
}

/// Connects with `creds`, dialing with `_INBOX.<preset>` where given; server errors arrive on
/// the returned channel.
pub async fn connect(
    topo: &Topology,
    creds: &str,
    preset: Option<&str>,
) -> (
    Result<Client, async_nats::ConnectError>,
    mpsc::UnboundedReceiver<Event>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut opts = ConnectOptions::with_credentials(creds)
        .unwrap()
        .connection_timeout(Duration::from_secs(3))
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(event);
            }
        });
    if let Some(p) = preset {
        opts = opts.custom_inbox_prefix(nats_wire::preset_inbox_prefix(p));
    }
    (opts.connect(topo.server_addrs()).await, rx)
}

pub fn now_secs() -> i64 {
    now()
}

/// Judges subjects by the server's answer: a refused publish or subscription comes back as
/// `-ERR 'Permissions Violation ...'`, an accepted one with nothing, so each probe is followed by
/// a publish to a sentinel subject the user may not publish to: the server handles a
/// connection's messages in order, so the sentinel's error arriving with no error for the probe
/// before it means the probe was accepted.
pub struct Judge {
    pub client: Client,
    pub events: mpsc::UnboundedReceiver<Event>,
    pub n: u32,
}

fn violation(e: &Event, what: &str, subject: &str) -> bool {
    match e {
        Event::ServerError(err) => {
            let text = err.to_string().to_lowercase();
            text.contains("permissions violation")
                && text.contains(what)
                && text.contains(&format!("\"{}\"", subject.to_lowercase()))
        }
        _ => false,
    }
}

impl Judge {
    /// Waits for the sentinel's violation; true where `probe` was refused before it.
    async fn refused_before_sentinel(&mut self, what: &str, probe: &str) -> bool {
        self.n += 1;
        let sentinel = format!("sentinel.{}", self.n);
        self.client
            .publish(sentinel.clone(), "".into())
            .await
            .unwrap();
        self.client.flush().await.unwrap();
        let mut refused = false;
        let found = tokio::time::timeout(DEADLINE, async {
            while let Some(e) = self.events.recv().await {
                if violation(&e, what, probe) {
                    refused = true;
                }
                if violation(&e, "publish", &sentinel) {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(found, Ok(true), "no violation for sentinel {sentinel}");
        refused
    }

    pub async fn publish_allowed(&mut self, subject: &str) -> bool {
        self.client
            .publish(subject.to_string(), "probe".into())
            .await
            .unwrap();
        !self.refused_before_sentinel("publish", subject).await
    }

    pub async fn subscribe_allowed(&mut self, subject: &str) -> bool {
        let _sub = self.client.subscribe(subject.to_string()).await.unwrap();
        !self.refused_before_sentinel("subscription", subject).await
    }
}
