//! The condition gauge's series (`nats_operator_condition{kind,namespace,name,type,reason}`), one
//! set per object, kept small: a controller holds one for every object it owns, 10,000 of them at
//! the scale the bench measures (docs/performance.md).
//!
//! Kept as an object's name under its kind and namespace (each of those written once), and its
//! conditions as a boxed slice of (type, reason, value) whose types and reasons are shared words:
//! a type or reason is one of the design's few (API.md), so 10,000 objects share a dozen
//! strings. A map per object of `(type, reason)` pairs as owned strings took about 750 bytes an
//! object; this about 170 (an object's name, its map slot and two conditions).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// One condition of one object: its type, its reason, 1 when True.
pub type Series = (Arc<str>, Arc<str>, u8);

/// The series of each object of one namespace, by name.
type Names = BTreeMap<Box<str>, Box<[Series]>>;

/// Every object's condition series, by kind, namespace and name.
#[derive(Debug, Default)]
pub struct ConditionSeries {
    objects: BTreeMap<String, BTreeMap<String, Names>>,
    /// The types and reasons in use, each held once.
    words: BTreeSet<Arc<str>>,
}

impl ConditionSeries {
    /// Replaces the series of `kind` `namespace/name` with `conditions`' (sorted by type, then
    /// reason, as they are rendered).
    pub fn set(&mut self, kind: &str, namespace: &str, name: &str, conditions: &[Condition]) {
        let mut series: Vec<Series> = conditions
            .iter()
            .map(|c| {
                (
                    self.word(&c.type_),
                    self.word(&c.reason),
                    u8::from(c.status == "True"),
                )
            })
            .collect();
        series.sort();
        series.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
        let names = self
            .objects
            .entry(kind.to_string())
            .or_default()
            .entry(namespace.to_string())
            .or_default();
        let series = series.into_boxed_slice();
        match names.get_mut(name) {
            Some(slot) => {
                let old = std::mem::replace(slot, series);
                self.release(&old);
            }
            None => {
                names.insert(name.into(), series);
            }
        }
    }

    /// Drops every series of `kind` `namespace/name` (it was deleted).
    pub fn forget(&mut self, kind: &str, namespace: &str, name: &str) {
        let Some(namespaces) = self.objects.get_mut(kind) else {
            return;
        };
        let Some(names) = namespaces.get_mut(namespace) else {
            return;
        };
        let old = names.remove(name);
        if names.is_empty() {
            namespaces.remove(namespace);
        }
        if namespaces.is_empty() {
            self.objects.remove(kind);
        }
        if let Some(old) = old {
            self.release(&old);
        }
    }

    /// Every series as (kind, namespace, name, type, reason, value), in order.
    pub fn each(&self) -> impl Iterator<Item = (&str, &str, &str, &str, &str, u8)> {
        self.objects.iter().flat_map(|(kind, namespaces)| {
            namespaces.iter().flat_map(move |(ns, names)| {
                names.iter().flat_map(move |(name, series)| {
                    series
                        .iter()
                        .map(move |(t, r, v)| (kind.as_str(), ns.as_str(), &**name, &**t, &**r, *v))
                })
            })
        })
    }

    /// The shared copy of `word`.
    fn word(&mut self, word: &str) -> Arc<str> {
        if let Some(w) = self.words.get(word) {
            return w.clone();
        }
        let w: Arc<str> = Arc::from(word);
        self.words.insert(w.clone());
        w
    }

    /// Lets go of the words of `old`, a series no longer kept: those nobody else uses go.
    fn release(&mut self, old: &[Series]) {
        for (t, r, _) in old {
            for w in [t, r] {
                // Two holders left: `words` and `old`.
                if Arc::strong_count(w) <= 2 {
                    self.words.remove(&**w);
                }
            }
        }
    }

    /// How many distinct types and reasons are held (for the tests).
    #[cfg(test)]
    fn words(&self) -> usize {
        self.words.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::cond;
    use super::*;

    fn rendered(s: &ConditionSeries) -> Vec<String> {
        s.each()
            .map(|(k, ns, n, t, r, v)| format!("{k} {ns}/{n} {t} {r} {v}"))
            .collect()
    }

    #[test]
    fn series_come_out_by_kind_namespace_name_type_and_reason() {
        let mut s = ConditionSeries::default();
        // Given out of order: they come out sorted.
        let x = [
            cond("Synced", "False", "DriftCorrected"),
            cond("Ready", "True", "MatchesSpec"),
        ];
        s.set("NatsStream", "b", "x", &x);
        s.set("NatsStream", "a", "y", &[cond("Ready", "False", "Pending")]);
        s.set("NatsConsumer", "b", "z", &[cond("Ready", "True", "Ok")]);
        assert_eq!(
            rendered(&s),
            [
                "NatsConsumer b/z Ready Ok 1",
                "NatsStream a/y Ready Pending 0",
                "NatsStream b/x Ready MatchesSpec 1",
                "NatsStream b/x Synced DriftCorrected 0",
            ]
        );
    }

    #[test]
    fn a_new_set_replaces_the_old_and_its_unused_words_go() {
        let mut s = ConditionSeries::default();
        s.set("K", "n", "a", &[cond("Synced", "False", "DriftCorrected")]);
        s.set("K", "n", "b", &[cond("Synced", "False", "DriftCorrected")]);
        s.set("K", "n", "a", &[cond("Synced", "True", "MatchesSpec")]);
        // "DriftCorrected" is still b's.
        assert_eq!(s.words(), 3);
        s.set("K", "n", "b", &[cond("Synced", "True", "MatchesSpec")]);
        assert_eq!(s.words(), 2);
        assert_eq!(
            rendered(&s),
            ["K n/a Synced MatchesSpec 1", "K n/b Synced MatchesSpec 1"]
        );
    }

    #[test]
    fn forget_drops_the_object_its_empty_maps_and_its_words() {
        let mut s = ConditionSeries::default();
        s.set("K", "n", "a", &[cond("Ready", "True", "Ok")]);
        s.forget("K", "n", "a");
        s.forget("K", "n", "never-set");
        s.forget("Other", "n", "a");
        assert!(rendered(&s).is_empty());
        assert!(s.objects.is_empty());
        assert_eq!(s.words(), 0);
    }

    #[test]
    fn one_condition_type_given_twice_with_one_reason_is_one_series() {
        let mut s = ConditionSeries::default();
        s.set(
            "K",
            "n",
            "a",
            &[cond("Ready", "True", "Ok"), cond("Ready", "True", "Ok")],
        );
        assert_eq!(rendered(&s), ["K n/a Ready Ok 1"]);
    }
}
