//! Times as the passes use them: Unix seconds now, metav1 Times to and from Unix seconds, and an
//! object's creation time (the older of two holders keeps a key).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;

/// Unix seconds now.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A metav1 Time of unix seconds.
pub(crate) fn time_of(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap_or_default())
}

/// Unix seconds of a metav1 Time.
pub(crate) fn secs_of(t: &Time) -> i64 {
    t.0.as_second()
}

/// metadata.creationTimestamp in seconds (0 when unset).
pub(crate) fn created<K: Resource>(obj: &K) -> i64 {
    obj.meta()
        .creation_timestamp
        .as_ref()
        .map(secs_of)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_through_metav1() {
        assert_eq!(secs_of(&time_of(1_790_000_000)), 1_790_000_000);
    }
}
