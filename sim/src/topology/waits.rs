//! The waits of a running topology, as verbs on [`crate::wait::poll`]: every meta group led
//! with all its peers current, healthz, a stream's leader and its replicas, gateways and leaf
//! links up (or down after a cut). Each reads the servers' monitoring endpoints.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Topology, TopologyError, TopologySpec};
use crate::server::{ProcessState, Server};
use crate::wait;

/// A server's role, for grouping in waits.
fn domain_of(spec: &TopologySpec, server: &Server) -> String {
    match spec.leafs.iter().find(|l| l.name == server.cluster) {
        Some(l) => format!("leaf:{}", l.domain),
        None => format!("hub:{}", spec.hub_domain.clone().unwrap_or_default()),
    }
}

impl Topology {
    /// Waits for everything the spec promises: meta leaders with all peers, healthz, gateways, leafs.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), TopologyError> {
        self.wait_meta_leader(timeout).await?;
        self.wait_healthz(timeout).await?;
        if self.spec.gateways.is_some() {
            self.wait_gateways_connected(timeout).await?;
        }
        if !self.spec.leafs.is_empty() {
            self.wait_leafs_connected(timeout).await?;
        }
        Ok(())
    }

    /// Waits until every JetStream meta group (the hub domain; each multi-server leaf domain) has a
    /// leader that all its members agree on and that sees every configured peer as current.
    /// Returns the hub's meta leader (or the single hub server's name).
    pub async fn wait_meta_leader(&self, timeout: Duration) -> Result<String, TopologyError> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for s in &self.servers {
            groups
                .entry(domain_of(&self.spec, s))
                .or_default()
                .push(s.name().to_string());
        }
        let mut hub_leader = String::new();
        for (domain, members) in groups {
            if members.len() < 2 {
                if domain.starts_with("hub:") {
                    hub_leader = members[0].clone();
                }
                continue;
            }
            let leader = wait::poll(
                &format!("meta leader of {domain} with all {} peers", members.len()),
                timeout,
                || self.meta_leader_check(&members),
            )
            .await?;
            if domain.starts_with("hub:") {
                hub_leader = leader;
            }
        }
        Ok(hub_leader)
    }

    async fn meta_leader_check(&self, members: &[String]) -> Result<Option<String>, String> {
        crate::monitored::meta_leader_among(self, members).await
    }

    /// Waits until every running server answers /healthz with ok.
    pub async fn wait_healthz(&self, timeout: Duration) -> Result<(), TopologyError> {
        let names = self.running_names();
        wait::poll("healthz ok on every running server", timeout, || async {
            for n in &names {
                let h = self.monitor(n, "/healthz").await?;
                if h["status"].as_str() != Some("ok") {
                    return Err(format!("{n}: {h}"));
                }
            }
            Ok(Some(()))
        })
        .await?;
        Ok(())
    }

    /// The server currently leading `stream` (any account), as that server itself reports.
    pub async fn stream_leader(&self, stream: &str) -> Result<Option<String>, String> {
        for n in self.running_names() {
            let jsz = self.monitor(&n, "/jsz?accounts=true&streams=true").await?;
            for acc in jsz["account_details"].as_array().into_iter().flatten() {
                for st in acc["stream_detail"].as_array().into_iter().flatten() {
                    if st["name"].as_str() != Some(stream) {
                        continue;
                    }
                    let leader = st["cluster"]["leader"].as_str().unwrap_or("");
                    // A standalone (non-clustered) server has no leader field: it is the leader.
                    if leader == n
                        || (leader.is_empty()
                            && st["cluster"]["replicas"].is_null()
                            && self
                                .server(&n)
                                .map(|s| s.config.cluster.is_none())
                                .unwrap_or(false))
                    {
                        return Ok(Some(n));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Waits until some server reports itself leader of `stream`; returns its name.
    pub async fn wait_stream_leader(
        &self,
        stream: &str,
        timeout: Duration,
    ) -> Result<String, TopologyError> {
        Ok(
            wait::poll(&format!("a leader for stream {stream}"), timeout, || {
                self.stream_leader(stream)
            })
            .await?,
        )
    }

    /// Waits until the leader of `stream` sees every replica as current; returns the leader.
    pub async fn wait_stream_current(
        &self,
        stream: &str,
        timeout: Duration,
    ) -> Result<String, TopologyError> {
        Ok(wait::poll(
            &format!("stream {stream} with a leader and every replica current"),
            timeout,
            || async {
                let Some(leader) = self.stream_leader(stream).await? else {
                    return Ok(None);
                };
                let jsz = self
                    .monitor(&leader, "/jsz?accounts=true&streams=true")
                    .await?;
                for acc in jsz["account_details"].as_array().into_iter().flatten() {
                    for st in acc["stream_detail"].as_array().into_iter().flatten() {
                        if st["name"].as_str() != Some(stream) {
                            continue;
                        }
                        let lagging: Vec<String> = st["cluster"]["replicas"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter(|r| r["current"].as_bool() != Some(true))
                            .map(|r| r["name"].as_str().unwrap_or("?").to_string())
                            .collect();
                        if lagging.is_empty() {
                            return Ok(Some(leader));
                        }
                        return Err(format!("replicas not current: {lagging:?}"));
                    }
                }
                Ok(None)
            },
        )
        .await?)
    }

    /// Waits until every running hub server has inbound and outbound gateways to every other cluster.
    pub async fn wait_gateways_connected(&self, timeout: Duration) -> Result<(), TopologyError> {
        let clusters: Vec<String> = self.spec.clusters.iter().map(|c| c.name.clone()).collect();
        let names: Vec<(String, String)> = self
            .servers
            .iter()
            .filter(|s| s.state() == ProcessState::Running && s.config.gateway.is_some())
            .map(|s| (s.name().to_string(), s.cluster.clone()))
            .collect();
        wait::poll(
            "gateways connected between every cluster",
            timeout,
            || async {
                // Every server dials one server of each other cluster (outbound); inbound connections
                // land on whichever server was dialed, so they are counted per cluster.
                let mut inbound: BTreeMap<(String, String), usize> = BTreeMap::new();
                for (n, own) in &names {
                    let gz = self.monitor(n, "/gatewayz").await?;
                    for c in clusters.iter().filter(|c| *c != own) {
                        if gz["outbound_gateways"][c].is_null() {
                            return Err(format!("{n} has no outbound gateway to {c}"));
                        }
                        let k = gz["inbound_gateways"][c]
                            .as_array()
                            .map(Vec::len)
                            .unwrap_or(0);
                        *inbound.entry((own.clone(), c.clone())).or_default() += k;
                    }
                }
                for own in &clusters {
                    for c in clusters.iter().filter(|c| *c != own) {
                        let dialers = names.iter().filter(|(_, cl)| cl == c).count();
                        let got = inbound.get(&(own.clone(), c.clone())).copied().unwrap_or(0);
                        if got < dialers {
                            return Err(format!(
                                "{own} has {got} inbound gateways from {c}, wants {dialers}"
                            ));
                        }
                    }
                }
                Ok(Some(()))
            },
        )
        .await?;
        Ok(())
    }

    /// Waits until every running leaf server has its leaf connection up.
    pub async fn wait_leafs_connected(&self, timeout: Duration) -> Result<(), TopologyError> {
        let leafs: Vec<String> = self
            .spec
            .leafs
            .iter()
            .map(|l| l.name.clone())
            .filter(|n| self.running_names().contains(n))
            .collect();
        wait::poll("leaf nodes connected to their hubs", timeout, || async {
            for n in &leafs {
                let lz = self.monitor(n, "/leafz").await?;
                if lz["leafnodes"].as_u64().unwrap_or(0) < 1 {
                    return Err(format!("{n} has no leaf connection"));
                }
            }
            Ok(Some(()))
        })
        .await?;
        Ok(())
    }

    /// Waits until the gateways of cluster `a` no longer list `b` (after a cut).
    pub async fn wait_gateway_down(
        &self,
        a: &str,
        b: &str,
        timeout: Duration,
    ) -> Result<(), TopologyError> {
        let names: Vec<String> = self
            .servers
            .iter()
            .filter(|s| s.cluster == a && s.state() == ProcessState::Running)
            .map(|s| s.name().to_string())
            .collect();
        wait::poll(&format!("gateways {a} -> {b} down"), timeout, || async {
            for n in &names {
                let gz = self.monitor(n, "/gatewayz").await?;
                if !gz["outbound_gateways"][b].is_null() || !gz["inbound_gateways"][b].is_null() {
                    return Err(format!("{n} still connected to {b}"));
                }
            }
            Ok(Some(()))
        })
        .await?;
        Ok(())
    }

    /// Waits until `leaf` has no leaf connection (after a cut).
    pub async fn wait_leaf_down(&self, leaf: &str, timeout: Duration) -> Result<(), TopologyError> {
        wait::poll(&format!("leaf {leaf} disconnected"), timeout, || async {
            let lz = self.monitor(leaf, "/leafz").await?;
            match lz["leafnodes"].as_u64().unwrap_or(0) {
                0 => Ok(Some(())),
                n => Err(format!("{n} leaf connections")),
            }
        })
        .await?;
        Ok(())
    }
}

impl crate::monitored::Monitored for Topology {
    fn members(&self) -> Vec<crate::monitored::Member> {
        self.servers
            .iter()
            .map(|s| crate::monitored::Member {
                name: s.name().to_string(),
                cluster: s.cluster.clone(),
            })
            .collect()
    }

    fn monitor<'a>(
        &'a self,
        name: &'a str,
        path: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<serde_json::Value, String>> {
        Box::pin(Topology::monitor(self, name, path))
    }
}
