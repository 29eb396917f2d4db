//! Asking the servers how they are: through the system connection (`auth.systemCredentials`,
//! `$SYS.REQ.SERVER.PING.{STATSZ,JSZ,GATEWAYZ,LEAFZ}`) or, without one, each server's monitoring
//! endpoint (`/varz`, `/jsz`, `/gatewayz`, `/leafz` at the port's [`ServerAddress`]).

use std::collections::BTreeMap;
use std::time::Duration;

use nats_wire::monitor::{GatewayzOptions, JszOptions, LeafzOptions};
use nats_wire::{Collect, ConnectionConfig, ServerFilter};
use serde::de::DeserializeOwned;

use super::status::{Observation, ServerAnswer};
use crate::lifecycle::ServerAddress;

/// How long one observation may wait for the servers.
pub const OBSERVE_TIMEOUT: Duration = Duration::from_secs(2);

/// What to ask for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Asks {
    pub jetstream: bool,
    pub gateways: bool,
    pub leafnodes: bool,
}

/// The system user the controller asks with.
#[derive(Clone)]
pub struct SystemAccess {
    pub creds: String,
    /// The client listener's CA (the client Secret's ca.crt), when it runs TLS with one.
    pub ca_pem: Option<Vec<u8>>,
}

/// Dials the system connection to `servers` (a reload asks over it).
pub async fn dial_system(
    servers: &[(String, ServerAddress)],
    access: &SystemAccess,
) -> Result<nats_wire::Wire, nats_wire::DialError> {
    nats_wire::dial(&system_config(servers, access)).await
}

/// The system connection's settings: the controller's name and its preset inbox prefix
/// (`_INBOX.cluster-controller`, the only inbox the auth plane's cluster-controller user may
/// subscribe to; any other system user may use it too).
fn system_config(servers: &[(String, ServerAddress)], access: &SystemAccess) -> ConnectionConfig {
    let mut config = ConnectionConfig::new(servers.iter().map(|(_, a)| a.client_url.clone()))
        .with_creds(access.creds.clone())
        .with_name("cluster-controller")
        .with_inbox_prefix(nats_wire::preset_inbox_prefix("cluster-controller"))
        .with_connect_timeout(OBSERVE_TIMEOUT)
        .with_request_timeout(OBSERVE_TIMEOUT);
    if let Some(ca) = &access.ca_pem {
        config = config.with_ca_pem(ca.clone());
    }
    config
}

/// Asks the servers over the system connection; the answers of servers not in `servers` (other
/// members of a supercluster) are left out.
pub async fn over_system(
    cluster: &str,
    servers: &[(String, ServerAddress)],
    asks: Asks,
    access: &SystemAccess,
) -> Observation {
    let wire = match nats_wire::dial(&system_config(servers, access)).await {
        Ok(w) => w,
        Err(e) => {
            return Observation {
                failure: Some(format!("system connection: {e}")),
                ..Default::default()
            };
        }
    };
    let filter = ServerFilter::cluster(cluster);
    let collect = Collect {
        deadline: OBSERVE_TIMEOUT,
        expect: Some(servers.len()),
    };
    let ours = |name: &str| servers.iter().any(|(n, _)| n == name);
    let mut obs = Observation::default();
    match wire.ping_statsz(&filter, collect).await {
        Ok(replies) => {
            for r in replies.replies.into_iter().filter(|r| ours(&r.server.name)) {
                obs.answers.insert(
                    r.server.name.clone(),
                    ServerAnswer {
                        name: r.server.name.clone(),
                        version: Some(r.server.version.clone()).filter(|v| !v.is_empty()),
                        // A system user reached it: only an operator-mode server has one.
                        auth: Some(true),
                        ..Default::default()
                    },
                );
            }
        }
        Err(e) => obs.failure = Some(format!("STATSZ: {e}")),
    }
    // Each server's config digest: which rendered config it runs (the gate's revision check).
    match wire.ping_varz(&filter, collect).await {
        Ok(replies) => {
            for r in replies.replies {
                if let Some(a) = obs.answers.get_mut(&r.server.name) {
                    a.certificates = loaded_certificates(&r.data);
                    a.config_digest = Some(r.data.config_digest).filter(|d| !d.is_empty());
                }
            }
        }
        Err(e) => obs.failure = Some(format!("VARZ: {e}")),
    }
    if asks.jetstream {
        let options = JszOptions {
            filter: filter.clone(),
            accounts: true,
            streams: true,
            consumer: true,
            raft_groups: true,
            ..Default::default()
        };
        match wire.ping_jsz(&options, collect).await {
            Ok(replies) => {
                for r in replies.replies {
                    if let Some(a) = obs.answers.get_mut(&r.server.name) {
                        a.jsz = Some(r.data);
                    }
                }
            }
            Err(e) => obs.failure = Some(format!("JSZ: {e}")),
        }
    }
    if asks.gateways {
        let options = GatewayzOptions {
            filter: filter.clone(),
            ..Default::default()
        };
        match wire.ping_gatewayz(&options, collect).await {
            Ok(replies) => {
                for r in replies.replies {
                    if let Some(a) = obs.answers.get_mut(&r.server.name) {
                        a.gatewayz = Some(r.data);
                    }
                }
            }
            Err(e) => obs.failure = Some(format!("GATEWAYZ: {e}")),
        }
    }
    if asks.leafnodes {
        let options = LeafzOptions {
            filter,
            ..Default::default()
        };
        match wire.ping_leafz(&options, collect).await {
            Ok(replies) => {
                for r in replies.replies {
                    if let Some(a) = obs.answers.get_mut(&r.server.name) {
                        a.leafz = Some(r.data);
                    }
                }
            }
            Err(e) => obs.failure = Some(format!("LEAFZ: {e}")),
        }
    }
    obs
}

async fn get<T: DeserializeOwned>(http: &reqwest::Client, url: String) -> Result<T, String> {
    let resp = http
        .get(&url)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("{url}: HTTP {}", resp.status()));
    }
    resp.json::<T>().await.map_err(|e| format!("{url}: {e}"))
}

/// Asks each server's monitoring endpoint; a server whose `/varz` does not answer is silent.
pub async fn over_monitor(servers: &[(String, ServerAddress)], asks: Asks) -> Observation {
    let http = match reqwest::Client::builder().timeout(OBSERVE_TIMEOUT).build() {
        Ok(c) => c,
        Err(e) => {
            return Observation {
                failure: Some(format!("HTTP client: {e}")),
                ..Default::default()
            };
        }
    };
    let asks_one = servers.iter().map(|(name, addr)| {
        let http = http.clone();
        async move {
            let base = addr.monitor_url.trim_end_matches('/').to_string();
            let varz: nats_wire::monitor::Varz = get(&http, format!("{base}/varz")).await?;
            let certificates = loaded_certificates(&varz);
            let mut a = ServerAnswer {
                name: name.clone(),
                certificates,
                version: Some(varz.version).filter(|v| !v.is_empty()),
                auth: super::status::auth_from_system_account(&varz.system_account),
                config_digest: Some(varz.config_digest).filter(|d| !d.is_empty()),
                ..Default::default()
            };
            if asks.jetstream {
                a.jsz = Some(
                    get(
                        &http,
                        format!("{base}/jsz?accounts=true&streams=true&consumers=true&raft=true"),
                    )
                    .await?,
                );
            }
            if asks.gateways {
                a.gatewayz = Some(get(&http, format!("{base}/gatewayz")).await?);
            }
            if asks.leafnodes {
                a.leafz = Some(get(&http, format!("{base}/leafz")).await?);
            }
            Ok::<_, String>(a)
        }
    });
    let mut obs = Observation::default();
    let mut failures = vec![];
    for r in futures::future::join_all(asks_one).await {
        match r {
            Ok(a) => {
                obs.answers.insert(a.name.clone(), a);
            }
            Err(e) => failures.push(e),
        }
    }
    if !failures.is_empty() {
        obs.failure = Some(failures.join("; "));
    }
    obs
}

/// NotAfter (unix seconds) of the certificate each TLS listener of a server loaded.
fn loaded_certificates(varz: &nats_wire::monitor::Varz) -> BTreeMap<String, i64> {
    varz.loaded_certificates()
        .into_iter()
        .map(|(l, t)| (l, t.timestamp()))
        .collect()
}
