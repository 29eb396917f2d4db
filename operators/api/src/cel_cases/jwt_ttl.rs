//! CEL rows of `NatsAccount.spec.jwtTTL`: `0` (never expiring) or at least the floor of
//! [`crate::auth::MIN_JWT_TTL`], the refusal naming the field and why.

use super::Case;
use super::Expect::{self, Accepted, Refused};

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

fn create(name: &'static str, new: &'static str, expect: Expect) -> Case {
    Case {
        name,
        kind: "NatsAccount",
        old: None,
        new,
        expect,
    }
}

fn update(name: &'static str, old: &'static str, new: &'static str, expect: Expect) -> Case {
    Case {
        name,
        kind: "NatsAccount",
        old: Some(old),
        new,
        expect,
    }
}

/// The rows.
pub fn cases() -> Vec<Case> {
    vec![
        create(
            "account: jwtTTL 48h, the default written out",
            ttl!("ttl-48h", "48h"),
            Accepted,
        ),
        create(
            "account: jwtTTL 0 never expires",
            ttl!("ttl-zero", "0"),
            Accepted,
        ),
        create(
            "account: jwtTTL 0s never expires too",
            ttl!("ttl-zero-s", "0s"),
            Accepted,
        ),
        create(
            "account: jwtTTL 1m, the floor itself",
            ttl!("ttl-floor", "1m"),
            Accepted,
        ),
        create(
            "account: jwtTTL 1s re-signs twice a second: below the floor",
            ttl!("ttl-1s", "1s"),
            Refused(MESSAGE),
        ),
        create(
            "account: jwtTTL 59999ms is just below the floor",
            ttl!("ttl-below", "59999ms"),
            Refused(MESSAGE),
        ),
        create(
            "account: jwtTTL 1ns is below the floor",
            ttl!("ttl-1ns", "1ns"),
            Refused(MESSAGE),
        ),
        update(
            "account: lowering jwtTTL below the floor is refused",
            ttl!("ttl-lower", "12h"),
            ttl!("ttl-lower", "30s"),
            Refused(MESSAGE),
        ),
        update(
            "account: raising jwtTTL from the floor is accepted",
            ttl!("ttl-raise", "1m"),
            ttl!("ttl-raise", "2h"),
            Accepted,
        ),
    ]
}
