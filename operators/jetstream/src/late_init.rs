//! Late initialization (AdoptOrCreate, §6.3): the fields spec omits are filled in from the server,
//! the fields it sets are left as written.
//!
//! Works on any kind's spec through its JSON form: the server's spec (from the kind's
//! `spec_from_server`) supplies each top-level field the current spec lacks.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A spec that could not round-trip through JSON (a bug in the spec types, not user input).
#[derive(Debug, thiserror::Error)]
#[error("late-initializing the spec: {0}")]
pub struct LateInitError(#[from] serde_json::Error);

/// The result: the merged spec and the fields that were filled in (empty: nothing to write back).
#[derive(Debug, Clone, PartialEq)]
pub struct LateInitialized<T> {
    /// The spec with omitted fields filled from the server.
    pub spec: T,
    /// The camelCase names of the fields filled in, sorted.
    pub filled: Vec<String>,
}

/// Fills every top-level field `current` omits from `from_server`.
pub fn late_initialize<T: Serialize + DeserializeOwned>(
    current: &T,
    from_server: &T,
) -> Result<LateInitialized<T>, LateInitError> {
    let mut cur = serde_json::to_value(current)?;
    let server = serde_json::to_value(from_server)?;
    let mut filled = Vec::new();
    if let (Some(cur), Some(server)) = (cur.as_object_mut(), server.as_object()) {
        for (k, v) in server {
            if !cur.contains_key(k) && !v.is_null() {
                cur.insert(k.clone(), v.clone());
                filled.push(k.clone());
            }
        }
    }
    filled.sort();
    let spec = serde_json::from_value::<T>(Value::clone(&cur))?;
    Ok(LateInitialized { spec, filled })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::jetstream::NatsStreamSpec;
    use rstest::rstest;
    use serde_json::json;

    fn spec(v: Value) -> NatsStreamSpec {
        let mut base = json!({"connectionRef": {"name": "main"}});
        if let (Some(b), Some(o)) = (base.as_object_mut(), v.as_object()) {
            b.extend(o.clone());
        }
        serde_json::from_value(base).expect("a valid NatsStream spec")
    }

    #[rstest]
    #[case::omitted_fields_taken_from_the_server(
        json!({"subjects": ["a.>"]}), json!({"subjects": ["a.>"], "maxMsgs": -1, "storage": "File"}),
        json!({"subjects": ["a.>"], "maxMsgs": -1, "storage": "File"}), vec!["maxMsgs", "storage"])]
    #[case::set_fields_kept_as_written(
        json!({"maxMsgs": 100}), json!({"maxMsgs": -1}),
        json!({"maxMsgs": 100}), vec![])]
    #[case::lifecycle_fields_never_filled(
        json!({"deletionPolicy": "Delete"}), json!({"deletionPolicy": "Retain"}),
        json!({"deletionPolicy": "Delete"}), vec![])]
    fn late_initialization_fills_only_what_spec_omits(
        #[case] current: Value,
        #[case] server: Value,
        #[case] want: Value,
        #[case] filled: Vec<&str>,
    ) {
        let got = late_initialize(&spec(current), &spec(server)).expect("merges");
        assert_eq!(got.spec, spec(want));
        assert_eq!(got.filled, filled);
    }
}
