//! The versions of its objects a controller's passes already worked from: the one each pass read
//! fresh and each one it wrote (a finalizer added, a status applied). A watch event carrying such
//! a version is the echo of the pass itself, and no reason for another: with 1,000 NatsUsers,
//! each user's own finalizer and status writes came back as a second pass that read its account's
//! keys and its creds Secret again to write nothing (4.5 requests a user).
//!
//! Only the object's own watch is filtered ([`Echoes::echo`]); a wake for a change of another
//! object still runs the pass. A version is forgotten once its echo came, and each object keeps
//! at most [`KEPT`] versions, so memory is bounded by the objects written, not by the writes. A
//! resourceVersion is compared for equality only, never ordered, as the API asks.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use kube::core::Resource;

use crate::object::describe;

/// Versions kept per object: a pass reads one and writes at most two or three.
pub const KEPT: usize = 4;

/// The versions passes worked from, by object.
#[derive(Debug, Default)]
pub struct Echoes {
    map: Mutex<HashMap<String, VecDeque<String>>>,
}

impl Echoes {
    fn map(&self) -> MutexGuard<'_, HashMap<String, VecDeque<String>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that a pass worked from `obj` as it is (read fresh, or as written).
    pub fn worked_from<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        let Some(rv) = obj.meta().resource_version.clone() else {
            return;
        };
        let mut map = self.map();
        let versions = map.entry(describe(obj)).or_default();
        if versions.contains(&rv) {
            return;
        }
        if versions.len() == KEPT {
            versions.pop_front();
        }
        versions.push_back(rv);
    }

    /// Whether the watch event `obj` is a version a pass worked from (forgotten now: an echo
    /// comes once).
    pub fn echo<K: Resource<DynamicType = ()>>(&self, obj: &K) -> bool {
        let Some(rv) = obj.meta().resource_version.as_deref() else {
            return false;
        };
        let key = describe(obj);
        let mut map = self.map();
        let Some(versions) = map.get_mut(&key) else {
            return false;
        };
        let Some(at) = versions.iter().position(|v| v == rv) else {
            return false;
        };
        versions.remove(at);
        if versions.is_empty() {
            map.remove(&key);
        }
        true
    }

    /// Whether a version a pass wrote of `obj` has not come back through the watch yet (its
    /// echo not yet dropped): a copy from the watch's store may then be older than that write.
    pub fn pending<K: Resource<DynamicType = ()>>(&self, obj: &K) -> bool {
        self.map().contains_key(&describe(obj))
    }

    /// Forgets `obj` (deleted).
    pub fn forget<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        self.map().remove(&describe(obj));
    }

    /// How many objects have versions kept.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether none has.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use rstest::rstest;

    fn at(name: &str, rv: Option<&str>) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.namespace = Some("ns".into());
        c.metadata.name = Some(name.into());
        c.metadata.resource_version = rv.map(str::to_string);
        c
    }

    /// Records `worked` of object a, then asks about each of `events` in turn.
    #[rstest]
    #[case::the_echo_of_a_write(&["10", "11"], &["10", "11"], &[true, true])]
    #[case::an_echo_comes_once(&["10"], &["10", "10"], &[true, false])]
    #[case::a_version_no_pass_saw(&["10"], &["12"], &[false])]
    #[case::only_the_last_four_are_kept(&["1", "2", "3", "4", "5"], &["1", "5"], &[false, true])]
    #[case::the_same_version_twice_is_one(&["7", "7"], &["7", "7"], &[true, false])]
    fn an_event_is_an_echo_only_of_a_version_a_pass_worked_from(
        #[case] worked: &[&str],
        #[case] events: &[&str],
        #[case] want: &[bool],
    ) {
        let e = Echoes::default();
        for rv in worked {
            e.worked_from(&at("a", Some(rv)));
        }
        let got: Vec<bool> = events.iter().map(|rv| e.echo(&at("a", Some(rv)))).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn objects_are_apart_and_forgotten_once_their_echoes_came() {
        let e = Echoes::default();
        e.worked_from(&at("a", Some("10")));
        e.worked_from(&at("b", Some("11")));
        e.worked_from(&at("c", None));
        assert!(!e.echo(&at("a", Some("11"))), "b's version is not a's");
        assert!(!e.echo(&at("c", None)), "no version, no echo");
        assert_eq!(e.len(), 2);
        assert!(e.pending(&at("a", Some("9"))), "a's write is not back");
        assert!(e.echo(&at("a", Some("10"))));
        assert!(!e.pending(&at("a", Some("10"))), "and now it is");
        assert_eq!(e.len(), 1);
        e.forget(&at("b", Some("11")));
        assert!(e.is_empty());
    }
}
