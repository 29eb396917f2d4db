//! Scale-down and server replacement (design §4.5), one server at a time as a step of the
//! rollout: evacuate it, wait until it holds no Raft group and the NATS cluster is Settled apart
//! from itself, step it down if it leads the meta group, `$JS.API.SERVER.REMOVE` it, then delete
//! its StatefulSet, its PVC only when the PVC is proven the claim of that StatefulSet
//! ([`crate::objects::claims`]: its name and ownership, never its labels alone), and (scale-down)
//! its ConfigMap only when the NatsCluster controls it. A replacement then recreates the server
//! under the same name once the old PVC is gone, and holds the gate until the meta leader lists
//! it.
//!
//! [`next`] is the whole state machine: what was observed in, the one thing to do now out. The
//! phase it moves to is recorded in `status.removals`, so a restarted controller resumes it.

use nats_api::cluster::{RemovalPhase, reason};

/// Why a server leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemovalKind {
    /// Beyond `spec.replicas`: removed for good.
    ScaleDown,
    /// Named by `replace-server`, or its volume no longer matches `jetstream.volumeClaimTemplate`:
    /// removed and recreated under the same name.
    Replace,
}

/// A stream and its replica count (from JSZ), for the ScaleDownBlocked check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamReplicas {
    /// `account > stream`, as messages name it.
    pub name: String,
    pub replicas: u32,
}

/// What the removal may do with a PVC of the name of the server's data claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Proven the claim of the server's own StatefulSet ([`crate::objects::claims::own_claim`]):
    /// deleted with the server.
    Own,
    /// Being deleted already: waited for until it is gone.
    Deleting,
    /// Not proven the server's (why): never deleted, named as left.
    NotOwn(String),
}

/// The server's objects as observed (Kubernetes; the local server lifecycle reports its process and
/// files the same way: its "PVC" is the store directory, always its own).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerObjects {
    /// The StatefulSet `<cluster>-<i>` (local: the process) still exists.
    pub statefulset: bool,
    /// A PVC of the name of the server's data claim, if one exists: its name, and what the
    /// removal may do with it.
    pub pvc: Option<(String, Claim)>,
    /// The ConfigMap `<cluster>-<i>`, if it exists: its name, and whether this NatsCluster
    /// controls it.
    pub configmap: Option<(String, bool)>,
}

/// Everything one removal step is decided from.
#[derive(Clone, Debug)]
pub struct RemovalInput<'a> {
    pub server: &'a str,
    pub kind: RemovalKind,
    /// The phase in `status.removals`; `None` (or Requested) while it has not begun.
    pub phase: Option<RemovalPhase>,
    pub jetstream: bool,
    /// `spec.auth.systemCredentials` is set: the controller has a system user to evacuate with.
    pub system_credentials: bool,
    /// `spec.replicas`: the size the NATS cluster shrinks to.
    pub new_size: u32,
    pub streams: &'a [StreamReplicas],
    /// Raft groups (streams, consumers) that still have the server as a member.
    pub groups_on_server: &'a [String],
    /// Raft groups not current, not counting the server itself being offline or behind.
    pub not_current_apart_from_server: &'a [String],
    /// The meta leader's server name, when one answered.
    pub meta_leader: Option<&'a str>,
    /// The meta group's peers as its leader lists them; `None` when no leader answered.
    pub meta_peers: Option<&'a [String]>,
    pub objects: &'a ServerObjects,
    /// The recreated server is up (pod Ready / process answering).
    pub server_ready: bool,
}

/// The one thing to do now for a removal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RemovalStep {
    /// Nothing is forced: Progressing=False with `reason` (ScaleDownBlocked, ReplacementBlocked).
    Blocked {
        reason: &'static str,
        message: String,
    },
    /// Send `$JS.API.SERVER.EVACUATE` for the server.
    Evacuate,
    /// Evacuation is under way; wait.
    WaitEvacuation { waiting_for: String },
    /// Send `$JS.API.META.LEADER.STEPDOWN`: the server leads the meta group.
    StepDownMetaLeader,
    /// Send `$JS.API.SERVER.REMOVE` for the server.
    RemovePeer,
    /// Delete these of the server's objects (the server lifecycle's `delete_server`; repeated until gone).
    Delete {
        statefulset: bool,
        pvc: bool,
        configmap: bool,
    },
    /// Objects the controller may not delete remain: Ready=False, ReconcileFailed naming each.
    Leftovers { names: Vec<String> },
    /// The old server is gone: create it again under the same name (replacement).
    Recreate,
    /// The recreated server is not listed by the meta leader yet; the gate holds on it.
    WaitRejoin { waiting_for: String },
    /// The removal is complete: drop its `status.removals` entry.
    Done,
    /// Asking for `step` failed (a request to the servers, the server lifecycle): it is asked again
    /// next pass, the recorded phase unchanged.
    Failed {
        step: Box<RemovalStep>,
        error: String,
    },
}

impl RemovalStep {
    /// The phase `status.removals` records once this step is taken; `None` keeps the current one
    /// (or, for [`RemovalStep::Done`], drops the entry).
    pub fn phase_after(&self, kind: RemovalKind) -> Option<RemovalPhase> {
        match self {
            RemovalStep::Blocked { .. } => Some(RemovalPhase::Requested),
            RemovalStep::Evacuate | RemovalStep::WaitEvacuation { .. } => {
                Some(RemovalPhase::Evacuating)
            }
            RemovalStep::StepDownMetaLeader => Some(RemovalPhase::Evacuating),
            RemovalStep::RemovePeer => Some(RemovalPhase::Removed),
            RemovalStep::Delete { .. } | RemovalStep::Leftovers { .. } => {
                Some(RemovalPhase::Deleting)
            }
            RemovalStep::Recreate | RemovalStep::WaitRejoin { .. } => {
                (kind == RemovalKind::Replace).then_some(RemovalPhase::Rejoining)
            }
            RemovalStep::Done => None,
            RemovalStep::Failed { step, .. } => step.phase_after(kind),
        }
    }

    /// The Progressing reason while this step holds or runs.
    pub fn progressing_reason(&self, kind: RemovalKind) -> &'static str {
        match self {
            RemovalStep::Blocked { reason, .. } => reason,
            _ => match kind {
                RemovalKind::ScaleDown => reason::SCALING_DOWN,
                RemovalKind::Replace => reason::REPLACING_SERVER,
            },
        }
    }
}

fn blocked_reason(kind: RemovalKind) -> &'static str {
    match kind {
        RemovalKind::ScaleDown => reason::SCALE_DOWN_BLOCKED,
        RemovalKind::Replace => reason::REPLACEMENT_BLOCKED,
    }
}

/// With JetStream and no system credentials nothing can be evacuated: scale-down and
/// replacement are blocked, with a reason.
pub fn needs_system_credentials(input: &RemovalInput<'_>) -> Option<RemovalStep> {
    (input.jetstream && !input.system_credentials).then(|| RemovalStep::Blocked {
        reason: blocked_reason(input.kind),
        message: format!(
            "{} cannot be evacuated: JetStream runs and spec.auth.systemCredentials is not set, so the controller has no system user to evacuate with",
            input.server
        ),
    })
}

/// A stream whose replica count exceeds the new size stops the shrink; nothing is forced.
pub fn streams_fit(input: &RemovalInput<'_>) -> Option<RemovalStep> {
    if input.kind != RemovalKind::ScaleDown || !input.jetstream {
        return None;
    }
    let over: Vec<String> = input
        .streams
        .iter()
        .filter(|s| s.replicas > input.new_size)
        .map(|s| format!("{} (R{})", s.name, s.replicas))
        .collect();
    (!over.is_empty()).then(|| RemovalStep::Blocked {
        reason: reason::SCALE_DOWN_BLOCKED,
        message: format!(
            "streams with more replicas than the new size of {}: {}",
            input.new_size,
            over.join(", ")
        ),
    })
}

/// What of the server's objects to delete: the StatefulSet, the PVC only when proven its claim
/// (or already going: waited for), the ConfigMap (scale-down only; a replacement keeps its name)
/// only when controlled.
fn deletable(input: &RemovalInput<'_>) -> (bool, bool, bool) {
    let o = input.objects;
    (
        o.statefulset,
        o.pvc
            .as_ref()
            .is_some_and(|(_, c)| matches!(c, Claim::Own | Claim::Deleting)),
        input.kind == RemovalKind::ScaleDown
            && o.configmap
                .as_ref()
                .is_some_and(|(_, controlled)| *controlled),
    )
}

/// Objects left that the controller may not delete, named for ReconcileFailed.
fn leftovers(input: &RemovalInput<'_>) -> Vec<String> {
    let o = input.objects;
    let mut names = Vec::new();
    if let Some((name, Claim::NotOwn(why))) = &o.pvc {
        names.push(format!(
            "PersistentVolumeClaim/{name} (not proven the server's claim: {why})"
        ));
    }
    if input.kind == RemovalKind::ScaleDown
        && let Some((name, false)) = &o.configmap
    {
        names.push(format!(
            "ConfigMap/{name} (not controlled by the NatsCluster)"
        ));
    }
    names
}

fn delete_or_done(input: &RemovalInput<'_>) -> RemovalStep {
    let (statefulset, pvc, configmap) = deletable(input);
    if statefulset || pvc || configmap {
        return RemovalStep::Delete {
            statefulset,
            pvc,
            configmap,
        };
    }
    let left = leftovers(input);
    if !left.is_empty() {
        return RemovalStep::Leftovers { names: left };
    }
    match input.kind {
        RemovalKind::ScaleDown => RemovalStep::Done,
        RemovalKind::Replace => RemovalStep::Recreate,
    }
}

/// The next step of one server's removal.
pub fn next(input: &RemovalInput<'_>) -> RemovalStep {
    match input.phase {
        None | Some(RemovalPhase::Requested) => {
            if !input.jetstream {
                // Nothing to evacuate: delete at once.
                return delete_or_done(input);
            }
            if let Some(b) = needs_system_credentials(input).or_else(|| streams_fit(input)) {
                return b;
            }
            RemovalStep::Evacuate
        }
        Some(RemovalPhase::Evacuating) => {
            if !input.groups_on_server.is_empty() {
                return RemovalStep::WaitEvacuation {
                    waiting_for: format!(
                        "{} still holds {}",
                        input.server,
                        input.groups_on_server.join(", ")
                    ),
                };
            }
            if !input.not_current_apart_from_server.is_empty() {
                return RemovalStep::WaitEvacuation {
                    waiting_for: format!(
                        "groups not current: {}",
                        input.not_current_apart_from_server.join(", ")
                    ),
                };
            }
            if input.meta_leader == Some(input.server) {
                return RemovalStep::StepDownMetaLeader;
            }
            RemovalStep::RemovePeer
        }
        Some(RemovalPhase::Removed) | Some(RemovalPhase::Deleting) => delete_or_done(input),
        Some(RemovalPhase::Rejoining) => {
            if input.objects.statefulset && !input.server_ready {
                return RemovalStep::WaitRejoin {
                    waiting_for: format!("{} not Ready", input.server),
                };
            }
            if !input.objects.statefulset {
                return RemovalStep::Recreate;
            }
            if !input.jetstream {
                return RemovalStep::Done;
            }
            match input.meta_peers {
                Some(peers) if peers.iter().any(|p| p == input.server) => RemovalStep::Done,
                Some(_) => RemovalStep::WaitRejoin {
                    waiting_for: format!(
                        "{} rejoining: the meta leader does not list it yet (removal tombstone)",
                        input.server
                    ),
                },
                None => RemovalStep::WaitRejoin {
                    waiting_for: format!(
                        "{} rejoining: no meta leader answered to list it",
                        input.server
                    ),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    struct Fixture {
        kind: RemovalKind,
        phase: Option<RemovalPhase>,
        jetstream: bool,
        system_credentials: bool,
        streams: Vec<StreamReplicas>,
        groups_on_server: Vec<String>,
        not_current: Vec<String>,
        meta_leader: Option<&'static str>,
        meta_peers: Option<Vec<String>>,
        objects: ServerObjects,
        server_ready: bool,
    }

    fn base() -> Fixture {
        Fixture {
            kind: RemovalKind::ScaleDown,
            phase: None,
            jetstream: true,
            system_credentials: true,
            streams: vec![StreamReplicas {
                name: "APP > ORDERS".into(),
                replicas: 3,
            }],
            groups_on_server: vec![],
            not_current: vec![],
            meta_leader: Some("demo-0"),
            meta_peers: Some(vec!["demo-0".into(), "demo-1".into(), "demo-2".into()]),
            objects: ServerObjects {
                statefulset: true,
                pvc: Some(("data-demo-3-0".into(), Claim::Own)),
                configmap: Some(("demo-3".into(), true)),
            },
            server_ready: true,
        }
    }

    fn run(f: &Fixture) -> RemovalStep {
        next(&RemovalInput {
            server: "demo-3",
            kind: f.kind,
            phase: f.phase,
            jetstream: f.jetstream,
            system_credentials: f.system_credentials,
            new_size: 3,
            streams: &f.streams,
            groups_on_server: &f.groups_on_server,
            not_current_apart_from_server: &f.not_current,
            meta_leader: f.meta_leader,
            meta_peers: f.meta_peers.as_deref(),
            objects: &f.objects,
            server_ready: f.server_ready,
        })
    }

    fn blocked(reason: &'static str, message: &str) -> RemovalStep {
        RemovalStep::Blocked {
            reason,
            message: message.into(),
        }
    }

    fn not_own() -> Claim {
        Claim::NotOwn("it lacks a label".into())
    }

    const ALL: RemovalStep = RemovalStep::Delete {
        statefulset: true,
        pvc: true,
        configmap: true,
    };

    #[rstest]
    #[case::evacuate_first("a JetStream server is evacuated first", |_: &mut Fixture| {}, RemovalStep::Evacuate)]
    #[case::no_jetstream("without JetStream: deleted with no evacuation", |f: &mut Fixture| f.jetstream = false, ALL)]
    #[case::no_system_credentials("JetStream without systemCredentials: blocked with a reason", |f: &mut Fixture| f.system_credentials = false,
        blocked(reason::SCALE_DOWN_BLOCKED, "demo-3 cannot be evacuated: JetStream runs and spec.auth.systemCredentials is not set, so the controller has no system user to evacuate with"))]
    #[case::replace_no_system_credentials("replacement without systemCredentials: ReplacementBlocked", |f: &mut Fixture| { f.kind = RemovalKind::Replace; f.system_credentials = false },
        blocked(reason::REPLACEMENT_BLOCKED, "demo-3 cannot be evacuated: JetStream runs and spec.auth.systemCredentials is not set, so the controller has no system user to evacuate with"))]
    #[case::stream_too_wide("a stream wider than the new size: ScaleDownBlocked", |f: &mut Fixture| f.streams.push(StreamReplicas { name: "APP > WIDE".into(), replicas: 5 }),
        blocked(reason::SCALE_DOWN_BLOCKED, "streams with more replicas than the new size of 3: APP > WIDE (R5)"))]
    #[case::replace_ignores_size("a replacement keeps the size: wide streams do not block it", |f: &mut Fixture| { f.kind = RemovalKind::Replace; f.streams.push(StreamReplicas { name: "APP > WIDE".into(), replicas: 5 }) }, RemovalStep::Evacuate)]
    #[case::wait_groups("evacuating: still holds groups", |f: &mut Fixture| { f.phase = Some(RemovalPhase::Evacuating); f.groups_on_server = vec!["ORDERS".into()] },
        RemovalStep::WaitEvacuation { waiting_for: "demo-3 still holds ORDERS".into() })]
    #[case::wait_settled("evacuating: others not Settled", |f: &mut Fixture| { f.phase = Some(RemovalPhase::Evacuating); f.not_current = vec!["EVENTS".into()] },
        RemovalStep::WaitEvacuation { waiting_for: "groups not current: EVENTS".into() })]
    #[case::step_down("evacuated meta leader steps down first", |f: &mut Fixture| { f.phase = Some(RemovalPhase::Evacuating); f.meta_leader = Some("demo-3") }, RemovalStep::StepDownMetaLeader)]
    #[case::remove_peer("evacuated and settled: SERVER.REMOVE", |f: &mut Fixture| f.phase = Some(RemovalPhase::Evacuating), RemovalStep::RemovePeer)]
    #[case::delete_all("removed: delete StatefulSet, its proven claim, controlled ConfigMap", |f: &mut Fixture| f.phase = Some(RemovalPhase::Removed), ALL)]
    #[case::foreign_pvc_kept("a PVC not proven the server's claim is not deleted", |f: &mut Fixture| { f.phase = Some(RemovalPhase::Removed); f.objects.pvc = Some(("data-demo-3-0".into(), not_own())) },
        RemovalStep::Delete { statefulset: true, pvc: false, configmap: true })]
    #[case::claim_going("a claim being deleted is waited for", |f: &mut Fixture| { f.phase = Some(RemovalPhase::Deleting); f.objects = ServerObjects { statefulset: false, pvc: Some(("data-demo-3-0".into(), Claim::Deleting)), configmap: None } },
        RemovalStep::Delete { statefulset: false, pvc: true, configmap: false })]
    #[case::leftovers("what could not be deleted is named", |f: &mut Fixture| { f.phase = Some(RemovalPhase::Deleting); f.objects = ServerObjects { statefulset: false, pvc: Some(("data-demo-3-0".into(), not_own())), configmap: Some(("demo-3".into(), false)) } },
        RemovalStep::Leftovers { names: vec!["PersistentVolumeClaim/data-demo-3-0 (not proven the server's claim: it lacks a label)".into(), "ConfigMap/demo-3 (not controlled by the NatsCluster)".into()] })]
    #[case::scale_down_done("all gone: done", |f: &mut Fixture| { f.phase = Some(RemovalPhase::Deleting); f.objects = ServerObjects::default() }, RemovalStep::Done)]
    #[case::replace_keeps_configmap("a replacement keeps its ConfigMap", |f: &mut Fixture| { f.kind = RemovalKind::Replace; f.phase = Some(RemovalPhase::Removed) },
        RemovalStep::Delete { statefulset: true, pvc: true, configmap: false })]
    #[case::replace_recreates("old PVC gone: recreate under the same name", |f: &mut Fixture| { f.kind = RemovalKind::Replace; f.phase = Some(RemovalPhase::Deleting); f.objects = ServerObjects { statefulset: false, pvc: None, configmap: Some(("demo-3".into(), true)) } }, RemovalStep::Recreate)]
    #[case::replace_foreign_pvc("a foreign PVC holds the replacement", |f: &mut Fixture| { f.kind = RemovalKind::Replace; f.phase = Some(RemovalPhase::Deleting); f.objects = ServerObjects { statefulset: false, pvc: Some(("data-demo-3-0".into(), not_own())), configmap: None } },
        RemovalStep::Leftovers { names: vec!["PersistentVolumeClaim/data-demo-3-0 (not proven the server's claim: it lacks a label)".into()] })]
    #[case::rejoin_wait("recreated: held until the meta leader lists it", |f: &mut Fixture| { f.kind = RemovalKind::Replace; f.phase = Some(RemovalPhase::Rejoining) },
        RemovalStep::WaitRejoin { waiting_for: "demo-3 rejoining: the meta leader does not list it yet (removal tombstone)".into() })]
    #[case::rejoin_no_leader("recreated, no leader answering", |f: &mut Fixture| { f.kind = RemovalKind::Replace; f.phase = Some(RemovalPhase::Rejoining); f.meta_peers = None },
        RemovalStep::WaitRejoin { waiting_for: "demo-3 rejoining: no meta leader answered to list it".into() })]
    #[case::rejoined("listed again: done", |f: &mut Fixture| { f.kind = RemovalKind::Replace; f.phase = Some(RemovalPhase::Rejoining); f.meta_peers.as_mut().unwrap().push("demo-3".into()) }, RemovalStep::Done)]
    #[case::rejoin_not_ready("recreated, pod not Ready", |f: &mut Fixture| { f.kind = RemovalKind::Replace; f.phase = Some(RemovalPhase::Rejoining); f.server_ready = false },
        RemovalStep::WaitRejoin { waiting_for: "demo-3 not Ready".into() })]
    #[case::rejoin_recreate("Rejoining but the workload is missing: recreate", |f: &mut Fixture| { f.kind = RemovalKind::Replace; f.phase = Some(RemovalPhase::Rejoining); f.objects.statefulset = false }, RemovalStep::Recreate)]
    fn removal_steps(
        #[case] what: &str,
        #[case] edit: fn(&mut Fixture),
        #[case] want: RemovalStep,
    ) {
        let mut f = base();
        edit(&mut f);
        assert_eq!(run(&f), want, "{what}");
    }

    #[rstest]
    #[case(
        RemovalStep::Evacuate,
        RemovalKind::ScaleDown,
        Some(RemovalPhase::Evacuating),
        reason::SCALING_DOWN
    )]
    #[case(
        RemovalStep::RemovePeer,
        RemovalKind::Replace,
        Some(RemovalPhase::Removed),
        reason::REPLACING_SERVER
    )]
    #[case(
        ALL,
        RemovalKind::ScaleDown,
        Some(RemovalPhase::Deleting),
        reason::SCALING_DOWN
    )]
    #[case(
        RemovalStep::Recreate,
        RemovalKind::Replace,
        Some(RemovalPhase::Rejoining),
        reason::REPLACING_SERVER
    )]
    #[case(RemovalStep::Done, RemovalKind::ScaleDown, None, reason::SCALING_DOWN)]
    #[case(
        blocked(reason::SCALE_DOWN_BLOCKED, "x"),
        RemovalKind::ScaleDown,
        Some(RemovalPhase::Requested),
        reason::SCALE_DOWN_BLOCKED
    )]
    #[case(
        blocked(reason::REPLACEMENT_BLOCKED, "x"),
        RemovalKind::Replace,
        Some(RemovalPhase::Requested),
        reason::REPLACEMENT_BLOCKED
    )]
    #[case(
        RemovalStep::Failed { step: Box::new(RemovalStep::RemovePeer), error: "timeout".into() },
        RemovalKind::Replace,
        Some(RemovalPhase::Removed),
        reason::REPLACING_SERVER
    )]
    fn phases_and_reasons(
        #[case] step: RemovalStep,
        #[case] kind: RemovalKind,
        #[case] phase: Option<RemovalPhase>,
        #[case] why: &str,
    ) {
        assert_eq!(step.phase_after(kind), phase);
        assert_eq!(step.progressing_reason(kind), why);
    }
}
