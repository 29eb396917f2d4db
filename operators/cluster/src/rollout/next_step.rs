//! From one pass's observations to the next step (design §4.4): where each desired server stands
//! against what the port observed, each server's reported revision from its `/varz` digest, the
//! revision it runs for the step order, Settled as the gate reads it; then the gate and the step
//! order decide the next step ([`next_step`]).

use std::collections::{BTreeMap, BTreeSet};

use controller_kit::conditions::Decided;
use nats_api::cluster::{RemovalPhase, ServerRemoval, reason};

use super::gate::{Gate, GateInput, MetaObservation, SettledView, gate};
use super::order::{Decision, OrderInput, ReplaceCause, decide};
use super::rollout_inputs::{Targets, gate_servers, members, reported_revision};
use crate::observation::Observation;
use crate::refusals::Refusal;
use crate::server_lifecycle::{DesiredServer, ObservedServer};

/// Where a desired server stands against what the port observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerState {
    /// No workload: create it.
    Absent,
    /// Running the desired revision: kept as rendered.
    Current,
    /// Running another revision: the rollout decides when it restarts.
    Changed,
    /// Present with its revision unknown (no pod yet, a restart under way): nothing is written
    /// over it; it is not Ready, which holds every step meanwhile.
    InFlux,
}

/// The state of `desired` among `observed`.
pub fn server_state(desired: &DesiredServer, observed: &[ObservedServer]) -> ServerState {
    match observed.iter().find(|o| o.ordinal == desired.ordinal) {
        Some(o) if o.present => match &o.revision {
            Some(r) if *r == desired.revision => ServerState::Current,
            Some(_) => ServerState::Changed,
            None => ServerState::InFlux,
        },
        _ => ServerState::Absent,
    }
}

/// Settled as the gate reads it, from the Settled condition this pass computed.
pub fn settled_view(settled: &Decided) -> SettledView {
    if settled.status {
        SettledView::Settled
    } else if settled.reason == reason::OBSERVATION_FAILED {
        SettledView::Unobserved {
            error: settled.message.clone(),
        }
    } else {
        SettledView::NotCurrent {
            groups: vec![settled.message.clone()],
        }
    }
}

/// The revision each answering server reports: the desired revision whose rendered config has
/// the digest its `/varz` names. A server reporting another digest maps to none.
pub fn reported_revisions(
    desired: &[DesiredServer],
    obs: &Observation,
) -> BTreeMap<String, String> {
    desired
        .iter()
        .filter_map(|d| {
            let digest = obs
                .answers
                .get(&d.plan.server_name)?
                .config_digest
                .as_deref()?;
            let known = [(
                d.revision.clone(),
                crate::reload::config_digest(&crate::render::render_block(&d.plan)),
            )];
            let r = reported_revision(digest, &known)?;
            Some((d.plan.server_name.clone(), r))
        })
        .collect()
}

/// The revision a server runs for the step order: the target once its `/varz` digest shows it
/// and its workload is the target's (a reload leaves the workload's tag on the old revision),
/// else the workload's — a server whose config already matches but whose image, resources or
/// pod template do not still needs its restart.
pub fn running(
    observed: &[ObservedServer],
    reported: &BTreeMap<String, String>,
) -> Vec<ObservedServer> {
    observed
        .iter()
        .map(|o| {
            let by_digest = reported.get(&o.server_name).filter(|r| {
                o.revision
                    .as_deref()
                    .is_some_and(|w| crate::revision::same_workload(w, r))
            });
            ObservedServer {
                revision: by_digest.cloned().or_else(|| o.revision.clone()),
                ..o.clone()
            }
        })
        .collect()
}

/// The next step over the servers within replicas: the gate over what was observed, then the
/// step order (restarts highest ordinal first, the meta leader's server last; paused;
/// force-step). Servers beyond replicas are left to the removal path.
pub struct StepInput<'a> {
    pub replicas: u32,
    pub observed: &'a [ObservedServer],
    pub targets: &'a Targets,
    pub reported: &'a BTreeMap<String, String>,
    pub answered: &'a BTreeSet<String>,
    pub meta: &'a MetaObservation,
    pub settled: &'a SettledView,
    pub paused: bool,
    pub force_step: Option<&'a str>,
    pub auth_change: Option<Refusal>,
    /// The `restart-all` annotation is set.
    pub restart_all: bool,
    /// Servers to replace and why.
    pub replace: &'a [(String, ReplaceCause)],
    /// `status.removals`.
    pub removals: &'a [ServerRemoval],
}

/// The gate and the decision.
pub fn next_step(input: &StepInput<'_>) -> (Gate, Decision) {
    let running = running(input.observed, input.reported);
    let servers = gate_servers(&running, input.targets, input.reported, input.answered);
    let rejoining: Vec<String> = input
        .removals
        .iter()
        .filter(|r| r.phase == RemovalPhase::Rejoining)
        .map(|r| r.name.clone())
        .collect();
    let gate = gate(&GateInput {
        servers: &servers,
        meta: input.meta,
        settled: input.settled,
        rejoining: &rejoining,
    });
    let leader = match input.meta {
        MetaObservation::FromLeader { leader, .. } => Some(leader.as_str()),
        _ => None,
    };
    // A server in flux (no pod yet, a restart under way) is no step of its own: it holds the
    // gate by not being Ready.
    let settled_members: Vec<ObservedServer> = running
        .iter()
        .filter(|o| !o.present || o.revision.is_some())
        .cloned()
        .collect();
    let members = members(&settled_members, input.targets);
    let decision = decide(&OrderInput {
        replicas: input.replicas,
        servers: &members,
        meta_leader: leader,
        paused: input.paused,
        force_step: input.force_step,
        replace: input.replace,
        removals: input.removals,
        gate: &gate,
        auth_change: input.auth_change.clone(),
        restart_all: input.restart_all,
    });
    (gate, decision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::order::{Action, Hold, Step, StepKind};
    use nats_api::cluster::condition::SETTLED;
    use rstest::rstest;

    fn servers(ready: &[bool], revisions: &[&str]) -> Vec<ObservedServer> {
        ready
            .iter()
            .zip(revisions)
            .enumerate()
            .map(|(i, (r, rev))| ObservedServer {
                ordinal: i as u32,
                server_name: format!("demo-{i}"),
                present: true,
                ready: *r,
                revision: Some(rev.to_string()).filter(|r| !r.is_empty()),
                ..Default::default()
            })
            .collect()
    }

    fn desired(ordinal: u32, revision: &str) -> DesiredServer {
        use crate::plan::{ClusterInputs, KubernetesLayout, plan_servers};
        let spec = crate::objects::testing::spec("version: 2.15.0\nreplicas: 1\n");
        let plan = plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: &spec,
                trust: None,
                account_preloads: vec![],
                leaf_remotes: vec![],
            },
            &KubernetesLayout {
                name: "demo".into(),
                namespace: "nats".into(),
                cluster_domain: "cluster.local".into(),
            },
        )
        .expect("plans")
        .remove(0);
        DesiredServer {
            ordinal,
            plan,
            config: String::new(),
            revision: revision.into(),
            files: vec![],
        }
    }

    fn seen(present: bool, revision: Option<&str>) -> Vec<ObservedServer> {
        vec![ObservedServer {
            ordinal: 0,
            server_name: "demo-0".into(),
            present,
            revision: revision.map(str::to_string),
            ..Default::default()
        }]
    }

    #[rstest]
    #[case::never_seen(vec![], ServerState::Absent)]
    #[case::gone(seen(false, None), ServerState::Absent)]
    #[case::on_its_revision(seen(true, Some("r2")), ServerState::Current)]
    #[case::on_another_revision(seen(true, Some("r1")), ServerState::Changed)]
    #[case::no_pod_or_mid_restart(seen(true, None), ServerState::InFlux)]
    fn a_server_is_created_kept_stepped_or_left_in_flux(
        #[case] observed: Vec<ObservedServer>,
        #[case] want: ServerState,
    ) {
        assert_eq!(server_state(&desired(0, "r2"), &observed), want);
    }

    struct Case {
        ready: Vec<bool>,
        /// The revision each server's workload runs; the target is "new" for all.
        running: Vec<&'static str>,
        /// Servers whose /varz digest names the target.
        reporting: Vec<&'static str>,
        leader: Option<&'static str>,
        settled: SettledView,
        paused: bool,
        force_step: Option<&'static str>,
    }

    fn case(running: &[&'static str]) -> Case {
        Case {
            ready: vec![true; running.len()],
            running: running.to_vec(),
            reporting: running
                .iter()
                .enumerate()
                .filter(|(_, r)| **r == "new")
                .map(|(i, _)| ["demo-0", "demo-1", "demo-2"][i])
                .collect(),
            leader: None,
            settled: SettledView::Settled,
            paused: false,
            force_step: None,
        }
    }

    fn decide_case(c: &Case) -> (Gate, Decision) {
        // Every revision of a case runs the same workload ("-w"): only the config differs.
        let running: Vec<String> = c
            .running
            .iter()
            .map(|r| {
                if r.is_empty() {
                    String::new()
                } else {
                    format!("{r}-w")
                }
            })
            .collect();
        let running: Vec<&str> = running.iter().map(String::as_str).collect();
        let observed = servers(&c.ready, &running);
        let targets: Targets = (0..observed.len() as u32)
            .map(|o| (o, "new-w".to_string()))
            .collect();
        let reported: BTreeMap<String, String> = c
            .reporting
            .iter()
            .map(|s| (s.to_string(), "new-w".to_string()))
            .collect();
        let answered: BTreeSet<String> = observed.iter().map(|o| o.server_name.clone()).collect();
        let meta = match c.leader {
            Some(l) => MetaObservation::FromLeader {
                leader: l.into(),
                peers: answered.iter().cloned().collect(),
            },
            None => MetaObservation::FromFollowers,
        };
        next_step(&StepInput {
            replicas: observed.len() as u32,
            observed: &observed,
            targets: &targets,
            reported: &reported,
            answered: &answered,
            meta: &meta,
            settled: &c.settled,
            paused: c.paused,
            force_step: c.force_step,
            auth_change: None,
            restart_all: false,
            replace: &[],
            removals: &[],
        })
    }

    fn restart(o: u32) -> Action {
        Action::Take(Step {
            server: format!("demo-{o}"),
            ordinal: o,
            kind: StepKind::Restart,
        })
    }

    #[rstest]
    #[case::nothing_changed(case(&["new", "new", "new"]), Action::UpToDate)]
    #[case::highest_first(case(&["old", "old", "old"]), restart(2))]
    #[case::meta_leader_last(Case { leader: Some("demo-2"), ..case(&["old", "old", "old"]) }, restart(1))]
    #[case::meta_leader_alone_left(Case { leader: Some("demo-2"), ..case(&["new", "new", "old"]) }, restart(2))]
    #[case::waits_for_ready(Case { ready: vec![true, true, false], ..case(&["old", "old", "new"]) }, Action::Held(Hold::Gate))]
    #[case::waits_for_the_revision_report(Case { reporting: vec![], ..case(&["old", "old", "new"]) }, Action::Held(Hold::Gate))]
    #[case::waits_for_settled(Case { settled: SettledView::NotCurrent { groups: vec!["stream ORDERS".into()] }, ..case(&["old", "old", "new"]) }, Action::Held(Hold::Gate))]
    #[case::paused(Case { paused: true, ..case(&["old", "old", "old"]) }, Action::Held(Hold::Paused))]
    #[case::force_step_through_a_closed_gate(Case { settled: SettledView::Unobserved { error: "x".into() }, force_step: Some("demo-0"), ..case(&["old", "old", "old"]) }, Action::Forced(Step { server: "demo-0".into(), ordinal: 0, kind: StepKind::Restart }))]
    #[case::in_flux_is_no_step(Case { ready: vec![false, false, false], running: vec!["", "", ""], reporting: vec![], ..case(&["new", "new", "new"]) }, Action::UpToDate)]
    #[case::reloaded_server_is_current(Case { reporting: vec!["demo-2"], ..case(&["old", "old", "old"]) }, restart(1))]
    fn one_server_at_a_time_meta_leader_last_behind_the_gate(
        #[case] c: Case,
        #[case] want: Action,
    ) {
        let (_, d) = decide_case(&c);
        assert_eq!(d.action, want, "{d:?}");
    }

    #[test]
    fn force_step_is_cleared_once_read_even_when_it_names_no_waiting_server() {
        let c = Case {
            force_step: Some("demo-7"),
            ..case(&["new", "new", "new"])
        };
        let (_, d) = decide_case(&c);
        assert!(d.clear_force_step);
        assert_eq!(d.action, Action::UpToDate);
    }

    #[test]
    fn a_closed_gate_names_what_it_waits_for() {
        let c = Case {
            ready: vec![true, false, true],
            ..case(&["old", "old", "new"])
        };
        let (g, _) = decide_case(&c);
        assert_eq!(g.waiting_for().as_deref(), Some("demo-1 not Ready"));
    }

    #[rstest]
    #[case::settled(
        Decided::new(SETTLED, true, reason::ALL_GROUPS_CURRENT, "ok"),
        SettledView::Settled
    )]
    #[case::unobserved(Decided::new(SETTLED, false, reason::OBSERVATION_FAILED, "dial"), SettledView::Unobserved { error: "dial".into() })]
    #[case::silent(Decided::new(SETTLED, false, reason::SERVERS_SILENT, "demo-1 does not answer"), SettledView::NotCurrent { groups: vec!["demo-1 does not answer".into()] })]
    fn settled_reads_into_the_gate(#[case] v: Decided, #[case] want: SettledView) {
        assert_eq!(settled_view(&v), want);
    }

    fn answer(name: &str, leader: &str, replicas: &[&str]) -> crate::observation::ServerAnswer {
        let jsz: nats_wire::monitor::Jsz = serde_json::from_value(serde_json::json!({
            "server_id": "N", "now": "2026-11-29T20:00:00Z",
            "meta_cluster": {
                "name": "demo", "leader": leader,
                "replicas": replicas.iter().map(|r| serde_json::json!({"name": r, "current": true})).collect::<Vec<_>>(),
            },
        }))
        .expect("jsz");
        crate::observation::ServerAnswer {
            name: name.into(),
            jsz: Some(jsz),
            ..Default::default()
        }
    }

    #[test]
    fn the_meta_group_comes_from_the_leaders_own_report_else_from_followers() {
        use crate::rollout::rollout_inputs::meta_observation;
        let mut obs = Observation::default();
        obs.answers
            .insert("demo-0".into(), answer("demo-0", "demo-1", &[]));
        assert_eq!(meta_observation(true, &obs), MetaObservation::FromFollowers);
        assert_eq!(meta_observation(false, &obs), MetaObservation::Off);
        obs.answers.insert(
            "demo-1".into(),
            answer("demo-1", "demo-1", &["demo-0", "demo-2"]),
        );
        assert_eq!(
            meta_observation(true, &obs),
            MetaObservation::FromLeader {
                leader: "demo-1".into(),
                peers: vec!["demo-0".into(), "demo-1".into(), "demo-2".into()],
            }
        );
    }

    #[test]
    fn a_server_reports_the_target_only_by_the_digest_of_its_rendered_config() {
        let d = desired(0, "r2");
        let digest = crate::reload::config_digest(&crate::render::render_block(&d.plan));
        let mut obs = Observation::default();
        obs.answers.insert(
            "demo-0".into(),
            crate::observation::ServerAnswer {
                name: "demo-0".into(),
                config_digest: Some(digest),
                ..Default::default()
            },
        );
        let r = reported_revisions(std::slice::from_ref(&d), &obs);
        assert_eq!(r.get("demo-0").map(String::as_str), Some("r2"));
        if let Some(a) = obs.answers.get_mut("demo-0") {
            a.config_digest = Some("sha256:other".into());
        }
        assert!(reported_revisions(&[d], &obs).is_empty());
    }

    #[rstest]
    // A reload moved the config; the workload's tag keeps the old revision.
    #[case::reloaded(Some("c1-w1"), Some("c2-w1"), Some("c2-w1"))]
    // The config already matches but the image or resources changed: still to restart.
    #[case::workload_changed(Some("c1-w1"), Some("c1-w2"), Some("c1-w1"))]
    #[case::not_answering(Some("c1-w1"), None, Some("c1-w1"))]
    #[case::a_revision_of_the_old_form(Some("c1"), Some("c1-w1"), Some("c1"))]
    #[case::no_workload_tag_yet(None, Some("c2-w1"), None)]
    fn the_running_revision_is_the_reported_one_only_on_the_same_workload(
        #[case] tagged: Option<&str>,
        #[case] reported: Option<&str>,
        #[case] want: Option<&str>,
    ) {
        let observed = seen(true, tagged);
        let reported: BTreeMap<String, String> = reported
            .map(|r| ("demo-0".to_string(), r.to_string()))
            .into_iter()
            .collect();
        let r = running(&observed, &reported);
        assert_eq!(r[0].revision.as_deref(), want);
    }
}
