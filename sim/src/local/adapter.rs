//! The local server lifecycle as the cluster controller's [`ServerLifecycle`]: a server's config and
//! files written into its directory, its process started, restarted (lame duck, exit, start)
//! or deleted, and observed through its process and `/healthz`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cluster_controller::plan::Layout;
use cluster_controller::render::ServerPlan;
use cluster_controller::server_lifecycle::{
    Applied, DesiredServer, ObservedServer, ServerAddress, ServerLifecycle, ServerLifecycleError,
};
use nats_api::cluster::{Endpoints, NatsCluster};

use super::events::log;
use super::files::{missing_tls_files, read_plan, write_server_files};
use super::layout::LOCAL_HOST;
use super::pod_process::{Entry, start, stop};
use super::{LocalServerLifecycle, failed, key};
use crate::server::events::LocalEvent;
use crate::server::server_process::CONFIG_FILE;

/// How long observing a server waits for a lock another holder has: longer than a config write
/// or a look at the process takes on a loaded machine, far shorter than a restart.
const BRIEF_HOLD: Duration = Duration::from_secs(1);

impl ServerLifecycle for LocalServerLifecycle {
    fn layout(&self, cluster: &NatsCluster) -> Box<dyn Layout + Send + Sync> {
        Box::new(self.local_layout(cluster))
    }

    async fn apply_shared(
        &self,
        cluster: &NatsCluster,
        _plans: &[ServerPlan],
    ) -> Result<Applied, ServerLifecycleError> {
        // Nothing is shared between local processes but the root directory.
        let dir = self.local_layout(cluster).root;
        std::fs::create_dir_all(&dir).map_err(|e| {
            failed(
                "create directory",
                key(cluster),
                format!("{}: {e}", dir.display()),
            )
        })?;
        Ok(Applied::default())
    }

    async fn write_config(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> Result<Applied, ServerLifecycleError> {
        let dir = self.local_layout(cluster).server_dir(server.ordinal);
        write_server_files(&dir, server)?;
        log(
            &self.events,
            &server.plan.server_name,
            LocalEvent::ConfigWritten,
            Some(&server.revision),
        );
        Ok(Applied::default())
    }

    async fn apply_server(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> Result<Applied, ServerLifecycleError> {
        let layout = self.local_layout(cluster);
        let dir = layout.server_dir(server.ordinal);
        let monitor = layout.ports(server.ordinal).monitor;
        let binary = self.resolve(cluster)?;
        let object = format!("server {}", server.plan.server_name);
        // Not started (nor made) until its certificates are there, as a pod waits for its Secret.
        let missing = missing_tls_files(server);
        if !missing.is_empty() {
            return Err(failed(
                "start",
                object,
                format!(
                    "waiting for its certificate files (their Secret is not there yet): {}",
                    missing.join(", ")
                ),
            ));
        }
        let entry = self.server_entry(
            cluster,
            &server.plan,
            server.ordinal,
            &binary,
            &server.revision,
        );
        let mut guard = entry.local.lock().await;
        let local = &mut *guard;
        entry.revive(local, &dir, monitor, &self.http).await?;
        let current = local
            .running
            .as_ref()
            .is_some_and(|r| r.revision == server.revision && r.binary == binary);
        write_server_files(&dir, server)?;
        local.revision = server.revision.clone();
        local.binary = binary.clone();
        local.dir = dir.clone();
        local.monitor = monitor;
        local.pid_file = server.plan.pid_file.clone();
        if current {
            return Ok(Applied::default());
        }
        let restart = match local.running.take() {
            Some(r) => {
                entry.pid.store(0, Ordering::SeqCst);
                // Lame duck under the revision it ran; the restart brings the new one.
                log(
                    &self.events,
                    &entry.server_name,
                    LocalEvent::LameDuck,
                    Some(&r.revision),
                );
                stop(r, &local.pid_file, &object).await;
                true
            }
            None => false,
        };
        let r = start(
            &dir,
            &binary,
            &server.revision,
            monitor,
            &self.http,
            &object,
        )
        .await?;
        entry.started(local, r);
        if restart {
            entry.restarted();
            log(
                &self.events,
                &entry.server_name,
                LocalEvent::Restarted,
                Some(&server.revision),
            );
        } else {
            log(
                &self.events,
                &entry.server_name,
                LocalEvent::Started,
                Some(&server.revision),
            );
        }
        Ok(Applied::default())
    }

    async fn delete_server(
        &self,
        cluster: &NatsCluster,
        ordinal: u32,
        remove_storage: bool,
    ) -> Result<Applied, ServerLifecycleError> {
        let dir = self.local_layout(cluster).server_dir(ordinal);
        let entry = self.state(|m| {
            m.get_mut(&key(cluster))
                .and_then(|s| s.servers.remove(&ordinal))
        });
        let object = format!("{} server {ordinal}", key(cluster));
        if let Some(entry) = entry {
            let mut local = entry.local.lock().await;
            // Deleted: nothing revives it, even through an entry read before its removal.
            local.dir = PathBuf::new();
            entry.pid.store(0, Ordering::SeqCst);
            if let Some(r) = local.running.take() {
                stop(r, &local.pid_file, &object).await;
            }
            log(&self.events, &entry.server_name, LocalEvent::Deleted, None);
        }
        let gone = if remove_storage {
            std::fs::remove_dir_all(&dir)
        } else {
            // The config goes with the workload; the store stays, as a PVC would.
            std::fs::remove_file(dir.join(CONFIG_FILE))
        };
        match gone {
            Ok(()) => Ok(Applied::default()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Applied::default()),
            Err(e) => Err(failed("remove", object, format!("{}: {e}", dir.display()))),
        }
    }

    async fn observe(
        &self,
        cluster: &NatsCluster,
    ) -> Result<Vec<ObservedServer>, ServerLifecycleError> {
        let layout = self.local_layout(cluster);
        let servers: Vec<(u32, Arc<Entry>)> = self.state(|m| {
            m.get(&key(cluster))
                .map(|s| s.servers.iter().map(|(o, l)| (*o, l.clone())).collect())
                .unwrap_or_default()
        });
        let mut out = Vec::with_capacity(servers.len());
        for (ordinal, entry) in servers {
            let monitor = layout.ports(ordinal).monitor;
            // A server being restarted is observed as it stands, without waiting for the restart;
            // a lock held only for a moment (another observer, the supervisor, a config write)
            // is waited for, or that moment would read as a server down.
            let (running, revision) =
                match tokio::time::timeout(BRIEF_HOLD, entry.local.lock()).await {
                    Ok(mut guard) => {
                        let local = &mut *guard;
                        let dir = layout.server_dir(ordinal);
                        if let Err(e) = entry.revive(local, &dir, monitor, &self.http).await {
                            tracing::warn!(error = %e, "a server that exited did not start again");
                        }
                        (
                            local.running.is_some(),
                            local.running.as_ref().map(|r| r.revision.clone()),
                        )
                    }
                    Err(_) => (false, None),
                };
            let ready = running && self.http.healthz(monitor).await == Some(200);
            out.push(ObservedServer {
                ordinal,
                server_name: entry.server_name.clone(),
                present: true,
                ready,
                revision,
                restarts: entry.restarts.load(Ordering::SeqCst),
                volume: entry.volume.clone(),
                // A local server's store goes with its delete: nothing is left to wait for.
                claim: None,
            });
        }
        Ok(out)
    }

    async fn stored_plan(
        &self,
        cluster: &NatsCluster,
        ordinal: u32,
        revision: &str,
    ) -> Option<ServerPlan> {
        read_plan(&self.local_layout(cluster).server_dir(ordinal), revision)
    }

    fn address(&self, cluster: &NatsCluster, ordinal: u32) -> ServerAddress {
        let ports = self.local_layout(cluster).ports(ordinal);
        ServerAddress {
            client_url: format!("nats://{LOCAL_HOST}:{}", ports.client),
            monitor_url: format!("http://{LOCAL_HOST}:{}", ports.monitor),
        }
    }

    fn endpoints(&self, _cluster: &NatsCluster, plan: &ServerPlan) -> Endpoints {
        local_endpoints(plan)
    }
}

/// The endpoints of a NATS cluster run as local processes: its first server's listeners on
/// the loopback address (there are no Services, so no DNS names to give).
pub(super) fn local_endpoints(plan: &ServerPlan) -> Endpoints {
    let scheme = if plan.client_tls.is_some() {
        "tls"
    } else {
        "nats"
    };
    Endpoints {
        client: Some(format!("{scheme}://{LOCAL_HOST}:{}", plan.client.port)),
        monitor: Some(format!("http://{LOCAL_HOST}:{}", plan.monitor.port)),
        gateway: plan.gateway.as_ref().map(|gw| {
            gw.advertise
                .clone()
                .unwrap_or_else(|| format!("nats://{LOCAL_HOST}:{}", gw.listen.port))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster_controller::plan::{ClusterInputs, KubernetesLayout, plan_servers};
    use nats_api::cluster::NatsClusterSpec;

    fn spec(yaml: &str) -> NatsClusterSpec {
        serde_yaml::from_str(yaml).expect("spec")
    }

    #[test]
    fn local_endpoints_are_the_first_servers_loopback_listeners() {
        let s = spec("version: 2.15.1\nreplicas: 3\n");
        let mut p = plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: &s,
                trust: None,
                account_preloads: vec![],
                leaf_remotes: vec![],
            },
            &KubernetesLayout {
                name: "demo".into(),
                namespace: "nats".into(),
                cluster_domain: "cluster.local".into(),
            },
        )
        .expect("plans")
        .remove(0);
        p.client.port = 40001;
        p.monitor.port = 40002;
        let e = local_endpoints(&p);
        assert_eq!(e.client.as_deref(), Some("nats://127.0.0.1:40001"));
        assert_eq!(e.monitor.as_deref(), Some("http://127.0.0.1:40002"));
        assert_eq!(e.gateway, None, "no gateway planned");
        assert!(
            !format!("{e:?}").contains(".svc"),
            "no Kubernetes DNS name: {e:?}"
        );
    }
}
