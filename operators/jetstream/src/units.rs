//! Units between spec and server: Go duration strings ↔ nanoseconds, quantities ↔ bytes.
//!
//! The CRD writes durations as Go duration strings and sizes as Kubernetes quantities; nats-server
//! reads both as integers (`time.Duration` nanoseconds, `int64` bytes). Adoption writes the server's
//! integers back as strings that parse to the same integers, so a spec round-trips exactly.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use nats_api::jetstream::GoDuration;

/// A spec value that does not map onto the server's integer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UnitError {
    /// A duration string that is not a Go duration.
    #[error("{field}: {source}")]
    Duration {
        /// The spec field holding it.
        field: &'static str,
        /// What the parser said.
        #[source]
        source: nats_api::jetstream::DurationError,
    },
    /// A duration too long for Go's int64 nanoseconds.
    #[error("{field}: {text:?} exceeds the longest duration nats-server holds (about 292 years)")]
    DurationTooLong {
        /// The spec field holding it.
        field: &'static str,
        /// The text as written.
        text: String,
    },
    /// A quantity that is not a whole number of bytes.
    #[error("{field}: {text:?} is not a whole number of bytes such as 1Gi, 500M or -1: {reason}")]
    Quantity {
        /// The spec field holding it.
        field: &'static str,
        /// The text as written.
        text: String,
        /// Why it failed.
        reason: &'static str,
    },
}

/// A Go duration string as nats-server's nanoseconds.
pub fn duration_nanos(field: &'static str, d: &GoDuration) -> Result<i64, UnitError> {
    let parsed = d
        .parse()
        .map_err(|source| UnitError::Duration { field, source })?;
    i64::try_from(parsed.as_nanos()).map_err(|_| UnitError::DurationTooLong {
        field,
        text: d.as_str().to_string(),
    })
}

/// nats-server's nanoseconds as a Go duration string that parses back to the same value.
/// Negative values (never written by the server for these fields) read as zero.
pub fn nanos_duration(nanos: i64) -> GoDuration {
    GoDuration::from(Duration::from_nanos(u64::try_from(nanos).unwrap_or(0)))
}

/// A quantity (`1Gi`, `500M`, `1.5Ki`, `1e3`, `-1`) as whole bytes, by the one rule every
/// controller reads quantities with ([`nats_api::quantity::bytes`]).
pub fn quantity_bytes(field: &'static str, q: &Quantity) -> Result<i64, UnitError> {
    nats_api::quantity::bytes(&q.0).map_err(|reason| UnitError::Quantity {
        field,
        text: q.0.clone(),
        reason,
    })
}

/// Whole bytes as a quantity: the largest binary suffix that divides them, else plain bytes.
pub fn bytes_quantity(bytes: i64) -> Quantity {
    Quantity(nats_api::quantity::of_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::gibibytes("10Gi", 10 * (1 << 30))]
    #[case::plain_bytes("1048576", 1_048_576)]
    #[case::no_limit("-1", -1)]
    #[case::decimal_si("500M", 500_000_000)]
    #[case::fraction_of_a_binary_unit("1.5Ki", 1536)]
    #[case::exponent("1e3", 1000)]
    #[case::kilo("64k", 64_000)]
    fn quantities_map_to_whole_bytes(#[case] text: &str, #[case] want: i64) {
        assert_eq!(quantity_bytes("maxBytes", &Quantity(text.into())), Ok(want));
    }

    #[rstest]
    #[case::milli_is_a_fraction_of_a_byte("1500m")]
    #[case::fractional_byte("0.5")]
    #[case::unknown_suffix("1Gb")]
    #[case::no_number("Gi")]
    #[case::beyond_int64("16Ei")]
    fn quantities_that_are_not_whole_bytes_are_refused(#[case] text: &str) {
        let err = quantity_bytes("maxBytes", &Quantity(text.into())).unwrap_err();
        assert!(err.to_string().starts_with("maxBytes:"), "{err}");
    }

    #[rstest]
    #[case::binary_suffix(1 << 30, "1Gi")]
    #[case::largest_suffix_wins(3 * (1 << 20), "3Mi")]
    #[case::plain_when_no_suffix_divides(1000, "1000")]
    #[case::no_limit(-1, "-1")]
    #[case::zero(0, "0")]
    fn bytes_write_back_as_quantities_that_parse_to_the_same_bytes(
        #[case] bytes: i64,
        #[case] text: &str,
    ) {
        let q = bytes_quantity(bytes);
        assert_eq!(q.0, text);
        assert_eq!(quantity_bytes("maxBytes", &q), Ok(bytes));
    }

    #[rstest]
    #[case::minutes("2m", 120_000_000_000)]
    #[case::millis("100ms", 100_000_000)]
    #[case::zero_keeps_forever("0", 0)]
    fn durations_map_to_nanoseconds(#[case] text: &str, #[case] nanos: i64) {
        assert_eq!(duration_nanos("maxAge", &GoDuration::new(text)), Ok(nanos));
        assert_eq!(
            duration_nanos("maxAge", &nanos_duration(nanos)),
            Ok(nanos),
            "the written-back duration parses to the same nanoseconds"
        );
    }

    #[test]
    fn a_bad_duration_names_its_field() {
        let err = duration_nanos("maxAge", &GoDuration::new("2d")).unwrap_err();
        assert!(err.to_string().starts_with("maxAge:"), "{err}");
    }
}
