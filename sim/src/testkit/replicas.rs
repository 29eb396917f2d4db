//! Replicas of a controller binary under leader election, as a Deployment of two runs them: each
//! its own process with its own `POD_NAME`, metrics and probe ports, all on one Lease in one
//! namespace. Which one leads and how many passes each ran are read from its `/metrics`
//! (`nats_operator_leader`, `nats_operator_reconcile_total`), as an operator of the real thing
//! would read them.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use crate::wait::poll;

/// The election's timings every replica is given: short, so a test sees a takeover in seconds,
/// and far enough apart that a release (taken at the next retry) and an expiry (after the lease
/// duration) cannot be mistaken for each other.
#[derive(Debug, Clone, Copy)]
pub struct Election {
    /// `--leader-elect-lease-duration` (whole seconds).
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
}

impl Election {
    /// 8 s, 6 s, 250 ms.
    pub const SHORT: Election = Election {
        lease_duration: Duration::from_secs(8),
        renew_deadline: Duration::from_secs(6),
        retry_period: Duration::from_millis(250),
    };

    fn flags(&self) -> Vec<String> {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        vec![
            "--leader-elect".into(),
            format!(
                "--leader-elect-lease-duration={}s",
                self.lease_duration.as_secs()
            ),
            format!("--leader-elect-renew-deadline={}", ms(self.renew_deadline)),
            format!("--leader-elect-retry-period={}", ms(self.retry_period)),
        ]
    }
}

/// One replica: a running binary, killed when dropped.
#[derive(Debug)]
pub struct Replica {
    /// Its `POD_NAME` (the prefix of its Lease identity).
    pub name: String,
    /// Where it serves /metrics.
    pub metrics_port: u16,
    /// The Lease's name: the binary's (also the `controller` label of its leader gauge).
    pub binary: String,
    child: Option<Child>,
}

impl Replica {
    /// Starts `program` as replica `name`: `KUBECONFIG=kubeconfig`, its Lease in `namespace`,
    /// `election`'s timings, free metrics and probe ports, then `args`; its output goes to
    /// `log` (a file a failing test can show).
    pub fn spawn(
        program: &Path,
        kubeconfig: &Path,
        namespace: &str,
        name: &str,
        election: Election,
        args: &[&str],
        log: &Path,
    ) -> Replica {
        let metrics_port = crate::ports::free_port();
        let out = std::fs::File::create(log)
            .unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let err = out
            .try_clone()
            .unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let child = Command::new(program)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", name)
            .env("POD_NAMESPACE", namespace)
            .args(election.flags())
            .arg(format!("--metrics-addr=127.0.0.1:{metrics_port}"))
            .arg("--probe-addr=127.0.0.1:0")
            .args(args)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        let binary = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Replica {
            name: name.to_string(),
            metrics_port,
            binary,
            child: Some(child),
        }
    }

    fn pid(&self) -> Option<i32> {
        self.child.as_ref().and_then(|c| i32::try_from(c.id()).ok())
    }

    /// SIGKILL: no release, no goodbye (a node lost, an OOM kill).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, as the kubelet sends it when a pod is deleted.
    pub fn sigterm(&self) {
        if let Some(pid) = self.pid() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }

    /// Waits up to `within` for the process to exit, and returns how.
    pub async fn exited(&mut self, within: Duration) -> Result<ExitStatus, String> {
        let name = self.name.clone();
        let child = self.child.as_mut().ok_or("already reaped")?;
        let status = poll(&format!("{name} exits"), within, || {
            let s = child.try_wait();
            async move {
                match s {
                    Ok(s) => Ok(s),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await
        .map_err(|e| e.to_string())?;
        self.child = None;
        Ok(status)
    }

    /// Its /metrics now.
    pub async fn scrape(&self) -> Result<String, String> {
        super::metrics(self.metrics_port).await
    }

    /// Whether its leader gauge says it leads.
    pub async fn leads(&self) -> Result<bool, String> {
        let body = self.scrape().await?;
        let labels = format!("controller=\"{}\"", self.binary);
        Ok(sample(&body, "nats_operator_leader", &labels) == Some(1.0))
    }

    /// How many passes over `kind` it has run (0 before the first).
    pub async fn passes(&self, kind: &str) -> Result<u64, String> {
        let body = self.scrape().await?;
        let labels = format!("controller=\"{kind}\"");
        Ok(sample(&body, "nats_operator_reconcile_total", &labels).unwrap_or(0.0) as u64)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The value of the sample `name{labels}` in a Prometheus text exposition.
pub fn sample(body: &str, name: &str, labels: &str) -> Option<f64> {
    let key = format!("{name}{{{labels}}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits up to `within` until exactly one of `replicas` says it leads, and returns its index.
pub async fn leader_of(replicas: &[&Replica], within: Duration) -> Result<usize, String> {
    poll("exactly one replica leads", within, || async move {
        let mut leading = Vec::new();
        for (i, r) in replicas.iter().enumerate() {
            if r.leads().await? {
                leading.push(i);
            }
        }
        match leading.as_slice() {
            [one] => Ok(Some(*one)),
            [] => Ok(None),
            many => Err(format!("{} replicas lead at once: {many:?}", many.len())),
        }
    })
    .await
    .map_err(|e| e.to_string())
}

/// One controller binary, for [`prove_takeover`].
#[derive(Debug, Clone)]
pub struct Takeover<'a> {
    /// The binary (`sim::bin_exe!("…")`).
    pub program: &'a Path,
    /// The kind whose passes are counted (`nats_operator_reconcile_total{controller=kind}`).
    pub kind: &'a str,
    /// Its own flags.
    pub args: &'a [&'a str],
    /// The Lease's namespace (the release namespace of an install).
    pub namespace: &'a str,
}

/// What [`prove_takeover`] measured.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// From the leader's SIGKILL to the standby leading (the lease duration must pass first).
    pub after_kill: Duration,
    /// From the leader's SIGTERM to the standby leading (the Lease is released on the way out).
    pub after_term: Duration,
}

/// The election story of one binary, on a real apiserver: of two replicas exactly one leads and
/// only its passes run (the other's counter stays at 0 after `trigger` gave both work); the
/// leader SIGKILLed, the standby takes the Lease once it expires and runs the passes; a third
/// replica started beside it, the new leader SIGTERMed exits 0 having released the Lease (read
/// right after it exits: no holder, or already the third), and the third takes over. Logs go
/// under `dir`; panics naming the step that failed.
pub async fn prove_takeover<F, Fut>(
    kubeconfig: &Path,
    client: kube::Client,
    binary: &Takeover<'_>,
    dir: &Path,
    trigger: F,
) -> Figures
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let election = Election::SHORT;
    let spawn = |name: &str| {
        Replica::spawn(
            binary.program,
            kubeconfig,
            binary.namespace,
            name,
            election,
            binary.args,
            &dir.join(format!("{name}.log")),
        )
    };
    let fail = |what: &str, e: String| -> ! { panic!("{what}: {e} (logs in {})", dir.display()) };
    let mut a = spawn("replica-a");
    let mut b = spawn("replica-b");
    let first = leader_of(&[&a, &b], Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| fail("the first election", e));
    let (leader, standby) = if first == 0 {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    trigger().await;
    wait_passes(leader, binary.kind)
        .await
        .unwrap_or_else(|e| fail("the leader's passes", e));
    // The standby's watch saw the same object: its pass waits at the gate, uncounted.
    let standby_passes = standby
        .passes(binary.kind)
        .await
        .unwrap_or_else(|e| fail("the standby's metrics", e));
    assert_eq!(standby_passes, 0, "the standby {} ran passes", standby.name);
    let leases: Api<Lease> = Api::namespaced(client, binary.namespace);
    let held = holder(&leases, &leader.binary).await;
    assert!(
        held.as_deref()
            .is_some_and(|h| h.starts_with(&format!("{}_", leader.name))),
        "the Lease is held by {held:?}, not {}",
        leader.name
    );

    leader.kill9();
    let killed = tokio::time::Instant::now();
    leader_of(
        &[standby],
        election.lease_duration + Duration::from_secs(30),
    )
    .await
    .unwrap_or_else(|e| fail("the takeover after SIGKILL", e));
    let after_kill = killed.elapsed();
    wait_passes(standby, binary.kind)
        .await
        .unwrap_or_else(|e| fail("the new leader's passes", e));

    let third = spawn("replica-c");
    super::wait_metrics(
        third.metrics_port,
        "the third replica serves /metrics",
        super::WAIT,
        |b| b.contains("nats_operator_leader{"),
    )
    .await;
    standby.sigterm();
    let termed = tokio::time::Instant::now();
    let status = standby
        .exited(Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| fail("the SIGTERMed leader exits", e));
    assert!(status.success(), "the SIGTERMed leader exited {status}");
    let held = holder(&leases, &third.binary).await;
    assert!(
        held.as_deref()
            .is_none_or(|h| h.starts_with(&format!("{}_", third.name))),
        "after SIGTERM the Lease is still held by {held:?}: it was not released"
    );
    leader_of(&[&third], Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| fail("the takeover after SIGTERM", e));
    let after_term = termed.elapsed();
    wait_passes(&third, binary.kind)
        .await
        .unwrap_or_else(|e| fail("the third replica's passes", e));
    Figures {
        after_kill,
        after_term,
    }
}

async fn wait_passes(r: &Replica, kind: &str) -> Result<u64, String> {
    poll(
        &format!("{} runs a pass over {kind}", r.name),
        super::WAIT,
        || async { Ok(Some(r.passes(kind).await?).filter(|n| *n > 0)) },
    )
    .await
    .map_err(|e| e.to_string())
}

async fn holder(leases: &Api<Lease>, name: &str) -> Option<String> {
    leases
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("reading the Lease {name}: {e}"))
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_reads_the_value_of_exactly_the_labels_asked() {
        let body = "# TYPE x counter\n\
                    nats_operator_reconcile_total{controller=\"NatsCluster\"} 3\n\
                    nats_operator_reconcile_total{controller=\"NatsClusterX\"} 9\n\
                    nats_operator_leader{controller=\"cluster-controller\"} 1\n";
        assert_eq!(
            sample(
                body,
                "nats_operator_reconcile_total",
                "controller=\"NatsCluster\""
            ),
            Some(3.0)
        );
        assert_eq!(
            sample(
                body,
                "nats_operator_leader",
                "controller=\"cluster-controller\""
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(body, "nats_operator_reconcile_total", "controller=\"Nats\""),
            None
        );
    }

    #[test]
    fn the_election_flags_are_go_durations_the_binaries_take() {
        assert_eq!(
            Election::SHORT.flags(),
            [
                "--leader-elect",
                "--leader-elect-lease-duration=8s",
                "--leader-elect-renew-deadline=6000ms",
                "--leader-elect-retry-period=250ms"
            ]
        );
    }
}
