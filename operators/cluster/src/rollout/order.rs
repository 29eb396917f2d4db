//! The step order (design §4.4, §4.5): one server at a time — servers beyond replicas first,
//! highest ordinal first, then restarts, then replacements, the meta leader's server last. A
//! removal once begun is carried through, paused or not; `spec.rollout.paused` stops the rollout
//! before its next step; `force-step: <server>` restarts that waiting server now, through a closed
//! gate and through paused, and is cleared once read; a closed gate holds every other voluntary
//! step, which is how an involuntary disruption (a pod killed, a group catching up) holds the
//! next one too.

use nats_api::cluster::{RemovalPhase, ServerRemoval};

use super::gate::Gate;
use super::removal::RemovalKind;
use crate::refusals::Refusal;

/// One server as the step order sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub ordinal: u32,
    pub name: String,
    /// Its workload exists.
    pub present: bool,
    /// The revision it runs (started under, or reloaded to).
    pub revision: Option<String>,
    /// The revision it is to run.
    pub target: String,
}

/// Why a server is replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplaceCause {
    /// The `replace-server` annotation names it.
    Annotation,
    /// Its volume no longer matches `jetstream.volumeClaimTemplate` (class, size, zone).
    VolumeClaimTemplate,
}

/// What a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// Remove a server beyond replicas.
    ScaleDown,
    /// Restart onto the target revision (ConfigMap and pod template written together).
    Restart,
    /// Replace under the same name.
    Replace,
}

impl StepKind {
    fn rank(self) -> u8 {
        match self {
            StepKind::ScaleDown => 0,
            StepKind::Restart => 1,
            StepKind::Replace => 2,
        }
    }

    /// The removal this step is, if it is one.
    pub fn removal(self) -> Option<RemovalKind> {
        match self {
            StepKind::ScaleDown => Some(RemovalKind::ScaleDown),
            StepKind::Replace => Some(RemovalKind::Replace),
            StepKind::Restart => None,
        }
    }
}

/// A step waiting its turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub server: String,
    pub ordinal: u32,
    pub kind: StepKind,
}

/// Everything the next step is decided from.
#[derive(Clone, Debug)]
pub struct OrderInput<'a> {
    pub replicas: u32,
    pub servers: &'a [Member],
    /// The meta leader's server name, when known.
    pub meta_leader: Option<&'a str>,
    /// `spec.rollout.paused`.
    pub paused: bool,
    /// The `force-step` annotation's value.
    pub force_step: Option<&'a str>,
    /// Servers to replace and why.
    pub replace: &'a [(String, ReplaceCause)],
    /// `status.removals`.
    pub removals: &'a [ServerRemoval],
    pub gate: &'a Gate,
    /// `refusals::auth_change` for this spec against what runs: adding or removing `auth` on a
    /// running NATS cluster cannot roll one server at a time.
    pub auth_change: Option<Refusal>,
    /// The `restart-all` annotation is set: carry an auth change by restarting every server at
    /// once instead of holding.
    pub restart_all: bool,
}

/// Why no step is taken now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    /// `spec.rollout.paused`.
    Paused,
    /// The gate is closed.
    Gate,
    /// AuthChangeBlocked.
    AuthChange(Refusal),
}

/// What to do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Every server runs the target revision and nothing is to be removed.
    UpToDate,
    /// Carry a begun removal through (paused or not; its own waits stand in for the gate).
    ContinueRemoval(Step),
    /// Take this step now.
    Take(Step),
    /// Restart this waiting server now because `force-step` names it.
    Forced(Step),
    /// Restart every one of these servers now, gate or not: `restart-all` carries an auth change,
    /// which servers cannot take one at a time (with and without auth they do not route to each
    /// other).
    RestartAll(Vec<Step>),
    Held(Hold),
}

/// The decision: absent servers to create, the steps in order, what to do now, and whether to
/// clear the `force-step` annotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Servers within replicas with no workload and no removal under way: created at once
    /// (starting a server disrupts nothing).
    pub create: Vec<u32>,
    /// Every step still to take, in the order they will be taken.
    pub pending: Vec<Step>,
    pub action: Action,
    /// `force-step` was read: the caller clears the annotation.
    pub clear_force_step: bool,
    /// `restart-all` is set and no auth change is left to carry: the caller clears it.
    pub clear_restart_all: bool,
}

/// What reading the `replace-server` annotation does: record the named server's replacement as
/// Requested in `status.removals` (unless one is already recorded), and clear the annotation —
/// always once read, a name that is no server of this NATS cluster included (`unknown`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplaceRead {
    pub record: Option<ServerRemoval>,
    pub unknown: Option<String>,
    pub clear: bool,
}

/// Reads `replace-server: <server>`.
pub fn read_replace_server(
    annotation: Option<&str>,
    replicas: u32,
    servers: &[Member],
    removals: &[ServerRemoval],
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> ReplaceRead {
    let Some(name) = annotation else {
        return ReplaceRead {
            record: None,
            unknown: None,
            clear: false,
        };
    };
    let known = servers
        .iter()
        .any(|m| m.name == name && m.present && m.ordinal < replicas);
    let recorded = removals.iter().any(|r| r.name == name);
    ReplaceRead {
        record: (known && !recorded).then(|| ServerRemoval {
            name: name.to_string(),
            phase: RemovalPhase::Requested,
            since: Some(now.clone()),
        }),
        unknown: (!known).then(|| name.to_string()),
        clear: true,
    }
}

/// The servers to replace: those with a removal recorded within replicas (read from
/// `replace-server`, kept in `status.removals` across restarts of the controller) and those
/// whose volume no longer matches `jetstream.volumeClaimTemplate`.
pub fn replacements(
    replicas: u32,
    servers: &[Member],
    removals: &[ServerRemoval],
    volume_mismatch: &[String],
) -> Vec<(String, ReplaceCause)> {
    let within = |name: &str| {
        servers
            .iter()
            .any(|m| m.name == name && m.ordinal < replicas)
    };
    let mut out: Vec<(String, ReplaceCause)> = removals
        .iter()
        .filter(|r| within(&r.name))
        .map(|r| (r.name.clone(), ReplaceCause::Annotation))
        .collect();
    for v in volume_mismatch {
        if within(v) && !out.iter().any(|(n, _)| n == v) {
            out.push((v.clone(), ReplaceCause::VolumeClaimTemplate));
        }
    }
    out
}

/// A removal has begun once it is past Requested.
pub fn begun(removals: &[ServerRemoval]) -> Option<&ServerRemoval> {
    removals.iter().find(|r| r.phase != RemovalPhase::Requested)
}

/// Every step still to take, in order: beyond replicas (highest ordinal first), restarts
/// (highest first), replacements (highest first), the meta leader's server last.
pub fn pending_steps(input: &OrderInput<'_>) -> Vec<Step> {
    let mut steps: Vec<Step> = input
        .servers
        .iter()
        .filter(|m| m.present)
        .filter_map(|m| {
            let kind = if m.ordinal >= input.replicas {
                StepKind::ScaleDown
            } else if input.replace.iter().any(|(s, _)| *s == m.name) {
                StepKind::Replace
            } else if m.revision.as_deref() != Some(m.target.as_str()) {
                StepKind::Restart
            } else {
                return None;
            };
            Some(Step {
                server: m.name.clone(),
                ordinal: m.ordinal,
                kind,
            })
        })
        .collect();
    steps.sort_by_key(|s| {
        (
            input.meta_leader == Some(s.server.as_str()),
            s.kind.rank(),
            std::cmp::Reverse(s.ordinal),
        )
    });
    steps
}

/// Absent servers within replicas that no removal is recreating.
pub fn to_create(input: &OrderInput<'_>) -> Vec<u32> {
    (0..input.replicas)
        .filter(|o| {
            let m = input.servers.iter().find(|m| m.ordinal == *o);
            let present = m.is_some_and(|m| m.present);
            let removing = m.is_some_and(|m| input.removals.iter().any(|r| r.name == m.name));
            !present && !removing
        })
        .collect()
}

/// A begun removal is carried through, paused or not.
pub fn carry_removal(input: &OrderInput<'_>) -> Option<Action> {
    let r = begun(input.removals)?;
    let ordinal = input
        .servers
        .iter()
        .find(|m| m.name == r.name)
        .map(|m| m.ordinal)
        .or_else(|| r.name.rsplit('-').next().and_then(|n| n.parse().ok()))
        .unwrap_or(0);
    let kind = if ordinal >= input.replicas {
        StepKind::ScaleDown
    } else {
        StepKind::Replace
    };
    Some(Action::ContinueRemoval(Step {
        server: r.name.clone(),
        ordinal,
        kind,
    }))
}

/// `force-step: <server>` restarts that server now if it waits for a restart; through a closed
/// gate and through paused.
pub fn forced(input: &OrderInput<'_>, pending: &[Step]) -> Option<Action> {
    let name = input.force_step?;
    pending
        .iter()
        .find(|s| s.server == name && s.kind == StepKind::Restart)
        .map(|s| Action::Forced(s.clone()))
}

/// The next step.
pub fn decide(input: &OrderInput<'_>) -> Decision {
    let create = to_create(input);
    let pending = pending_steps(input);
    let clear_force_step = input.force_step.is_some();
    let action = if let Some(a) = carry_removal(input) {
        a
    } else if let Some(r) = &input.auth_change {
        match restart_all(input, &pending) {
            Some(a) => a,
            None => Action::Held(Hold::AuthChange(r.clone())),
        }
    } else if pending.is_empty() {
        Action::UpToDate
    } else if let Some(a) = forced(input, &pending) {
        a
    } else if input.paused {
        Action::Held(Hold::Paused)
    } else if !input.gate.is_open() {
        Action::Held(Hold::Gate)
    } else {
        Action::Take(pending[0].clone())
    };
    Decision {
        create,
        pending,
        action,
        clear_force_step,
        clear_restart_all: input.restart_all && input.auth_change.is_none(),
    }
}

/// `restart-all` over an auth change: every server waiting for a restart, at once, through a
/// closed gate and through paused (the gate cannot open while half the servers run another auth
/// plane). `None` without the annotation, or with nothing left to restart.
pub fn restart_all(input: &OrderInput<'_>, pending: &[Step]) -> Option<Action> {
    if !input.restart_all {
        return None;
    }
    let all: Vec<Step> = pending
        .iter()
        .filter(|s| s.kind == StepKind::Restart)
        .cloned()
        .collect();
    (!all.is_empty()).then_some(Action::RestartAll(all))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refusals::Hold as RefusalHold;
    use nats_api::cluster::reason;
    use rstest::rstest;

    fn member(ordinal: u32, revision: &str) -> Member {
        Member {
            ordinal,
            name: format!("demo-{ordinal}"),
            present: true,
            revision: Some(revision.into()),
            target: "new".into(),
        }
    }

    struct Fixture {
        replicas: u32,
        servers: Vec<Member>,
        meta_leader: Option<&'static str>,
        paused: bool,
        force_step: Option<&'static str>,
        replace: Vec<(String, ReplaceCause)>,
        removals: Vec<ServerRemoval>,
        gate: Gate,
        auth_change: Option<Refusal>,
        restart_all: bool,
    }

    fn base() -> Fixture {
        Fixture {
            replicas: 3,
            servers: (0..3).map(|i| member(i, "old")).collect(),
            meta_leader: Some("demo-1"),
            paused: false,
            force_step: None,
            replace: vec![],
            removals: vec![],
            gate: Gate::Open,
            auth_change: None,
            restart_all: false,
        }
    }

    fn run(f: &Fixture) -> Decision {
        decide(&OrderInput {
            replicas: f.replicas,
            servers: &f.servers,
            meta_leader: f.meta_leader,
            paused: f.paused,
            force_step: f.force_step,
            replace: &f.replace,
            removals: &f.removals,
            gate: &f.gate,
            auth_change: f.auth_change.clone(),
            restart_all: f.restart_all,
        })
    }

    fn step(ordinal: u32, kind: StepKind) -> Step {
        Step {
            server: format!("demo-{ordinal}"),
            ordinal,
            kind,
        }
    }

    fn closed() -> Gate {
        Gate::Closed {
            waiting_for: vec!["demo-2 not Ready".into()],
        }
    }

    fn removal(name: &str, phase: RemovalPhase) -> ServerRemoval {
        ServerRemoval {
            name: name.into(),
            phase,
            since: None,
        }
    }

    use StepKind::{Replace as Rp, Restart as R, ScaleDown as S};

    #[rstest]
    #[case::highest_first_leader_last("restarts highest ordinal first, the meta leader's server last", |_: &mut Fixture| {},
        vec![(2, R), (0, R), (1, R)])]
    #[case::no_leader_known("no meta leader known: plain highest-first", |f: &mut Fixture| f.meta_leader = None,
        vec![(2, R), (1, R), (0, R)])]
    #[case::scale_down_first("servers beyond replicas first, highest first, then restarts", |f: &mut Fixture| { f.servers.push(member(3, "old")); f.servers.push(member(4, "old")) },
        vec![(4, S), (3, S), (2, R), (0, R), (1, R)])]
    #[case::replacements_after_restarts("replacements after restarts", |f: &mut Fixture| f.replace.push(("demo-2".into(), ReplaceCause::Annotation)),
        vec![(0, R), (2, Rp), (1, R)])]
    #[case::leader_replaced_last("the meta leader's replacement is still last", |f: &mut Fixture| f.replace.push(("demo-1".into(), ReplaceCause::VolumeClaimTemplate)),
        vec![(2, R), (0, R), (1, Rp)])]
    #[case::leader_beyond_replicas("the meta leader beyond replicas goes last", |f: &mut Fixture| { f.servers.push(member(3, "new")); f.meta_leader = Some("demo-3") },
        vec![(2, R), (1, R), (0, R), (3, S)])]
    #[case::updated_skipped("servers on the target revision are not stepped (a restarted controller resumes)", |f: &mut Fixture| f.servers[2].revision = Some("new".into()),
        vec![(0, R), (1, R)])]
    fn step_order(
        #[case] what: &str,
        #[case] edit: fn(&mut Fixture),
        #[case] want: Vec<(u32, StepKind)>,
    ) {
        let mut f = base();
        edit(&mut f);
        let got = run(&f).pending;
        let want: Vec<Step> = want.into_iter().map(|(o, k)| step(o, k)).collect();
        assert_eq!(got, want, "{what}");
    }

    fn auth_refusal() -> Refusal {
        Refusal::new(
            reason::AUTH_CHANGE_BLOCKED,
            RefusalHold::Waiting,
            "adding spec.auth on a running NATS cluster is not supported; create a new NatsCluster",
        )
    }

    #[rstest]
    #[case::take_first("an open gate takes the first step", |_: &mut Fixture| {}, Action::Take(step(2, R)), false)]
    #[case::up_to_date("all on the target revision", |f: &mut Fixture| f.servers.iter_mut().for_each(|m| m.revision = Some("new".into())), Action::UpToDate, false)]
    #[case::gate_holds("a closed gate holds the next step (also after an involuntary disruption)", |f: &mut Fixture| f.gate = closed(), Action::Held(Hold::Gate), false)]
    #[case::paused("paused stops before the next step", |f: &mut Fixture| f.paused = true, Action::Held(Hold::Paused), false)]
    #[case::force_through_gate("force-step restarts a waiting server through a closed gate", |f: &mut Fixture| { f.gate = closed(); f.force_step = Some("demo-0") }, Action::Forced(step(0, R)), true)]
    #[case::force_through_pause("force-step restarts a waiting server through paused", |f: &mut Fixture| { f.paused = true; f.force_step = Some("demo-1") }, Action::Forced(step(1, R)), true)]
    #[case::force_not_waiting("force-step naming a server not waiting is cleared and does nothing", |f: &mut Fixture| { f.gate = closed(); f.servers[0].revision = Some("new".into()); f.force_step = Some("demo-0") }, Action::Held(Hold::Gate), true)]
    #[case::force_when_up_to_date("force-step read while up to date is cleared", |f: &mut Fixture| { f.servers.iter_mut().for_each(|m| m.revision = Some("new".into())); f.force_step = Some("demo-0") }, Action::UpToDate, true)]
    #[case::removal_carried_through_pause("a begun removal is carried through while paused", |f: &mut Fixture| { f.paused = true; f.gate = closed(); f.servers.push(member(3, "old")); f.removals.push(removal("demo-3", RemovalPhase::Evacuating)) }, Action::ContinueRemoval(step(3, S)), false)]
    #[case::replacement_carried_through("a begun replacement is carried through a closed gate", |f: &mut Fixture| { f.gate = closed(); f.replace.push(("demo-2".into(), ReplaceCause::Annotation)); f.removals.push(removal("demo-2", RemovalPhase::Rejoining)) }, Action::ContinueRemoval(step(2, Rp)), false)]
    #[case::requested_not_begun("a removal only Requested waits for its turn like any step", |f: &mut Fixture| { f.paused = true; f.servers.push(member(3, "old")); f.removals.push(removal("demo-3", RemovalPhase::Requested)) }, Action::Held(Hold::Paused), false)]
    #[case::auth_change("adding auth on a running cluster holds: AuthChangeBlocked", |f: &mut Fixture| f.auth_change = Some(auth_refusal()), Action::Held(Hold::AuthChange(auth_refusal())), false)]
    #[case::scale_down_taken("a scale-down step is taken before restarts", |f: &mut Fixture| f.servers.push(member(3, "new")), Action::Take(step(3, S)), false)]
    fn next_action(
        #[case] what: &str,
        #[case] edit: fn(&mut Fixture),
        #[case] want: Action,
        #[case] clear: bool,
    ) {
        let mut f = base();
        edit(&mut f);
        let d = run(&f);
        assert_eq!(d.action, want, "{what}");
        assert_eq!(d.clear_force_step, clear, "{what}: clear force-step");
    }

    #[rstest]
    #[case::carries_the_auth_change("restart-all over an auth change restarts every waiting server at once, through a closed gate and paused, the meta leader's too",
        |f: &mut Fixture| { f.auth_change = Some(auth_refusal()); f.restart_all = true; f.gate = closed(); f.paused = true },
        Action::RestartAll(vec![step(2, R), step(0, R), step(1, R)]), false)]
    #[case::only_waiting_servers("servers already on the target revision are not restarted again (a pass after a controller restart)",
        |f: &mut Fixture| { f.auth_change = Some(auth_refusal()); f.restart_all = true; f.servers[2].revision = Some("new".into()) },
        Action::RestartAll(vec![step(0, R), step(1, R)]), false)]
    #[case::nothing_to_restart("every server restarted but still answering with the old plane: held, the annotation kept",
        |f: &mut Fixture| { f.auth_change = Some(auth_refusal()); f.restart_all = true; f.servers.iter_mut().for_each(|m| m.revision = Some("new".into())) },
        Action::Held(Hold::AuthChange(auth_refusal())), false)]
    #[case::no_scale_down("restart-all restarts; a server beyond replicas is still removed one at a time later",
        |f: &mut Fixture| { f.auth_change = Some(auth_refusal()); f.restart_all = true; f.servers.push(member(3, "old")) },
        Action::RestartAll(vec![step(2, R), step(0, R), step(1, R)]), false)]
    #[case::removal_first("a begun removal is carried through first",
        |f: &mut Fixture| { f.auth_change = Some(auth_refusal()); f.restart_all = true; f.servers.push(member(3, "old")); f.removals.push(removal("demo-3", RemovalPhase::Evacuating)) },
        Action::ContinueRemoval(step(3, S)), false)]
    #[case::carried("the servers run what spec.auth says: the rollout goes on as usual and the annotation is cleared",
        |f: &mut Fixture| f.restart_all = true,
        Action::Take(step(2, R)), true)]
    #[case::without_annotation("without restart-all an auth change holds",
        |f: &mut Fixture| f.auth_change = Some(auth_refusal()),
        Action::Held(Hold::AuthChange(auth_refusal())), false)]
    fn restart_all_annotation(
        #[case] what: &str,
        #[case] edit: fn(&mut Fixture),
        #[case] want: Action,
        #[case] clear: bool,
    ) {
        let mut f = base();
        edit(&mut f);
        let d = run(&f);
        assert_eq!(d.action, want, "{what}");
        assert_eq!(d.clear_restart_all, clear, "{what}: clear restart-all");
    }

    fn at(secs: i64) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(secs).unwrap(),
        )
    }

    #[rstest]
    #[case::absent(None, vec![], None, None, false)]
    #[case::recorded_and_cleared(Some("demo-1"), vec![], Some("demo-1"), None, true)]
    #[case::already_recorded(Some("demo-1"), vec![removal("demo-1", RemovalPhase::Evacuating)], None, None, true)]
    #[case::unknown_cleared(Some("demo-7"), vec![], None, Some("demo-7"), true)]
    #[case::beyond_replicas_is_no_replacement(Some("demo-3"), vec![], None, Some("demo-3"), true)]
    fn replace_server_annotation(
        #[case] annotation: Option<&str>,
        #[case] removals: Vec<ServerRemoval>,
        #[case] record: Option<&str>,
        #[case] unknown: Option<&str>,
        #[case] clear: bool,
    ) {
        let mut f = base();
        f.servers.push(member(3, "old"));
        let r = read_replace_server(annotation, 3, &f.servers, &removals, &at(5));
        assert_eq!(r.record.as_ref().map(|x| x.name.as_str()), record);
        if let Some(x) = &r.record {
            assert_eq!(
                (x.phase, x.since.clone()),
                (RemovalPhase::Requested, Some(at(5)))
            );
        }
        assert_eq!(r.unknown.as_deref(), unknown);
        assert_eq!(r.clear, clear);
    }

    #[test]
    fn replacements_come_from_status_and_volume_changes() {
        let mut f = base();
        f.servers.push(member(3, "old"));
        let removals = vec![
            removal("demo-1", RemovalPhase::Requested),
            removal("demo-3", RemovalPhase::Evacuating),
        ];
        let r = replacements(
            3,
            &f.servers,
            &removals,
            &["demo-1".into(), "demo-2".into()],
        );
        assert_eq!(
            r,
            vec![
                ("demo-1".to_string(), ReplaceCause::Annotation),
                ("demo-2".to_string(), ReplaceCause::VolumeClaimTemplate),
            ],
            "demo-3 is beyond replicas: a scale-down, not a replacement"
        );
    }

    #[rstest]
    #[case::adding(
        "version: 2.15.1\nreplicas: 3\nauth: {trustRef: {name: t}}\n",
        Some(false),
        true
    )]
    #[case::removing("version: 2.15.1\nreplicas: 3\n", Some(true), true)]
    #[case::unchanged("version: 2.15.1\nreplicas: 3\n", Some(false), false)]
    #[case::not_running(
        "version: 2.15.1\nreplicas: 3\nauth: {trustRef: {name: t}}\n",
        None,
        false
    )]
    fn auth_change_holds_the_rollout(
        #[case] spec: &str,
        #[case] running_with_auth: Option<bool>,
        #[case] held: bool,
    ) {
        let spec: nats_api::cluster::NatsClusterSpec = serde_yaml::from_str(spec).unwrap();
        let mut f = base();
        f.auth_change = crate::refusals::auth_change(&spec, running_with_auth);
        let d = run(&f);
        match d.action {
            Action::Held(Hold::AuthChange(r)) => {
                assert!(held);
                assert_eq!(r.reason, reason::AUTH_CHANGE_BLOCKED);
            }
            other => assert!(!held, "{other:?}"),
        }
    }

    #[rstest]
    #[case::none_missing(|_: &mut Fixture| {}, vec![])]
    #[case::scale_up(|f: &mut Fixture| f.replicas = 5, vec![3, 4])]
    #[case::absent(|f: &mut Fixture| f.servers[1].present = false, vec![1])]
    #[case::being_replaced(|f: &mut Fixture| { f.servers[1].present = false; f.removals.push(removal("demo-1", RemovalPhase::Deleting)) }, vec![])]
    fn creation(#[case] edit: fn(&mut Fixture), #[case] want: Vec<u32>) {
        let mut f = base();
        edit(&mut f);
        assert_eq!(run(&f).create, want);
    }
}
