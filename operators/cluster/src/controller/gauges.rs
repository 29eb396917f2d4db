//! The rollout gauges: how many servers of a NatsCluster are not yet on the target revision,
//! and whether its rollout gate is closed and what for, exported from `status.rollout` each pass
//! and dropped with the object.

use controller_kit::metrics::{self, Metrics};
use nats_api::cluster::RolloutStatus;

use crate::rollout::gate::WaitingFor;

/// Servers not yet on the target revision: the one being stepped and those still to step.
pub fn pending_servers(rollout: Option<&RolloutStatus>) -> usize {
    rollout.map_or(0, |r| r.pending.len() + usize::from(r.current.is_some()))
}

/// Exports `status.rollout` as the pending and gate gauges: one gate series per rule the closed
/// gate waits on ([`WaitingFor`], a fixed set of label values). The gate's series are replaced
/// each pass, so one for a rule no longer waited on (or a gate now open) does not linger at 1.
pub fn export_rollout(m: &Metrics, namespace: &str, name: &str, rollout: Option<&RolloutStatus>) {
    let object = [("namespace", namespace), ("name", name)];
    m.set_gauge(
        metrics::ROLLOUT_PENDING,
        "Servers of a NatsCluster not yet on the target revision.",
        &object,
        pending_servers(rollout) as f64,
    );
    m.remove_gauge(metrics::ROLLOUT_GATE, &object);
    let Some(gate) = rollout.and_then(|r| r.gate.as_ref()) else {
        return;
    };
    let mut rules = WaitingFor::all_of(gate.waiting_for.as_deref().unwrap_or_default());
    if rules.is_empty() {
        rules.insert(WaitingFor::Other);
    }
    for rule in rules {
        m.set_gauge(
            metrics::ROLLOUT_GATE,
            "1 while a NatsCluster's rollout gate is closed, by the rule it waits on.",
            &[
                ("namespace", namespace),
                ("name", name),
                ("waiting_for", rule.label()),
            ],
            1.0,
        );
    }
}

/// Drops a deleted NatsCluster's rollout gauges.
pub fn forget_rollout(m: &Metrics, namespace: &str, name: &str) {
    let object = [("namespace", namespace), ("name", name)];
    m.remove_gauge(metrics::ROLLOUT_PENDING, &object);
    m.remove_gauge(metrics::ROLLOUT_GATE, &object);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollout_gauges_follow_the_status_and_go_with_the_object() {
        use nats_api::cluster::RolloutGate;
        let m = Metrics::default();
        let closed = RolloutStatus {
            current: Some("demo-2".into()),
            pending: vec!["demo-0".into(), "demo-1".into()],
            gate: Some(RolloutGate {
                waiting_for: Some("demo-2 not Ready; groups not current: ORDERS".into()),
                since: None,
            }),
            ..Default::default()
        };
        export_rollout(&m, "ns", "demo", Some(&closed));
        let text = m.render();
        assert!(
            text.contains(r#"nats_operator_rollout_pending_servers{namespace="ns",name="demo"} 3"#),
            "{text}"
        );
        for rule in ["pod_ready", "settled"] {
            let series = format!(r#"{{namespace="ns",name="demo",waiting_for="{rule}"}} 1"#);
            assert!(text.contains(&series), "{series} in {text}");
        }
        assert!(!text.contains("ORDERS"), "no name in a label: {text}");
        let open = RolloutStatus {
            gate: None,
            ..closed
        };
        export_rollout(&m, "ns", "demo", Some(&open));
        let text = m.render();
        assert!(
            !text.contains("waiting_for="),
            "the open gate's series is gone: {text}"
        );
        export_rollout(&m, "ns", "demo", None);
        assert!(
            m.render()
                .contains(r#"nats_operator_rollout_pending_servers{namespace="ns",name="demo"} 0"#)
        );
        forget_rollout(&m, "ns", "demo");
        assert!(
            !m.render()
                .contains("nats_operator_rollout_pending_servers{")
        );
    }
}
