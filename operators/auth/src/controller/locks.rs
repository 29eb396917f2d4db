//! The per-object locks every pass of the auth controller holds, the Controllers' and the
//! revocation lane's ([`super::lane`]): no NatsUser or NatsAccount is passed over twice at once,
//! and a pass that waited for another reads its object again. Below both, so neither names the
//! other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Resource;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// Per object (`Kind namespace/name`), the lock its pass holds; an entry lives while a pass holds
/// or waits for it.
#[derive(Default)]
pub(crate) struct Locks(Arc<Mutex<HashMap<String, Arc<AsyncMutex<()>>>>>);

/// An object's lock held; the entry goes with the last holder.
pub(crate) struct Held {
    guard: Option<OwnedMutexGuard<()>>,
    lock: Arc<AsyncMutex<()>>,
    key: String,
    map: Arc<Mutex<HashMap<String, Arc<AsyncMutex<()>>>>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.guard.take();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        // The map's reference and this one: nobody else waits for it.
        if Arc::strong_count(&self.lock) == 2 {
            map.remove(&self.key);
        }
    }
}

impl Locks {
    /// Holds the lock of `key`; true when another pass held it first (what was read before is
    /// as old as that wait).
    pub(crate) async fn lock(&self, key: String) -> (Held, bool) {
        let lock = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.clone())
            .or_default()
            .clone();
        let (guard, waited) = match lock.clone().try_lock_owned() {
            Ok(g) => (g, false),
            Err(_) => (lock.clone().lock_owned().await, true),
        };
        let held = Held {
            guard: Some(guard),
            lock,
            key,
            map: self.0.clone(),
        };
        (held, waited)
    }
}

/// The key of `obj`'s lock.
pub(crate) fn key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    controller_kit::object::describe(obj)
}
