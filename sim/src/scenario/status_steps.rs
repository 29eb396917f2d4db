//! Steps and figures on what the controllers write and publish: `wait_status` (a status field
//! read until it meets a rule), the counts a `wait_status` step records (`status_growth:`:
//! how much the field grew since an earlier one read it) and the `events.<Reason>` figures (how
//! many Events of that reason the controllers published in the run). Both are counts, always
//! judged: an evacuation's `moved` not growing while a server was down is what the run checks.

use std::collections::{BTreeMap, BTreeSet};

#[cfg(feature = "kube")]
use serde_json::Value;

#[cfg(feature = "kube")]
use super::deployed::Done;
use super::report::{ROLLOUT_FIGURES, figure};
#[cfg(feature = "kube")]
use super::step_context::StepContext;
use super::timeline::ControllerEvent;
use super::{Action, Report, Rule, Scenario, ScenarioError, Step, StepOutcome};
#[cfg(feature = "kube")]
use crate::control_plane::ObjectRef;
use crate::ledger::Figures;

/// The prefix of the figures counting the controllers' Events by reason (`events.MoveDone`).
pub const EVENTS_PREFIX: &str = "events.";

/// Carries out a `wait_status` step: the object read until its status field meets the rule.
#[cfg(feature = "kube")]
pub(super) async fn run(action: &Action, ctx: &StepContext) -> Result<Done, String> {
    let Action::WaitStatus {
        object,
        field,
        rule,
        timeout,
    } = action
    else {
        return Err(format!("{} is not a step on a status", action.describe()));
    };
    let r = ObjectRef::parse(object).map_err(|e| e.to_string())?;
    let text = rule;
    let rule = Rule::parse(text)?;
    let host = ctx.host()?;
    let value = crate::wait::poll(&format!("{r} status.{field} {text}"), *timeout, || async {
        let obj = host.get(&r).await.map_err(|e| e.to_string())?;
        match status_count(&obj, field) {
            Some(v) if rule.holds(v) => Ok(Some(v)),
            Some(v) => Err(format!("status.{field} is {v}")),
            None => Err(format!("no status.{field} yet")),
        }
    })
    .await
    .map_err(|e| e.to_string())?;
    Ok(Done {
        target: Some(format!("{r} status.{field} = {value}")),
        observed_at_ms: None,
        value: Some(value),
    })
}

/// `status.<field>` of an object as a count: a number, or a list's length (`requested`); a
/// dotted field reaches deeper (`transfer.moved`). None when absent or of another type.
#[cfg(feature = "kube")]
pub fn status_count(obj: &Value, field: &str) -> Option<u64> {
    let mut v = obj.get("status")?;
    for part in field.split('.') {
        v = v.get(part)?;
    }
    match v {
        Value::Number(n) => n.as_u64(),
        Value::Array(a) => Some(a.len() as u64),
        _ => None,
    }
}

/// The counts the steps record: per `wait_status` step with a `status_growth`, how much the
/// value it read exceeds the one its `since` step read (0 when it did not grow). A step that
/// failed, or whose `since` step failed, records nothing.
pub fn status_figures(steps: &[Step], outcomes: &[StepOutcome]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (step, o) in steps.iter().zip(outcomes) {
        if let (Action::AuditStream { count, .. }, true, Some(v)) = (&step.action, o.ok, o.value) {
            out.insert(count.clone(), v);
        }
        let Some(g) = &step.status_growth else {
            continue;
        };
        let since = outcomes
            .iter()
            .find(|s| s.ok && s.id.as_deref() == Some(g.since.as_str()))
            .and_then(|s| s.value);
        if let (true, Some(now), Some(then)) = (o.ok, o.value, since) {
            out.insert(g.name.clone(), now.saturating_sub(then));
        }
    }
    out
}

/// `events.<Reason>`: how many Events of that reason the controllers published in the run (a
/// series counted as its repeats); None for a name of another kind.
pub fn event_figure(events: &[ControllerEvent], name: &str) -> Option<u64> {
    let reason = name.strip_prefix(EVENTS_PREFIX)?;
    Some(
        events
            .iter()
            .filter(|e| e.reason == reason)
            .map(|e| u64::from(e.count.max(1)))
            .sum(),
    )
}

/// Judges the expectations on the counts of this module, once the report holds the steps and
/// the Events: always judged; a count whose steps failed is a failure of the run.
pub fn judge_counts(scenario: &Scenario, report: &mut Report) {
    let growth = scenario.status_figure_names();
    for (k, rule_text) in &scenario.expect {
        let Ok(rule) = Rule::parse(rule_text) else {
            continue;
        };
        let actual = if growth.contains(k.as_str()) {
            report.status_figures.get(k).copied()
        } else if let Some(n) = event_figure(&report.controller_events, k) {
            Some(n)
        } else {
            continue;
        };
        let Some(actual) = actual else {
            report.not_recorded(k, rule_text);
            continue;
        };
        report.judge(k, rule_text, rule, actual, true);
    }
}

impl Scenario {
    /// The names of the counts the `wait_status` steps record.
    pub fn status_figure_names(&self) -> BTreeSet<&str> {
        self.steps
            .iter()
            .filter_map(|s| match &s.action {
                Action::AuditStream { count, .. } => Some(count.as_str()),
                _ => s.status_growth.as_ref().map(|g| g.name.as_str()),
            })
            .collect()
    }

    /// Whether `name` is a figure of this module: a count a step records, or `events.<Reason>`.
    pub(super) fn is_count_figure(&self, name: &str) -> bool {
        self.status_figure_names().contains(name)
            || name
                .strip_prefix(EVENTS_PREFIX)
                .is_some_and(|r| !r.is_empty())
    }

    /// A `wait_status` rule that parses; `status_growth` only on a `wait_status` step, since an
    /// earlier `wait_status` step's id, under a name of its own.
    pub(super) fn validate_status_steps(
        &self,
        taken: &BTreeSet<&str>,
    ) -> Result<(), ScenarioError> {
        let mut reads: BTreeSet<&str> = BTreeSet::new();
        let mut names: BTreeSet<&str> = BTreeSet::new();
        for s in &self.steps {
            let what = s.action.describe();
            let is_read = matches!(s.action, Action::WaitStatus { .. });
            if let Action::WaitStatus { rule, .. } = &s.action {
                Rule::parse(rule).map_err(|e| self.invalid(format!("step {what:?}: {e}")))?;
            }
            if let Some(g) = &s.status_growth {
                if !is_read {
                    return Err(self.invalid(format!(
                        "status_growth on step {what:?}: only a wait_status step reads a status"
                    )));
                }
                if !reads.contains(g.since.as_str()) {
                    return Err(self.invalid(format!(
                        "status_growth {} of step {what:?} is measured since {:?}, which no earlier wait_status step is",
                        g.name, g.since
                    )));
                }
                if taken.contains(g.name.as_str())
                    || figure(&Figures::default(), &g.name).is_some()
                    || ROLLOUT_FIGURES.contains(&g.name.as_str())
                    || g.name.starts_with(EVENTS_PREFIX)
                    || !names.insert(&g.name)
                {
                    return Err(self.invalid(format!("figure name {:?} is taken", g.name)));
                }
            }
            if let (true, Some(id)) = (is_read, &s.id) {
                reads.insert(id);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "kube")]
    #[test]
    fn a_status_count_is_a_number_or_a_list_length_at_a_dotted_field() {
        use serde_json::json;
        let obj = json!({"status": {
            "moved": 2, "inFlight": 0, "requested": [{"stream": "A"}],
            "transfer": {"moved": 5}, "phase": "Moving", "ratio": -1
        }});
        let cases: &[(&str, Option<u64>)] = &[
            ("moved", Some(2)),
            ("inFlight", Some(0)),
            ("requested", Some(1)),
            ("transfer.moved", Some(5)),
            ("transfer.absent", None),
            ("phase", None),
            ("ratio", None),
            ("absent", None),
        ];
        for (field, want) in cases {
            assert_eq!(status_count(&obj, field), *want, "status.{field}");
        }
        assert_eq!(status_count(&json!({"spec": {}}), "moved"), None);
    }

    const FAULTS: &str = r#"
name: f
topology: { clusters: 2, servers: 3, gateways: explicit }
steps:
  - { at: 1s, id: held, action: wait_status, object: NatsClusterEvacuation/e, field: moved, rule: ">= 1" }
  - { at: 2s, action: wait_status, object: NatsClusterEvacuation/e, field: moved, rule: ">= 0", status_growth: { name: moved_while_down, since: held } }
expect: { moved_while_down: "== 0", events.MoveCancelled: ">= 1" }
"#;

    /// A step's value and whether it succeeded.
    type Read = (Option<u64>, bool);

    fn outcome(index: usize, id: Option<&str>, value: Option<u64>, ok: bool) -> StepOutcome {
        StepOutcome {
            index,
            at_ms: 0,
            action: String::new(),
            target: None,
            ok,
            error: None,
            took_ms: 0,
            id: id.map(str::to_string),
            observed_at_ms: None,
            value,
        }
    }

    #[test]
    fn a_status_growth_is_the_later_value_less_the_earlier_and_nothing_when_a_step_failed() {
        let s = Scenario::from_yaml(std::path::Path::new("f.yaml"), FAULTS).unwrap();
        let cases: &[(Read, Read, Option<u64>)] = &[
            // ((since's value, since ok), (this value, this ok)) → the figure
            ((Some(1), true), (Some(1), true), Some(0)),
            ((Some(1), true), (Some(3), true), Some(2)),
            ((Some(3), true), (Some(1), true), Some(0)),
            ((Some(1), false), (Some(1), true), None),
            ((Some(1), true), (Some(1), false), None),
            ((None, true), (Some(1), true), None),
        ];
        for &((then, then_ok), (now, now_ok), want) in cases {
            let out = vec![
                outcome(1, Some("held"), then, then_ok),
                outcome(2, None, now, now_ok),
            ];
            assert_eq!(
                status_figures(&s.steps, &out)
                    .get("moved_while_down")
                    .copied(),
                want,
                "{then:?}/{then_ok} -> {now:?}/{now_ok}"
            );
        }
    }

    #[test]
    fn an_events_figure_counts_the_events_of_its_reason_with_their_repeats() {
        let e = |reason: &str, count: u32| ControllerEvent {
            at_ms: 0,
            controller: "jetstream".into(),
            object: "NatsClusterEvacuation/e".into(),
            reason: reason.into(),
            note: String::new(),
            warning: false,
            count,
        };
        let events = vec![e("MoveDone", 1), e("MoveCancelled", 1), e("MoveDone", 3)];
        let cases: &[(&str, Option<u64>)] = &[
            ("events.MoveDone", Some(4)),
            ("events.MoveCancelled", Some(1)),
            ("events.MoveRefused", Some(0)),
            ("lost", None),
        ];
        for (name, want) in cases {
            assert_eq!(event_figure(&events, name), *want, "{name}");
        }
    }

    #[test]
    fn status_growth_needs_an_earlier_wait_status_and_a_name_of_its_own() {
        assert!(Scenario::from_yaml(std::path::Path::new("f"), FAULTS).is_ok());
        let bad = |from: &str, to: &str| {
            let text = FAULTS.replace(from, to);
            assert!(
                Scenario::from_yaml(std::path::Path::new("f"), &text).is_err(),
                "{from} -> {to}"
            );
        };
        bad("since: held", "since: later");
        bad(
            "name: moved_while_down, since: held",
            "name: lost, since: held",
        );
        bad("name: moved_while_down", "name: events.MoveDone");
        bad(
            "{ at: 1s, id: held, action: wait_status, object: NatsClusterEvacuation/e, field: moved, rule: \">= 1\" }",
            "{ at: 1s, id: held, action: wait_meta_leader }",
        );
        bad("rule: \">= 0\"", "rule: \"about 0\"");
        bad("events.MoveCancelled:", "events.:");
        bad("moved_while_down: \"== 0\"", "moved_while_up: \"== 0\"");
    }
}
