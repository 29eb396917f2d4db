//! Backends: where a topology runs. `local` runs nats-server processes here (the default; no Docker,
//! no root); `k3s` (cargo feature `k3s`) runs nats-server containers next to a k3s container through
//! testcontainers.
//! The scenario runner only talks to the [`Deployment`] trait, so a scenario runs on either.

use std::time::Duration;

use futures::future::BoxFuture;

use crate::topology::{Topology, TopologyError, TopologySpec};

/// A fault the sim injects into one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Kill9,
    Sigterm,
    LameDuck,
    Pause,
    Resume,
    /// Start again on the same store (kill -9 first if it still runs).
    Restart,
    /// Delete the store (the server must be stopped).
    WipeStore,
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error("backend {backend} is not available here: {reason}")]
    Unavailable { backend: String, reason: String },
    #[error("backend {backend} cannot {what}")]
    Unsupported { backend: String, what: String },
    #[error("backend {backend}: {message}")]
    Other { backend: String, message: String },
}

/// A running topology, whatever runs it.
pub trait Deployment: Send + Sync {
    fn backend(&self) -> &'static str;
    fn server_names(&self) -> Vec<String>;
    /// Client URLs of the hub servers.
    fn client_urls(&self) -> Vec<String>;
    /// The client URL of one hub server: by default the one at its place in `server_names`
    /// (a backend whose lists differ in length or order says otherwise). A Service's URL
    /// where the backend reaches servers through one.
    fn client_url_of(&self, server: &str) -> Option<String> {
        let names = self.server_names();
        let urls = self.client_urls();
        (names.len() == urls.len())
            .then(|| names.iter().position(|n| n == server))
            .flatten()
            .and_then(|i| urls.get(i).cloned())
    }
    /// (server name, monitoring URL) of the hub servers, where the sim can reach them: what the
    /// meta leader watch asks. None by default.
    fn monitor_urls(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    fn meta_leader(&self, timeout: Duration) -> BoxFuture<'_, Result<String, BackendError>>;
    fn stream_leader(
        &self,
        stream: &str,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<String, BackendError>>;
    fn wait_healthz(&self, timeout: Duration) -> BoxFuture<'_, Result<(), BackendError>>;
    /// Waits until `server`'s process has exited by itself (a lame duck ends so, once the
    /// server has closed its clients). Unsupported by default.
    fn wait_exited<'a>(
        &'a mut self,
        server: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let _ = (server, timeout);
        unsupported(self.backend(), "wait for a server to exit")
    }
    fn fault<'a>(
        &'a mut self,
        server: &'a str,
        fault: Fault,
    ) -> BoxFuture<'a, Result<(), BackendError>>;
    /// Appends raw text to a server's config and reloads it. Unsupported by default.
    fn reload_with<'a>(
        &'a mut self,
        server: &'a str,
        append: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let _ = (server, append);
        unsupported(self.backend(), "append to a server's config and reload it")
    }
    /// Cuts (or restores) the gateway link between clusters `a` and `b`. Unsupported by default.
    fn gateway_link<'a>(
        &'a self,
        a: &'a str,
        b: &'a str,
        cut: bool,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let _ = (a, b, cut);
        unsupported(self.backend(), "cut or restore a gateway")
    }
    /// Cuts (or restores) leaf `leaf`'s link to its hub. Unsupported by default.
    fn leaf_link<'a>(
        &'a self,
        leaf: &'a str,
        cut: bool,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let _ = (leaf, cut);
        unsupported(self.backend(), "cut or restore a leaf link")
    }
    /// Cuts (or restores) server `server`'s routes to the peers `from` names (every peer of its
    /// cluster when empty); returns the peers. Unsupported by default.
    fn route_link(
        &self,
        server: &str,
        from: &[String],
        cut: bool,
    ) -> Result<Vec<String>, BackendError> {
        let _ = (server, from, cut);
        Err(BackendError::Unsupported {
            backend: self.backend().into(),
            what: "cut a server's routes (route proxies run under sim topologies)".into(),
        })
    }
    /// A power loss of `servers` at once: SIGKILLed, then every byte each wrote since its last
    /// fsync dropped (the filesystem fault layer, [`faultfs`]). Unsupported by default.
    fn lose_unsynced(
        &mut self,
        servers: &[String],
    ) -> Result<Vec<(String, faultfs::Loss)>, BackendError> {
        let _ = servers;
        Err(BackendError::Unsupported {
            backend: self.backend().into(),
            what: "drop unsynced writes (the fault layer runs under sim topologies)".into(),
        })
    }
    /// Damages the files of stopped server `server`'s store matching `glob`. Unsupported by
    /// default.
    fn corrupt(
        &mut self,
        server: &str,
        glob: &str,
        kind: faultfs::Corruption,
    ) -> Result<Vec<faultfs::Damage>, BackendError> {
        let _ = (server, glob, kind);
        Err(BackendError::Unsupported {
            backend: self.backend().into(),
            what: "damage a store's files".into(),
        })
    }
    /// Reads stopped server `server`'s own copy of `stream` on a standalone server
    /// ([`Topology::read_replica_copy`]). Unsupported by default.
    fn read_replica_copy<'a>(
        &'a mut self,
        server: &'a str,
        stream: &'a str,
        creds: Option<&'a str>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<crate::topology::ReplicaCopy, BackendError>> {
        let _ = (server, stream, creds, timeout);
        let backend = self.backend();
        Box::pin(async move {
            Err(BackendError::Unsupported {
                backend: backend.into(),
                what: "read a replica's own copy of a stream".into(),
            })
        })
    }
}

/// What a backend cannot do, as the future its trait method returns.
pub fn unsupported<'a>(backend: &str, what: &str) -> BoxFuture<'a, Result<(), BackendError>> {
    let err = BackendError::Unsupported {
        backend: backend.into(),
        what: what.into(),
    };
    Box::pin(async move { Err(err) })
}

/// Something that can start a topology.
pub trait Backend {
    fn name(&self) -> &'static str;
    fn start<'a>(
        &'a self,
        spec: &'a TopologySpec,
    ) -> BoxFuture<'a, Result<Box<dyn Deployment>, BackendError>>;
}

/// nats-server processes on 127.0.0.1.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalBackend;

impl Backend for LocalBackend {
    fn name(&self) -> &'static str {
        "local"
    }
    fn start<'a>(
        &'a self,
        spec: &'a TopologySpec,
    ) -> BoxFuture<'a, Result<Box<dyn Deployment>, BackendError>> {
        Box::pin(async move {
            let t = Topology::start(spec.clone()).await?;
            Ok(Box::new(t) as Box<dyn Deployment>)
        })
    }
}

impl Deployment for Topology {
    fn backend(&self) -> &'static str {
        "local"
    }
    fn server_names(&self) -> Vec<String> {
        Topology::server_names(self)
    }
    fn client_urls(&self) -> Vec<String> {
        Topology::client_urls(self)
    }
    fn client_url_of(&self, server: &str) -> Option<String> {
        self.server(server).ok().map(|s| s.client_url())
    }
    fn monitor_urls(&self) -> Vec<(String, String)> {
        Topology::monitor_urls(self)
    }
    fn lose_unsynced(
        &mut self,
        servers: &[String],
    ) -> Result<Vec<(String, faultfs::Loss)>, BackendError> {
        Ok(Topology::lose_unsynced(self, servers)?)
    }
    fn route_link(
        &self,
        server: &str,
        from: &[String],
        cut: bool,
    ) -> Result<Vec<String>, BackendError> {
        Ok(if cut {
            self.cut_routes(server, from)?
        } else {
            self.restore_routes(server, from)?
        })
    }
    fn corrupt(
        &mut self,
        server: &str,
        glob: &str,
        kind: faultfs::Corruption,
    ) -> Result<Vec<faultfs::Damage>, BackendError> {
        Ok(Topology::corrupt(self, server, glob, kind)?)
    }
    fn read_replica_copy<'a>(
        &'a mut self,
        server: &'a str,
        stream: &'a str,
        creds: Option<&'a str>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<crate::topology::ReplicaCopy, BackendError>> {
        Box::pin(async move {
            Ok(Topology::read_replica_copy(self, server, stream, creds, timeout).await?)
        })
    }
    fn meta_leader(&self, timeout: Duration) -> BoxFuture<'_, Result<String, BackendError>> {
        Box::pin(async move { Ok(self.wait_meta_leader(timeout).await?) })
    }
    fn stream_leader(
        &self,
        stream: &str,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<String, BackendError>> {
        let stream = stream.to_string();
        Box::pin(async move { Ok(self.wait_stream_leader(&stream, timeout).await?) })
    }
    fn wait_healthz(&self, timeout: Duration) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move { Ok(Topology::wait_healthz(self, timeout).await?) })
    }
    fn wait_exited<'a>(
        &'a mut self,
        server: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let s = self.server_mut(server)?;
            s.wait_exit(timeout)
                .await
                .map_err(|e| BackendError::Topology(e.into()))
        })
    }
    fn fault<'a>(
        &'a mut self,
        server: &'a str,
        fault: Fault,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            if fault == Fault::WipeStore {
                return Ok(Topology::wipe_store(self, server)?);
            }
            let s = self.server_mut(server)?;
            let r = match fault {
                Fault::Kill9 => s.kill9(),
                Fault::Sigterm => s.sigterm(Duration::from_secs(60)).await,
                Fault::LameDuck => s.lame_duck(),
                Fault::Pause => s.pause(),
                Fault::Resume => s.resume(),
                Fault::Restart => s.restart().await,
                Fault::WipeStore => s.wipe_store(),
            };
            r.map_err(|e| BackendError::Topology(e.into()))
        })
    }
    fn reload_with<'a>(
        &'a mut self,
        server: &'a str,
        append: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let s = self.server_mut(server)?;
            s.edit_and_reload(|c| {
                c.extra.push_str(append);
                c.extra.push('\n');
            })
            .map_err(|e| BackendError::Topology(e.into()))
        })
    }
    fn gateway_link<'a>(
        &'a self,
        a: &'a str,
        b: &'a str,
        cut: bool,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            if cut {
                self.cut_gateway(a, b).await?;
            } else {
                self.restore_gateway(a, b).await?;
            }
            Ok(())
        })
    }
    fn leaf_link<'a>(
        &'a self,
        leaf: &'a str,
        cut: bool,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            if cut {
                self.cut_leaf(leaf).await?;
            } else {
                self.restore_leaf(leaf).await?;
            }
            Ok(())
        })
    }
}
