//! The creds file nats clients read: a user JWT and its seed between dashed marker lines.

use crate::claims::User;
use crate::error::{Error, Result};
use crate::jwt;
use crate::keys::{KeyKind, NKey, SecretText};

/// A user JWT with its seed, as a creds file holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Creds {
    pub jwt: String,
    pub seed: SecretText,
}

impl Creds {
    /// Renders a creds file exactly as nats-io/jwt's `FormatUserConfig` (and so nsc) does.
    /// The JWT must be a user JWT whose signature verifies and whose subject is the seed's
    /// public key; the seed must be a user seed.
    pub fn render(user_jwt: &str, seed: &SecretText) -> Result<SecretText> {
        let claims = jwt::decode::<User>(user_jwt)?;
        let key = NKey::from_seed_of(KeyKind::User, seed.expose().as_bytes())?;
        if key.public_key() != claims.subject {
            return Err(Error::BadCreds {
                reason: format!(
                    "seed of {} does not match the JWT subject {}",
                    key.public_key(),
                    claims.subject
                ),
            });
        }
        let seed = seed.expose().trim();
        Ok(SecretText::new(format!(
            "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
************************* IMPORTANT *************************\n\
NKEY Seed printed below can be used to sign and prove identity.\n\
NKEYs are sensitive and should be treated as secrets.\n\n\
-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n\n\
*************************************************************\n"
        )))
    }

    /// Renders from a key pair rather than its seed text.
    pub fn render_key(user_jwt: &str, user: &NKey) -> Result<SecretText> {
        Self::render(user_jwt, &user.seed())
    }

    /// Parses a creds file the way nats clients do: the first marked block is the JWT, the
    /// second the seed. Checks that the JWT is a user JWT with a valid signature and that the
    /// seed is the user seed of its subject.
    pub fn parse(text: &str) -> Result<Creds> {
        let blocks = marked_blocks(text);
        let [jwt_text, seed_text, ..] = blocks.as_slice() else {
            return Err(Error::BadCreds {
                reason: format!(
                    "expected a JWT block and a seed block between dashed marker lines, found {} block(s)",
                    blocks.len()
                ),
            });
        };
        let claims = jwt::decode::<User>(jwt_text)?;
        let key = NKey::from_seed_of(KeyKind::User, seed_text.as_bytes())?;
        if key.public_key() != claims.subject {
            return Err(Error::BadCreds {
                reason: format!(
                    "seed of {} does not match the JWT subject {}",
                    key.public_key(),
                    claims.subject
                ),
            });
        }
        Ok(Creds {
            jwt: (*jwt_text).to_string(),
            seed: SecretText::new((*seed_text).to_string()),
        })
    }

    pub fn key(&self) -> Result<NKey> {
        NKey::from_seed_of(KeyKind::User, self.seed.expose().as_bytes())
    }
}

/// A marker line as the clients' pattern `-{3,}.*-{3,}` sees it: ends in three dashes and
/// holds three more before those.
fn is_marker(line: &str) -> bool {
    line.len() >= 6 && line.ends_with("---") && line[..line.len() - 3].contains("---")
}

fn is_block_content(line: &str) -> bool {
    !line.is_empty()
        && line
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'='))
}

/// Contents of `marker / content / marker` line triples, in order, not overlapping.
fn marked_blocks(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 < lines.len() {
        if is_marker(lines[i]) && is_block_content(lines[i + 1]) && is_marker(lines[i + 2]) {
            out.push(lines[i + 1]);
            i += 3;
        } else {
            i += 1;
        }
    }
    out
}
