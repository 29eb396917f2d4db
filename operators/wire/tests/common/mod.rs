//! Shared parts of the live tests: dialing a topology's system and application users through
//! `nats_wire::dial`, and the server roster (name → id) from STATSZ.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use nats_wire::{Collect, ConnectionConfig, ServerFilter, Wire, dial};
use sim::topology::{APP_USER, SYS_USER, Topology};

pub const WAIT: Duration = Duration::from_secs(30);

/// `nats://user:pass@host:port` for every hub server (a NatsConnection's servers with the user in
/// the URL, as async-nats reads it).
pub fn urls_with_user(topo: &Topology, user: (&str, &str)) -> Vec<String> {
    topo.client_urls()
        .iter()
        .map(|u| u.replacen("nats://", &format!("nats://{}:{}@", user.0, user.1), 1))
        .collect()
}

/// The system user of an [`sim::topology::Auth::Accounts`] topology, with the cluster
/// controller preset's inbox prefix.
pub async fn sys_wire(topo: &Topology) -> Wire {
    dial(
        &ConnectionConfig::new(urls_with_user(topo, SYS_USER))
            .with_inbox_prefix(nats_wire::preset_inbox_prefix("cluster-controller"))
            .with_name("wire-test-sys"),
    )
    .await
    .expect("dial the system user")
}

/// The application user (APP account) of an Accounts topology.
pub async fn app_wire(topo: &Topology) -> Wire {
    dial(&ConnectionConfig::new(urls_with_user(topo, APP_USER)).with_name("wire-test-app"))
        .await
        .expect("dial the app user")
}

/// Server name → server id, from a STATSZ ping that must reach `expected` servers.
pub async fn roster(wire: &Wire, expected: usize) -> BTreeMap<String, String> {
    let replies = wire
        .ping_statsz(
            &ServerFilter::all(),
            Collect::expecting(expected, Duration::from_secs(5)),
        )
        .await
        .expect("STATSZ ping");
    assert_eq!(
        replies.replies.len(),
        expected,
        "STATSZ answers: {:?}, failures {:?}",
        replies.server_names(),
        replies.failures
    );
    replies
        .replies
        .iter()
        .map(|r| (r.server.name.clone(), r.server.id.clone()))
        .collect()
}

/// Polls `check` every 100 ms until it yields `Some`, failing the test after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, String>>,
{
    match sim::wait::poll(what, timeout, check).await {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}
