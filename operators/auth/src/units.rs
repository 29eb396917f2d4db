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

/// A quantity (`1Mi`, `500M`, `1.5Gi`, `1048576`, `-1`) as whole bytes, by the one rule every
/// controller reads quantities with ([`nats_api::quantity::bytes`]).
pub fn bytes(field: &'static str, q: &Quantity) -> Result<i64, UnitError> {
    nats_api::quantity::bytes(&q.0).map_err(|_| UnitError::Quantity {
        field,
        text: q.0.clone(),
    })
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
    #[case::a_fraction_of_a_unit_that_is_whole_bytes("1.5Ki", Some(1536))]
    #[case::a_fraction_of_a_byte("0.5", None)]
    #[case::garbage("lots", None)]
    fn quantity_to_bytes(#[case] text: &str, #[case] want: Option<i64>) {
        assert_eq!(bytes("payload", &Quantity(text.into())).ok(), want);
    }
}
