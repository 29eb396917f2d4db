//! Creds files: rendered exactly as nsc/nats-io/jwt render them, parsed as the clients parse them.

use nats_claims::*;

fn user_jwt() -> (String, NKey, NKey) {
    let account = NKey::generate(KeyKind::Account);
    let user = NKey::generate(KeyKind::User);
    let jwt = UserClaims::new(user.public_key())
        .name("u")
        .encode(&account)
        .unwrap();
    (jwt, user, account)
}

#[test]
fn render_matches_the_go_layout_byte_for_byte() {
    let (jwt, user, _) = user_jwt();
    let seed = user.seed();
    let text = Creds::render(&jwt, &seed).unwrap();
    let expected = format!(
        "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
************************* IMPORTANT *************************\n\
NKEY Seed printed below can be used to sign and prove identity.\n\
NKEYs are sensitive and should be treated as secrets.\n\n\
-----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n\n\
*************************************************************\n",
        seed.expose()
    );
    assert_eq!(text.expose(), expected);
    assert!(!format!("{text:?}").contains(seed.expose()));
    let parsed = Creds::parse(text.expose()).unwrap();
    assert_eq!(parsed.jwt, jwt);
    assert_eq!(parsed.seed, seed);
    assert_eq!(parsed.key().unwrap().public_key(), user.public_key());
}

#[test]
fn parse_accepts_crlf_and_the_javascript_layout() {
    let (jwt, user, _) = user_jwt();
    let seed = user.seed();
    let crlf = Creds::render(&jwt, &seed)
        .unwrap()
        .expose()
        .replace('\n', "\r\n");
    assert_eq!(Creds::parse(&crlf).unwrap().jwt, jwt);
    // @nats-io/jwt's fmtCreds: a different banner, same blocks.
    let js = format!(
        "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
************************* IMPORTANT *************************\n\
NKEY Seed printed below can be used sign and prove identity.\n\
NKEYs are sensitive and should be treated as secrets.\n\n\
-----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
        seed.expose()
    );
    assert_eq!(Creds::parse(&js).unwrap().seed, seed);
}

#[test]
fn mismatches_and_missing_blocks_are_typed_errors() {
    let (jwt, user, account) = user_jwt();
    let other = NKey::generate(KeyKind::User);
    // Seed of another user.
    assert!(matches!(
        Creds::render(&jwt, &other.seed()),
        Err(Error::BadCreds { .. })
    ));
    // An account seed is not a user seed.
    assert!(matches!(
        Creds::render(&jwt, &account.seed()),
        Err(Error::WrongKeyPrefix { role: "seed", .. })
    ));
    // Not a user JWT.
    let account_jwt = AccountClaims::new(account.public_key())
        .encode(&NKey::generate(KeyKind::Operator))
        .unwrap();
    assert!(matches!(
        Creds::render(&account_jwt, &user.seed()),
        Err(Error::WrongClaimType { .. })
    ));
    // Only one block.
    let one = format!("-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n");
    assert!(matches!(Creds::parse(&one), Err(Error::BadCreds { .. })));
    assert!(matches!(Creds::parse(""), Err(Error::BadCreds { .. })));
    // A tampered JWT inside a creds file.
    let good = Creds::render(&jwt, &user.seed()).unwrap();
    let tampered = good.expose().replacen(&jwt[40..44], "AAAA", 1);
    assert!(Creds::parse(&tampered).is_err());
}
