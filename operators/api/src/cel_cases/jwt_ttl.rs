//! CEL rows of `NatsAccount.spec.jwtTTL`: `0` (never expiring) or at least the floor of
//! [`crate::auth::MIN_JWT_TTL`], the refusal naming the field and why.

use super::Expect::{Accepted, Refused};
use super::{Case, create, update};

/// The kind of every row here.
const KIND: &str = "NatsAccount";

/// A NatsAccount whose `jwtTTL` is `$value` (YAML, as written).
macro_rules! ttl {
    ($name:literal, $value:literal) => {
        concat!(
            "apiVersion: auth.nats.mikluko.io/v1beta1\nkind: NatsAccount\nmetadata:\n  name: ",
            $name,
            "\n  namespace: team\nspec:\n  operatorRef:\n    name: demo\n  jwtTTL: \"",
            $value,
            "\"\n"
        )
    };
}

const MESSAGE: &str = "jwtTTL must be 0 (never expiring) or at least 1m";

/// The rows.
pub fn cases() -> Vec<Case> {
    vec![
        create(
            "account: jwtTTL 48h, the default written out",
            KIND,
            ttl!("ttl-48h", "48h"),
            Accepted,
        ),
        create(
            "account: jwtTTL 0 never expires",
            KIND,
            ttl!("ttl-zero", "0"),
            Accepted,
        ),
        create(
            "account: jwtTTL 0s never expires too",
            KIND,
            ttl!("ttl-zero-s", "0s"),
            Accepted,
        ),
        create(
            "account: jwtTTL 1m, the floor itself",
            KIND,
            ttl!("ttl-floor", "1m"),
            Accepted,
        ),
        create(
            "account: jwtTTL 1s re-signs twice a second: below the floor",
            KIND,
            ttl!("ttl-1s", "1s"),
            Refused(MESSAGE),
        ),
        create(
            "account: jwtTTL 59999ms is just below the floor",
            KIND,
            ttl!("ttl-below", "59999ms"),
            Refused(MESSAGE),
        ),
        create(
            "account: jwtTTL 1ns is below the floor",
            KIND,
            ttl!("ttl-1ns", "1ns"),
            Refused(MESSAGE),
        ),
        update(
            "account: lowering jwtTTL below the floor is refused",
            KIND,
            ttl!("ttl-lower", "12h"),
            ttl!("ttl-lower", "30s"),
            Refused(MESSAGE),
        ),
        update(
            "account: raising jwtTTL from the floor is accepted",
            KIND,
            ttl!("ttl-raise", "1m"),
            ttl!("ttl-raise", "2h"),
            Accepted,
        ),
    ]
}
