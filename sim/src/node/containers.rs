//! The node's containers as the host sees them through containerd ([`Containers`]): a signal to
//! a container's process, a pause and a resume (the cgroup freezer). What a scenario's faults on
//! a pod are: a kill -9 the kubelet answers by starting the container again in place.

use std::path::PathBuf;

use super::{NodeError, sh};

/// containerd's CRI namespace, where the kubelet's containers are.
const NAMESPACE: &str = "k8s.io";

/// The kubelet's containers, through containerd's socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Containers {
    pub(super) socket: PathBuf,
}

impl Containers {
    /// The id of a container as a pod's status names it (`containerd://<id>`).
    pub fn id_of(status_id: &str) -> Option<&str> {
        status_id
            .strip_prefix("containerd://")
            .filter(|id| !id.is_empty())
    }

    fn ctr(&self, what: &'static str, args: &[&str]) -> Result<(), NodeError> {
        let sock = self.socket.display().to_string();
        let mut all = vec!["--address", &sock, "-n", NAMESPACE, "task"];
        all.extend(args);
        sh(what, "/usr/bin/ctr", &all).map(drop)
    }

    /// Sends `signal` (`SIGKILL`, `SIGTERM`, `SIGUSR2`) to container `id`'s process.
    pub fn signal(&self, id: &str, signal: &str) -> Result<(), NodeError> {
        self.ctr("container signal", &["kill", "--signal", signal, id])
    }

    /// Freezes container `id`.
    pub fn pause(&self, id: &str) -> Result<(), NodeError> {
        self.ctr("container pause", &["pause", id])
    }

    /// Thaws container `id`.
    pub fn resume(&self, id: &str) -> Result<(), NodeError> {
        self.ctr("container resume", &["resume", id])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rstest::rstest]
    #[case::containerd("containerd://4f2a", Some("4f2a"))]
    #[case::empty("containerd://", None)]
    #[case::other_runtime("docker://4f2a", None)]
    fn a_pods_container_id_names_a_containerd_task(
        #[case] status: &str,
        #[case] want: Option<&str>,
    ) {
        assert_eq!(Containers::id_of(status), want);
    }
}
