//! NATS JWTs: operator, account, user and activation claims; encode, sign, decode, verify.
//!
//! The claim types mirror nats-io/jwt v2 (the Go library nats-server and nsc use) field for
//! field, including Go's `omitempty` and HTML escaping, so a payload this crate signs is
//! byte-identical to what the Go library would sign for the same claims and `iat`, and `jti`
//! is computed as Go computes it ([`jwt::claims_hash`]).
//!
//! ```
//! use nats_claims::{AccountClaims, KeyKind, NKey, OperatorClaims, UserClaims, Creds};
//! let operator = NKey::generate(KeyKind::Operator);
//! let account = NKey::generate(KeyKind::Account);
//! let user = NKey::generate(KeyKind::User);
//! let op_jwt = OperatorClaims::new(operator.public_key()).name("op").encode(&operator).unwrap();
//! let acc_jwt = AccountClaims::new(account.public_key()).name("a").encode(&operator).unwrap();
//! let user_jwt = UserClaims::new(user.public_key()).name("u").encode(&account).unwrap();
//! let creds = Creds::render(&user_jwt, &user.seed()).unwrap();
//! let parsed = Creds::parse(creds.expose()).unwrap();
//! assert_eq!(parsed.jwt, user_jwt);
//! # let _ = (op_jwt, acc_jwt);
//! ```

pub mod claims;
pub mod creds;
pub mod error;
pub mod jwt;
pub mod keys;
pub mod trust;
pub mod types;

pub use claims::{
    Account, AccountClaims, Activation, ActivationClaims, ClaimBody, Claims, Operator,
    OperatorClaims, SigningKeys, User, UserClaims, UserScope,
};
pub use creds::Creds;
pub use error::{Error, Part, Result};
pub use jwt::{AnyClaims, RawToken, decode, decode_any, decode_unverified};
pub use keys::{KeyKind, NKey, SecretText};
pub use types::*;
