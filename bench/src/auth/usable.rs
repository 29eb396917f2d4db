//! How soon what was applied can be used: a NatsUser applied until a client connects with the
//! creds its Secret holds, and a NatsAccount with a user of it applied until that user connects.
//! The floors do the same work by hand: the JWTs signed, the account's pushed with
//! `$SYS.REQ.CLAIMS.UPDATE`, the creds Secret written; the client reads the Secret and connects
//! in the same loop in both.

use std::time::{Duration, Instant};

use async_nats::ConnectOptions;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ObjectMeta, PostParams};
use nats_claims::{AccountClaims, Creds, KeyKind, NKey, UserClaims};
use serde_json::{Value, json};

use super::{NS, WAIT, user_doc};

/// How often the client looks for the creds Secret and tries to connect.
const TICK: Duration = Duration::from_millis(5);

/// Rounds of each figure (the median is the figure).
pub(super) const ROUNDS: usize = 3;

/// How long a floor's client tries before the floor is given up (reported, not fatal).
const FLOOR_WAIT: Duration = Duration::from_secs(10);

/// Polls Secret `name` every [`TICK`] and, once it holds creds, connects with them to `url`
/// until a connection is accepted: the time from `since`.
pub(super) async fn connected_since(
    secrets: &Api<Secret>,
    name: &str,
    url: &str,
    since: Instant,
) -> anyhow::Result<Duration> {
    connected_within(secrets, name, url, since, WAIT).await
}

async fn connected_within(
    secrets: &Api<Secret>,
    name: &str,
    url: &str,
    since: Instant,
    wait: Duration,
) -> anyhow::Result<Duration> {
    let what = format!("a client connected with {name}");
    let at = sim::wait::poll_every(&what, wait, TICK, || async move {
        let creds = super::secret_text(secrets, name, "user.creds")
            .await
            .ok_or_else(|| format!("no {name}"))?;
        let client = ConnectOptions::with_credentials(&creds)
            .map_err(|e| e.to_string())?
            .ignore_discovered_servers()
            .connect(url)
            .await
            .map_err(|e| e.to_string())?;
        client.flush().await.map_err(|e| e.to_string())?;
        Ok(Some(Instant::now()))
    })
    .await?;
    Ok(at.saturating_duration_since(since))
}

/// The account document `name` under NatsOperator `demo`.
pub(super) fn account_doc(name: &str) -> Value {
    json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"operatorRef": {"name": "demo"}},
    })
}

/// NatsUser `name` under the bench account applied until a client connects with its creds.
pub(super) async fn user_applied(
    client: &kube::Client,
    secrets: &Api<Secret>,
    name: &str,
    url: &str,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    sim::testkit::apply(client, &user_doc(name))
        .await
        .map_err(anyhow::Error::msg)?;
    connected_since(secrets, &format!("{name}-creds"), url, started).await
}

/// NatsAccount `name` and its user `<name>-user` applied at once until the user connects.
pub(super) async fn account_applied(
    client: &kube::Client,
    secrets: &Api<Secret>,
    name: &str,
    url: &str,
) -> anyhow::Result<Duration> {
    let user = format!("{name}-user");
    let mut doc = user_doc(&user);
    doc["spec"]["accountRef"]["name"] = json!(name);
    let account = account_doc(name);
    let started = Instant::now();
    let (a, u) = futures::join!(
        sim::testkit::apply(client, &account),
        sim::testkit::apply(client, &doc)
    );
    a.and(u).map_err(anyhow::Error::msg)?;
    connected_since(secrets, &format!("{user}-creds"), url, started).await
}

/// An account made by hand: its identity and the signing key its users are signed with.
pub(super) struct HandAccount {
    identity: NKey,
    signing: NKey,
}

/// A creds Secret `name` for a new user of `account`, signed with its signing key (the
/// NatsOperator's trust is strict: an account's identity key signs no user), written.
async fn write_creds(
    secrets: &Api<Secret>,
    name: &str,
    account: &HandAccount,
) -> anyhow::Result<()> {
    let user = NKey::generate(KeyKind::User);
    let jwt = UserClaims::new(user.public_key())
        .name(name)
        .issuer_account(account.identity.public_key())
        .encode(&account.signing)?;
    let creds = Creds::render(&jwt, &user.seed())?;
    let s = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        data: Some(
            [(
                "user.creds".to_string(),
                ByteString(creds.expose().as_bytes().to_vec()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &s).await?;
    Ok(())
}

/// The floor of [`user_applied`]: a user of `account` (whose JWT the servers hold) signed, its
/// creds Secret `name` written, until a client connects with it.
pub(super) async fn user_by_hand(
    secrets: &Api<Secret>,
    account: &HandAccount,
    name: &str,
    url: &str,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    write_creds(secrets, name, account).await?;
    connected_within(secrets, name, url, started, FLOOR_WAIT).await
}

/// The floor of [`account_applied`]: an account JWT signed with `operator`'s key and pushed with
/// CLAIMS.UPDATE to every server (`sys`: one connection each, as the auth controller
/// distributes per server), a user of it signed and its creds Secret `name` written, until a
/// client connects with it. The account, for [`user_by_hand`].
pub(super) async fn account_by_hand(
    sys: &[async_nats::Client],
    secrets: &Api<Secret>,
    operator: &NKey,
    name: &str,
    url: &str,
) -> anyhow::Result<(Duration, HandAccount)> {
    let started = Instant::now();
    let account = HandAccount {
        identity: NKey::generate(KeyKind::Account),
        signing: NKey::generate(KeyKind::Account),
    };
    let jwt = AccountClaims::new(account.identity.public_key())
        .name(name)
        .signing_key(account.signing.public_key())
        .encode(operator)?;
    // Published, not requested, as the kick's floor: the system user's permissions admit its
    // own inbox prefix only.
    for server in sys {
        server
            .publish("$SYS.REQ.CLAIMS.UPDATE", jwt.clone().into())
            .await?;
    }
    for server in sys {
        server.flush().await?;
    }
    write_creds(secrets, name, &account).await?;
    let took = connected_within(secrets, name, url, started, FLOOR_WAIT).await?;
    Ok((took, account))
}

/// Both `usable` figures and their floors, [`ROUNDS`] of each, interleaved: (user, user floor,
/// account, account floor) times.
pub(super) struct Usable {
    pub user: Vec<Duration>,
    pub user_floor: Vec<Duration>,
    pub account: Vec<Duration>,
    pub account_floor: Vec<Duration>,
    /// Why a floor's round was given up.
    pub refused: Vec<String>,
}

pub(super) async fn measure(
    client: &kube::Client,
    users: &Api<DynamicObject>,
    sys: &[async_nats::Client],
    operator: &NKey,
    url: &str,
) -> anyhow::Result<Usable> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let mut out = Usable {
        user: vec![],
        user_floor: vec![],
        account: vec![],
        account_floor: vec![],
        refused: vec![],
    };
    for i in 0..ROUNDS {
        out.account
            .push(account_applied(client, &secrets, &format!("usable{i}"), url).await?);
        let hand = account_by_hand(sys, &secrets, operator, &format!("hand-acct{i}"), url).await;
        out.user
            .push(user_applied(client, &secrets, &format!("usable-u{i}"), url).await?);
        // A floor whose client was refused is reported, not fatal: the figures stand.
        let account = match hand {
            Ok((took, account)) => {
                out.account_floor.push(took);
                account
            }
            Err(e) => {
                out.refused.push(format!("account by hand: {e}"));
                continue;
            }
        };
        match user_by_hand(&secrets, &account, &format!("hand-u{i}"), url).await {
            Ok(took) => out.user_floor.push(took),
            Err(e) => out.refused.push(format!("user by hand: {e}")),
        }
    }
    // The users applied are Ready before the next figure starts.
    for i in 0..ROUNDS {
        super::wait_has(users, &format!("usable-u{i}"), "Ready", "True").await?;
    }
    Ok(out)
}
