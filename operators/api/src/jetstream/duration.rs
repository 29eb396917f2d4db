//! Durations as the spec writes them: Go duration strings such as `1h30m`, `500ms` or `0`.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The pattern a duration string must match: one or more `<number><unit>` terms with units
/// `ns`, `us`, `µs`, `ms`, `s`, `m`, `h` (Go's `time.ParseDuration` without a sign), or `0`.
pub const DURATION_PATTERN: &str = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$";

/// The longest duration string accepted; bounds the cost of CEL rules that read one.
pub const DURATION_MAX_LENGTH: u32 = 64;

/// A non-negative duration written as a Go duration string (`90s`, `1h30m`, `0`).
///
/// The text is kept as written so the spec reads back the way it was applied; [`GoDuration::parse`]
/// turns it into a [`std::time::Duration`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
#[serde(transparent)]
pub struct GoDuration(pub String);

/// A duration string that is not a Go duration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{text:?} is not a duration such as 90s or 1h30m: {reason}")]
pub struct DurationError {
    /// The text that failed to parse.
    pub text: String,
    /// Why it failed.
    pub reason: String,
}

impl GoDuration {
    /// A duration from its Go spelling, unchecked; [`GoDuration::parse`] checks it.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The duration the text spells.
    pub fn parse(&self) -> Result<std::time::Duration, DurationError> {
        let fail = |reason: String| DurationError {
            text: self.0.clone(),
            reason,
        };
        if self.0.starts_with('-') {
            return Err(fail("a duration here cannot be negative".into()));
        }
        let parsed = kube::core::Duration::from_str(&self.0).map_err(|e| fail(e.to_string()))?;
        Ok(parsed.into())
    }
}

impl From<std::time::Duration> for GoDuration {
    fn from(d: std::time::Duration) -> Self {
        // Whole seconds read best as Go writes them; anything finer falls back to nanoseconds.
        if d.subsec_nanos() == 0 {
            let secs = d.as_secs();
            let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
            let mut out = String::new();
            if h > 0 {
                out.push_str(&format!("{h}h"));
            }
            if m > 0 {
                out.push_str(&format!("{m}m"));
            }
            if s > 0 || out.is_empty() {
                out.push_str(&format!("{s}s"));
            }
            Self(out)
        } else {
            Self(format!("{}ns", d.as_nanos()))
        }
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl JsonSchema for GoDuration {
    fn schema_name() -> Cow<'static, str> {
        "GoDuration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": DURATION_PATTERN,
            "maxLength": DURATION_MAX_LENGTH,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use std::time::Duration;

    #[rstest]
    #[case::minutes("1m", Duration::from_secs(60))]
    #[case::compound("1h30m", Duration::from_secs(5400))]
    #[case::millis("500ms", Duration::from_millis(500))]
    #[case::fraction("1.5s", Duration::from_millis(1500))]
    #[case::zero("0", Duration::ZERO)]
    #[case::days_as_hours("48h", Duration::from_secs(172_800))]
    fn parses_go_durations(#[case] text: &str, #[case] want: Duration) {
        assert_eq!(GoDuration::new(text).parse(), Ok(want));
    }

    #[rstest]
    #[case::negative("-1m")]
    #[case::no_unit("15")]
    #[case::unknown_unit("2d")]
    fn refuses_what_go_refuses(#[case] text: &str) {
        assert!(GoDuration::new(text).parse().is_err(), "{text} parsed");
    }

    #[rstest]
    #[case(Duration::from_secs(60), "1m")]
    #[case(Duration::from_secs(5400), "1h30m")]
    #[case(Duration::ZERO, "0s")]
    #[case(Duration::from_millis(1500), "1500000000ns")]
    fn writes_what_it_reads(#[case] d: Duration, #[case] text: &str) {
        let written = GoDuration::from(d);
        assert_eq!(written.as_str(), text);
        assert_eq!(written.parse(), Ok(d));
    }
}
