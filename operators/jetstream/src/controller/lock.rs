//! The controller's in-memory records behind a mutex: locked with poisoning ignored, since each
//! pass rewrites them. Below the context, the census and the shares, which all lock.

use std::sync::{Mutex, MutexGuard};

/// A lock of the in-memory records, poisoning ignored (the records are rewritten every pass).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
