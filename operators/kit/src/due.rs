//! When each object is next due, and what it looked like when its pass scheduled it: a watch
//! event caused only by a pass's own status write is no reason for another pass before then. A
//! change of what calls for a pass (its spec, its finalizers, its deletion) is.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::core::Resource;

use crate::object::describe;

/// What of an object, when changed, calls for a pass before it is due: its uid, its spec
/// (generation), its finalizers and its deletion, kept as their hash: a controller holds one
/// for every object it owns, 8 bytes where the fields themselves took about 150 (with 10,000
/// NatsStreams, docs/performance.md). Two different states hashing alike would put off a pass
/// until it is due, at odds of one in 2^64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint(u64);

fn fingerprint_of(
    uid: Option<&str>,
    generation: Option<i64>,
    deleting: bool,
    finalizers: &[String],
) -> Fingerprint {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (uid, generation, deleting, finalizers).hash(&mut h);
    Fingerprint(h.finish())
}

/// The fingerprint of `obj`.
pub fn fingerprint<K: Resource>(obj: &K) -> Fingerprint {
    let m = obj.meta();
    fingerprint_of(
        m.uid.as_deref(),
        m.generation,
        m.deletion_timestamp.is_some(),
        m.finalizers.as_deref().unwrap_or_default(),
    )
}

/// The wait left before a pass is due: none when the object changed in a way that calls for a
/// pass (spec, finalizers, deletion) or the time has come.
pub fn time_left(
    scheduled: &Fingerprint,
    due: Instant,
    now_seen: &Fingerprint,
    now: Instant,
) -> Option<Duration> {
    let left = due.checked_duration_since(now)?;
    (scheduled == now_seen && !left.is_zero()).then_some(left)
}

/// When each object (by kind namespace/name) is next due, with its fingerprint then.
#[derive(Debug, Default)]
pub struct Due {
    map: Mutex<HashMap<String, (Fingerprint, Instant)>>,
}

impl Due {
    fn map(&self) -> MutexGuard<'_, HashMap<String, (Fingerprint, Instant)>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `obj` (as its pass wrote it) is next due after `wait`.
    pub fn schedule<K: Resource<DynamicType = ()>>(&self, obj: &K, wait: Duration) {
        self.map()
            .insert(describe(obj), (fingerprint(obj), Instant::now() + wait));
    }

    /// The time left before `obj` is due, when nothing that calls for a pass changed.
    pub fn not_yet<K: Resource<DynamicType = ()>>(&self, obj: &K) -> Option<Duration> {
        let map = self.map();
        let (fp, due) = map.get(&describe(obj))?;
        time_left(fp, *due, &fingerprint(obj), Instant::now())
    }

    /// Forgets when `obj` is due: its next trigger runs a pass.
    pub fn forget<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        self.map().remove(&describe(obj));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn fp(generation: i64, deleting: bool, finalizers: &[&str]) -> Fingerprint {
        let finalizers: Vec<String> = finalizers.iter().map(|f| f.to_string()).collect();
        fingerprint_of(Some("u"), Some(generation), deleting, &finalizers)
    }

    #[rstest]
    #[case::own_status_write_waits(fp(1, false, &["f"]), 5, Some(5))]
    #[case::spec_edit_runs_now(fp(2, false, &["f"]), 5, None)]
    #[case::deletion_runs_now(fp(1, true, &["f"]), 5, None)]
    #[case::finalizer_change_runs_now(fp(1, false, &[]), 5, None)]
    #[case::due_time_reached_runs(fp(1, false, &["f"]), 0, None)]
    #[case::another_finalizer_runs_now(fp(1, false, &["g"]), 5, None)]
    #[case::recreated_runs_now(fingerprint_of(Some("v"), Some(1), false, &["f".to_string()]), 5, None)]
    fn a_pass_is_skipped_only_for_an_unchanged_object_before_it_is_due(
        #[case] seen: Fingerprint,
        #[case] secs_left: u64,
        #[case] want: Option<u64>,
    ) {
        let now = Instant::now();
        let due = now + Duration::from_secs(secs_left);
        assert_eq!(
            time_left(&fp(1, false, &["f"]), due, &seen, now),
            want.map(Duration::from_secs)
        );
    }

    #[test]
    fn a_scheduled_object_is_not_yet_due_until_forgotten() {
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        cm.metadata.name = Some("a".into());
        cm.metadata.namespace = Some("nats".into());
        let due = Due::default();
        assert_eq!(due.not_yet(&cm), None, "never scheduled");
        due.schedule(&cm, Duration::from_secs(60));
        assert!(due.not_yet(&cm).is_some());
        cm.metadata.generation = Some(2);
        assert_eq!(due.not_yet(&cm), None, "a spec edit calls for a pass");
        cm.metadata.generation = None;
        due.forget(&cm);
        assert_eq!(due.not_yet(&cm), None);
    }
}
