//! docs/controllers.md lists every series the binaries export: each metric name a production
//! source of the controllers spells (`"nats_operator_…"`, the process figures `"process_…"`)
//! appears in the doc, in backquotes, so the doc cannot drift from what `/metrics` serves.

use std::collections::BTreeSet;

use rstest::rstest;

use crate::reasons::without_tests;

/// The crates whose binaries serve `/metrics`, and the kit they share.
const SERVERS: &[&str] = &["api", "auth", "cluster", "jetstream", "kit"];

/// The metric names spelled as string literals in `source`, comments and test modules left out.
fn metric_names(source: &str) -> BTreeSet<String> {
    let code: String = source
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let code = without_tests(&code);
    let mut out = BTreeSet::new();
    for prefix in ["\"nats_operator_", "\"process_"] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(prefix) {
            let tail = &rest[at + 1..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if tail[name.len()..].starts_with('"') {
                out.insert(name);
            }
            rest = tail;
        }
    }
    out
}

#[rstest]
#[case::a_constant("pub const M: &str = \"nats_operator_leader\";", &["nats_operator_leader"])]
#[case::a_process_figure("set(\"process_open_fds\", 3)", &["process_open_fds"])]
#[case::a_prefix_built_on_is_not_a_name("format!(\"nats_operator_{x}\")", &[])]
#[case::in_a_comment("// \"nats_operator_gone\"", &[])]
#[case::in_a_test_module("#[cfg(test)]\nmod tests { const M: &str = \"nats_operator_x\"; }", &[])]
fn a_metric_name_is_a_whole_literal_in_code(#[case] source: &str, #[case] want: &[&str]) {
    let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
    assert_eq!(metric_names(source), want);
}

#[test]
fn controllers_md_lists_every_series_the_binaries_export() {
    let root = nats_api::crds::checkout();
    let mut names = BTreeSet::new();
    for c in SERVERS {
        for e in walkdir::WalkDir::new(root.join("operators").join(c).join("src"))
            .into_iter()
            .filter_map(Result::ok)
        {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "rs")
                && !p.components().any(|c| c.as_os_str() == "tests")
            {
                let text = std::fs::read_to_string(p).expect("a source");
                names.extend(metric_names(&text));
            }
        }
    }
    assert!(names.len() > 15, "the metric names were found: {names:?}");
    let doc = std::fs::read_to_string(root.join("docs/controllers.md")).expect("controllers.md");
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !doc.contains(&format!("`{n}`")) && !doc.contains(&format!("`{n}{{")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/controllers.md does not list: {missing:?}"
    );
}
