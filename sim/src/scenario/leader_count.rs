//! Stream leaders per server at one moment ([`LeaderCount`]) and their spread: what a report
//! records, counted by the run and judged by [`super::leaders`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Stream leaders per server at one moment, and their spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderCount {
    /// The figure it was counted for: [`END_SPREAD`](super::leaders::END_SPREAD) or a `record_leader_spread` step's name.
    pub figure: String,
    /// When it was counted, in ms since the run began.
    pub at_ms: u64,
    /// Per server of the topology, how many of the workload's streams it led (0 included).
    pub leaders: BTreeMap<String, u64>,
    /// The most leaders one server had minus the fewest: [`leader_spread`].
    pub spread: u64,
}

impl LeaderCount {
    pub fn new(figure: &str, at_ms: u64, leaders: BTreeMap<String, u64>) -> LeaderCount {
        LeaderCount {
            figure: figure.to_string(),
            at_ms,
            spread: leader_spread(&leaders),
            leaders,
        }
    }

    /// `c1-0 3, c1-1 3, c1-2 0`: the summary's and the progress line's words.
    pub fn describe(&self) -> String {
        let list: Vec<String> = self
            .leaders
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect();
        format!("{} (spread {})", list.join(", "), self.spread)
    }
}

/// Per server, how many of `leaders` (each stream's leader) name it: every server of `servers`
/// counted, those leading nothing as 0, and a leader not among them counted too.
pub fn leaders_per_server(servers: &[String], leaders: &[String]) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = servers.iter().map(|s| (s.clone(), 0)).collect();
    for l in leaders {
        *out.entry(l.clone()).or_default() += 1;
    }
    out
}

/// The most leaders one server has minus the fewest; 0 with no server.
pub fn leader_spread(per_server: &BTreeMap<String, u64>) -> u64 {
    let most = per_server.values().max().copied().unwrap_or(0);
    let fewest = per_server.values().min().copied().unwrap_or(0);
    most - fewest
}
