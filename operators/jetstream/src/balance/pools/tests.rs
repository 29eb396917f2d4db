//! Pools, row by row against §6.5: "A pool selects NatsStream, NatsKeyValue and NatsObjectStore
//! resources by label; a stream matching several pools belongs to the first and status reports
//! Overlapping; streams in no pool, and streams with no resource, form the default pool."

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

use super::*;
use crate::system_view::{GroupSeen, ServerSeen};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn by_labels(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels(pairs)),
        ..Default::default()
    }
}

fn expr(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

fn by_exprs(exprs: Vec<LabelSelectorRequirement>) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(exprs),
        ..Default::default()
    }
}

fn pool(name: &str, selector: LabelSelector) -> PoolDef {
    PoolDef {
        name: name.into(),
        selector,
    }
}

fn resource(kind: &str, name: &str, l: &[(&str, &str)]) -> Labeled {
    Labeled {
        kind: kind.into(),
        namespace: "orders".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        labels: labels(l),
    }
}

fn stream(name: &str, owner: Option<&str>) -> Owned {
    Owned {
        key: ("APP".into(), name.into()),
        owner: owner.map(|o| format!("uid-{o}")),
    }
}

fn names(a: &Assignment) -> Vec<(String, Vec<String>)> {
    a.pools
        .iter()
        .map(|(p, s)| (p.clone(), s.iter().map(|k| k.1.clone()).collect()))
        .collect()
}

fn row(pool: &str, streams: &[&str]) -> (String, Vec<String>) {
    (
        pool.to_string(),
        streams.iter().map(|s| s.to_string()).collect(),
    )
}

#[test]
fn selectors_match_as_kubernetes_label_selectors_do() {
    let l = labels(&[("tier", "hot"), ("team", "orders")]);
    for (selector, matched) in [
        (LabelSelector::default(), true),
        (by_labels(&[("tier", "hot")]), true),
        (by_labels(&[("tier", "hot"), ("team", "orders")]), true),
        (by_labels(&[("tier", "cold")]), false),
        (by_labels(&[("zone", "a")]), false),
        (by_exprs(vec![expr("tier", "In", &["hot", "warm"])]), true),
        (by_exprs(vec![expr("tier", "In", &["cold"])]), false),
        (by_exprs(vec![expr("tier", "NotIn", &["cold"])]), true),
        (by_exprs(vec![expr("tier", "NotIn", &["hot"])]), false),
        (by_exprs(vec![expr("zone", "NotIn", &["a"])]), true),
        (by_exprs(vec![expr("tier", "Exists", &[])]), true),
        (by_exprs(vec![expr("zone", "Exists", &[])]), false),
        (by_exprs(vec![expr("zone", "DoesNotExist", &[])]), true),
        (by_exprs(vec![expr("tier", "DoesNotExist", &[])]), false),
        (
            LabelSelector {
                match_labels: Some(labels(&[("team", "orders")])),
                match_expressions: Some(vec![expr("tier", "In", &["cold"])]),
            },
            false,
        ),
    ] {
        assert_eq!(matches(&selector, &l), matched, "{selector:?}");
    }
}

#[test]
fn an_invalid_selector_names_its_field_and_the_reason() {
    for (selector, message) in [
        (by_labels(&[("tier", "hot")]), None),
        (by_labels(&[("example.com/tier", "")]), None),
        (
            by_exprs(vec![expr("tier", "Near", &["hot"])]),
            Some(
                "spec.pools[1].selector.matchExpressions[0].operator: \"Near\" is not In, NotIn, \
                 Exists or DoesNotExist",
            ),
        ),
        (
            by_exprs(vec![expr("tier", "Exists", &[]), expr("tier", "In", &[])]),
            Some(
                "spec.pools[1].selector.matchExpressions[1].values: operator In needs at least \
                 one value",
            ),
        ),
        (
            by_exprs(vec![expr("tier", "DoesNotExist", &["hot"])]),
            Some(
                "spec.pools[1].selector.matchExpressions[0].values: operator DoesNotExist takes \
                 no values",
            ),
        ),
        (
            by_exprs(vec![expr("-tier", "Exists", &[])]),
            Some(
                "spec.pools[1].selector.matchExpressions[0].key: \"-tier\" is not a label key \
                 ([prefix/]name, the name at most 63 characters, alphanumeric at both ends)",
            ),
        ),
        (
            by_labels(&[("tier", "hot!")]),
            Some(
                "spec.pools[1].selector.matchLabels[\"tier\"]: \"hot!\" is not a label value (at \
                 most 63 characters, alphanumeric at both ends)",
            ),
        ),
        (
            by_exprs(vec![expr("tier", "In", &["ok", "not ok"])]),
            Some(
                "spec.pools[1].selector.matchExpressions[0].values[1]: \"not ok\" is not a label \
                 value (at most 63 characters, alphanumeric at both ends)",
            ),
        ),
        (
            by_labels(&[("Bad_Prefix/tier", "hot")]),
            Some(
                "spec.pools[1].selector.matchLabels[\"Bad_Prefix/tier\"]: \"Bad_Prefix/tier\" is \
                 not a label key ([prefix/]name, the name at most 63 characters, alphanumeric at \
                 both ends)",
            ),
        ),
    ] {
        let pools = [pool("fine", by_labels(&[("a", "b")])), pool("p", selector)];
        let got = check_pools(&pools).err().map(|e| e.to_string());
        assert_eq!(got.as_deref(), message);
    }
}

#[test]
fn a_stream_belongs_to_the_first_pool_matching_its_resource() {
    let pools = [
        pool("hot", by_labels(&[("tier", "hot")])),
        pool("orders", by_labels(&[("team", "orders")])),
    ];
    let resources = [
        resource("NatsStream", "eu", &[("tier", "hot")]),
        resource("NatsKeyValue", "config", &[("team", "orders")]),
        resource("NatsStream", "both", &[("tier", "hot"), ("team", "orders")]),
        resource("NatsObjectStore", "files", &[("team", "billing")]),
    ];
    let streams = [
        stream("EU", Some("eu")),
        stream("KV_config", Some("config")),
        stream("BOTH", Some("both")),
        stream("OBJ_files", Some("files")),
        // No resource at all, and a marker naming a resource that is gone.
        stream("HANDMADE", None),
        stream("ORPHAN", Some("deleted")),
    ];
    let a = assign(&pools, &resources, &streams);
    assert_eq!(
        names(&a),
        vec![
            row("hot", &["BOTH", "EU"]),
            row("orders", &["KV_config"]),
            row("default", &["HANDMADE", "OBJ_files", "ORPHAN"]),
        ]
    );
    assert_eq!(
        a.overlapping,
        vec![Overlap {
            resource: "NatsStream orders/both".into(),
            pools: vec!["hot".into(), "orders".into()],
        }]
    );
    assert_eq!(
        overlap_message(&a.overlapping).as_deref(),
        Some("NatsStream orders/both matches pools hot, orders; it belongs to hot")
    );
}

#[test]
fn pool_assignment_row_by_row() {
    let hot = || pool("hot", by_labels(&[("tier", "hot")]));
    let any = || pool("any", LabelSelector::default());
    let hot_r = resource("NatsStream", "s", &[("tier", "hot")]);
    let cold_r = resource("NatsStream", "s", &[("tier", "cold")]);
    for (what, pools, resources, overlaps, pool_of_s) in [
        (
            "no pools: all in default",
            vec![],
            vec![hot_r.clone()],
            0,
            "default",
        ),
        ("matched by one", vec![hot()], vec![hot_r.clone()], 0, "hot"),
        (
            "matched by none",
            vec![hot()],
            vec![cold_r.clone()],
            0,
            "default",
        ),
        ("no resource", vec![hot()], vec![], 0, "default"),
        (
            "matched by two: the first, Overlapping",
            vec![hot(), any()],
            vec![hot_r.clone()],
            1,
            "hot",
        ),
        (
            "the order of the spec decides",
            vec![any(), hot()],
            vec![hot_r.clone()],
            1,
            "any",
        ),
        (
            "an empty selector takes every resource",
            vec![hot(), any()],
            vec![cold_r.clone()],
            0,
            "any",
        ),
    ] {
        let a = assign(&pools, &resources, &[stream("S", Some("s"))]);
        assert_eq!(a.overlapping.len(), overlaps, "{what}");
        let found = a
            .pools
            .iter()
            .find(|(_, s)| !s.is_empty())
            .map(|(p, _)| p.as_str());
        assert_eq!(found, Some(pool_of_s), "{what}");
        assert_eq!(
            a.pools.last().map(|(p, _)| p.as_str()),
            Some("default"),
            "{what}: the default pool is always last"
        );
    }
}

#[test]
fn overlapping_names_only_resources_owning_a_stream_of_the_account() {
    let pools = [
        pool("a", LabelSelector::default()),
        pool("b", LabelSelector::default()),
    ];
    let resources = [resource("NatsStream", "elsewhere", &[])];
    let a = assign(&pools, &resources, &[stream("MINE", None)]);
    assert!(a.overlapping.is_empty(), "{a:?}");
    assert_eq!(overlap_message(&a.overlapping), None);
}

#[test]
fn each_pool_is_judged_on_its_own() {
    let group = |stream: &str, members: &[&str]| GroupSeen {
        account: "APP".into(),
        stream: stream.into(),
        cluster: "c1".into(),
        leader: members[0].into(),
        peers: members[1..].iter().map(|m| m.to_string()).collect(),
        replicas: members.len(),
        ..Default::default()
    };
    let view = SystemView {
        servers: ["a", "b", "c"]
            .iter()
            .map(|n| ServerSeen {
                name: n.to_string(),
                cluster: "c1".into(),
                tags: Vec::new(),
            })
            .collect(),
        groups: vec![
            group("H1", &["a", "b", "c"]),
            group("H2", &["a", "b", "c"]),
            group("D1", &["b", "a", "c"]),
            group("D2", &["c", "a", "b"]),
        ],
        ..Default::default()
    };
    let set = |s: &[&str]| -> BTreeSet<StreamKey> {
        s.iter()
            .map(|s| ("APP".to_string(), s.to_string()))
            .collect()
    };
    // Over all four: a 2, b 1, c 1 → skew 1; the hot pool alone: a 2, b 0, c 0 → 2.
    assert_eq!(pool_skew(&view, "c1", &set(&["H1", "H2", "D1", "D2"])), 1);
    assert_eq!(pool_skew(&view, "c1", &set(&["H1", "H2"])), 2);
    assert_eq!(pool_skew(&view, "c1", &set(&["D1", "D2"])), 1);
    assert_eq!(pool_skew(&view, "c1", &set(&[])), 0);
    assert_eq!(
        pool_skew(&view, "c2", &set(&["H1", "H2"])),
        0,
        "another cluster"
    );
}
