//! Kubernetes resource quantities as bytes, for the limits derived from memory and volume size,
//! and bytes as a quantity, for the limits `status.jetstream` reports: the shared rule of
//! [`nats_api::quantity`], with the field named in the error.

use thiserror::Error;

/// A quantity that cannot be read as a byte count.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{field}: {value:?} is not a byte quantity: {reason}")]
pub struct QuantityError {
    pub field: String,
    pub value: String,
    pub reason: &'static str,
}

/// A quantity such as `512Mi`, `1G`, `1.5Gi` or `1000` as whole bytes, by the one rule every
/// controller reads quantities with ([`nats_api::quantity::bytes`]); a size is never negative.
pub fn bytes(field: &str, value: &str) -> Result<i64, QuantityError> {
    let err = |reason| QuantityError {
        field: field.to_string(),
        value: value.to_string(),
        reason,
    };
    match nats_api::quantity::bytes(value).map_err(err)? {
        n if n < 0 => Err(err("a size is not negative")),
        n => Ok(n),
    }
}

/// A byte count as a Kubernetes quantity, in the largest binary unit that divides it.
pub fn of_bytes(bytes: i64) -> String {
    nats_api::quantity::of_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("1000", 1000)]
    #[case("512Mi", 512 << 20)]
    #[case("1Gi", 1 << 30)]
    #[case("1.5Gi", 3 << 29)]
    #[case("2G", 2_000_000_000)]
    #[case("10k", 10_000)]
    fn reads_quantities(#[case] q: &str, #[case] want: i64) {
        assert_eq!(bytes("f", q), Ok(want));
    }

    #[rstest]
    #[case("", "no number")]
    #[case("Gi", "no number")]
    #[case("100m", "a fraction of a byte")]
    #[case("1Zi", "unknown suffix")]
    #[case("1.2.3Gi", "malformed number")]
    #[case("-1Gi", "a size is not negative")]
    fn refuses_what_is_not_bytes(#[case] q: &str, #[case] reason: &str) {
        let e = bytes("spec.resources.limits.memory", q).unwrap_err();
        assert_eq!(e.reason, reason);
        assert!(e.to_string().starts_with("spec.resources.limits.memory: "));
    }

    #[rstest]
    #[case(3 << 30, "3Gi")]
    #[case(20 << 30, "20Gi")]
    #[case(1536 << 20, "1536Mi")]
    #[case(1000, "1000")]
    fn quantities(#[case] bytes: i64, #[case] want: &str) {
        assert_eq!(of_bytes(bytes), want);
    }
}
