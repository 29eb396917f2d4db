//! Cutting one server from its cluster peers: a network cut of its routes, as a partition does,
//! where the server and its clients keep running (`spec.route_proxies`).
//!
//! Each server dials each peer through a proxy of that ordered pair (its explicit routes name
//! the proxies), so every connection between two servers — the three of nats-server's route pool
//! (`pool_size`, default 3) and any other — goes through one of the pair's two proxies, whichever
//! side dialed. A route learned by gossip (implicit) would be dialed at the peer's
//! `cluster.advertise`, which no pair proxy can stand for, since a server advertises one address
//! to every peer; so each server advertises a [`RefusingPort`]: nats-server gives an implicit
//! route up after one refused dial, and with every peer listed explicitly it needs none.
//!
//! A cut is named by the server it cuts and the peers it cuts it from; a link is cut while any
//! cut names it ([`link_cut`]), so restoring one server's cut leaves a link another cut also
//! covers cut.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use super::{Topology, TopologyError};
use crate::proxy::{LinkProxy, ProxyError, RefusingPort};
use crate::server::ProcessState;
use crate::wait;

/// Per server whose routes a cut names, the peers it is cut from.
pub type RouteCuts = BTreeMap<String, BTreeSet<String>>;

/// Whether the link between servers `a` and `b` is cut: some cut of `a` names `b`, or of `b`
/// names `a`.
pub fn link_cut(cuts: &RouteCuts, a: &str, b: &str) -> bool {
    let names = |x: &str, y: &str| cuts.get(x).is_some_and(|p| p.contains(y));
    names(a, b) || names(b, a)
}

/// The route proxies of a topology: one per ordered pair of servers of a cluster, each server's
/// refusing advertised port, and the cuts in force. Empty unless `spec.route_proxies`.
#[derive(Debug, Default)]
pub(super) struct RouteLinks {
    /// (dialer, dialed) → the proxy the dialer's route to the dialed goes through.
    proxies: BTreeMap<(String, String), LinkProxy>,
    /// Server → the port it advertises for routes (refusing).
    advertised: BTreeMap<String, RefusingPort>,
    cuts: Mutex<RouteCuts>,
}

impl RouteLinks {
    /// Proxies for every ordered pair of each cluster's servers, forwarding to the dialed
    /// server's cluster port (`cluster_port`), and a refusing port per server; nothing bound.
    pub(super) fn allocate<'a>(
        clusters: impl Iterator<Item = &'a [String]>,
        cluster_port: impl Fn(&str) -> u16,
    ) -> Self {
        let mut links = RouteLinks::default();
        for names in clusters.filter(|n| n.len() > 1) {
            for a in names {
                links
                    .advertised
                    .insert(a.clone(), RefusingPort::new(crate::ports::free_port()));
                for b in names.iter().filter(|b| *b != a) {
                    let target = ("127.0.0.1".to_string(), cluster_port(b));
                    links.proxies.insert(
                        (a.clone(), b.clone()),
                        LinkProxy::new(crate::ports::free_port(), target),
                    );
                }
            }
        }
        links
    }

    /// Binds every proxy and refusing port.
    pub(super) async fn start(&mut self) -> Result<(), ProxyError> {
        for r in self.advertised.values_mut() {
            r.bind()?;
        }
        for p in self.proxies.values_mut() {
            p.start().await?;
        }
        Ok(())
    }

    /// The route URL server `from` dials server `to` at, if a proxy stands between them.
    pub(super) fn route_url(&self, from: &str, to: &str) -> Option<String> {
        self.proxies
            .get(&(from.to_string(), to.to_string()))
            .map(|p| format!("nats-route://127.0.0.1:{}", p.listen_port()))
    }

    /// The address server `name` advertises to its route peers, if it has a refusing port.
    pub(super) fn advertise(&self, name: &str) -> Option<String> {
        self.advertised
            .get(name)
            .map(|r| format!("127.0.0.1:{}", r.port()))
    }

    fn cuts(&self) -> std::sync::MutexGuard<'_, RouteCuts> {
        self.cuts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cuts or restores every proxy as the cuts in force say.
    fn enforce(&self, cuts: &RouteCuts) {
        for ((a, b), p) in &self.proxies {
            if link_cut(cuts, a, b) {
                p.cut_all();
            } else {
                p.restore_all();
            }
        }
    }
}

impl Topology {
    /// The cluster peers of `server` that `from` names, or all of them when it names none;
    /// fails on a name that is not a peer, or when the topology has no route proxies.
    fn route_peers(&self, server: &str, from: &[String]) -> Result<Vec<String>, TopologyError> {
        let cluster = self.server(server)?.cluster.clone();
        let peers: Vec<String> = self
            .servers
            .iter()
            .filter(|s| s.cluster == cluster && s.name() != server)
            .map(|s| s.name().to_string())
            .collect();
        if peers.is_empty() || self.routes.route_url(server, &peers[0]).is_none() {
            return Err(TopologyError::Invalid(format!(
                "{server} has no proxied routes (spec.route_proxies is off, or it has no peers)"
            )));
        }
        if let Some(bad) = from.iter().find(|f| !peers.contains(f)) {
            return Err(TopologyError::Invalid(format!(
                "{bad} is not a cluster peer of {server} (peers: {})",
                peers.join(", ")
            )));
        }
        Ok(if from.is_empty() {
            peers
        } else {
            from.to_vec()
        })
    }

    /// Cuts `server` from the peers `from` names (every peer of its cluster when empty): every
    /// route connection between them, whichever side dialed, is closed and new ones refused
    /// until [`Topology::restore_routes`]. Returns the peers it is cut from.
    pub fn cut_routes(&self, server: &str, from: &[String]) -> Result<Vec<String>, TopologyError> {
        let peers = self.route_peers(server, from)?;
        let mut cuts = self.routes.cuts();
        cuts.entry(server.to_string())
            .or_default()
            .extend(peers.iter().cloned());
        self.routes.enforce(&cuts);
        Ok(peers)
    }

    /// Lifts what `server`'s cuts from the peers `from` names (all, when empty) cut; a link
    /// another server's cut also names stays cut. Returns the peers named.
    pub fn restore_routes(
        &self,
        server: &str,
        from: &[String],
    ) -> Result<Vec<String>, TopologyError> {
        let peers = self.route_peers(server, from)?;
        let mut cuts = self.routes.cuts();
        if let Some(set) = cuts.get_mut(server) {
            set.retain(|p| !peers.contains(p));
            if set.is_empty() {
                cuts.remove(server);
            }
        }
        self.routes.enforce(&cuts);
        Ok(peers)
    }

    /// Connections the route proxy from `from` to `to` carries now (0 without one).
    pub fn route_connections(&self, from: &str, to: &str) -> usize {
        self.routes
            .proxies
            .get(&(from.to_string(), to.to_string()))
            .map_or(0, LinkProxy::connections)
    }

    /// The peers each running server's /routez lists routes to, with how many connections.
    async fn routed_peers(&self, name: &str) -> Result<BTreeMap<String, usize>, String> {
        let rz = self.monitor(name, "/routez").await?;
        let mut out = BTreeMap::new();
        for r in rz["routes"].as_array().into_iter().flatten() {
            let peer = r["remote_name"].as_str().unwrap_or("?").to_string();
            *out.entry(peer).or_default() += 1;
        }
        Ok(out)
    }

    fn running(&self, name: &str) -> bool {
        self.server(name)
            .is_ok_and(|s| s.state() == ProcessState::Running)
    }

    /// Waits until no running server among `server` and `peers` lists a route across the cut:
    /// `server` none to any of `peers`, each of them none to `server`.
    pub async fn wait_routes_cut(
        &self,
        server: &str,
        peers: &[String],
        timeout: Duration,
    ) -> Result<(), TopologyError> {
        wait::poll(
            &format!("routes between {server} and {} down", peers.join(", ")),
            timeout,
            || async {
                if self.running(server) {
                    let seen = self.routed_peers(server).await?;
                    if let Some(p) = peers.iter().find(|p| seen.contains_key(*p)) {
                        return Err(format!("{server} still routes to {p}"));
                    }
                }
                for p in peers.iter().filter(|p| self.running(p)) {
                    if self.routed_peers(p).await?.contains_key(server) {
                        return Err(format!("{p} still routes to {server}"));
                    }
                }
                Ok(Some(()))
            },
        )
        .await?;
        Ok(())
    }

    /// Waits until every running server routes to every running peer of its cluster that no
    /// cut separates it from, with at least `pool` connections each (nats-server's pool_size).
    pub async fn wait_routes_connected(
        &self,
        pool: usize,
        timeout: Duration,
    ) -> Result<(), TopologyError> {
        wait::poll("routes up between every uncut pair", timeout, || async {
            let cuts = self.routes.cuts().clone();
            for s in self.servers.iter().filter(|s| self.running(s.name())) {
                let seen = self.routed_peers(s.name()).await?;
                for p in self.servers.iter().filter(|p| {
                    p.cluster == s.cluster
                        && p.name() != s.name()
                        && self.running(p.name())
                        && !link_cut(&cuts, s.name(), p.name())
                }) {
                    let n = seen.get(p.name()).copied().unwrap_or(0);
                    if n < pool {
                        return Err(format!(
                            "{} has {n} route connections to {}, wants {pool}",
                            s.name(),
                            p.name()
                        ));
                    }
                }
            }
            Ok(Some(()))
        })
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// `"a:b,c d:e"`: a cut of `a` from `b` and `c`, one of `d` from `e`.
    fn cuts(text: &str) -> RouteCuts {
        text.split_whitespace()
            .filter_map(|c| c.split_once(':'))
            .map(|(s, peers)| (s.to_string(), peers.split(',').map(String::from).collect()))
            .collect()
    }

    #[rstest]
    #[case::no_cut("", "a", "b", false)]
    #[case::cut_names_the_peer("a:b,c", "a", "b", true)]
    #[case::either_direction("a:b,c", "b", "a", true)]
    #[case::peers_of_a_cut_server_stay_linked("a:b,c", "b", "c", false)]
    #[case::a_partial_cut_leaves_the_rest("a:b", "a", "c", false)]
    // The scenario's overlap: a cut from all, then b cut from all, then a restored: a–b stays cut.
    #[case::another_cut_keeps_the_link("b:a,c", "a", "b", true)]
    #[case::the_other_pair_restored("b:a,c", "a", "c", false)]
    #[case::both_cut("a:b b:a", "a", "b", true)]
    fn a_link_is_cut_while_any_cut_names_it(
        #[case] list: &str,
        #[case] a: &str,
        #[case] b: &str,
        #[case] cut: bool,
    ) {
        assert_eq!(link_cut(&cuts(list), a, b), cut);
    }
}
