//! Strict decoding: serde drops a field its type does not know, so a typo'd field in a manifest
//! decodes "fine". [`strict`] reports every such field by path, and the first type error;
//! [`round_trip`] also reports where a value does not come back the same after decoding and
//! encoding again (a value the type reads as something else, a field it never writes).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Decodes `value` into `T`, returning every problem: a field `T` does not know (by path) and the
/// first type error (by path). Empty when the decode is exact.
pub fn strict<T: DeserializeOwned>(value: &Value) -> Vec<String> {
    decode::<T>(value).err().unwrap_or_default()
}

/// [`strict`], and then `T` encoded again must equal `value`: every path where it does not is a
/// problem. Empty when the document is exactly a `T`.
pub fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Vec<String> {
    match decode::<T>(value) {
        Ok(decoded) => match serde_json::to_value(&decoded) {
            Ok(again) => {
                let mut problems = Vec::new();
                diff("", value, &again, &mut problems);
                problems
            }
            Err(e) => vec![format!("encoding again: {e}")],
        },
        Err(problems) => problems,
    }
}

fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, Vec<String>> {
    let mut unknown = Vec::new();
    // serde_ignored writes `?` for each Option it passes through: `spec.?.template` is `spec.template`.
    let mut record = |path: serde_ignored::Path| {
        let path = path.to_string().replace(".?", "");
        unknown.push(format!("unknown field `{}`", path.trim_start_matches("?.")))
    };
    let decoded: Result<T, _> = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(
        value.clone(),
        &mut record,
    ));
    match decoded {
        Ok(t) if unknown.is_empty() => Ok(t),
        Ok(_) => Err(unknown),
        Err(err) => {
            let mut problems = vec![format!("at `{}`: {}", err.path(), err.inner())];
            problems.extend(unknown);
            Err(problems)
        }
    }
}

/// Every JSON pointer where `a` and `b` differ.
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let p = format!("{path}/{k}");
                match y.get(k) {
                    Some(w) => diff(&p, v, w, out),
                    None => out.push(format!("`{p}` is dropped by the type")),
                }
            }
            for k in y.keys().filter(|k| !x.contains_key(*k)) {
                out.push(format!("`{path}/{k}` is added by the type"));
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}/{i}"), v, w, out);
            }
        }
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => {}
        _ if a == b => {}
        _ => out.push(format!("`{path}`: {a} comes back as {b}")),
    }
}
