//! Whether an object's status shows what a story's status example shows ([`conforms`]).
//!
//! A status example is written once, on some day, by some cluster: its keys, times, revisions and
//! leaders are that run's. What every run must show is its shape and its verdicts:
//!
//! - **Conditions** match by `type`: the same `status` and `reason`. Messages, times and
//!   generations are not compared (they name counts and servers that vary).
//! - **Verdicts** match exactly: booleans, CamelCase words (`Created`, `Restart`, `Settled`), and
//!   the values of [`EXACT`] keys (the version, replica counts).
//! - **Everything else** must be present, of the same JSON type: keys, JWTs, times, revisions,
//!   leaders, byte counts, quantities (which the node's fit scales).
//! - **Lists** have the expected length, and their items pair off one to one, in any order, by
//!   the same rules (which server restarted first or leads differs by run); an expected empty
//!   list or mapping, zero, false or an empty string also matches one left out (a controller
//!   omits empties).

use serde_json::Value;

/// Keys whose values match exactly wherever they appear.
pub const EXACT: &[&str] = &["version"];

/// Keys whose values match exactly at the status's top level: a NatsCluster's server counts. A
/// balancer's per-server `replicas` (the copies a server holds) are a busy cluster's counts.
pub const EXACT_AT_TOP: &[&str] = &["replicas", "readyReplicas"];

/// One difference between an example and an object's status, at a JSON path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Where, e.g. `status.conditions[Ready].reason`.
    pub path: String,
    pub want: String,
    pub got: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: want {}, got {}", self.path, self.want, self.got)
    }
}

/// Every way `actual` (an object's `status`) falls short of `expected` (an example's); empty
/// when it conforms.
pub fn conforms(expected: &Value, actual: &Value) -> Vec<Mismatch> {
    let mut out = Vec::new();
    walk("status", None, expected, Some(actual), &mut out);
    out
}

fn walk(path: &str, key: Option<&str>, want: &Value, got: Option<&Value>, out: &mut Vec<Mismatch>) {
    let miss = |out: &mut Vec<Mismatch>, want: String, got: String| {
        out.push(Mismatch {
            path: path.to_string(),
            want,
            got,
        })
    };
    let Some(got) = got.filter(|g| !g.is_null()) else {
        if !is_empty(want) {
            miss(out, shown(want), "nothing".into());
        }
        return;
    };
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let at = format!("{path}.{k}");
                if k == "conditions" {
                    conditions(&at, wv, g.get(k), out);
                } else {
                    walk(&at, Some(k), wv, g.get(k), out);
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                miss(
                    out,
                    format!("{} items", w.len()),
                    format!("{} items", g.len()),
                );
                return;
            }
            if one_to_one(key, w, g) {
                return;
            }
            // No pairing conforms: say where the items in order differ.
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                walk(&format!("{path}[{i}]"), key, wv, Some(gv), out);
            }
        }
        (w, g) if kind(w) != kind(g) => miss(out, shown(w), shown(g)),
        (w, g) if exact(path, key, w) && w != g => miss(out, shown(w), shown(g)),
        _ => {}
    }
}

/// Whether each expected item conforms to a distinct actual item, in any order (which server
/// restarted first, or leads, differs from run to run). Lists are short: a plain search.
fn one_to_one(key: Option<&str>, want: &[Value], got: &[Value]) -> bool {
    fn assign(key: Option<&str>, want: &[Value], got: &[Value], used: &mut [bool]) -> bool {
        let Some((first, rest)) = want.split_first() else {
            return true;
        };
        for (j, g) in got.iter().enumerate() {
            if used[j] {
                continue;
            }
            let mut found = Vec::new();
            walk("", key, first, Some(g), &mut found);
            if found.is_empty() {
                used[j] = true;
                if assign(key, rest, got, used) {
                    return true;
                }
                used[j] = false;
            }
        }
        false
    }
    assign(key, want, got, &mut vec![false; got.len()])
}

/// Conditions by type: each expected one present with its status and reason.
fn conditions(path: &str, want: &Value, got: Option<&Value>, out: &mut Vec<Mismatch>) {
    let got: &[Value] = got.and_then(Value::as_array).map_or(&[], Vec::as_slice);
    for w in want.as_array().map_or(&[][..], Vec::as_slice) {
        let type_ = w["type"].as_str().unwrap_or_default();
        let at = format!("{path}[{type_}]");
        let Some(g) = got.iter().find(|g| g["type"] == w["type"]) else {
            out.push(Mismatch {
                path: at,
                want: format!("{} {}", shown(&w["status"]), shown(&w["reason"])),
                got: "no such condition".into(),
            });
            continue;
        };
        for field in ["status", "reason"] {
            if w.get(field).is_some() && w[field] != g[field] {
                out.push(Mismatch {
                    path: format!("{at}.{field}"),
                    want: shown(&w[field]),
                    got: shown(&g[field]),
                });
            }
        }
    }
}

/// Whether a scalar at `path` is a verdict, compared as written.
fn exact(path: &str, key: Option<&str>, v: &Value) -> bool {
    let exact_key = key.is_some_and(|k| {
        EXACT.contains(&k) || (EXACT_AT_TOP.contains(&k) && path == format!("status.{k}"))
    });
    match v {
        Value::Bool(_) => true,
        Value::String(s) => exact_key || camel_word(s),
        Value::Number(_) => exact_key,
        _ => false,
    }
}

/// `Created`, `AllServersReady`: a capital letter, then letters only, at least one lower case.
fn camel_word(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && s.chars().all(|c| c.is_ascii_alphabetic())
        && s.chars().any(|c| c.is_ascii_lowercase())
}

/// A value a controller may leave out (`omitempty`): an empty list, mapping or string, zero,
/// false.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
        Value::Null => true,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) if s.len() > 60 => format!("{:?}…", &s[..60]),
        Value::Array(_) | Value::Object(_) => kind(v).into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Value {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": "2026-11-20T10:02:41Z", "observedGeneration": 1})
    }

    #[rstest]
    #[case::same_verdicts_other_run(
        json!({"conditions": [cond("Ready", "True", "AllServersReady", "3 of 3")],
               "config": {"revision": "3f9a1c2e", "appliedBy": "Restart"},
               "publicKey": "OAZQ", "jetstream": {"metaLeader": "demo-0", "limits": {"maxMemoryStore": "3Gi"}}}),
        json!({"conditions": [cond("Ready", "True", "AllServersReady", "three of three"), cond("Settled", "True", "AllGroupsCurrent", "")],
               "config": {"revision": "8b27e0d4", "appliedBy": "Restart"},
               "publicKey": "OBXY", "jetstream": {"metaLeader": "demo-2", "limits": {"maxMemoryStore": "384Mi"}}}),
        &[]
    )]
    #[case::a_reason_differs(
        json!({"conditions": [cond("Ready", "True", "AllServersReady", "")]}),
        json!({"conditions": [cond("Ready", "False", "QuorumLost", "")]}),
        &["status.conditions[Ready].status", "status.conditions[Ready].reason"]
    )]
    #[case::a_condition_missing(
        json!({"conditions": [cond("Settled", "True", "AllGroupsCurrent", "")]}),
        json!({"conditions": [cond("Ready", "True", "AllServersReady", "")]}),
        &["status.conditions[Settled]"]
    )]
    #[case::a_verdict_word_differs(
        json!({"config": {"appliedBy": "Reload"}}),
        json!({"config": {"appliedBy": "Restart"}}),
        &["status.config.appliedBy"]
    )]
    #[case::exact_keys(
        json!({"version": "2.15.1", "readyReplicas": 3, "servers": [{"name": "demo-0", "ready": true}]}),
        json!({"version": "2.15.0", "readyReplicas": 2, "servers": [{"name": "demo-1", "ready": false}]}),
        &["status.readyReplicas", "status.servers[0].ready", "status.version"]
    )]
    #[case::a_servers_count_is_exact_a_balancers_per_server_copies_are_not(
        json!({"replicas": 3, "servers": [{"name": "demo-0", "leaders": 14, "replicas": 40}]}),
        json!({"replicas": 2, "servers": [{"name": "demo-1", "leaders": 2, "replicas": 5}]}),
        &["status.replicas"]
    )]
    #[case::list_items_in_another_order(
        json!({"servers": [{"name": "demo-0", "ready": true, "version": "2.15.0"}, {"name": "demo-1", "ready": false, "version": "2.15.1"}]}),
        json!({"servers": [{"name": "demo-0", "ready": false, "version": "2.15.1"}, {"name": "demo-1", "ready": true, "version": "2.15.0"}]}),
        &[]
    )]
    #[case::a_field_absent(
        json!({"endpoints": {"client": "nats://demo.nats.svc:4222"}, "signingKeys": ["OAT5"]}),
        json!({"endpoints": {}}),
        &["status.endpoints.client", "status.signingKeys"]
    )]
    #[case::lists_by_length(
        json!({"rollout": {"updated": ["demo-2"], "pending": ["demo-0"]}}),
        json!({"rollout": {"updated": ["demo-1"], "pending": []}}),
        &["status.rollout.pending"]
    )]
    #[case::empties_may_be_left_out(
        json!({"rollout": {"pending": [], "gate": {}}, "server": {"replicas": [{"name": "demo-0", "lag": 0, "offline": false}]}}),
        json!({"rollout": {}, "server": {"replicas": [{"name": "demo-2"}]}}),
        &[]
    )]
    #[case::a_value_is_not_left_out(
        json!({"server": {"replicas": [{"name": "demo-0", "lag": 1, "current": true}]}}),
        json!({"server": {"replicas": [{"name": "demo-2"}]}}),
        &["status.server.replicas[0].current", "status.server.replicas[0].lag"]
    )]
    #[case::another_json_type(
        json!({"server": {"messages": 0}}),
        json!({"server": {"messages": "0"}}),
        &["status.server.messages"]
    )]
    fn a_status_conforms_by_shape_and_verdicts(
        #[case] want: Value,
        #[case] got: Value,
        #[case] at: &[&str],
    ) {
        let found: Vec<String> = conforms(&want, &got).into_iter().map(|m| m.path).collect();
        assert_eq!(found, at);
    }

    #[rstest]
    #[case("Created", true)]
    #[case("AllServersReady", true)]
    #[case("True", true)]
    #[case("TLS", false)]
    #[case("demo-0", false)]
    #[case("Full resolver", false)]
    #[case("2.15.0", false)]
    fn verdict_words(#[case] s: &str, #[case] want: bool) {
        assert_eq!(camel_word(s), want);
    }
}
