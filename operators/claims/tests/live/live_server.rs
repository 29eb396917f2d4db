//! A real nats-server 2.15 in operator mode (started by the sim) judges the JWTs this crate signs:
//! it trusts the operator, takes the preloaded system account and pushed accounts, admits users
//! by their creds, refuses what their permissions do not grant, disconnects revoked users,
//! honours activation tokens, and refuses users of an expired account.

use std::time::Duration;

use async_nats::{Client, ConnectErrorKind, ConnectOptions, Event};
use nats_claims::*;
use serde_json::Value;
use sim::{Auth, OperatorMode, Topology, TopologySpec};
use tokio::sync::mpsc;

const VERSION: &str = "2.15.1";
const DEADLINE: Duration = Duration::from_secs(10);

struct Plane {
    operator_signing: NKey,
    topo: Topology,
    sys: Client,
}

/// An account with the signing key that signs its users and activations: the NATS operator
/// requires strict signing, so the identity signs nothing.
struct Acct {
    identity: NKey,
    signing: NKey,
}

impl Acct {
    fn new() -> Acct {
        Acct {
            identity: NKey::generate(KeyKind::Account),
            signing: NKey::generate(KeyKind::Account),
        }
    }

    fn public_key(&self) -> String {
        self.identity.public_key()
    }

    /// Account claims listing the signing key.
    fn claims(&self, name: &str) -> AccountClaims {
        AccountClaims::new(self.public_key())
            .name(name)
            .signing_key(self.signing.public_key())
    }

    /// A creds file for a user of `claims` (a `UserClaims::new` of `user`'s key).
    fn creds(&self, claims: UserClaims, user: &NKey) -> String {
        let jwt = claims
            .name("u")
            .issuer_account(self.public_key())
            .encode(&self.signing)
            .unwrap();
        Creds::render_key(&jwt, user).unwrap().expose().to_string()
    }

    /// A fresh user with default permissions.
    fn user(&self) -> (NKey, String) {
        let key = NKey::generate(KeyKind::User);
        let creds = self.creds(UserClaims::new(key.public_key()), &key);
        (key, creds)
    }
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Plane {
    /// One server trusting a strict-signing operator, the system account preloaded.
    async fn start() -> Plane {
        let operator = NKey::generate(KeyKind::Operator);
        let operator_signing = NKey::generate(KeyKind::Operator);
        let sys_account = Acct::new();
        let operator_jwt = OperatorClaims::new(operator.public_key())
            .name("plane")
            .signing_key(operator_signing.public_key())
            .system_account(sys_account.public_key())
            .strict_signing(true)
            .encode(&operator)
            .unwrap();
        let sys_jwt = sys_account.claims("SYS").encode(&operator_signing).unwrap();
        let spec = TopologySpec::cluster(1)
            .with_version(VERSION)
            .with_auth(Auth::Operator(OperatorMode {
                operator_jwt,
                system_account: sys_account.public_key(),
                preload: vec![(sys_account.public_key(), sys_jwt)],
            }));
        let topo = Topology::start(spec)
            .await
            .expect("operator-mode server starts");
        let (_, sys_creds) = sys_account.user();
        let sys = match connect(&topo, &sys_creds, None).await {
            Ok(c) => c,
            Err(e) => panic!("system user refused: {e}\n{}", topo.servers()[0].log_tail()),
        };
        Plane {
            operator_signing,
            topo,
            sys,
        }
    }

    /// `$SYS.REQ.CLAIMS.UPDATE`, returning the server's answer.
    async fn push(&self, jwt: &str) -> Value {
        let msg = tokio::time::timeout(
            DEADLINE,
            self.sys
                .request("$SYS.REQ.CLAIMS.UPDATE", jwt.to_string().into()),
        )
        .await
        .expect("claims update answered in time")
        .expect("claims update request");
        serde_json::from_slice(&msg.payload).unwrap()
    }

    async fn push_ok(&self, jwt: &str) {
        let answer = self.push(jwt).await;
        assert_eq!(answer["data"]["code"], 200, "push refused: {answer}");
    }

    async fn lookup(&self, account: &str) -> String {
        let msg = self
            .sys
            .request(
                format!("$SYS.REQ.ACCOUNT.{account}.CLAIMS.LOOKUP"),
                "".into(),
            )
            .await
            .unwrap();
        String::from_utf8(msg.payload.to_vec()).unwrap()
    }
}

async fn connect(
    topo: &Topology,
    creds: &str,
    events: Option<mpsc::UnboundedSender<Event>>,
) -> Result<Client, async_nats::ConnectError> {
    let mut opts = ConnectOptions::with_credentials(creds)
        .unwrap()
        .connection_timeout(Duration::from_secs(5));
    if let Some(tx) = events {
        opts = opts.event_callback(move |event| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(event);
            }
        });
    }
    opts.connect(topo.client_urls()).await
}

/// Waits for an event matching `pred`, failing after the deadline.
async fn wait_event(
    rx: &mut mpsc::UnboundedReceiver<Event>,
    what: &str,
    pred: impl Fn(&Event) -> bool,
) -> Event {
    let found = tokio::time::timeout(DEADLINE, async {
        while let Some(e) = rx.recv().await {
            if pred(&e) {
                return Some(e);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(e)) => e,
        _ => panic!("no {what} event within {DEADLINE:?}"),
    }
}

fn server_error_contains(e: &Event, text: &str) -> bool {
    matches!(e, Event::ServerError(err) if err.to_string().to_lowercase().contains(&text.to_lowercase()))
}

async fn round_trip(client: &Client, subject: &str) {
    let mut sub = client.subscribe(subject.to_string()).await.unwrap();
    client.flush().await.unwrap();
    client
        .publish(subject.to_string(), "ping".into())
        .await
        .unwrap();
    let msg = tokio::time::timeout(DEADLINE, futures_next(&mut sub))
        .await
        .expect("round trip in time")
        .expect("subscription open");
    assert_eq!(&msg.payload[..], b"ping");
}

async fn futures_next(sub: &mut async_nats::Subscriber) -> Option<async_nats::Message> {
    use futures::StreamExt as _;
    sub.next().await
}

#[tokio::test]
async fn server_trusts_operator_preload_and_pushed_account_and_admits_creds() {
    let plane = Plane::start().await;
    let account = Acct::new();
    let account_jwt = account.claims("A").encode(&plane.operator_signing).unwrap();
    plane.push_ok(&account_jwt).await;
    assert_eq!(plane.lookup(&account.public_key()).await, account_jwt);

    let (_, creds) = account.user();
    let client = connect(&plane.topo, &creds, None)
        .await
        .expect("user with our creds connects");
    round_trip(&client, "hello.world").await;
}

#[tokio::test]
async fn strict_signing_refuses_what_an_identity_signs() {
    // A plane of its own whose NATS operator identity we keep, to sign with it.
    let operator = NKey::generate(KeyKind::Operator);
    let operator_signing = NKey::generate(KeyKind::Operator);
    let sys_account = Acct::new();
    let operator_jwt = OperatorClaims::new(operator.public_key())
        .signing_key(operator_signing.public_key())
        .system_account(sys_account.public_key())
        .strict_signing(true)
        .encode(&operator)
        .unwrap();
    let sys_jwt = sys_account.claims("SYS").encode(&operator_signing).unwrap();
    let topo = Topology::start(TopologySpec::cluster(1).with_version(VERSION).with_auth(
        Auth::Operator(OperatorMode {
            operator_jwt,
            system_account: sys_account.public_key(),
            preload: vec![(sys_account.public_key(), sys_jwt)],
        }),
    ))
    .await
    .unwrap();
    let sys = connect(&topo, &sys_account.user().1, None).await.unwrap();

    // An account signed by the operator identity is refused on push.
    let account = Acct::new();
    let by_identity = account.claims("A").encode(&operator).unwrap();
    let answer: Value = serde_json::from_slice(
        &sys.request("$SYS.REQ.CLAIMS.UPDATE", by_identity.into())
            .await
            .unwrap()
            .payload,
    )
    .unwrap();
    let description = answer["error"]["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("signing key"),
        "expected a strict-signing refusal, got {answer}"
    );

    // A user signed by the account identity is refused at connect, one signed by the
    // account's signing key is admitted; trust::check_user agrees with both verdicts.
    let account_claims = account.claims("A");
    let signed = account_claims.encode(&operator_signing).unwrap();
    let answer: Value = serde_json::from_slice(
        &sys.request("$SYS.REQ.CLAIMS.UPDATE", signed.clone().into())
            .await
            .unwrap()
            .payload,
    )
    .unwrap();
    assert_eq!(answer["data"]["code"], 200, "{answer}");
    let account_claims = decode::<Account>(&signed).unwrap();
    let user = NKey::generate(KeyKind::User);
    let by_account_identity = UserClaims::new(user.public_key())
        .encode(&account.identity)
        .unwrap();
    let user_claims = decode::<User>(&by_account_identity).unwrap();
    assert!(trust::check_user(&account_claims, &user_claims, true).is_err());
    assert!(trust::check_user(&account_claims, &user_claims, false).is_ok());
    let refused = connect(
        &topo,
        Creds::render_key(&by_account_identity, &user)
            .unwrap()
            .expose(),
        None,
    )
    .await
    .expect_err("strict signing refuses a user signed by the account identity");
    assert_eq!(refused.kind(), ConnectErrorKind::AuthorizationViolation);

    let by_signing_key = account.creds(UserClaims::new(user.public_key()), &user);
    let parsed = Creds::parse(&by_signing_key).unwrap();
    assert!(
        trust::check_user(&account_claims, &decode::<User>(&parsed.jwt).unwrap(), true).is_ok()
    );
    let client = connect(&topo, &by_signing_key, None)
        .await
        .expect("user signed by the account signing key connects");
    round_trip(&client, "strict.ok").await;
}

#[tokio::test]
async fn user_outside_its_permissions_is_refused_by_the_server() {
    let plane = Plane::start().await;
    let account = Acct::new();
    plane
        .push_ok(&account.claims("A").encode(&plane.operator_signing).unwrap())
        .await;

    let observer = connect(&plane.topo, &account.user().1, None).await.unwrap();
    let mut seen = observer.subscribe("*.x").await.unwrap();
    observer.flush().await.unwrap();

    let limited_key = NKey::generate(KeyKind::User);
    let limited_claims = UserClaims::new(limited_key.public_key())
        .publish(Permission::allow(["allowed.>"]))
        .subscribe(Permission::allow(["allowed.>", "_INBOX.>"]).and_deny(["allowed.secret"]));
    let (tx, mut events) = mpsc::unbounded_channel();
    let limited = connect(
        &plane.topo,
        &account.creds(limited_claims, &limited_key),
        Some(tx),
    )
    .await
    .unwrap();

    // Publish outside the allow list: the server says so and drops the message.
    limited.publish("denied.x", "no".into()).await.unwrap();
    limited.publish("allowed.x", "yes".into()).await.unwrap();
    limited.flush().await.unwrap();
    wait_event(&mut events, "publish permissions violation", |e| {
        server_error_contains(e, "Permissions Violation for Publish to \"denied.x\"")
    })
    .await;
    // Messages of one publisher arrive in order: the first the observer sees is the allowed one.
    let first = tokio::time::timeout(DEADLINE, futures_next(&mut seen))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.subject.as_str(), "allowed.x");

    // Subscribing to a denied subject is refused too.
    let _denied = limited.subscribe("allowed.secret").await.unwrap();
    limited.flush().await.unwrap();
    wait_event(&mut events, "subscription permissions violation", |e| {
        server_error_contains(
            e,
            "Permissions Violation for Subscription to \"allowed.secret\"",
        )
    })
    .await;
}

#[tokio::test]
async fn revoked_user_is_disconnected_and_cannot_return() {
    let plane = Plane::start().await;
    let account = Acct::new();
    let claims = account.claims("A");
    plane
        .push_ok(&claims.encode(&plane.operator_signing).unwrap())
        .await;

    let (doomed, doomed_creds) = account.user();
    let (tx, mut events) = mpsc::unbounded_channel();
    let client = connect(&plane.topo, &doomed_creds, Some(tx)).await.unwrap();
    round_trip(&client, "before.revocation").await;
    let keeper = connect(&plane.topo, &account.user().1, None).await.unwrap();

    let revoking = claims
        .clone()
        .revoke_at(doomed.public_key(), now())
        .encode(&plane.operator_signing)
        .unwrap();
    plane.push_ok(&revoking).await;

    wait_event(&mut events, "revocation", |e| {
        server_error_contains(e, "User Authentication Revoked")
    })
    .await;
    wait_event(&mut events, "disconnect", |e| {
        matches!(e, Event::Disconnected)
    })
    .await;
    let err = connect(&plane.topo, &doomed_creds, None)
        .await
        .expect_err("a revoked user is refused on reconnect");
    assert_eq!(
        err.kind(),
        ConnectErrorKind::AuthorizationViolation,
        "{err}"
    );
    // Revoking one key leaves the account's other users alone.
    round_trip(&keeper, "after.revocation").await;
}

#[tokio::test]
async fn activation_token_admits_an_import_of_a_private_export() {
    let plane = Plane::start().await;
    let exporter = Acct::new();
    let importer = Acct::new();
    plane
        .push_ok(
            &exporter
                .claims("exporter")
                .export(Export::service("private.svc").token_required())
                .encode(&plane.operator_signing)
                .unwrap(),
        )
        .await;
    let import = Import::service(exporter.public_key(), "private.svc");
    plane
        .push_ok(
            &importer
                .claims("importer")
                .import(import.clone())
                .encode(&plane.operator_signing)
                .unwrap(),
        )
        .await;

    let responder = connect(&plane.topo, &exporter.user().1, None)
        .await
        .unwrap();
    let mut requests = responder.subscribe("private.svc").await.unwrap();
    responder.flush().await.unwrap();
    let serving = tokio::spawn({
        let responder = responder.clone();
        async move {
            while let Some(req) = futures_next(&mut requests).await {
                if let Some(reply) = req.reply {
                    let _ = responder.publish(reply, "served".into()).await;
                    let _ = responder.flush().await;
                }
            }
        }
    });
    let requester = connect(&plane.topo, &importer.user().1, None)
        .await
        .unwrap();

    // Without a token the private export is not imported: nobody answers.
    let refused = tokio::time::timeout(DEADLINE, requester.request("private.svc", "q".into()))
        .await
        .expect("an answer or a no-responders error in time");
    assert!(refused.is_err(), "imported without a token: {refused:?}");

    // With an activation token, issued by the exporter's signing key, it is.
    let token = ActivationClaims::new(importer.public_key(), "private.svc", ExportType::Service)
        .issuer_account(exporter.public_key())
        .encode(&exporter.signing)
        .unwrap();
    plane
        .push_ok(
            &importer
                .claims("importer")
                .import(import.token(token))
                .encode(&plane.operator_signing)
                .unwrap(),
        )
        .await;
    let answered = sim::wait::poll("the import to answer", DEADLINE, || {
        let requester = requester.clone();
        async move {
            match requester.request("private.svc", "q".into()).await {
                Ok(msg) => Ok(Some(msg)),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await
    .expect("the activation token admits the import");
    assert_eq!(&answered.payload[..], b"served");
    serving.abort();
}

#[tokio::test]
async fn expired_account_jwt_is_refused() {
    let plane = Plane::start().await;
    let account = Acct::new();
    let expired = account
        .claims("expired")
        .expires(now() - 60)
        .encode(&plane.operator_signing)
        .unwrap();
    // The resolver stores it (time is not checked on update) ...
    plane.push_ok(&expired).await;
    let (_, creds) = account.user();
    // ... but admits none of its users.
    let err = connect(&plane.topo, &creds, None)
        .await
        .expect_err("a user of an expired account is refused");
    assert_eq!(
        err.kind(),
        ConnectErrorKind::AuthorizationViolation,
        "{err}"
    );

    // The same account re-signed without expiry admits the same creds: expiry was the cause.
    plane
        .push_ok(
            &account
                .claims("renewed")
                .encode(&plane.operator_signing)
                .unwrap(),
        )
        .await;
    let client = connect(&plane.topo, &creds, None)
        .await
        .expect("renewed account admits its user");
    round_trip(&client, "renewed").await;
}

/// The stream-creation error of a JetStream limit, as text.
async fn create_stream(client: &Client, name: &str) -> Result<(), String> {
    let js = async_nats::jetstream::new(client.clone());
    js.create_stream(async_nats::jetstream::stream::Config {
        name: name.to_string(),
        subjects: vec![format!("{name}.>")],
        max_bytes: 4096,
        ..Default::default()
    })
    .await
    .map(|_| ())
    .map_err(|e| e.to_string())
}

#[tokio::test]
async fn account_limits_are_enforced_by_the_server() {
    let plane = Plane::start().await;
    // Flat JetStream limits and a connection limit.
    let flat = Acct::new();
    let mut limits = OperatorLimits::unlimited();
    limits.account.conn = 2;
    plane
        .push_ok(
            &flat
                .claims("flat")
                .limits(limits)
                .jetstream(JetStreamLimits {
                    memory_storage: 1 << 20,
                    disk_storage: 1 << 20,
                    streams: 1,
                    consumer: 1,
                    ..JetStreamLimits::default()
                })
                .encode(&plane.operator_signing)
                .unwrap(),
        )
        .await;
    let first = connect(&plane.topo, &flat.user().1, None).await.unwrap();
    let _second = connect(&plane.topo, &flat.user().1, None).await.unwrap();
    let third = connect(&plane.topo, &flat.user().1, None).await;
    assert!(third.is_err(), "a third connection exceeds conn: 2");
    create_stream(&first, "ONE")
        .await
        .expect("first stream within limits");
    let refused = create_stream(&first, "TWO")
        .await
        .expect_err("a second stream exceeds streams: 1");
    assert!(refused.contains("maximum number of streams"), "{refused}");

    // Tiered JetStream limits (R1 only).
    let tiered = Acct::new();
    plane
        .push_ok(
            &tiered
                .claims("tiered")
                .jetstream_tier(
                    "R1",
                    JetStreamLimits {
                        disk_storage: 1 << 20,
                        streams: 1,
                        consumer: 1,
                        ..JetStreamLimits::default()
                    },
                )
                .encode(&plane.operator_signing)
                .unwrap(),
        )
        .await;
    let client = connect(&plane.topo, &tiered.user().1, None).await.unwrap();
    create_stream(&client, "ONE")
        .await
        .expect("R1 stream within the tier");
    let refused = create_stream(&client, "TWO")
        .await
        .expect_err("a second R1 stream exceeds the tier");
    assert!(refused.contains("maximum number of streams"), "{refused}");

    // An account without JetStream limits has no JetStream.
    let none = Acct::new();
    plane
        .push_ok(&none.claims("none").encode(&plane.operator_signing).unwrap())
        .await;
    let client = connect(&plane.topo, &none.user().1, None).await.unwrap();
    let refused = create_stream(&client, "ONE")
        .await
        .expect_err("JetStream is disabled without limits");
    assert!(refused.to_lowercase().contains("jetstream"), "{refused}");
}

#[tokio::test]
async fn scoped_signing_key_template_is_what_the_server_enforces() {
    let plane = Plane::start().await;
    let account = Acct::new();
    let scoped = NKey::generate(KeyKind::Account);
    let template = UserPermissionLimits {
        permissions: Permissions {
            publish: Permission::allow(["scoped.>"]),
            subscribe: Permission::allow(["scoped.>", "_INBOX.>"]),
            response: None,
        },
        ..UserPermissionLimits::unlimited()
    };
    plane
        .push_ok(
            &account
                .claims("A")
                .scoped_signing_key(UserScope::new(scoped.public_key(), "scoped", template))
                .encode(&plane.operator_signing)
                .unwrap(),
        )
        .await;

    let user = NKey::generate(KeyKind::User);
    let jwt = UserClaims::new_scoped(user.public_key(), account.public_key())
        .encode(&scoped)
        .unwrap();
    let (tx, mut events) = mpsc::unbounded_channel();
    let client = connect(
        &plane.topo,
        Creds::render_key(&jwt, &user).unwrap().expose(),
        Some(tx),
    )
    .await
    .expect("a scoped user connects");
    round_trip(&client, "scoped.ok").await;
    client.publish("elsewhere.x", "no".into()).await.unwrap();
    client.flush().await.unwrap();
    wait_event(&mut events, "template permissions violation", |e| {
        server_error_contains(e, "Permissions Violation for Publish to \"elsewhere.x\"")
    })
    .await;

    // A user of a scoped key may not carry permissions of its own.
    let other = NKey::generate(KeyKind::User);
    let with_permissions = UserClaims::new(other.public_key())
        .publish(Permission::allow([">"]))
        .issuer_account(account.public_key())
        .encode(&scoped)
        .unwrap();
    let err = connect(
        &plane.topo,
        Creds::render_key(&with_permissions, &other)
            .unwrap()
            .expose(),
        None,
    )
    .await
    .expect_err("a scoped key's user with its own permissions is refused");
    assert_eq!(
        err.kind(),
        ConnectErrorKind::AuthorizationViolation,
        "{err}"
    );
}
