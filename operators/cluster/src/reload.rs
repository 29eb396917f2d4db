//! Reload (design §4.2), the rules: which changed config reloads ([`route`]), the digest a
//! reloaded server must report ([`config_digest`]) and whether a `/varz` reading confirms it
//! ([`judge`]). The asking — `$SYS.REQ.SERVER.<id>.RELOAD` over the system user, confirmed by
//! `/varz` `config_digest` and `config_load_time`, a restart on any error — is
//! [`crate::nats::ask_reload`]'s.
//!
//! How nats-server computes `config_digest` (conf/parse.go `configDigest`, called from
//! `Options.ProcessConfigFile` at start and on every reload): the file is parsed in pedantic mode
//! into a map of tokens, and the digest is `sha256:` and the hex SHA-256 of that map as Go's
//! `json.Encoder` writes it — map keys sorted bytewise, `<`, `>`, `&`, U+2028 and U+2029 escaped,
//! one trailing newline. Comments, whitespace, key order and quoting do not count; only the parsed
//! values do. The controller renders every nats.conf from a [`Block`], whose values are exactly
//! the parsed values (quoted strings, integers, booleans, lists and blocks), so
//! [`config_digest`] computes the digest the server must report from the rendered block, and the
//! reload is confirmed by an exact match, not merely by a change.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::render::conf::{Block, Value};

/// The digest nats-server reports in `/varz` `config_digest` for a nats.conf rendered from
/// `block` (`nats-server -t -c FILE` prints the same).
pub fn config_digest(block: &Block) -> String {
    let mut json = String::new();
    write_block(&mut json, block);
    json.push('\n');
    let sum = Sha256::digest(json.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in sum {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// A later duplicate key wins, as in the server's parser.
fn write_block(out: &mut String, block: &Block) {
    let sorted: BTreeMap<&str, &Value> = block
        .entries()
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    out.push('{');
    for (i, (k, v)) in sorted.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_go_string(out, k);
        out.push(':');
        write_value(out, v);
    }
    out.push('}');
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Str(s) => write_go_string(out, s),
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::List(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, v);
            }
            out.push(']');
        }
        Value::Block(b) => write_block(out, b),
    }
}

/// A string as Go's encoding/json writes it with HTML escaping on (the Encoder's default).
fn write_go_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// How a changed config reaches a running server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Ask the server to reload, then confirm.
    Reload,
    /// Restart it in the rollout; the reason is for `status.config.restartReason`.
    Restart { reason: String },
    /// Nothing changed.
    Nothing,
}

/// The restart reason of a changed workload.
pub const WORKLOAD_CHANGED: &str =
    "the workload changed (version, image, resources, pod template or exporter)";

/// Reload where every changed field reloads and the controller has a system user to ask with
/// (`spec.auth.systemCredentials`, or config accounts it is given); without one every config
/// change restarts (design §4.3). A changed workload (see [`crate::revision`]) restarts
/// whatever the config allows: only a new process runs a new image or resources.
pub fn route(
    mode: &crate::apply_mode::ApplyMode,
    system_user: bool,
    workload_changed: bool,
) -> Route {
    use crate::apply_mode::ApplyMode;
    match mode {
        _ if workload_changed => Route::Restart {
            reason: match mode {
                ApplyMode::Restart { .. } => format!(
                    "{WORKLOAD_CHANGED}; {}",
                    mode.restart_reason().unwrap_or_default()
                ),
                ApplyMode::Reload { changed } => format!(
                    "{WORKLOAD_CHANGED}; config fields changed with it: {}",
                    changed.join(", ")
                ),
                ApplyMode::Unchanged => WORKLOAD_CHANGED.into(),
            },
        },
        ApplyMode::Unchanged => Route::Nothing,
        ApplyMode::Reload { changed } if !system_user => Route::Restart {
            reason: format!(
                "no system user to request a reload with; changed: {}",
                changed.join(", ")
            ),
        },
        ApplyMode::Reload { .. } => Route::Reload,
        ApplyMode::Restart { .. } => Route::Restart {
            reason: mode.restart_reason().unwrap_or_default(),
        },
    }
}

/// What `/varz` said about a server's loaded config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadedConfig {
    pub config_digest: String,
    /// `config_load_time` as Unix nanoseconds; the server sets it at start and on each reload.
    pub load_time_nanos: Option<i64>,
}

/// Whether a reload took, judged from `/varz` before and after the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confirmation {
    /// The server loaded the expected config, and its load time advanced past `before`.
    Confirmed,
    /// Not yet: the server still reports what it had (a reload can take a moment to apply).
    Pending,
    /// The server reloaded, but the file it read is still the one it ran before: the new config
    /// has not reached it yet (on Kubernetes the kubelet projects a changed ConfigMap into the
    /// pod at its next sync of that pod). Ask again.
    NotProjected,
    /// The server loaded a config with another digest: the file it read is neither the one it
    /// ran nor the one rendered.
    WrongDigest { reported: String },
}

/// Judges one `/varz` reading after a reload request against the expected digest.
pub fn judge(before: &LoadedConfig, after: &LoadedConfig, expected_digest: &str) -> Confirmation {
    let advanced = match (before.load_time_nanos, after.load_time_nanos) {
        (Some(b), Some(a)) => a > b,
        (None, Some(_)) => true,
        _ => false,
    };
    if !advanced {
        return Confirmation::Pending;
    }
    if after.config_digest == expected_digest {
        Confirmation::Confirmed
    } else if after.config_digest == before.config_digest {
        Confirmation::NotProjected
    } else {
        Confirmation::WrongDigest {
            reported: after.config_digest.clone(),
        }
    }
}

/// What the caller does after asking a server to reload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReloadDecision {
    /// The server already runs the expected config: nothing to do.
    AlreadyCurrent,
    /// The reload took: `/varz` reports the expected digest with a later load time.
    Reloaded,
    /// The reload failed or could not be confirmed; restart the server. `reason` is for status
    /// (`restartReason`) and the log.
    Restart { reason: String },
}

/// How long a reload is given and how often `/varz` is read meanwhile.
#[derive(Clone, Copy, Debug)]
pub struct ReloadTiming {
    /// Each request's (VARZ, RELOAD) answer deadline.
    pub request: Duration,
    /// How long the reload has to show in `/varz`: longer than the new file takes to reach the
    /// server ([`crate::server_lifecycle::ServerLifecycle::config_projection`]).
    pub confirm_within: Duration,
    pub poll: Duration,
    /// How long after a reload that read the old file the reload is asked for again.
    pub reask: Duration,
}

impl ReloadTiming {
    /// The timing of a config reload whose file takes up to `projection` to reach the server.
    pub fn for_projection(projection: Duration) -> Self {
        let base = ReloadTiming::default();
        ReloadTiming {
            confirm_within: base.confirm_within + projection,
            ..base
        }
    }
}

impl Default for ReloadTiming {
    fn default() -> Self {
        ReloadTiming {
            request: Duration::from_secs(5),
            confirm_within: Duration::from_secs(20),
            poll: Duration::from_millis(200),
            reask: Duration::from_secs(2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn block(entries: &[(&str, Value)]) -> Block {
        let mut b = Block::new();
        for (k, v) in entries {
            b.set(k, v.clone());
        }
        b
    }

    /// The JSON the digest hashes, for checking the encoding itself.
    fn json(b: &Block) -> String {
        let mut s = String::new();
        write_block(&mut s, b);
        s
    }

    #[rstest]
    #[case::keys_sorted(
        block(&[("b", Value::Int(1)), ("a", Value::Bool(true))]),
        r#"{"a":true,"b":1}"#
    )]
    #[case::later_duplicate_wins(
        block(&[("a", Value::Int(1)), ("a", Value::Int(2))]),
        r#"{"a":2}"#
    )]
    #[case::html_escaped(
        block(&[("s", Value::Str("<a&b>".into()))]),
        r#"{"s":"\u003ca\u0026b\u003e"}"#
    )]
    #[case::controls(
        block(&[("s", Value::Str("q\"\\\n\t\u{1}".into()))]),
        r#"{"s":"q\"\\\n\t\u0001"}"#
    )]
    #[case::nested(
        block(&[("l", Value::List(vec![Value::Str("x".into()), Value::Block(block(&[("z", Value::Int(-3))]))]))]),
        r#"{"l":["x",{"z":-3}]}"#
    )]
    fn the_digest_hashes_go_json(#[case] b: Block, #[case] want: &str) {
        assert_eq!(json(&b), want);
    }

    #[test]
    fn the_digest_is_prefixed_and_stable_under_key_order() {
        let a = block(&[("x", Value::Int(1)), ("y", Value::Int(2))]);
        let b = block(&[("y", Value::Int(2)), ("x", Value::Int(1))]);
        let d = config_digest(&a);
        assert!(d.starts_with("sha256:") && d.len() == 7 + 64, "{d}");
        assert_eq!(d, config_digest(&b));
        assert_ne!(d, config_digest(&block(&[("x", Value::Int(3))])));
    }

    use crate::apply_mode::ApplyMode;

    #[rstest]
    #[case::reload(ApplyMode::Reload { changed: vec!["server_tags"] }, true, Route::Reload)]
    #[case::no_system_user(ApplyMode::Reload { changed: vec!["server_tags"] }, false, Route::Restart { reason: "no system user to request a reload with; changed: server_tags".into() })]
    #[case::restart_only(ApplyMode::Restart { changed: vec!["gateway"], restart_only: vec!["gateway"] }, true, Route::Restart { reason: "restart-only fields changed: gateway".into() })]
    #[case::unchanged(ApplyMode::Unchanged, true, Route::Nothing)]
    fn reload_or_restart(#[case] mode: ApplyMode, #[case] system_user: bool, #[case] want: Route) {
        assert_eq!(route(&mode, system_user, false), want);
    }

    #[rstest]
    #[case::workload_only(ApplyMode::Unchanged, WORKLOAD_CHANGED.to_string())]
    #[case::with_a_reloadable_field(ApplyMode::Reload { changed: vec!["jetstream.limits"] }, format!("{WORKLOAD_CHANGED}; config fields changed with it: jetstream.limits"))]
    #[case::with_a_restart_only_field(
        ApplyMode::Restart { changed: vec!["gateway"], restart_only: vec!["gateway"] },
        format!("{WORKLOAD_CHANGED}; restart-only fields changed: gateway")
    )]
    fn a_changed_workload_restarts(#[case] mode: ApplyMode, #[case] reason: String) {
        assert_eq!(route(&mode, true, true), Route::Restart { reason });
    }

    fn lc(digest: &str, t: Option<i64>) -> LoadedConfig {
        LoadedConfig {
            config_digest: digest.into(),
            load_time_nanos: t,
        }
    }

    #[rstest]
    #[case::confirmed(lc("old", Some(1)), lc("new", Some(2)), Confirmation::Confirmed)]
    #[case::not_yet(lc("old", Some(1)), lc("old", Some(1)), Confirmation::Pending)]
    #[case::same_digest_time_unchanged(
        lc("old", Some(1)),
        lc("new", Some(1)),
        Confirmation::Pending
    )]
    #[case::first_time_seen(lc("old", None), lc("new", Some(5)), Confirmation::Confirmed)]
    #[case::old_file_reloaded(lc("old", Some(1)), lc("old", Some(2)), Confirmation::NotProjected)]
    #[case::wrong_file(lc("old", Some(1)), lc("other", Some(2)), Confirmation::WrongDigest { reported: "other".into() })]
    fn a_reload_is_confirmed_by_digest_and_load_time(
        #[case] before: LoadedConfig,
        #[case] after: LoadedConfig,
        #[case] want: Confirmation,
    ) {
        assert_eq!(judge(&before, &after, "new"), want);
    }
}
