//! Live tests against a real operator-mode 3-server cluster (trusted NATS operator, system
//! account preloaded, full resolver with allow_delete), JWTs signed by `nats-claims`:
//! dialing with creds and a preset's inbox prefix, CLAIMS.UPDATE answered by every server,
//! CLAIMS.LOOKUP per server before and after, the pushed account accepting its users, CONNZ by
//! account and user public key plus KICK, and CLAIMS.DELETE removing the account again; and in an
//! operator-mode supercluster, CLAIMS.UPDATE crossing the gateways to every server.

use crate::common;

use std::time::Duration;

use base64::Engine as _;
use common::{WAIT, roster};
use nats_claims::{AccountClaims, Creds, JetStreamLimits, KeyKind, NKey, Permission, UserClaims};
use nats_wire::monitor::ConnzOptions;
use nats_wire::sys::LookupAnswer;
use nats_wire::{Collect, ConnectionConfig, ServerFilter, WireError, dial};
use sim::topology::{Auth, Topology, TopologySpec};
use sim::trust::Roots;

const N: usize = 3;

fn trust() -> Roots {
    Roots::sign("wire-test").unwrap()
}

fn creds_for(account: &NKey, user: UserClaims, key: &NKey) -> String {
    let jwt = user.encode(account).unwrap();
    Creds::render(&jwt, &key.seed())
        .unwrap()
        .expose()
        .to_string()
}

/// The NATS operator's request to delete accounts (accounts.go handleDeleteRequest): a generic
/// JWT the operator issues about itself with `nats.accounts`. The claims crate signs typed claims
/// only, so this one is assembled here.
fn delete_request(operator: &NKey, accounts: &[String]) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = b64.encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let payload = serde_json::json!({
        "jti": format!("delete-{}", accounts.join("-")),
        "iat": chrono::Utc::now().timestamp(),
        "iss": operator.public_key(),
        "sub": operator.public_key(),
        "nats": {"accounts": accounts},
    });
    let payload = b64.encode(serde_json::to_vec(&payload).unwrap());
    let signing_input = format!("{header}.{payload}");
    let kp = nkeys::KeyPair::from_seed(operator.seed().expose()).unwrap();
    let sig = b64.encode(kp.sign(signing_input.as_bytes()).unwrap());
    format!("{signing_input}.{sig}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_mode_claims_update_lookup_delete_and_kick() {
    let t = trust();
    let spec = TopologySpec::cluster(N).with_auth(Auth::Operator(t.operator_mode(&[])));
    let topo = Topology::start(spec)
        .await
        .expect("an operator-mode cluster boots");
    let urls = topo.client_urls();

    // The system user, dialed from creds with the auth controller preset's inbox prefix.
    let sys_user = NKey::generate(KeyKind::User);
    let sys_creds = creds_for(
        &t.system,
        UserClaims::new(sys_user.public_key()).name("sys"),
        &sys_user,
    );
    let sys = dial(
        &ConnectionConfig::new(urls.clone())
            .with_creds(sys_creds)
            .with_inbox_prefix(nats_wire::preset_inbox_prefix("auth-controller")),
    )
    .await
    .expect("dial with system creds");
    roster(&sys, N).await;

    // A preset-like user may subscribe only under its own inbox: the prefix is what makes its
    // requests answerable at all.
    let confined = NKey::generate(KeyKind::User);
    let confined_claims = UserClaims::new(confined.public_key())
        .name("confined")
        .publish(Permission::allow(["$SYS.REQ.>"]))
        .subscribe(Permission::allow(["_INBOX.auth-controller.>"]));
    let confined_creds = creds_for(&t.system, confined_claims, &confined);
    let with_prefix = dial(
        &ConnectionConfig::new(urls.clone())
            .with_creds(confined_creds.clone())
            .with_inbox_prefix("_INBOX.auth-controller"),
    )
    .await
    .unwrap();
    let answers = with_prefix
        .ping_statsz(
            &ServerFilter::all(),
            Collect::expecting(N, Duration::from_secs(5)),
        )
        .await
        .expect("the confined user's ping comes back under its inbox");
    assert_eq!(answers.replies.len(), N);
    let without_prefix = dial(&ConnectionConfig::new(urls.clone()).with_creds(confined_creds))
        .await
        .unwrap();
    let err = without_prefix
        .ping_statsz(&ServerFilter::all(), Collect::until(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(matches!(err, WireError::Timeout { .. }), "{err}");

    // An account the servers do not know yet: every server answers the lookup with nothing.
    let app = NKey::generate(KeyKind::Account);
    let app_key = app.public_key();
    let all = Collect::expecting(N, Duration::from_secs(5));
    let lookups = sys.claims_lookup(&app_key, all).await.unwrap();
    assert_eq!(lookups, vec![LookupAnswer::Absent; N]);

    // CLAIMS.UPDATE: every server's full resolver takes the JWT and says so.
    let app_jwt = AccountClaims::new(app_key.clone())
        .name("APP")
        .jetstream(JetStreamLimits {
            memory_storage: -1,
            disk_storage: -1,
            ..Default::default()
        })
        .encode(&t.operator)
        .unwrap();
    let pushed = sys.claims_update(&app_jwt, all).await.unwrap();
    assert!(pushed.failures.is_empty(), "{:?}", pushed.failures);
    assert_eq!(pushed.replies.len(), N);
    for r in &pushed.replies {
        assert_eq!(r.data.account, app_key);
        assert_eq!(r.data.code, 200);
        assert!(r.data.message.contains("updated"), "{}", r.data.message);
        assert!(!r.server.id.is_empty(), "the answer names its server");
    }
    let lookups = sys.claims_lookup(&app_key, all).await.unwrap();
    assert_eq!(lookups, vec![LookupAnswer::Holds(app_jwt.clone()); N]);

    // Something that is not an account JWT: each server refuses, naming itself.
    let refused = sys.claims_update("not-a-jwt", all).await.unwrap();
    assert!(refused.replies.is_empty());
    assert_eq!(refused.failures.len(), N);
    assert!(
        refused
            .failures
            .iter()
            .all(|f| matches!(f, WireError::Refused { server, .. } if server.contains('N')))
    );

    // The pushed account accepts its users; CONNZ by account and user key finds one, KICK ends it.
    let user = NKey::generate(KeyKind::User);
    let user_creds = creds_for(&app, UserClaims::new(user.public_key()).name("u"), &user);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let client = async_nats::ConnectOptions::with_credentials(&user_creds)
        .unwrap()
        .event_callback(move |e| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(e);
            }
        })
        .connect(topo.server_addrs())
        .await
        .expect("a user of the pushed account connects");
    client.flush().await.unwrap();
    let connz = sys
        .ping_connz(
            &ConnzOptions::user_of_account(&app_key, &user.public_key()),
            all,
        )
        .await
        .unwrap();
    let found: Vec<(String, u64)> = connz
        .replies
        .iter()
        .flat_map(|r| {
            r.data
                .connections
                .iter()
                .map(|c| (r.server.id.clone(), c.cid))
        })
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    sys.kick(&found[0].0, found[0].1).await.expect("kick");
    tokio::time::timeout(WAIT, async {
        while let Some(e) = rx.recv().await {
            if matches!(e, async_nats::Event::Disconnected) {
                return;
            }
        }
    })
    .await
    .expect("the kicked user is disconnected");
    drop(client);

    // CLAIMS.DELETE by a key that is not the NATS operator's: refused by every server.
    let stranger = NKey::generate(KeyKind::Operator);
    let refused = sys
        .claims_delete(
            &delete_request(&stranger, std::slice::from_ref(&app_key)),
            all,
        )
        .await
        .unwrap();
    assert!(refused.replies.is_empty());
    assert_eq!(refused.failures.len(), N, "{:?}", refused.failures);

    // CLAIMS.DELETE by the NATS operator: every server drops the account.
    let deleted = sys
        .claims_delete(
            &delete_request(&t.operator, std::slice::from_ref(&app_key)),
            all,
        )
        .await
        .unwrap();
    assert!(deleted.failures.is_empty(), "{:?}", deleted.failures);
    assert_eq!(deleted.replies.len(), N);
    assert!(
        deleted
            .replies
            .iter()
            .all(|r| r.data.message.contains("deleted 1"))
    );
    let lookups = sys.claims_lookup(&app_key, all).await.unwrap();
    assert_eq!(lookups, vec![LookupAnswer::Absent; N]);

    // The system account cannot be deleted.
    let refused = sys
        .claims_delete(&delete_request(&t.operator, &[t.system.public_key()]), all)
        .await
        .unwrap();
    assert_eq!(refused.failures.len(), N);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_update_crosses_gateways_to_every_server_of_the_supercluster() {
    let t = trust();
    let spec = TopologySpec::supercluster(2, 2, sim::topology::GatewayMode::Explicit)
        .with_auth(Auth::Operator(t.operator_mode(&[])));
    let topo = Topology::start(spec)
        .await
        .expect("an operator-mode supercluster boots");
    // Dialed to one server of c1 only: the other cluster is reached through the gateways.
    let sys_user = NKey::generate(KeyKind::User);
    let sys =
        dial(
            &ConnectionConfig::new(topo.cluster_urls("c1").into_iter().take(1)).with_creds(
                creds_for(&t.system, UserClaims::new(sys_user.public_key()), &sys_user),
            ),
        )
        .await
        .unwrap();
    let ids = roster(&sys, 4).await;
    assert_eq!(
        ids.keys().cloned().collect::<Vec<_>>(),
        vec!["c1-0", "c1-1", "c2-0", "c2-1"]
    );
    let app = NKey::generate(KeyKind::Account);
    let app_jwt = AccountClaims::new(app.public_key())
        .name("APP")
        .encode(&t.operator)
        .unwrap();
    let all = Collect::expecting(4, Duration::from_secs(5));
    let pushed = sys.claims_update(&app_jwt, all).await.unwrap();
    let mut answered: Vec<String> = pushed.server_names();
    answered.sort();
    assert_eq!(answered, vec!["c1-0", "c1-1", "c2-0", "c2-1"]);
    let lookups = sys.claims_lookup(&app.public_key(), all).await.unwrap();
    assert_eq!(lookups, vec![LookupAnswer::Holds(app_jwt); 4]);
}
