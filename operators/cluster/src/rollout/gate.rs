//! The gate to the next voluntary step (design §4.4): every server's pod is Ready, every server
//! on the target revision reports it, with JetStream every server that answers is a member of the
//! meta group, a replaced server is listed by the meta leader again, and the NATS cluster is
//! Settled. Each rule is one function naming what it waits for; the gate is closed while any
//! names something. Nothing proceeds on a timeout: after ten minutes the gate only reads
//! GateBlocked instead of RollingRestart.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nats_api::cluster::{RolloutGate, reason};

/// A closed gate reads GateBlocked after this long (status.rollout.gate.since).
pub const GATE_BLOCKED_AFTER: Duration = Duration::from_secs(10 * 60);

/// One server as the gate sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateServer {
    pub name: String,
    /// The pod is Ready (local: the process is up and `/healthz` answers).
    pub ready: bool,
    /// The revision its workload was started or reloaded under.
    pub revision: Option<String>,
    /// The revision it is to run (each server's config, and so its revision, is its own).
    pub target: String,
    /// The revision the running server reports (mapped from its `/varz` config digest); `None`
    /// while it does not answer.
    pub reported: Option<String>,
    /// It answered the JSZ ping of this observation.
    pub answered: bool,
}

/// The meta group as observed for the gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaObservation {
    /// No JetStream on this NATS cluster: there is no meta group to wait for.
    Off,
    /// The meta leader (in this NATS cluster or another of the supercluster) answered with its
    /// peers; this NATS cluster's servers are the ones among them.
    FromLeader { leader: String, peers: Vec<String> },
    /// No meta leader answered: the meta group is judged from its followers, and every server
    /// that answers counts as a member.
    FromFollowers,
}

/// Settled as observed for the gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettledView {
    /// Every Raft group is current (or there is no JetStream).
    Settled,
    /// These groups are not current (leaderless, members offline or catching up).
    NotCurrent { groups: Vec<String> },
    /// The NATS cluster could not be observed.
    Unobserved { error: String },
}

/// Everything the gate is judged from.
#[derive(Clone, Debug)]
pub struct GateInput<'a> {
    pub servers: &'a [GateServer],
    pub meta: &'a MetaObservation,
    pub settled: &'a SettledView,
    /// Servers recreated by a replacement that the meta leader must list again (removal phase
    /// Rejoining): the fresh pod answers outside the meta group until the tombstone lapses.
    pub rejoining: &'a [String],
}

/// The gate's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    Open,
    /// Closed, naming everything not current.
    Closed {
        waiting_for: Vec<String>,
    },
}

impl Gate {
    pub fn is_open(&self) -> bool {
        matches!(self, Gate::Open)
    }

    /// What the gate waits for, as status.rollout.gate.waitingFor and condition messages read.
    pub fn waiting_for(&self) -> Option<String> {
        match self {
            Gate::Open => None,
            Gate::Closed { waiting_for } => Some(waiting_for.join("; ")),
        }
    }
}

/// Every pod is Ready.
pub fn pods_ready(servers: &[GateServer]) -> Vec<String> {
    servers
        .iter()
        .filter(|s| !s.ready)
        .map(|s| format!("{} not Ready", s.name))
        .collect()
}

/// Every server on the target revision reports it (its restart or reload has taken).
pub fn revisions_reported(servers: &[GateServer]) -> Vec<String> {
    servers
        .iter()
        .filter(|s| {
            s.revision.as_deref() == Some(s.target.as_str())
                && s.reported.as_deref() != Some(s.target.as_str())
        })
        .map(|s| match &s.reported {
            Some(r) => format!("{} reports revision {r}, not {}", s.name, s.target),
            None => format!("{} does not report its revision", s.name),
        })
        .collect()
}

/// With JetStream, every server that answers is a member of the meta group. Judged from the
/// followers (no meta leader answered), every answering server counts as a member.
pub fn meta_members(servers: &[GateServer], meta: &MetaObservation) -> Vec<String> {
    match meta {
        MetaObservation::Off | MetaObservation::FromFollowers => Vec::new(),
        MetaObservation::FromLeader { leader, peers } => servers
            .iter()
            .filter(|s| s.answered && !peers.contains(&s.name))
            .map(|s| format!("{} not in the meta group (leader {leader})", s.name))
            .collect(),
    }
}

/// A replaced server holds the gate until the meta leader lists it again, which happens only
/// after the ~5 minute removal tombstone lapses; without a leader nothing can list it.
pub fn rejoined(rejoining: &[String], meta: &MetaObservation) -> Vec<String> {
    match meta {
        MetaObservation::Off => Vec::new(),
        MetaObservation::FromLeader { leader, peers } => rejoining
            .iter()
            .filter(|s| !peers.contains(s))
            .map(|s| format!("{s} rejoining: meta leader {leader} does not list it yet"))
            .collect(),
        MetaObservation::FromFollowers => rejoining
            .iter()
            .map(|s| format!("{s} rejoining: no meta leader answered to list it"))
            .collect(),
    }
}

/// The NATS cluster is Settled.
pub fn settled(view: &SettledView) -> Vec<String> {
    match view {
        SettledView::Settled => Vec::new(),
        SettledView::NotCurrent { groups } => {
            vec![format!("groups not current: {}", groups.join(", "))]
        }
        SettledView::Unobserved { error } => vec![format!("not observed: {error}")],
    }
}

/// What a closed gate waits for, as the `waiting_for` label of `nats_operator_rollout_gate`: one
/// value per rule above, so the label's values stay few whatever the servers and groups are
/// called (the text naming them stays in `status.rollout.gate.waitingFor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WaitingFor {
    /// [`pods_ready`].
    PodReady,
    /// [`revisions_reported`].
    RevisionReported,
    /// [`meta_members`].
    MetaMember,
    /// [`rejoined`].
    Rejoined,
    /// [`settled`], groups not current.
    Settled,
    /// [`settled`], the NATS cluster not observed.
    Observed,
    /// A text none of the rules above writes (a status written by another version).
    Other,
}

impl WaitingFor {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            WaitingFor::PodReady => "pod_ready",
            WaitingFor::RevisionReported => "revision_reported",
            WaitingFor::MetaMember => "meta_member",
            WaitingFor::Rejoined => "rejoined",
            WaitingFor::Settled => "settled",
            WaitingFor::Observed => "observed",
            WaitingFor::Other => "other",
        }
    }

    /// Which rule wrote `part`, one of the `; `-joined parts of `waitingFor`, read from the
    /// shape each rule's text has (a server or group name holds no `; `, and the shapes are
    /// matched at the part's end or start, where a name cannot reach).
    pub fn of(part: &str) -> Self {
        if part.starts_with("groups not current: ") {
            WaitingFor::Settled
        } else if part.starts_with("not observed: ") {
            WaitingFor::Observed
        } else if part.contains(" rejoining: ") {
            WaitingFor::Rejoined
        } else if part.ends_with(" not Ready") {
            WaitingFor::PodReady
        } else if part.ends_with(" does not report its revision")
            || part.contains(" reports revision ")
        {
            WaitingFor::RevisionReported
        } else if part.contains(" not in the meta group (leader ") {
            WaitingFor::MetaMember
        } else {
            WaitingFor::Other
        }
    }

    /// Every rule a `waitingFor` text names, each once.
    pub fn all_of(waiting_for: &str) -> std::collections::BTreeSet<WaitingFor> {
        waiting_for
            .split("; ")
            .filter(|p| !p.is_empty())
            .map(WaitingFor::of)
            .collect()
    }
}

/// The gate: open only when every rule names nothing.
pub fn gate(input: &GateInput<'_>) -> Gate {
    let mut waiting_for = pods_ready(input.servers);
    waiting_for.extend(revisions_reported(input.servers));
    waiting_for.extend(meta_members(input.servers, input.meta));
    waiting_for.extend(rejoined(input.rejoining, input.meta));
    waiting_for.extend(settled(input.settled));
    if waiting_for.is_empty() {
        Gate::Open
    } else {
        Gate::Closed { waiting_for }
    }
}

/// status.rollout.gate: since when the gate is closed, kept across reconciles (and controller
/// restarts) from the previous status; `None` when it is open.
pub fn gate_status(gate: &Gate, previous: Option<&RolloutGate>, now: &Time) -> Option<RolloutGate> {
    let waiting_for = gate.waiting_for()?;
    let since = previous
        .and_then(|p| p.since.clone())
        .unwrap_or_else(|| now.clone());
    Some(RolloutGate {
        waiting_for: Some(waiting_for),
        since: Some(since),
    })
}

/// The Progressing reason of a closed gate: RollingRestart, and GateBlocked once it has been
/// closed for ten minutes. The rollout never proceeds on that timeout.
pub fn closed_gate_reason(since: &Time, now: &Time) -> &'static str {
    let held = now.0.duration_since(since.0);
    if held >= k8s_openapi::jiff::SignedDuration::try_from(GATE_BLOCKED_AFTER).unwrap_or_default() {
        reason::GATE_BLOCKED
    } else {
        reason::ROLLING_RESTART
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    pub(crate) fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    fn srv(name: &str, ready: bool, revision: &str, reported: Option<&str>) -> GateServer {
        GateServer {
            name: name.into(),
            ready,
            revision: Some(revision.into()),
            target: "r2".into(),
            reported: reported.map(String::from),
            answered: reported.is_some(),
        }
    }

    fn three() -> Vec<GateServer> {
        vec![
            srv("demo-0", true, "r1", Some("r1")),
            srv("demo-1", true, "r2", Some("r2")),
            srv("demo-2", true, "r2", Some("r2")),
        ]
    }

    fn leader(peers: &[&str]) -> MetaObservation {
        MetaObservation::FromLeader {
            leader: "demo-0".into(),
            peers: peers.iter().map(|s| s.to_string()).collect(),
        }
    }

    struct GF {
        s: Vec<GateServer>,
        m: MetaObservation,
        st: SettledView,
        r: Vec<String>,
    }

    #[rstest]
    #[case::all_current("open", |_: &mut GF| {}, None)]
    #[case::pod_not_ready("a pod not Ready", |f: &mut GF| f.s[1].ready = false, Some("demo-1 not Ready"))]
    #[case::revision_not_reported("an updated server not reporting the revision", |f: &mut GF| f.s[2].reported = Some("r1".into()), Some("demo-2 reports revision r1, not r2"))]
    #[case::old_server_reports_old("a not-yet-updated server reporting the old revision is fine", |f: &mut GF| f.s[0].reported = Some("r1".into()), None)]
    #[case::not_meta_member("an answering server outside the meta group", |f: &mut GF| f.m = leader(&["demo-0", "demo-1"]), Some("demo-2 not in the meta group (leader demo-0)"))]
    #[case::leader_elsewhere("a meta leader in another NATS cluster lists this cluster's servers", |f: &mut GF| f.m = MetaObservation::FromLeader { leader: "west-1".into(), peers: vec!["west-0".into(), "west-1".into(), "demo-0".into(), "demo-1".into(), "demo-2".into()] }, None)]
    #[case::from_followers("no leader answering: every answering server counts", |f: &mut GF| f.m = MetaObservation::FromFollowers, None)]
    #[case::unsettled("groups not current", |f: &mut GF| f.st = SettledView::NotCurrent { groups: vec!["ORDERS (S-R3F-abc)".into()] }, Some("groups not current: ORDERS (S-R3F-abc)"))]
    #[case::unobserved("not observed", |f: &mut GF| f.st = SettledView::Unobserved { error: "timeout".into() }, Some("not observed: timeout"))]
    #[case::rejoining("a replaced server not listed yet", |f: &mut GF| { f.m = leader(&["demo-0", "demo-1"]); f.r.push("demo-2".into()) }, Some("demo-2 not in the meta group (leader demo-0); demo-2 rejoining: meta leader demo-0 does not list it yet"))]
    #[case::rejoining_no_leader("a replaced server with no leader to list it", |f: &mut GF| { f.m = MetaObservation::FromFollowers; f.r.push("demo-2".into()) }, Some("demo-2 rejoining: no meta leader answered to list it"))]
    #[case::rejoined("a replaced server listed again", |f: &mut GF| f.r.push("demo-2".into()), None)]
    #[case::no_jetstream("no JetStream: no meta group to wait on", |f: &mut GF| { f.m = MetaObservation::Off; f.s[2].answered = false; f.r.push("demo-2".into()) }, None)]
    fn the_gate(#[case] what: &str, #[case] edit: fn(&mut GF), #[case] want: Option<&str>) {
        let mut f = GF {
            s: three(),
            m: leader(&["demo-0", "demo-1", "demo-2"]),
            st: SettledView::Settled,
            r: Vec::new(),
        };
        edit(&mut f);
        let g = gate(&GateInput {
            servers: &f.s,
            meta: &f.m,
            settled: &f.st,
            rejoining: &f.r,
        });
        assert_eq!(g.waiting_for().as_deref(), want, "{what}");
    }

    #[test]
    fn a_closed_gate_names_everything_it_waits_for() {
        let mut servers = three();
        servers[1].ready = false;
        let g = gate(&GateInput {
            servers: &servers,
            meta: &MetaObservation::FromFollowers,
            settled: &SettledView::NotCurrent {
                groups: vec!["a".into(), "b".into()],
            },
            rejoining: &[],
        });
        assert_eq!(
            g.waiting_for().as_deref(),
            Some("demo-1 not Ready; groups not current: a, b")
        );
    }

    /// Each rule's own text is read back as that rule: the table is built by calling the rules,
    /// so a rule whose wording changes breaks here, not in a dashboard.
    #[rstest]
    #[case::pod(pods_ready(&[GateServer { name: "demo-1".into(), ..Default::default() }]), WaitingFor::PodReady)]
    #[case::revision(revisions_reported(&[srv("demo-2", true, "r2", Some("r1"))]), WaitingFor::RevisionReported)]
    #[case::no_revision(revisions_reported(&[srv("demo-2", true, "r2", None)]), WaitingFor::RevisionReported)]
    #[case::meta(meta_members(&[srv("demo-2", true, "r2", Some("r2"))], &leader(&["demo-0"])), WaitingFor::MetaMember)]
    #[case::rejoined(rejoined(&["demo-2".into()], &leader(&["demo-0"])), WaitingFor::Rejoined)]
    #[case::rejoined_no_leader(rejoined(&["demo-2".into()], &MetaObservation::FromFollowers), WaitingFor::Rejoined)]
    #[case::settled(settled(&SettledView::NotCurrent { groups: vec!["ORDERS (S-R3F-abc)".into()] }), WaitingFor::Settled)]
    #[case::observed(settled(&SettledView::Unobserved { error: "timeout; no answer".into() }), WaitingFor::Observed)]
    // A name made to look like another rule's text is still read as the rule that wrote it.
    #[case::tricky_name(pods_ready(&[GateServer { name: "x not in the meta group (leader y)".into(), ..Default::default() }]), WaitingFor::PodReady)]
    #[case::foreign(vec!["something else".into()], WaitingFor::Other)]
    fn each_rules_text_reads_back_as_its_rule(
        #[case] texts: Vec<String>,
        #[case] want: WaitingFor,
    ) {
        assert_eq!(texts.len(), 1, "{texts:?}");
        assert_eq!(WaitingFor::of(&texts[0]), want, "{texts:?}");
    }

    #[test]
    fn all_of_names_each_rule_of_a_joined_text_once() {
        let all =
            WaitingFor::all_of("demo-1 not Ready; demo-2 not Ready; groups not current: a, b");
        assert_eq!(
            all.into_iter().map(WaitingFor::label).collect::<Vec<_>>(),
            ["pod_ready", "settled"]
        );
        assert!(WaitingFor::all_of("").is_empty());
    }

    #[rstest]
    #[case::just_closed(0, reason::ROLLING_RESTART)]
    #[case::nine_minutes(9 * 60 + 59, reason::ROLLING_RESTART)]
    #[case::ten_minutes(10 * 60, reason::GATE_BLOCKED)]
    #[case::an_hour(3600, reason::GATE_BLOCKED)]
    fn gate_blocked_after_ten_minutes(#[case] held: i64, #[case] want: &str) {
        assert_eq!(closed_gate_reason(&at(1000), &at(1000 + held)), want);
    }

    #[test]
    fn since_is_kept_while_closed_and_dropped_when_open() {
        let closed = Gate::Closed {
            waiting_for: vec!["demo-1 not Ready".into()],
        };
        let first = gate_status(&closed, None, &at(100)).unwrap();
        assert_eq!(first.since, Some(at(100)));
        let later = gate_status(&closed, Some(&first), &at(700)).unwrap();
        assert_eq!(later.since, Some(at(100)), "since survives reconciles");
        assert_eq!(gate_status(&Gate::Open, Some(&later), &at(800)), None);
    }
}
