//! JWT helpers the passes share: status.jwtHash, signing that keeps an unchanged JWT as it was,
//! and the newest of the account JWTs the servers hold.

/// status.jwtHash: the hex SHA-256 of the JWT text.
pub(crate) fn jwt_hash(jwt: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(jwt.as_bytes()))
}

/// Signs with the previous JWT's iat when that reproduces the previous JWT exactly (nothing
/// changed: keep it, so status and servers see no new JWT), else at `now`. `build(iat)` signs.
pub(crate) fn sign_stable<N: nats_claims::ClaimBody, E>(
    prev: Option<&str>,
    now: i64,
    build: impl Fn(i64) -> Result<String, E>,
) -> Result<String, E> {
    if let Some(prev) = prev.filter(|p| !p.is_empty())
        && let Ok(claims) = nats_claims::decode_unverified::<N>(prev)
        && claims.issued_at > 0
        && build(claims.issued_at)? == prev
    {
        return Ok(prev.to_string());
    }
    build(now)
}

/// The newest (by issued-at) of the account JWTs the servers hold that verify.
pub(crate) fn newest(jwts: &[String]) -> Option<String> {
    jwts.iter()
        .filter_map(|j| {
            nats_claims::decode::<nats_claims::Account>(j)
                .ok()
                .map(|c| (c.issued_at, j))
        })
        .max_by_key(|(iat, _)| *iat)
        .map(|(_, j)| j.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwt_hash_is_hex_sha256() {
        assert_eq!(
            jwt_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
