//! The one call site that decides which changed server is restarted next. For now: one at a time,
//! highest ordinal first, only while every server is Ready and the rollout is not paused. The
//! full gate and step order (meta leader last, Settled, force-step, reload; design §4.4) replace
//! this function alone.

use crate::lifecycle::{DesiredServer, ObservedServer};

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

/// What the rollout does in this pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextStep {
    /// Nothing has changed.
    Idle,
    /// Restart this server now.
    Restart(u32),
    /// Changed servers wait; the reason says for what.
    Wait(String),
    /// `spec.rollout.paused` stops the rollout before its next step.
    Paused,
}

/// The next step over `changed` (ordinals whose rendered revision differs from the one they run).
pub fn next_step(changed: &[u32], observed: &[ObservedServer], paused: bool) -> NextStep {
    let Some(&highest) = changed.iter().max() else {
        return NextStep::Idle;
    };
    if paused {
        return NextStep::Paused;
    }
    let not_ready: Vec<&str> = observed
        .iter()
        .filter(|o| o.present && !o.ready)
        .map(|o| o.server_name.as_str())
        .collect();
    if !not_ready.is_empty() {
        return NextStep::Wait(format!("{} to be Ready", not_ready.join(", ")));
    }
    NextStep::Restart(highest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn servers(ready: &[bool]) -> Vec<ObservedServer> {
        ready
            .iter()
            .enumerate()
            .map(|(i, r)| ObservedServer {
                ordinal: i as u32,
                server_name: format!("demo-{i}"),
                present: true,
                ready: *r,
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

    #[rstest]
    #[case::nothing_changed(&[], &[true, true, true], false, NextStep::Idle)]
    #[case::highest_first(&[0, 2, 1], &[true, true, true], false, NextStep::Restart(2))]
    #[case::waits_for_ready(&[0, 1], &[true, true, false], false, NextStep::Wait("demo-2 to be Ready".into()))]
    #[case::paused(&[1], &[true, true, true], true, NextStep::Paused)]
    #[case::paused_without_change_is_idle(&[], &[true], true, NextStep::Idle)]
    fn one_server_at_a_time_highest_ordinal_first_only_when_all_ready(
        #[case] changed: &[u32],
        #[case] ready: &[bool],
        #[case] paused: bool,
        #[case] want: NextStep,
    ) {
        assert_eq!(next_step(changed, &servers(ready), paused), want);
    }
}
