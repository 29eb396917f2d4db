//! A small writer for nats-server's configuration format.
//!
//! The format is a superset of JSON with `key: value` pairs, `{}` blocks and `[]` arrays. The
//! writer quotes every string as a JSON string, which the server's parser accepts everywhere, so
//! no value from a spec can change the structure of the file around it.

use std::fmt::Write as _;

/// A value in a nats.conf.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A quoted string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// An array of values.
    List(Vec<Value>),
    /// A block of keyed values.
    Block(Block),
}

/// An ordered block of `key: value` entries; order is kept so a render is byte-stable.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Block {
    entries: Vec<(String, Value)>,
}

impl Block {
    /// An empty block.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `key: value`.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.entries.push((key.to_string(), value.into()));
        self
    }

    /// Appends `key: value` when the value is present.
    pub fn set_opt<V: Into<Value>>(&mut self, key: &str, value: Option<V>) -> &mut Self {
        if let Some(v) = value {
            self.set(key, v);
        }
        self
    }

    /// The value under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The entries in order.
    pub fn entries(&self) -> &[(String, Value)] {
        &self.entries
    }

    /// Renders the block as the top level of a nats.conf.
    pub fn to_conf(&self) -> String {
        let mut out = String::new();
        for (k, v) in &self.entries {
            write_entry(&mut out, 0, k, v);
        }
        out
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}
impl From<&String> for Value {
    fn from(s: &String) -> Self {
        Value::Str(s.clone())
    }
}
impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Int(n)
    }
}
impl From<u16> for Value {
    fn from(n: u16) -> Self {
        Value::Int(i64::from(n))
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<Block> for Value {
    fn from(b: Block) -> Self {
        Value::Block(b)
    }
}
impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Self {
        Value::List(v)
    }
}
impl From<Vec<String>> for Value {
    fn from(v: Vec<String>) -> Self {
        Value::List(v.into_iter().map(Value::Str).collect())
    }
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// Keys are emitted bare when they are plain identifiers and quoted otherwise (account public
/// keys under resolver_preload are plain; a key from a spec is quoted to stay inert).
fn write_key(out: &mut String, key: &str) {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        out.push_str(key);
    } else {
        write_str(out, key);
    }
}

fn write_str(out: &mut String, s: &str) {
    // serde_json's escaping is exactly the JSON string grammar the server's lexer reads.
    let quoted = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string());
    out.push_str(&quoted);
}

fn write_entry(out: &mut String, depth: usize, key: &str, value: &Value) {
    indent(out, depth);
    write_key(out, key);
    match value {
        Value::Block(b) => {
            out.push_str(" {\n");
            for (k, v) in &b.entries {
                write_entry(out, depth + 1, k, v);
            }
            indent(out, depth);
            out.push_str("}\n");
        }
        other => {
            out.push_str(": ");
            write_value(out, depth, other);
            out.push('\n');
        }
    }
}

fn write_value(out: &mut String, depth: usize, value: &Value) {
    match value {
        Value::Str(s) => write_str(out, s),
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::List(items) => {
            if items.iter().all(|v| !matches!(v, Value::Block(_))) {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_value(out, depth, v);
                }
                out.push(']');
            } else {
                out.push_str("[\n");
                for v in items {
                    indent(out, depth + 1);
                    write_value(out, depth + 1, v);
                    out.push('\n');
                }
                indent(out, depth);
                out.push(']');
            }
        }
        Value::Block(b) => {
            out.push_str("{\n");
            for (k, v) in &b.entries {
                write_entry(out, depth + 1, k, v);
            }
            indent(out, depth);
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_so_a_spec_value_cannot_break_out() {
        let mut b = Block::new();
        b.set("server_name", "a\" }\ninclude \"/etc/passwd");
        assert_eq!(
            b.to_conf(),
            "server_name: \"a\\\" }\\ninclude \\\"/etc/passwd\"\n"
        );
    }

    #[test]
    fn nested_blocks_and_lists_render_stably() {
        let mut tls = Block::new();
        tls.set("cert_file", "/c").set("verify", true);
        let mut cluster = Block::new();
        cluster
            .set("name", "demo")
            .set("routes", vec!["nats://a:6222".to_string()])
            .set("tls", tls);
        let mut top = Block::new();
        top.set("port", 4222i64).set("cluster", cluster);
        assert_eq!(
            top.to_conf(),
            "port: 4222\ncluster {\n  name: \"demo\"\n  routes: [\"nats://a:6222\"]\n  tls {\n    cert_file: \"/c\"\n    verify: true\n  }\n}\n"
        );
    }

    #[test]
    fn lists_of_blocks_go_one_per_line() {
        let mut g = Block::new();
        g.set("name", "west");
        let mut top = Block::new();
        top.set("gateways", Value::List(vec![Value::Block(g)]));
        assert_eq!(
            top.to_conf(),
            "gateways: [\n  {\n    name: \"west\"\n  }\n]\n"
        );
    }

    #[test]
    fn odd_keys_are_quoted() {
        let mut b = Block::new();
        b.set("has space", 1i64);
        assert_eq!(b.to_conf(), "\"has space\": 1\n");
    }
}
