//! One label set for every object of a NatsCluster, and the selectors that pick its pods.

use std::collections::BTreeMap;

pub const NAME: &str = "app.kubernetes.io/name";
pub const INSTANCE: &str = "app.kubernetes.io/instance";
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Names the server a StatefulSet, pod, ConfigMap or PVC belongs to; a PVC is deleted with its
/// server only when it carries this label (design §4.5).
pub const SERVER: &str = "cluster.nats.mikluko.io/server";

pub const NAME_VALUE: &str = "nats";
pub const MANAGED_BY_VALUE: &str = "nats-cluster-controller";

/// Labels of the cluster-wide objects (Services, PDB, NetworkPolicy).
pub fn cluster(name: &str) -> BTreeMap<String, String> {
    let mut l = selector(name);
    l.insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
    l
}

/// Labels of one server's objects and pods.
pub fn server(name: &str, server: &str) -> BTreeMap<String, String> {
    let mut l = cluster(name);
    l.insert(SERVER.into(), server.into());
    l
}

/// Selects every pod of the NATS cluster.
pub fn selector(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME.into(), NAME_VALUE.into()),
        (INSTANCE.into(), name.into()),
    ])
}

/// Selects the one pod of a server.
pub fn server_selector(name: &str, server: &str) -> BTreeMap<String, String> {
    let mut l = selector(name);
    l.insert(SERVER.into(), server.into());
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_labels_extend_cluster_labels_which_extend_the_selector() {
        let s = server("demo", "demo-1");
        assert_eq!(s.get(NAME).map(String::as_str), Some("nats"));
        assert_eq!(s.get(INSTANCE).map(String::as_str), Some("demo"));
        assert_eq!(
            s.get(MANAGED_BY).map(String::as_str),
            Some(MANAGED_BY_VALUE)
        );
        assert_eq!(s.get(SERVER).map(String::as_str), Some("demo-1"));
        for (k, v) in selector("demo") {
            assert_eq!(s.get(&k), Some(&v), "{k}");
        }
        for (k, v) in server_selector("demo", "demo-1") {
            assert_eq!(s.get(&k), Some(&v), "{k}");
        }
        assert!(!cluster("demo").contains_key(SERVER));
    }
}
