//! Kubernetes resource quantities as bytes, for the limits derived from memory and volume size,
//! and bytes as a quantity, for the limits `status.jetstream` reports.

use thiserror::Error;

/// A quantity that cannot be read as a byte count.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{field}: {value:?} is not a byte quantity: {reason}")]
pub struct QuantityError {
    pub field: String,
    pub value: String,
    pub reason: &'static str,
}

/// Parses a quantity such as `512Mi`, `1G`, `1.5Gi` or `1000` into whole bytes (rounded down).
pub fn bytes(field: &str, value: &str) -> Result<i64, QuantityError> {
    let err = |reason| QuantityError {
        field: field.to_string(),
        value: value.to_string(),
        reason,
    };
    let v = value.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, suffix) = v.split_at(split);
    if num.is_empty() {
        return Err(err("no number"));
    }
    let multiplier: f64 = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "m" => return Err(err("milli-units are not bytes")),
        _ => return Err(err("unknown suffix")),
    };
    let n: f64 = num.parse().map_err(|_| err("malformed number"))?;
    let b = n * multiplier;
    if !b.is_finite() || b > i64::MAX as f64 {
        return Err(err("too large"));
    }
    Ok(b as i64)
}

/// A byte count as a Kubernetes quantity, in the largest binary unit that divides it.
pub fn of_bytes(bytes: i64) -> String {
    for (unit, size) in [
        ("Ti", 1i64 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if bytes >= size && bytes % size == 0 {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
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
    #[case("100m", "milli-units are not bytes")]
    #[case("1Zi", "unknown suffix")]
    #[case("1.2.3Gi", "malformed number")]
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
