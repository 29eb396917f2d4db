//! The run's apiserver pool: kube-apiserver 1.20 pairs booted once for a test run and lent to
//! its tests one at a time, reset between them, instead of one pair booted and killed per test.
//!
//! Why: a gate's run booted 139 pairs, about 3.9 CPU s of kube-apiserver and 0.6 of etcd each
//! over its life, most of it the boot (2.5 CPU s to ready over a seed, docs/testing.md,
//! "Session 40"), and each boot is seconds of the test's slot spent waiting. Lent again, a pair
//! costs its reset: one read of etcd, the keys the test wrote undone, the server's caches waited
//! for ([`reset`]).
//!
//! How: `sim apiserver-pool -- <command>` ([`run`]) listens on a Unix socket in a directory of
//! its own, runs `<command>` (the test run) with [`ENV_POOL`] naming the socket, and when the
//! command ends stops every pair it booted, by PID, and removes their directories: its pairs
//! end with the run that asked for them, as a test's own pair ends with the test. A test that
//! asks for a pair over a seed ([`super::ApiServer::start_seeded`]) with [`ENV_POOL`] set asks
//! the pool ([`lease`]); without it, or for any other pair, it boots its own as before.
//!
//! A pair is lent to one process at a time. The pool resets it only once the borrowing process
//! has exited (its controllers' tasks die with it, so nothing writes behind the reset), and
//! lends it again only if etcd, read once more after the reset, holds the baseline. A test that
//! panics retires its pair: the pool stops it and keeps its directory for reading.
//!
//! The protocol, one JSON line each way: [`Request`], then [`Answer`]; the connection held
//! while the test runs; `retire` and the kept directory's path back, or the close.

pub(crate) mod lease;
pub(crate) mod reset;
mod serve;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(test)]
pub(crate) use serve::{Pool, View};
pub use serve::{PoolError, run};

/// The environment variable that names the pool's socket to the tests.
pub const ENV_POOL: &str = "SIM_APISERVER_POOL";

/// The socket of the run's pool, if the tests run under one.
pub(crate) fn socket() -> Option<PathBuf> {
    std::env::var_os(ENV_POOL)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

/// A test's request: a pair booted over the etcd seed `seed`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Request {
    pub(crate) seed: PathBuf,
}

/// The pool's answer to a [`Request`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Answer {
    Granted(Granted),
    /// No pair could be booted: why.
    Refused(String),
}

/// A pair lent: where it lives and how to reach it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Granted {
    /// The instance directory: `kubeconfig`, `pki/`, the logs.
    pub(crate) root: PathBuf,
    pub(crate) url: String,
    pub(crate) etcd_pid: u32,
    pub(crate) server_pid: u32,
    /// The audit log's length when lent: the borrower's events follow it.
    pub(crate) audit_from: u64,
}
