//! Stream leaders per server, counted from the servers (each stream's leader as that server
//! reports itself in /jsz): the figures a balancing scenario is judged by. `stream_leader_spread`
//! is the spread at the end of the run (once the consumers drained, the topology still up); a
//! `record_leader_spread` step records the spread of its moment under a name of its own (e.g.
//! `stream_leader_spread_before_balance`); `moves_done` counts the `MoveDone` Events the
//! controllers published (a balancer's or an evacuation's moves, each seen done on the servers).

use std::collections::BTreeMap;
use std::time::Duration;

use super::leader_count::leaders_per_server;
use super::report::{Report, Rule};
use super::{Action, Scenario};
use crate::backend::Deployment;

/// The spread of stream leaders at the end of the run.
pub const END_SPREAD: &str = "stream_leader_spread";
/// The `MoveDone` Events the controllers published during the run.
pub const MOVES_DONE: &str = "moves_done";
/// The figures of this module whatever the steps are; a `record_leader_spread` step adds its
/// own name.
pub const LEADER_FIGURES: &[&str] = &[END_SPREAD, MOVES_DONE];

/// How long a count waits for each stream to have a leader.
const LEADER_WAIT: Duration = Duration::from_secs(30);

/// Counts, from the servers, how many of `streams` each server of the deployment leads; fails
/// naming a stream that has no leader within [`LEADER_WAIT`].
pub async fn count_stream_leaders(
    dep: &dyn Deployment,
    streams: &[String],
) -> Result<BTreeMap<String, u64>, String> {
    let mut leaders = Vec::new();
    for s in streams {
        let l = dep
            .stream_leader(s, LEADER_WAIT)
            .await
            .map_err(|e| format!("counting stream leaders: {e}"))?;
        leaders.push(l);
    }
    Ok(leaders_per_server(&dep.server_names(), &leaders))
}

/// The value of a figure of this module in a finished report; none when it was not recorded.
pub fn leader_figure(r: &Report, name: &str) -> Option<u64> {
    if name == MOVES_DONE {
        let done = r
            .controller_events
            .iter()
            .filter(|e| e.reason == "MoveDone");
        return Some(done.map(|e| u64::from(e.count)).sum());
    }
    r.stream_leaders
        .iter()
        .find(|c| c.figure == name)
        .map(|c| c.spread)
}

impl Scenario {
    /// The names the `record_leader_spread` steps record under.
    pub fn leader_spread_names(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter_map(|s| match &s.action {
                Action::RecordLeaderSpread { name } => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Whether `name` is a figure of this module in this scenario.
    pub fn is_leader_figure(&self, name: &str) -> bool {
        LEADER_FIGURES.contains(&name) || self.leader_spread_names().contains(&name)
    }

    /// The workload's stream names: what the leaders are counted over.
    pub fn stream_names(&self) -> Vec<String> {
        self.streams().into_iter().map(|s| s.name).collect()
    }
}

/// Judges the expectations on this module's figures; one not recorded (its step failed, or
/// the count at the end did) is a failure.
pub(super) fn judge_leader_expectations(scenario: &Scenario, report: &mut Report) {
    for (k, rule_text) in &scenario.expect {
        let Ok(rule) = Rule::parse(rule_text) else {
            continue;
        };
        if !scenario.is_leader_figure(k) {
            continue;
        }
        let Some(actual) = leader_figure(report, k) else {
            report.not_recorded(k, rule_text);
            continue;
        };
        report.judge(k, rule_text, rule, actual, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::leader_count::{LeaderCount, leader_spread};

    #[test]
    fn spread_counts_every_server_and_leaders_off_the_list() {
        let servers = ["c1-0", "c1-1", "c1-2"];
        // (leaders of the streams, leaders per server in servers' order, spread)
        let cases: &[(&[&str], &[u64], u64)] = &[
            (&[], &[0, 0, 0], 0),
            (&["c1-0"; 6], &[6, 0, 0], 6),
            (
                &["c1-0", "c1-1", "c1-0", "c1-1", "c1-0", "c1-1"],
                &[3, 3, 0],
                3,
            ),
            (
                &["c1-0", "c1-1", "c1-2", "c1-0", "c1-1", "c1-2"],
                &[2, 2, 2],
                0,
            ),
            (&["c1-0", "c1-1", "c1-2", "c1-0", "c1-1"], &[2, 2, 1], 1),
            (&["c1-0", "c1-0", "c1-1"], &[2, 1, 0], 2),
        ];
        let names: Vec<String> = servers.iter().map(|s| s.to_string()).collect();
        for (leaders, per, spread) in cases {
            let leaders: Vec<String> = leaders.iter().map(|s| s.to_string()).collect();
            let counted = leaders_per_server(&names, &leaders);
            let got: Vec<u64> = servers.iter().map(|s| counted[*s]).collect();
            assert_eq!(&got, per, "{leaders:?}");
            assert_eq!(leader_spread(&counted), *spread, "{leaders:?}");
        }
        // A leader the topology does not list is counted, not dropped.
        let counted = leaders_per_server(&names[..2], &["c9-0".to_string()]);
        assert_eq!(counted.get("c9-0"), Some(&1));
        assert_eq!(leader_spread(&counted), 1);
        assert_eq!(leader_spread(&BTreeMap::new()), 0);
    }

    const BALANCE: &str = r#"
name: b
topology: { servers: 3 }
workload: { streams: [{ name: S, subjects: ["s.>"], replicas: 3 }] }
steps:
  - { at: 0s, action: lame_duck, server: c1-2 }
  - { at: 0s, action: wait_exited, server: last-faulted, timeout: 20s }
  - { at: 1s, action: record_leader_spread, name: before }
expect: { before: ">= 2", stream_leader_spread: "<= 1", moves_done: ">= 1" }
"#;

    #[test]
    fn a_recorded_spread_is_a_figure_of_its_own_over_the_workloads_streams() {
        let path = std::path::Path::new("b.yaml");
        let s = Scenario::from_yaml(path, BALANCE).unwrap();
        assert_eq!(s.leader_spread_names(), vec!["before"]);
        assert!(s.is_leader_figure("before") && s.is_leader_figure(MOVES_DONE));
        assert_eq!(
            s.steps[1].action,
            Action::WaitExited {
                server: "last-faulted".into(),
                timeout: Duration::from_secs(20)
            }
        );
        assert!(s.steps.iter().all(|s| !s.action.needs_controllers()));
        for taken in ["lost", END_SPREAD, MOVES_DONE, "rollout_restarts_max"] {
            let bad = BALANCE.replace("name: before }", &format!("name: {taken} }}"));
            assert!(Scenario::from_yaml(path, &bad).is_err(), "{taken}");
        }
        let twice = BALANCE.replace(
            "  - { at: 1s",
            "  - { at: 1s, action: record_leader_spread, name: before }\n  - { at: 1s",
        );
        assert!(Scenario::from_yaml(path, &twice).is_err());
        let no_streams = BALANCE.replace(
            r#"workload: { streams: [{ name: S, subjects: ["s.>"], replicas: 3 }] }"#,
            "",
        );
        assert!(Scenario::from_yaml(path, &no_streams).is_err());
        let unknown = BALANCE.replace("before: \">= 2\"", "after: \">= 2\"");
        assert!(Scenario::from_yaml(path, &unknown).is_err());
    }

    #[test]
    fn a_count_describes_itself_with_its_spread() {
        let c = LeaderCount::new(
            "stream_leader_spread_before_balance",
            1_000,
            leaders_per_server(
                &["c1-0".into(), "c1-1".into(), "c1-2".into()],
                &["c1-0".into(), "c1-1".into(), "c1-0".into()],
            ),
        );
        assert_eq!(c.spread, 2);
        assert_eq!(c.describe(), "c1-0 2, c1-1 1, c1-2 0 (spread 2)");
    }
}
