//! Durations written as `500ms`, `10s`, `2m` in scenario files.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// Parses `<number><unit>` with unit `ms`, `s` or `m` (fractions allowed: `1.5s`).
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        return Err(format!("duration {text:?} needs a unit (ms, s, m)"));
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("duration {text:?} is not a number with a unit"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("duration {text:?} must be a non-negative number"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// Formats as milliseconds (`1500ms`), which [`parse`] reads back exactly.
pub fn format(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*d))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_round_trips() {
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("2m").unwrap(), Duration::from_secs(120));
        assert!(parse("10").is_err());
        assert!(parse("-1s").is_err());
        let d = Duration::from_millis(1234);
        assert_eq!(parse(&format(d)).unwrap(), d);
    }
}
