//! What the sim asks of the servers a cluster controller runs, through their monitoring ports,
//! whatever runs them ([`Monitored`]: local processes or the node's pods): the meta leader every
//! server of a NATS cluster agrees on, a stream's leader, healthz on every server.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::backend::BackendError;
use crate::wait;

/// One server: its name and its NATS cluster's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub cluster: String,
}

/// Servers whose monitoring endpoints the sim reaches.
pub trait Monitored: Sync {
    /// Every server, in order.
    fn members(&self) -> Vec<Member>;
    /// `GET path` (`/jsz`, `/healthz`) of server `name`'s monitoring port, as JSON.
    fn monitor<'a>(&'a self, name: &'a str, path: &'a str) -> BoxFuture<'a, Result<Value, String>>;
}

/// The meta leader every server of the first NATS cluster agrees on, seeing every peer
/// current; None while no server names one.
pub async fn meta_leader(m: &dyn Monitored) -> Result<Option<String>, String> {
    let all = m.members();
    let Some(first) = all.first().map(|s| s.cluster.clone()) else {
        return Err("no servers".into());
    };
    let members: Vec<String> = all
        .into_iter()
        .filter(|s| s.cluster == first)
        .map(|s| s.name)
        .collect();
    meta_leader_among(m, &members).await
}

/// The meta leader all of `members` (one meta group) agree on, seeing every other member
/// current; None while no member names one. A lone member with no leader named is its own.
pub async fn meta_leader_among(
    m: &dyn Monitored,
    members: &[String],
) -> Result<Option<String>, String> {
    let mut leader: Option<String> = None;
    for name in members {
        let jsz = m.monitor(name, "/jsz").await?;
        let l = jsz["meta_cluster"]["leader"].as_str().unwrap_or("");
        if l.is_empty() {
            if members.len() == 1 {
                return Ok(Some(name.clone()));
            }
            return Err(format!("{name} sees no meta leader"));
        }
        match &leader {
            Some(prev) if prev != l => {
                return Err(format!("{name} sees {l}, others {prev}"));
            }
            _ => leader = Some(l.to_string()),
        }
    }
    let Some(leader) = leader else {
        return Ok(None);
    };
    if !members.contains(&leader) {
        // A leader in another cluster of the supercluster: it is the answer.
        return Ok(Some(leader));
    }
    let jsz = m.monitor(&leader, "/jsz").await?;
    let current: BTreeSet<String> = jsz["meta_cluster"]["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["current"].as_bool() == Some(true) && r["offline"].as_bool() != Some(true))
        .filter_map(|r| r["name"].as_str().map(String::from))
        .collect();
    let missing: Vec<&String> = members
        .iter()
        .filter(|s| **s != leader && !current.contains(*s))
        .collect();
    if missing.is_empty() {
        Ok(Some(leader))
    } else {
        Err(format!(
            "leader {leader} does not see {missing:?} as current"
        ))
    }
}

/// The server leading `stream` (of any account), if one answers that it does.
pub async fn stream_leader(m: &dyn Monitored, stream: &str) -> Result<Option<String>, String> {
    for s in m.members() {
        let Ok(jsz) = m.monitor(&s.name, "/jsz?accounts=true&streams=true").await else {
            continue;
        };
        for acc in jsz["account_details"].as_array().into_iter().flatten() {
            for st in acc["stream_detail"].as_array().into_iter().flatten() {
                if st["name"].as_str() == Some(stream)
                    && st["cluster"]["leader"].as_str() == Some(s.name.as_str())
                {
                    return Ok(Some(s.name.clone()));
                }
            }
        }
    }
    Ok(None)
}

/// `Some(())` once every server's healthz says ok.
pub async fn healthz(m: &dyn Monitored) -> Result<Option<()>, String> {
    for s in m.members() {
        let h = m.monitor(&s.name, "/healthz").await?;
        if h["status"].as_str() != Some("ok") {
            return Err(format!("{}: {h}", s.name));
        }
    }
    Ok(Some(()))
}

fn failed(backend: &'static str) -> impl Fn(crate::wait::WaitError) -> BackendError {
    move |e| BackendError::Other {
        backend: backend.into(),
        message: e.to_string(),
    }
}

/// [`meta_leader`] polled until it answers, within `timeout`: a [`Deployment::meta_leader`].
///
/// [`Deployment::meta_leader`]: crate::backend::Deployment::meta_leader
pub fn wait_meta_leader<'a>(
    m: &'a dyn Monitored,
    backend: &'static str,
    timeout: Duration,
) -> BoxFuture<'a, Result<String, BackendError>> {
    Box::pin(async move {
        wait::poll("a meta leader with all peers", timeout, || meta_leader(m))
            .await
            .map_err(failed(backend))
    })
}

/// [`stream_leader`] polled until it answers, within `timeout`.
pub fn wait_stream_leader<'a>(
    m: &'a dyn Monitored,
    backend: &'static str,
    stream: &str,
    timeout: Duration,
) -> BoxFuture<'a, Result<String, BackendError>> {
    let stream = stream.to_string();
    Box::pin(async move {
        wait::poll(&format!("a leader for stream {stream}"), timeout, || {
            stream_leader(m, &stream)
        })
        .await
        .map_err(failed(backend))
    })
}

/// [`healthz`] polled until every server says ok, within `timeout`.
pub fn wait_healthz<'a>(
    m: &'a dyn Monitored,
    backend: &'static str,
    timeout: Duration,
) -> BoxFuture<'a, Result<(), BackendError>> {
    Box::pin(async move {
        wait::poll("healthz ok on every server", timeout, || healthz(m))
            .await
            .map_err(failed(backend))
    })
}
