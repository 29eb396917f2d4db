//! A NatsBalancer's pools (design §6.5): a pool selects NatsStream, NatsKeyValue and
//! NatsObjectStore resources of the balancer's namespace by label; a stream belongs to the pool
//! of its resource (the resource whose UID its ownership marker names), the first pool matching
//! that resource; a resource matched by several pools is reported ([`Overlap`]); streams in no
//! pool, and streams with no resource, form the default pool. Each pool is judged on its own
//! ([`pool_skew`], and [`crate::balance::next_move`] with the pool as its scope's `only`).
//!
//! Selectors follow Kubernetes' LabelSelector: `matchLabels` and `matchExpressions` (In, NotIn,
//! Exists, DoesNotExist) all hold; an empty selector matches every resource. One the apiserver
//! let through but Kubernetes would refuse ([`check_pools`]) is a [`SelectorError`] naming the
//! field.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use nats_api::jetstream::DEFAULT_POOL;

use crate::system_view::SystemView;

/// A stream: (account, name).
pub type StreamKey = (String, String);

/// A NatsStream, NatsKeyValue or NatsObjectStore of the balancer's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labeled {
    /// NatsStream, NatsKeyValue or NatsObjectStore.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID (what the ownership marker of its stream names).
    pub uid: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

impl Labeled {
    fn describe(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// A stream of the account as the balancer sees it: its key and the UID its ownership marker
/// names, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Owned {
    /// (account, stream).
    pub key: StreamKey,
    /// The ownership marker's UID.
    pub owner: Option<String>,
}

/// A pool of the spec: its name and selector.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolDef {
    /// The pool's name.
    pub name: String,
    /// Its selector.
    pub selector: LabelSelector,
}

/// A selector Kubernetes would refuse: the field of `spec.pools[index].selector` and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("spec.pools[{index}].selector{field}: {why}")]
pub struct SelectorError {
    /// The pool's index in `spec.pools`.
    pub index: usize,
    /// The field under the selector (`.matchExpressions[0].operator`), empty for the selector.
    pub field: String,
    /// What is wrong with it.
    pub why: String,
}

/// A resource matched by more than one pool: it belongs to the first of `pools`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// `Kind namespace/name`.
    pub resource: String,
    /// The pools matching it, in spec order.
    pub pools: Vec<String>,
}

/// The streams of each pool: the named pools in spec order, then the default pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    /// (pool name, its streams).
    pub pools: Vec<(String, BTreeSet<StreamKey>)>,
    /// Resources owning a stream of the account and matched by more than one pool.
    pub overlapping: Vec<Overlap>,
}

/// Whether `s` is a DNS-1123 label-like name part: at most 63 characters, alphanumeric at both
/// ends, `-`, `_` and `.` inside (a label key's name, a label value).
fn label_name(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    s.len() <= 63
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

/// Why `key` is not a label key (`[prefix/]name`), if it is not.
fn key_error(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    (!prefix_ok || !label_name(name)).then(|| {
        format!(
            "{key:?} is not a label key ([prefix/]name, the name at most 63 characters, \
             alphanumeric at both ends)"
        )
    })
}

/// Why `value` is not a label value, if it is not.
fn value_error(value: &str) -> Option<String> {
    (!value.is_empty() && !label_name(value)).then(|| {
        format!("{value:?} is not a label value (at most 63 characters, alphanumeric at both ends)")
    })
}

fn requirement_error(r: &LabelSelectorRequirement) -> Option<(String, String)> {
    if let Some(why) = key_error(&r.key) {
        return Some((".key".into(), why));
    }
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => Some((
            ".values".into(),
            format!("operator {} needs at least one value", r.operator),
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => Some((
            ".values".into(),
            format!("operator {} takes no values", r.operator),
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => values
            .iter()
            .enumerate()
            .find_map(|(i, v)| value_error(v).map(|why| (format!(".values[{i}]"), why))),
        other => Some((
            ".operator".into(),
            format!("{other:?} is not In, NotIn, Exists or DoesNotExist"),
        )),
    }
}

/// Why the selector of pool `index` is invalid, if it is.
pub fn check_selector(index: usize, selector: &LabelSelector) -> Result<(), SelectorError> {
    let error = |field: String, why: String| SelectorError { index, field, why };
    for (k, v) in selector.match_labels.iter().flatten() {
        if let Some(why) = key_error(k).or_else(|| value_error(v)) {
            return Err(error(format!(".matchLabels[{k:?}]"), why));
        }
    }
    for (i, r) in selector.match_expressions.iter().flatten().enumerate() {
        if let Some((field, why)) = requirement_error(r) {
            return Err(error(format!(".matchExpressions[{i}]{field}"), why));
        }
    }
    Ok(())
}

/// The first invalid selector of `pools`, if any.
pub fn check_pools(pools: &[PoolDef]) -> Result<(), SelectorError> {
    pools
        .iter()
        .enumerate()
        .try_for_each(|(i, p)| check_selector(i, &p.selector))
}

/// Whether a (checked) selector matches `labels`.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|r| {
        let values = r.values.as_deref().unwrap_or_default();
        let has = labels.get(&r.key);
        match r.operator.as_str() {
            "In" => has.is_some_and(|v| values.contains(v)),
            "NotIn" => has.is_none_or(|v| !values.contains(v)),
            "Exists" => has.is_some(),
            "DoesNotExist" => has.is_none(),
            _ => false,
        }
    });
    by_labels && by_expressions
}

/// Each stream of `streams` in its pool (see the module doc): the first pool matching the
/// resource its ownership marker names, else the default pool; the resources owning one of
/// `streams` that several pools match.
pub fn assign(pools: &[PoolDef], resources: &[Labeled], streams: &[Owned]) -> Assignment {
    let mut by_uid: BTreeMap<&str, (&Labeled, Vec<usize>)> = BTreeMap::new();
    for r in resources.iter().filter(|r| !r.uid.is_empty()) {
        let matching: Vec<usize> = pools
            .iter()
            .enumerate()
            .filter(|(_, p)| matches(&p.selector, &r.labels))
            .map(|(i, _)| i)
            .collect();
        by_uid.insert(r.uid.as_str(), (r, matching));
    }
    let mut out: Vec<(String, BTreeSet<StreamKey>)> = pools
        .iter()
        .map(|p| (p.name.clone(), BTreeSet::new()))
        .chain(std::iter::once((DEFAULT_POOL.to_string(), BTreeSet::new())))
        .collect();
    let default = pools.len();
    let mut overlapping: BTreeMap<String, Overlap> = BTreeMap::new();
    for s in streams {
        let owner = s.owner.as_deref().and_then(|o| by_uid.get(o));
        let pool = owner
            .and_then(|(_, m)| m.first().copied())
            .unwrap_or(default);
        out[pool].1.insert(s.key.clone());
        if let Some((r, m)) = owner.filter(|(_, m)| m.len() > 1) {
            overlapping.entry(r.describe()).or_insert_with(|| Overlap {
                resource: r.describe(),
                pools: m.iter().map(|i| pools[*i].name.clone()).collect(),
            });
        }
    }
    Assignment {
        pools: out,
        overlapping: overlapping.into_values().collect(),
    }
}

/// The Overlapping condition's message, `None` when no resource overlaps.
pub fn overlap_message(overlapping: &[Overlap]) -> Option<String> {
    let parts: Vec<String> = overlapping
        .iter()
        .map(|o| {
            format!(
                "{} matches pools {}; it belongs to {}",
                o.resource,
                o.pools.join(", "),
                o.pools.first().map(String::as_str).unwrap_or_default()
            )
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The leader skew of a pool in `cluster`: loads counted over its streams alone, across every
/// server of the view.
pub fn pool_skew(view: &SystemView, cluster: &str, streams: &BTreeSet<StreamKey>) -> u32 {
    pool_skews(view, cluster, streams).leaders
}

/// The leader and replica skew of a pool in `cluster` ([`super::judged_skew`] over its streams
/// and their consumers alone, across every server of the view).
pub fn pool_skews(
    view: &SystemView,
    cluster: &str,
    streams: &BTreeSet<StreamKey>,
) -> nats_api::jetstream::Skew {
    let pool = SystemView {
        groups: view
            .groups
            .iter()
            .filter(|g| streams.contains(&(g.account.clone(), g.stream.clone())))
            .cloned()
            .collect(),
        ..view.clone()
    };
    super::judged_skew(&pool, cluster)
}

#[cfg(test)]
mod tests;
