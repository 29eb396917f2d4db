//! Settled: the meta group and every stream and consumer group have a leader and every member
//! current, as the answering servers report; every server answers. Each group is judged by its
//! leader's own report where the leader's server answered ([`crate::observation::leader_report`]);
//! the meta group, whose leader may be in another NATS cluster, by [`meta_members`].

use controller_kit::conditions::Decided;
use nats_api::cluster::{condition, reason};
use nats_wire::monitor::PeerInfo;

use super::names;
use crate::observation::{Observation, leader_report, meta_members, meta_reports, raft_groups};

/// Settled: the meta group and every stream and consumer group have a leader and every member
/// current, as the answering servers report; every server answers.
pub fn settled(expected: &[String], jetstream: bool, obs: &Observation) -> Decided {
    if let Some(unanswered) = unanswered(expected, obs) {
        return unanswered;
    }
    if !jetstream {
        return Decided::new(
            condition::SETTLED,
            true,
            reason::ALL_GROUPS_CURRENT,
            "every server answers; without JetStream there is no Raft group",
        );
    }
    NotCurrent::of(obs).verdict()
}

/// Settled as written by a pass that restarted `restarted`. The verdict was judged from what the
/// servers said before the step; a server the pass has just restarted is not serving its groups
/// until it rejoins, so the pass does not call the NATS cluster settled. The next pass judges
/// again from what the servers then say.
pub fn settled_after_restarts(judged: Decided, restarted: &[String]) -> Decided {
    if !judged.status || restarted.is_empty() {
        return judged;
    }
    Decided::new(
        condition::SETTLED,
        false,
        reason::SERVERS_SILENT,
        format!("{} restarted by this pass, not yet back", names(restarted)),
    )
}

/// Not Settled because the servers could not be asked, or some of `expected` did not answer.
fn unanswered(expected: &[String], obs: &Observation) -> Option<Decided> {
    let silent: Vec<String> = expected
        .iter()
        .filter(|n| !obs.answers.contains_key(*n))
        .cloned()
        .collect();
    if obs.answers.is_empty()
        && let Some(f) = &obs.failure
    {
        return Some(Decided::new(
            condition::SETTLED,
            false,
            reason::OBSERVATION_FAILED,
            f.clone(),
        ));
    }
    if !silent.is_empty() {
        let verb = if silent.len() == 1 { "does" } else { "do" };
        return Some(Decided::new(
            condition::SETTLED,
            false,
            reason::SERVERS_SILENT,
            format!("{} {verb} not answer", names(&silent)),
        ));
    }
    None
}

/// The Raft groups that are not current, by why.
#[derive(Default)]
struct NotCurrent {
    leaderless: Vec<String>,
    offline: Vec<String>,
    behind: Vec<String>,
}

impl NotCurrent {
    /// The meta group first, then every stream and consumer group, each by its leader's report.
    fn of(obs: &Observation) -> Self {
        let mut n = NotCurrent::default();
        let (leader, members) = meta_members(&meta_reports(obs.jsz()));
        n.judge("the meta group".into(), &leader, &members);
        for (group, reports) in raft_groups(obs.jsz()) {
            if let Some(c) = leader_report(&reports) {
                n.judge(group.words(), &c.leader, &c.replicas);
            }
        }
        n
    }

    fn judge(&mut self, group: String, leader: &str, replicas: &[PeerInfo]) {
        if leader.is_empty() {
            self.leaderless.push(group);
        } else if replicas.iter().any(|p| p.offline) {
            self.offline.push(group);
        } else if replicas.iter().any(|p| !p.current) {
            self.behind.push(group);
        }
    }

    /// Leaderless groups first, then members offline, then members catching up.
    fn verdict(&self) -> Decided {
        let count = |v: &[String]| {
            if v.len() == 1 {
                v[0].clone()
            } else {
                format!("{} Raft groups ({})", v.len(), names(v))
            }
        };
        if !self.leaderless.is_empty() {
            return Decided::new(
                condition::SETTLED,
                false,
                reason::GROUPS_LEADERLESS,
                format!("{} without a leader", count(&self.leaderless)),
            );
        }
        if !self.offline.is_empty() {
            return Decided::new(
                condition::SETTLED,
                false,
                reason::MEMBERS_OFFLINE,
                format!("{} with a member offline", count(&self.offline)),
            );
        }
        if !self.behind.is_empty() {
            return Decided::new(
                condition::SETTLED,
                false,
                reason::GROUPS_CATCHING_UP,
                format!("{} with a member that is not current", count(&self.behind)),
            );
        }
        Decided::new(
            condition::SETTLED,
            true,
            reason::ALL_GROUPS_CURRENT,
            "the meta group and every stream and consumer group have a leader and every member current",
        )
    }
}
