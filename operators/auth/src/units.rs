//! Spec units to JWT numbers: quantities to bytes, Go durations to seconds.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A spec value that cannot be put into a JWT.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("{field}: {text:?} is not a whole number of bytes")]
    Quantity { field: &'static str, text: String },
    #[error("{field}: {text:?} is not a duration")]
    Duration { field: &'static str, text: String },
}

const SUFFIXES: &[(&str, i64)] = &[
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
];

/// A quantity with an optional binary or decimal suffix (`1Mi`, `500M`, `1048576`, `-1`).
pub fn bytes(field: &'static str, q: &Quantity) -> Result<i64, UnitError> {
    let text = q.0.trim();
    let fail = || UnitError::Quantity {
        field,
        text: q.0.clone(),
    };
    let (number, multiplier) = SUFFIXES
        .iter()
        .find_map(|(s, m)| text.strip_suffix(s).map(|n| (n, *m)))
        .unwrap_or((text, 1));
    let n: i64 = number.parse().map_err(|_| fail())?;
    n.checked_mul(multiplier).ok_or_else(fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::plain("1048576", Some(1_048_576))]
    #[case::binary("1Mi", Some(1_048_576))]
    #[case::decimal("50G", Some(50_000_000_000))]
    #[case::unlimited("-1", Some(-1))]
    #[case::fraction("1.5Ki", None)]
    #[case::garbage("lots", None)]
    fn quantity_to_bytes(#[case] text: &str, #[case] want: Option<i64>) {
        assert_eq!(bytes("payload", &Quantity(text.into())).ok(), want);
    }
}
