//! The garbage collector and the kubelet of the local backend (issue 43): on Kubernetes a
//! NatsCluster's StatefulSets carry its owner reference, so once the NatsCluster is gone the
//! garbage collector deletes them and the kubelet stops their pods within the termination grace
//! (the preStop's lame duck, then SIGTERM, SIGKILL at the end of the grace). Here the servers are
//! processes the server lifecycle keeps per NatsCluster, so the host does the same: a cluster the
//! server lifecycle runs whose NatsCluster is no longer in the apiserver has its servers stopped that
//! way ([`LocalServerLifecycle::collect`]), and its files removed with them (its volumes: nothing here
//! outlives the NatsCluster, as a namespace's deletion leaves nothing either).
//!
//! The objects a gone NatsCluster controlled (its route CA and certificate Secrets) are deleted
//! too ([`owned_by_gone_cluster`]), as the garbage collector deletes dependents.
//!
//! Which clusters are orphans is [`orphans`]: those the server lifecycle ran *before* the NatsClusters
//! were listed and that the list lacks. A cluster the controller applies after the snapshot is
//! never taken for an orphan, since its NatsCluster existed before the controller read it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::LocalServerLifecycle;
use super::events::log;
use crate::server::events::LocalEvent;
use crate::server::server_process::signal_command;

/// How long a collected server may take to exit after SIGTERM before SIGKILL: well inside the
/// rendered `terminationGracePeriodSeconds` (300 s), which [`TERMINATION_GRACE`] names.
const EXIT_AFTER_TERM: Duration = Duration::from_secs(20);

/// The pods' termination grace the cluster controller renders (design §4.4): a collected server
/// is gone within it.
pub const TERMINATION_GRACE: Duration = Duration::from_secs(300);

/// The clusters (`namespace/name`) among `known_before` (what the server lifecycle ran before the list)
/// that `listed` (the NatsClusters in the apiserver, deleting or not) no longer holds.
pub fn orphans(known_before: &[String], listed: &BTreeSet<String>) -> Vec<String> {
    known_before
        .iter()
        .filter(|k| !listed.contains(*k))
        .cloned()
        .collect()
}

/// Whether an object with `owners` is garbage once its NatsCluster is gone: its controller is a
/// NatsCluster whose uid is not among `live`.
pub fn owned_by_gone_cluster(
    owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    live: &BTreeSet<String>,
) -> bool {
    owners
        .iter()
        .any(|o| o.kind == "NatsCluster" && o.controller == Some(true) && !live.contains(&o.uid))
}

impl LocalServerLifecycle {
    /// The clusters (`namespace/name`) the server lifecycle made servers of. Ports only reserved
    /// are left out: a test or scenario reserves them before it applies the manifest naming the
    /// cluster, and a collector LIST in between found the cluster missing and dropped the
    /// reservation, so the servers came up on other ports than the manifest's leaf remote named.
    pub fn clusters(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.state(|m| {
            m.iter()
                .filter(|(_, st)| st.ran)
                .map(|(k, _)| k.clone())
                .collect()
        });
        keys.sort();
        keys
    }

    /// Stops every server of each cluster in `orphans` as the kubelet stops a deleted pod (lame
    /// duck, SIGTERM, SIGKILL after [`EXIT_AFTER_TERM`]), all at once, and removes its files;
    /// returns how long it took.
    pub async fn collect(&self, orphans: &[String]) -> Duration {
        let start = Instant::now();
        let mut stopping = Vec::new();
        for key in orphans {
            let Some(state) = self.state(|m| m.remove(key)) else {
                continue;
            };
            let (ns, name) = key.split_once('/').unwrap_or(("default", key.as_str()));
            let root = self.cluster_root(ns, name);
            let events = self.events.clone();
            let entries: Vec<_> = state.servers.into_values().collect();
            stopping.push(async move {
                let stops = entries.into_iter().map(|entry| {
                    let events = events.clone();
                    async move {
                        let mut local = entry.local.lock().await;
                        // Deleted: nothing revives it.
                        local.dir = std::path::PathBuf::new();
                        entry.pid.store(0, std::sync::atomic::Ordering::SeqCst);
                        if let Some(mut r) = local.running.take() {
                            terminate(&mut r, &local.pid_file).await;
                        }
                        log(&events, &entry.server_name, LocalEvent::Deleted, None);
                    }
                });
                futures::future::join_all(stops).await;
                if let Err(e) = std::fs::remove_dir_all(&root)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    tracing::warn!(error = %e, "removing {}", root.display());
                }
                tracing::info!("NatsCluster {key} is gone: its servers stopped");
            });
        }
        futures::future::join_all(stopping).await;
        start.elapsed()
    }
}

/// The kubelet's stop of one server: the preStop's lame duck (every leader steps down), SIGTERM,
/// and SIGKILL if it has not exited [`EXIT_AFTER_TERM`] later.
async fn terminate(r: &mut super::pod_process::Running, pid_file: &str) {
    if r.process.exited().is_some() {
        return;
    }
    let lame_duck = signal_command(&r.binary, "ldm", std::path::Path::new(pid_file));
    let _ = tokio::process::Command::from(lame_duck).output().await;
    let pid = nix::unistd::Pid::from_raw(r.process.pid() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    if !r.process.wait_exit(EXIT_AFTER_TERM).await {
        r.process.kill();
        let _ = r.process.wait_exit(Duration::from_secs(5)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use rstest::rstest;

    fn set(keys: &[&str]) -> BTreeSet<String> {
        keys.iter().map(|k| k.to_string()).collect()
    }

    fn owner(kind: &str, uid: &str, controller: bool) -> Vec<OwnerReference> {
        vec![OwnerReference {
            kind: kind.into(),
            uid: uid.into(),
            controller: Some(controller),
            ..Default::default()
        }]
    }

    #[rstest]
    #[case::a_gone_clusters_route_ca_goes(owner("NatsCluster", "old", true), true)]
    #[case::a_live_clusters_stays(owner("NatsCluster", "new", true), false)]
    #[case::another_owners_stays(owner("NatsUser", "old", true), false)]
    #[case::an_unowned_secret_stays(vec![], false)]
    #[case::a_mere_owner_reference_is_not_control(owner("NatsCluster", "old", false), false)]
    fn which_objects_go_with_a_natscluster(
        #[case] owners: Vec<OwnerReference>,
        #[case] want: bool,
    ) {
        assert_eq!(owned_by_gone_cluster(&owners, &set(&["new"])), want);
    }

    #[rstest]
    #[case::a_natscluster_gone_is_collected(vec!["t/demo"], set(&[]), vec!["t/demo"])]
    #[case::one_still_listed_is_kept(vec!["t/demo"], set(&["t/demo"]), vec![])]
    #[case::one_being_deleted_is_still_listed_and_kept(vec!["t/demo"], set(&["t/demo"]), vec![])]
    #[case::only_the_gone_one_of_two(
        vec!["t/demo", "u/other"],
        set(&["u/other"]),
        vec!["t/demo"]
    )]
    #[case::a_cluster_started_after_the_snapshot_is_not_judged(vec![], set(&[]), vec![])]
    fn which_clusters_are_orphans(
        #[case] known: Vec<&str>,
        #[case] listed: BTreeSet<String>,
        #[case] want: Vec<&str>,
    ) {
        let known: Vec<String> = known.into_iter().map(String::from).collect();
        assert_eq!(orphans(&known, &listed), want);
    }

    /// Ports reserved for a manifest not yet applied are no cluster the collector may judge: the
    /// leaf test whose hub came up on other ports than its edge's remote named.
    #[test]
    fn reserved_ports_alone_are_not_a_cluster_to_collect() {
        let next = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(30_000));
        let lifecycle = LocalServerLifecycle::with_ports(
            "/nonexistent",
            std::sync::Arc::new(|_: &str| Err("no binary in this test".to_string())),
            std::sync::Arc::new(move || next.fetch_add(1, std::sync::atomic::Ordering::SeqCst)),
        );
        let reserved = lifecycle.reserve_ports("nats", "hub", 2);
        assert_eq!(reserved.len(), 2);
        assert!(
            lifecycle.clusters().is_empty(),
            "{:?}",
            lifecycle.clusters()
        );
        assert_eq!(lifecycle.reserve_ports("nats", "hub", 2), reserved);
    }
}
