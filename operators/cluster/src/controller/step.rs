//! The one call site that decides which changed server is restarted next. For now: one at a time,
//! highest ordinal first, only while every server is Ready and the rollout is not paused. The
//! full gate and step order (meta leader last, Settled, force-step, reload; design §4.4) replace
//! this function alone.

use crate::lifecycle::ObservedServer;

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
