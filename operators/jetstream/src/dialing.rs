//! Dialing a NatsConnection (§6.1): the spec and the Secrets it names → nats-wire dial options,
//! and the Ready condition as a decision on what happened (Connected, SecretNotFound,
//! InvalidSecret, ConnectFailed), and, for a connection once up, whether it still is
//! ([`ready_of_held`]: Connected or Disconnected).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use nats_api::common::SecretKeyRef;
use nats_api::nats::{NatsConnectionSpec, reason};
use nats_wire::{ConnectionConfig, DialError};

/// The Secret key a creds file is read from when `credentials.secretKeyRef.key` is omitted.
pub const DEFAULT_CREDS_KEY: &str = "user.creds";
/// The Secret key a CA bundle is read from when `tls.ca.secretKeyRef.key` is omitted.
pub const DEFAULT_CA_KEY: &str = "ca.crt";

/// The Secrets of the connection's namespace the reconciler found: name → data.
pub type Secrets = BTreeMap<String, BTreeMap<String, Vec<u8>>>;

/// A Secret's data as bytes by key.
pub fn secret_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .chain(
            // stringData is write-only on the API server, but a Secret built in memory may carry it.
            secret
                .string_data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes())),
        )
        .collect()
}

/// The Ready condition of a NatsConnection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// A server answered with the credentials given.
    Connected,
    /// A Secret the connection names does not exist.
    SecretNotFound {
        /// The Secret's name.
        secret: String,
    },
    /// The Secret exists but the key is missing or does not hold a creds file / PEM bundle.
    InvalidSecret {
        /// The Secret's name.
        secret: String,
        /// The key read.
        key: String,
        /// What is wrong with it.
        why: String,
    },
    /// No server could be dialled, or the handshake was refused.
    ConnectFailed {
        /// What the dial reported.
        why: String,
    },
    /// The connection was up and is lost: no server answers (closed, unreachable, or hung and
    /// silent to the client's PINGs); the client keeps reconnecting.
    Disconnected {
        /// The servers the connection names.
        servers: String,
        /// What the client last reported.
        why: String,
        /// When it was lost (RFC 3339).
        since: String,
    },
}

impl Ready {
    /// The condition's status.
    pub fn status(&self) -> bool {
        matches!(self, Ready::Connected)
    }

    /// The condition's reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Ready::Connected => reason::CONNECTED,
            Ready::SecretNotFound { .. } => reason::SECRET_NOT_FOUND,
            Ready::InvalidSecret { .. } => reason::INVALID_SECRET,
            Ready::ConnectFailed { .. } => reason::CONNECT_FAILED,
            Ready::Disconnected { .. } => reason::DISCONNECTED,
        }
    }

    /// The condition's message. Never holds Secret contents.
    pub fn message(&self) -> String {
        match self {
            Ready::Connected => "a server answered".into(),
            Ready::SecretNotFound { secret } => format!("Secret {secret} does not exist"),
            Ready::InvalidSecret { secret, key, why } => {
                format!("Secret {secret} key {key}: {why}")
            }
            Ready::ConnectFailed { why } => why.clone(),
            Ready::Disconnected {
                servers,
                why,
                since,
            } => format!("no server of {servers} answers since {since}: {why}"),
        }
    }
}

/// Ready of a connection once dialed: Connected while its client is, else Disconnected with what
/// the client last reported and since when (a client reconnecting before any event named its
/// trouble reads "disconnected", since now).
pub fn ready_of_held(
    servers: &[String],
    connected: bool,
    trouble: Option<&nats_wire::Trouble>,
) -> Ready {
    if connected {
        return Ready::Connected;
    }
    let (why, since) = trouble.map_or_else(
        || ("disconnected".to_string(), std::time::SystemTime::now()),
        |t| (t.what.clone(), t.since),
    );
    let since = k8s_openapi::jiff::Timestamp::try_from(since)
        .map(|t| {
            t.round(k8s_openapi::jiff::Unit::Second)
                .unwrap_or(t)
                .to_string()
        })
        .unwrap_or_default();
    Ready::Disconnected {
        servers: servers.join(", "),
        why,
        since,
    }
}

fn read<'a>(
    secrets: &'a Secrets,
    r: &SecretKeyRef,
    default_key: &str,
) -> Result<(&'a [u8], String), Ready> {
    let key = r.key.clone().unwrap_or_else(|| default_key.to_string());
    let data = secrets.get(&r.name).ok_or_else(|| Ready::SecretNotFound {
        secret: r.name.clone(),
    })?;
    let bytes = data.get(&key).ok_or_else(|| Ready::InvalidSecret {
        secret: r.name.clone(),
        key: key.clone(),
        why: "the key is missing".into(),
    })?;
    Ok((bytes.as_slice(), key))
}

/// Why a creds file is not one: it must hold a user JWT and a user seed that parses.
pub fn creds_problem(text: &str) -> Option<String> {
    let block = |begin: &str| {
        text.lines()
            .skip_while(|l| !(l.starts_with("-----BEGIN") && l.contains(begin)))
            .skip(1)
            .map(str::trim)
            .find(|l| !l.is_empty())
            .filter(|l| !l.starts_with("---"))
            .map(str::to_string)
    };
    let Some(jwt) = block("USER JWT") else {
        return Some("no user JWT block".into());
    };
    if jwt.split('.').count() != 3 {
        return Some("the user JWT is not three dot-separated parts".into());
    }
    let Some(seed) = block("NKEY SEED") else {
        return Some("no user seed block".into());
    };
    if !seed.starts_with("SU") {
        return Some("the seed is not a user seed (SU…)".into());
    }
    nkeys::KeyPair::from_seed(&seed)
        .err()
        .map(|e| format!("the seed does not parse: {e}"))
}

/// The account of a creds file's user: its JWT's `issuer_account` when a signing key of the
/// account issued it, else its issuer (the account's identity). What a balancer knows its
/// account by when the user may not ask `$SYS.REQ.USER.INFO`.
pub fn creds_account(text: &str) -> Option<String> {
    let jwt = text
        .lines()
        .skip_while(|l| !(l.starts_with("-----BEGIN") && l.contains("USER JWT")))
        .skip(1)
        .map(str::trim)
        .find(|l| !l.is_empty())?;
    let claims = nats_claims::decode_unverified::<nats_claims::claims::User>(jwt).ok()?;
    Some(if claims.nats.issuer_account.is_empty() {
        claims.issuer
    } else {
        claims.nats.issuer_account
    })
    .filter(|a| a.starts_with('A'))
}

/// The inbox every connection of the JetStream controller dials with (design §5.4: a controller
/// preset subscribes only under `_INBOX.<preset>.>`, "which its controller dials with"). A system
/// user of the jetstream-controller preset is answered nowhere else; an account user whose
/// permissions admit `_INBOX.>` is answered here as well.
pub fn inbox_prefix() -> String {
    nats_wire::preset_inbox_prefix("jetstream-controller")
}

/// The dial options of a NatsConnection: its servers, the CA bundle and creds from the Secrets it
/// names (defaults `ca.crt`, `user.creds`), checked enough to tell a bad Secret from a bad server,
/// and the controller's own inbox ([`inbox_prefix`]).
pub fn dial_config(
    spec: &NatsConnectionSpec,
    secrets: &Secrets,
) -> Result<ConnectionConfig, Ready> {
    let mut config =
        ConnectionConfig::new(spec.servers.iter().cloned()).with_inbox_prefix(inbox_prefix());
    if let Some(ca) = spec.tls.as_ref().and_then(|t| t.ca.as_ref()) {
        let (pem, key) = read(secrets, &ca.secret_key_ref, DEFAULT_CA_KEY)?;
        if !String::from_utf8_lossy(pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(Ready::InvalidSecret {
                secret: ca.secret_key_ref.name.clone(),
                key,
                why: "not a PEM bundle of certificates".into(),
            });
        }
        config = config.with_ca_pem(pem.to_vec());
    }
    if let Some(creds) = &spec.credentials {
        let (bytes, key) = read(secrets, &creds.secret_key_ref, DEFAULT_CREDS_KEY)?;
        let invalid = |why: String| Ready::InvalidSecret {
            secret: creds.secret_key_ref.name.clone(),
            key: key.clone(),
            why,
        };
        let text = std::str::from_utf8(bytes).map_err(|_| invalid("not UTF-8 text".into()))?;
        if let Some(why) = creds_problem(text) {
            return Err(invalid(format!("not a creds file: {why}")));
        }
        config = config.with_creds(text);
    }
    Ok(config)
}

/// Ready after a dial: what nats-wire reported, with the Secret named where the material was at
/// fault (its parser is stricter than [`dial_config`]'s checks).
pub fn ready_after_dial(spec: &NatsConnectionSpec, dialed: Result<(), &DialError>) -> Ready {
    let secret_of = |r: Option<&SecretKeyRef>, default_key: &str| {
        r.map(|r| {
            (
                r.name.clone(),
                r.key.clone().unwrap_or_else(|| default_key.into()),
            )
        })
        .unwrap_or_default()
    };
    match dialed {
        Ok(()) => Ready::Connected,
        Err(e @ DialError::InvalidCredentials { .. }) => {
            let (secret, key) = secret_of(
                spec.credentials.as_ref().map(|c| &c.secret_key_ref),
                DEFAULT_CREDS_KEY,
            );
            Ready::InvalidSecret {
                secret,
                key,
                why: e.to_string(),
            }
        }
        Err(e @ DialError::InvalidCa { .. }) => {
            let (secret, key) = secret_of(
                spec.tls
                    .as_ref()
                    .and_then(|t| t.ca.as_ref())
                    .map(|c| &c.secret_key_ref),
                DEFAULT_CA_KEY,
            );
            Ready::InvalidSecret {
                secret,
                key,
                why: e.to_string(),
            }
        }
        Err(e) => Ready::ConnectFailed { why: e.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    /// A syntactically valid creds file (random keys; no server trusts them).
    fn creds() -> String {
        let user = nkeys::KeyPair::new_user();
        let seed = user.seed().expect("a seed");
        format!(
            "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ.eyJzdWIiOiJVIn0.c2ln\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
        )
    }

    #[rstest]
    #[case::issued_by_a_signing_key(true, true)]
    #[case::issued_by_the_identity(false, true)]
    #[case::not_a_creds_file(false, false)]
    fn the_account_of_a_creds_files_user(#[case] by_signing_key: bool, #[case] creds_file: bool) {
        use nats_claims::{Creds, KeyKind, NKey, UserClaims};
        let account = NKey::generate(KeyKind::Account);
        let signing = NKey::generate(KeyKind::Account);
        let user = NKey::generate(KeyKind::User);
        let claims = UserClaims::new(user.public_key()).name("app");
        let jwt = if by_signing_key {
            claims.issuer_account(account.public_key()).encode(&signing)
        } else {
            claims.encode(&account)
        }
        .expect("signed");
        let text = if creds_file {
            Creds::render_key(&jwt, &user)
                .expect("creds")
                .expose()
                .to_string()
        } else {
            jwt
        };
        assert_eq!(
            creds_account(&text),
            creds_file.then(|| account.public_key())
        );
    }

    fn spec(v: serde_json::Value) -> NatsConnectionSpec {
        serde_json::from_value(v).expect("a valid NatsConnection spec")
    }

    fn secrets(entries: &[(&str, &str, &[u8])]) -> Secrets {
        let mut out = Secrets::new();
        for (name, key, value) in entries {
            out.entry(name.to_string())
                .or_default()
                .insert(key.to_string(), value.to_vec());
        }
        out
    }

    const CA: &[u8] = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn servers_only_dials_without_material() {
        let c = dial_config(
            &spec(json!({"servers": ["nats://a:4222"]})),
            &Secrets::new(),
        )
        .expect("dialable");
        assert_eq!(c.servers, vec!["nats://a:4222"]);
        assert!(c.creds.is_none() && c.ca_pem.is_none());
        assert_eq!(
            c.inbox_prefix.as_deref(),
            Some("_INBOX.jetstream-controller"),
            "the jetstream-controller preset subscribes only under its own inbox"
        );
    }

    #[test]
    fn creds_and_ca_come_from_their_default_keys() {
        let creds = creds();
        let s = secrets(&[
            ("app", "user.creds", creds.as_bytes()),
            ("tls", "ca.crt", CA),
        ]);
        let c = dial_config(
            &spec(json!({"servers": ["tls://a:4222"], "credentials": {"secretKeyRef": {"name": "app"}},
                         "tls": {"ca": {"secretKeyRef": {"name": "tls"}}}})),
            &s,
        )
        .expect("dialable");
        assert_eq!(c.creds.as_deref(), Some(creds.as_str()));
        assert_eq!(c.ca_pem.as_deref(), Some(CA));
    }

    #[rstest]
    #[case::creds_secret_missing(json!({"credentials": {"secretKeyRef": {"name": "app"}}}), secrets(&[]), "SecretNotFound")]
    #[case::ca_secret_missing(json!({"tls": {"ca": {"secretKeyRef": {"name": "tls"}}}}), secrets(&[]), "SecretNotFound")]
    #[case::creds_key_missing(json!({"credentials": {"secretKeyRef": {"name": "app", "key": "other.creds"}}}), secrets(&[("app", "user.creds", b"x")]), "InvalidSecret")]
    #[case::creds_not_a_creds_file(json!({"credentials": {"secretKeyRef": {"name": "app"}}}), secrets(&[("app", "user.creds", b"hello")]), "InvalidSecret")]
    #[case::creds_not_utf8(json!({"credentials": {"secretKeyRef": {"name": "app"}}}), secrets(&[("app", "user.creds", &[0xff, 0xfe])]), "InvalidSecret")]
    #[case::ca_not_pem(json!({"tls": {"ca": {"secretKeyRef": {"name": "tls"}}}}), secrets(&[("tls", "ca.crt", b"not a cert")]), "InvalidSecret")]
    fn a_bad_or_missing_secret_is_told_apart(
        #[case] extra: serde_json::Value,
        #[case] s: Secrets,
        #[case] reason: &str,
    ) {
        let mut v = json!({"servers": ["nats://a:4222"]});
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        let ready = dial_config(&spec(v), &s).expect_err("not dialable");
        assert_eq!(ready.reason(), reason, "{}", ready.message());
        assert!(!ready.status());
    }

    #[rstest]
    #[case::no_jwt(
        "-----BEGIN USER NKEY SEED-----\nSUAAA\n------END USER NKEY SEED------\n",
        "no user JWT"
    )]
    #[case::jwt_not_three_parts(
        "-----BEGIN NATS USER JWT-----\nabc\n------END NATS USER JWT------\n",
        "three dot-separated"
    )]
    #[case::no_seed(
        "-----BEGIN NATS USER JWT-----\na.b.c\n------END NATS USER JWT------\n",
        "no user seed"
    )]
    #[case::account_seed_instead_of_user(
        "-----BEGIN NATS USER JWT-----\na.b.c\n------END NATS USER JWT------\n-----BEGIN USER NKEY SEED-----\nSAAGOOD\n------END USER NKEY SEED------\n",
        "not a user seed"
    )]
    #[case::seed_garbled(
        "-----BEGIN NATS USER JWT-----\na.b.c\n------END NATS USER JWT------\n-----BEGIN USER NKEY SEED-----\nSUNOTASEED\n------END USER NKEY SEED------\n",
        "does not parse"
    )]
    fn a_creds_file_needs_a_user_jwt_and_a_user_seed(#[case] text: &str, #[case] why: &str) {
        let problem = creds_problem(text).expect("refused");
        assert!(problem.contains(why), "{problem}");
    }

    #[test]
    fn a_generated_creds_file_passes() {
        assert_eq!(creds_problem(&creds()), None);
    }

    #[test]
    fn a_secret_message_never_holds_its_contents() {
        let s = secrets(&[("app", "user.creds", b"SUSECRETSEEDTEXT")]);
        let ready = dial_config(
            &spec(json!({"servers": ["nats://a:4222"], "credentials": {"secretKeyRef": {"name": "app"}}})),
            &s,
        )
        .expect_err("invalid");
        assert!(!ready.message().contains("SUSECRET"), "{}", ready.message());
    }

    fn trouble(what: &str, at_secs: u64) -> nats_wire::Trouble {
        nats_wire::Trouble {
            what: what.into(),
            since: std::time::UNIX_EPOCH + std::time::Duration::from_secs(at_secs),
        }
    }

    #[rstest]
    #[case::up(true, None, "Connected", true, "a server answered")]
    #[case::up_after_an_error_while_connected(
        true,
        Some(trouble("server error: permissions", 5)),
        "Connected",
        true,
        "a server answered"
    )]
    #[case::lost_with_the_clients_word(
        false,
        Some(trouble("client error: timed out", 1_800_000_000)),
        "Disconnected",
        false,
        "no server of nats://a:4222, nats://b:4222 answers since 2027-01-15T08:00:00Z: client error: timed out"
    )]
    #[case::lost_before_any_event(false, None, "Disconnected", false, "answers since ")]
    fn ready_of_a_held_connection_follows_its_client(
        #[case] connected: bool,
        #[case] t: Option<nats_wire::Trouble>,
        #[case] reason: &str,
        #[case] status: bool,
        #[case] message: &str,
    ) {
        let servers = ["nats://a:4222".to_string(), "nats://b:4222".to_string()];
        let ready = ready_of_held(&servers, connected, t.as_ref());
        assert_eq!((ready.reason(), ready.status()), (reason, status));
        assert!(ready.message().contains(message), "{}", ready.message());
    }

    #[rstest]
    #[case::dialled(None, "Connected", true)]
    #[case::no_server_answered(Some(DialError::Timeout { servers: vec![], after: std::time::Duration::from_secs(1) }), "ConnectFailed", false)]
    #[case::no_servers(Some(DialError::NoServers { servers: vec![] }), "ConnectFailed", false)]
    #[case::ca_unusable(Some(DialError::InvalidCa { servers: vec![], reason: "empty".into() }), "InvalidSecret", false)]
    fn ready_follows_the_dial(
        #[case] err: Option<DialError>,
        #[case] reason: &str,
        #[case] status: bool,
    ) {
        let s = spec(
            json!({"servers": ["nats://a:4222"], "tls": {"ca": {"secretKeyRef": {"name": "tls"}}}}),
        );
        let ready = ready_after_dial(&s, err.as_ref().map_or(Ok(()), Err));
        assert_eq!((ready.reason(), ready.status()), (reason, status));
        if let Ready::InvalidSecret { secret, key, .. } = &ready {
            assert_eq!((secret.as_str(), key.as_str()), ("tls", "ca.crt"));
        }
    }
}
