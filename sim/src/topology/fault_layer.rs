//! The fault layer under a topology's stores ([`faultfs`]): each server the spec names runs its
//! JetStream store on a FUSE mount over a directory beside it, so a power loss can drop what
//! it wrote since its last fsync, and a store at rest can be damaged. Servers not named run on
//! a plain directory and pay nothing.

use std::collections::BTreeMap;

use faultfs::{Corruption, Damage, FaultFs, Loss};

use super::{Topology, TopologyError};
use crate::server::Server;

/// The directory beside a server's store that holds what is durable.
const DURABLE: &str = "store-durable";

/// Mounts the layer over the store of every server `names` lists. Every name must be a server
/// of the topology; the layer must be available (FUSE, root), or this fails saying why.
pub(super) fn mount(
    servers: &[Server],
    names: &std::collections::BTreeSet<String>,
) -> Result<BTreeMap<String, FaultFs>, TopologyError> {
    let mut layers = BTreeMap::new();
    for name in names {
        let server = servers
            .iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| TopologyError::NoSuchServer(name.clone()))?;
        let store = server
            .store_dir()
            .ok_or_else(|| TopologyError::Invalid(format!("{name} runs no JetStream store")))?
            .to_path_buf();
        let durable = server.dir().join(DURABLE);
        for d in [&store, &durable] {
            std::fs::create_dir_all(d).map_err(TopologyError::TempDir)?;
        }
        layers.insert(name.clone(), FaultFs::mount(&durable, &store)?);
    }
    Ok(layers)
}

impl Topology {
    /// The fault layer under `server`'s store, if it has one.
    pub fn fault_layer(&self, server: &str) -> Option<&FaultFs> {
        self.layers.get(server)
    }

    /// A power loss of `servers` at once: each is SIGKILLed, and then every byte each wrote
    /// since its last fsync of that file is dropped. Every server named must run its store on
    /// the fault layer. Returns what each lost; the servers stay down until restarted.
    pub fn lose_unsynced(
        &mut self,
        servers: &[String],
    ) -> Result<Vec<(String, Loss)>, TopologyError> {
        for name in servers {
            if !self.layers.contains_key(name) {
                return Err(TopologyError::Invalid(format!(
                    "{name}'s store is not on the fault layer (topology.fault_layer): it has no unsynced writes to lose"
                )));
            }
        }
        // Every process dies before any byte is dropped, as when the power goes.
        for name in servers {
            let s = self.server_mut(name)?;
            if s.is_running() {
                s.kill9()?;
            }
        }
        Ok(servers
            .iter()
            .filter_map(|n| self.layers.get(n).map(|l| (n.clone(), l.lose_unsynced())))
            .collect())
    }

    /// Deletes stopped server `server`'s store, on the layer or not. On the layer the store is
    /// the mountpoint, which stays: what is under it goes (and with it its unsynced bytes).
    pub fn wipe_store(&mut self, server: &str) -> Result<(), TopologyError> {
        let Some(layer) = self.layers.get(server) else {
            return Ok(self.server_mut(server)?.wipe_store()?);
        };
        let store = layer.mountpoint().to_path_buf();
        if self.server_mut(server)?.is_running() {
            return Err(TopologyError::Invalid(format!(
                "{server} must be stopped to wipe its store"
            )));
        }
        let entries = std::fs::read_dir(&store).map_err(TopologyError::TempDir)?;
        for entry in entries {
            let path = entry.map_err(TopologyError::TempDir)?.path();
            if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            }
            .map_err(TopologyError::TempDir)?;
        }
        Ok(())
    }

    /// Damages every file of stopped server `server`'s store matching `glob` (relative to the
    /// store directory): through the fault layer when the store is on it, else in place.
    pub fn corrupt(
        &mut self,
        server: &str,
        glob: &str,
        kind: Corruption,
    ) -> Result<Vec<Damage>, TopologyError> {
        let s = self.server_mut(server)?;
        if s.is_running() {
            return Err(TopologyError::Invalid(format!(
                "{server} is running: a store is damaged only while its server is down"
            )));
        }
        let store = s
            .store_dir()
            .ok_or_else(|| TopologyError::Invalid(format!("{server} runs no JetStream store")))?
            .to_path_buf();
        Ok(match self.layers.get(server) {
            Some(layer) => layer.corrupt(glob, kind)?,
            None => faultfs::corrupt_dir(&store, glob, kind)?,
        })
    }
}
