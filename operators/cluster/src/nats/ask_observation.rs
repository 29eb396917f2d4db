//! Asking the servers how they are: through the system connection (`auth.systemCredentials`,
//! `$SYS.REQ.SERVER.PING.{STATSZ,VARZ,JSZ,GATEWAYZ,LEAFZ}`) or, without one, each server's
//! monitoring endpoint (`/varz`, `/jsz`, `/gatewayz`, `/leafz` at the port's [`ServerAddress`]).
//! What they answer is an [`Observation`]; what it means is judged elsewhere (pure).

use std::collections::BTreeMap;

use nats_wire::monitor::{GatewayzOptions, JszOptions, LeafzOptions};
use nats_wire::{Collect, PingReplies, ServerFilter, WireError};
use serde::de::DeserializeOwned;

use super::system_connection::{OBSERVE_TIMEOUT, SystemAccess, dial_system};
use crate::observation::{Observation, ServerAnswer, auth_from_system_account};
use crate::server_lifecycle::ServerAddress;

/// What to ask for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Asks {
    pub jetstream: bool,
    pub gateways: bool,
    pub leafnodes: bool,
}

/// Puts each answer of one ping into the server's [`ServerAnswer`] (servers that did not answer
/// STATSZ are left out); a failed ping is the observation's failure, named by `what`.
fn record<T>(
    obs: &mut Observation,
    what: &str,
    replies: Result<PingReplies<T>, WireError>,
    mut set: impl FnMut(&mut ServerAnswer, T),
) {
    match replies {
        Ok(replies) => {
            for r in replies.replies {
                if let Some(a) = obs.answers.get_mut(&r.server.name) {
                    set(a, r.data);
                }
            }
        }
        Err(e) => obs.failure = Some(format!("{what}: {e}")),
    }
}

/// Asks the servers over the system connection; the answers of servers not in `servers` (other
/// members of a supercluster) are left out.
pub async fn over_system(
    cluster: &str,
    servers: &[(String, ServerAddress)],
    asks: Asks,
    access: &SystemAccess,
) -> Observation {
    let wire = match dial_system(servers, access).await {
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
    let varz = wire.ping_varz(&filter, collect).await;
    record(&mut obs, "VARZ", varz, |a, v| {
        a.certificates = loaded_certificates(&v);
        a.config_digest = Some(v.config_digest).filter(|d| !d.is_empty());
    });
    if asks.jetstream {
        let options = JszOptions {
            filter: filter.clone(),
            accounts: true,
            streams: true,
            consumer: true,
            raft_groups: true,
            ..Default::default()
        };
        let jsz = wire.ping_jsz(&options, collect).await;
        record(&mut obs, "JSZ", jsz, |a, j| a.jsz = Some(j));
    }
    if asks.gateways {
        let options = GatewayzOptions {
            filter: filter.clone(),
            ..Default::default()
        };
        let gatewayz = wire.ping_gatewayz(&options, collect).await;
        record(&mut obs, "GATEWAYZ", gatewayz, |a, g| a.gatewayz = Some(g));
    }
    if asks.leafnodes {
        let options = LeafzOptions {
            filter,
            ..Default::default()
        };
        let leafz = wire.ping_leafz(&options, collect).await;
        record(&mut obs, "LEAFZ", leafz, |a, l| a.leafz = Some(l));
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

/// Asks one server's monitoring endpoint at `addr` what `asks` names.
async fn ask_monitor(
    http: &reqwest::Client,
    name: &str,
    addr: &ServerAddress,
    asks: Asks,
) -> Result<ServerAnswer, String> {
    let base = addr.monitor_url.trim_end_matches('/').to_string();
    let varz: nats_wire::monitor::Varz = get(http, format!("{base}/varz")).await?;
    let certificates = loaded_certificates(&varz);
    let mut a = ServerAnswer {
        name: name.to_string(),
        certificates,
        version: Some(varz.version).filter(|v| !v.is_empty()),
        auth: auth_from_system_account(&varz.system_account),
        config_digest: Some(varz.config_digest).filter(|d| !d.is_empty()),
        ..Default::default()
    };
    if asks.jetstream {
        a.jsz = Some(
            get(
                http,
                format!("{base}/jsz?accounts=true&streams=true&consumers=true&raft=true"),
            )
            .await?,
        );
    }
    if asks.gateways {
        a.gatewayz = Some(get(http, format!("{base}/gatewayz")).await?);
    }
    if asks.leafnodes {
        a.leafz = Some(get(http, format!("{base}/leafz")).await?);
    }
    Ok(a)
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
    let asked = servers
        .iter()
        .map(|(name, addr)| ask_monitor(&http, name, addr, asks));
    let mut obs = Observation::default();
    let mut failures = vec![];
    for r in futures::future::join_all(asked).await {
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
