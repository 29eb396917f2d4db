//! Every condition reason the API declares is written by some production path: a reason module
//! (`nats::reason`, `auth::reason`, `jetstream::reason`, `cluster::reason`) lists a constant
//! only while the controllers' own code (`operators/*/src`, test modules and test files left
//! out) names it through that very module. A reason of one module does not count for another of
//! the same name (`nats::reason::SECRET_NOT_FOUND` is not `cluster::reason::SECRET_NOT_FOUND`),
//! and a name in a comment or a string does not count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rstest::rstest;

/// The declaring module of each reason module, and its file (the whole file for `cluster`,
/// the `pub mod reason { … }` block of the others).
const MODULES: &[(&str, &str)] = &[
    ("nats", "src/nats.rs"),
    ("auth", "src/auth.rs"),
    ("jetstream", "src/jetstream.rs"),
    ("cluster", "src/cluster/reason.rs"),
];

/// The crates whose code writes conditions.
const WRITERS: &[&str] = &["auth", "cluster", "jetstream", "kit", "wire"];

fn api_root() -> PathBuf {
    nats_api::crds::checkout().join("operators/api")
}

/// The text from `open` (an opening brace's index) through its matching close.
pub(crate) fn block(text: &str, open: usize) -> &str {
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open..=open + i];
                }
            }
            _ => {}
        }
    }
    &text[open..]
}

/// Comments and string literals blanked out, so only code is read.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                out.push(' ');
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '"' && !escaped {
                        break;
                    }
                    escaped = c == '\\' && !escaped;
                }
                out.push(' ');
            }
            c => out.push(c),
        }
    }
    out
}

/// The code with every `#[cfg(test)]` item (a test module, inline or declared) removed.
pub(crate) fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let end = match (after.find('{'), after.find(';')) {
            (Some(b), Some(s)) if s < b => s + 1,
            (Some(b), _) => b + block(after, b).len(),
            (None, Some(s)) => s + 1,
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The constants `pub const NAME: &str = "…"` of `text`.
fn constants(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| l.split_once(": &str"))
        .map(|(name, _)| name.trim().to_string())
        .collect()
}

/// Each reason module's declared constants.
fn declared() -> BTreeMap<&'static str, Vec<String>> {
    MODULES
        .iter()
        .map(|(module, file)| {
            let text = std::fs::read_to_string(api_root().join(file)).expect("an API source");
            let body = match text.find("pub mod reason {") {
                Some(at) => {
                    let open = at + text[at..].find('{').expect("a brace");
                    block(&text, open).to_string()
                }
                None => text,
            };
            (*module, constants(&body))
        })
        .collect()
}

/// The `(module, constant)` pairs a production source names: through an alias of a reason
/// module it imports (`use nats_api::M::reason;`, `use nats_api::M::{…, reason as r}`), a
/// full path (`nats_api::M::reason::NAME`), or constants imported from one
/// (`use nats_api::M::reason::{A, B}`) and then used.
fn referenced(source: &str) -> BTreeSet<(String, String)> {
    let code = without_tests(&code_only(source));
    let flat: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut aliases: BTreeMap<String, String> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut uses_rest = flat.as_str();
    while let Some(at) = uses_rest.find("nats_api::") {
        let tail = &uses_rest[at + "nats_api::".len()..];
        let module: String = tail
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = &tail[module.len()..];
        let Some(after) = after.strip_prefix("::") else {
            uses_rest = tail;
            continue;
        };
        if let Some(group) = after.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',').map(str::trim) {
                let mut words = item.split(' ');
                if words.next() == Some("reason") {
                    let alias = match (words.next(), words.next()) {
                        (Some("as"), Some(a)) => a.to_string(),
                        _ => "reason".to_string(),
                    };
                    aliases.insert(alias, module.clone());
                }
            }
        } else if let Some(r) = after.strip_prefix("reason") {
            if let Some(r) = r.strip_prefix("::") {
                if let Some(group) = r.strip_prefix('{') {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    for name in group.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                        let used = code.matches(name).count() > 1;
                        if used {
                            out.insert((module.clone(), name.to_string()));
                        }
                    }
                } else {
                    let name: String = r
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    out.insert((module.clone(), name));
                }
            } else if let Some(r) = r.strip_prefix(" as ") {
                let alias: String = r
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                aliases.insert(alias, module.clone());
            } else if r.starts_with(';') || r.starts_with(' ') {
                aliases.insert("reason".into(), module.clone());
            }
        }
        uses_rest = tail;
    }
    for (alias, module) in &aliases {
        let needle = format!("{alias}::");
        let mut rest = code.as_str();
        while let Some(at) = rest.find(&needle) {
            let before_ok = rest[..at]
                .chars()
                .last()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
            let tail = &rest[at + needle.len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if before_ok && !name.is_empty() {
                out.insert((module.clone(), name));
            }
            rest = tail;
        }
    }
    out
}

/// Every production source of the writing crates: their `src` trees, test files left out.
fn production_sources() -> Vec<PathBuf> {
    let operators = api_root().join("..");
    WRITERS
        .iter()
        .flat_map(|c| walkdir::WalkDir::new(operators.join(c).join("src")))
        .filter_map(Result::ok)
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| !is_test_file(p))
        .collect()
}

fn is_test_file(p: &Path) -> bool {
    p.components().any(|c| c.as_os_str() == "tests")
        || p.file_name().is_some_and(|n| n == "tests.rs")
}

#[rstest]
#[case::an_imported_module(
    "use nats_api::nats::reason;\nfn f() { w(reason::CONNECTED) }",
    &[("nats", "CONNECTED")]
)]
#[case::a_module_in_a_group_renamed(
    "use nats_api::jetstream::{condition, reason as js};\nfn f() { w(js::MOVING) }",
    &[("jetstream", "MOVING")]
)]
#[case::a_full_path("fn f() { w(nats_api::cluster::reason::CREATING) }", &[("cluster", "CREATING")])]
#[case::constants_imported_and_used(
    "use nats_api::auth::reason::{KICKING, SIGNED};\nfn f() { w(KICKING) }",
    &[("auth", "KICKING")]
)]
#[case::only_in_a_test_module(
    "use nats_api::nats::reason;\nfn f() {}\n#[cfg(test)]\nmod tests { fn t() { w(reason::CONNECTED) } }",
    &[]
)]
#[case::only_in_a_comment_or_a_string(
    "use nats_api::nats::reason;\n// reason::CONNECTED\nfn f() { w(\"reason::CONNECTED\") }",
    &[]
)]
#[case::same_name_of_another_module_does_not_count(
    "use nats_api::cluster::reason;\nfn f() { w(reason::SECRET_NOT_FOUND) }",
    &[("cluster", "SECRET_NOT_FOUND")]
)]
fn a_reference_is_read_through_the_module_it_names(
    #[case] source: &str,
    #[case] want: &[(&str, &str)],
) {
    let got = referenced(source);
    let want: BTreeSet<(String, String)> = want
        .iter()
        .map(|(m, n)| (m.to_string(), n.to_string()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn every_declared_reason_is_written_by_production_code() {
    let declared = declared();
    assert!(
        declared.values().all(|c| c.len() > 3),
        "each reason module parsed: {declared:?}"
    );
    let sources = production_sources();
    assert!(sources.len() > 50, "the writers' sources were found");
    let mut written = BTreeSet::new();
    for p in &sources {
        let text = std::fs::read_to_string(p).expect("a source");
        written.extend(referenced(&text));
    }
    let never: Vec<String> = declared
        .iter()
        .flat_map(|(m, names)| {
            names
                .iter()
                .filter(|n| !written.contains(&(m.to_string(), n.to_string())))
                .map(move |n| format!("{m}::reason::{n}"))
        })
        .collect();
    assert!(
        never.is_empty(),
        "declared but written by no production path (write it, or remove it): {never:?}"
    );
}
