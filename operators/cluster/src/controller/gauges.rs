//! The rollout gauges: how many servers of a NatsCluster are not yet on the target revision,
//! and whether its rollout gate is closed and what for, exported from `status.rollout` each pass
//! and dropped with the object.

use controller_kit::metrics::{self, Metrics};
use nats_api::cluster::RolloutStatus;

/// Servers not yet on the target revision: the one being stepped and those still to step.
pub fn pending_servers(rollout: Option<&RolloutStatus>) -> usize {
    rollout.map_or(0, |r| r.pending.len() + usize::from(r.current.is_some()))
}

/// Exports `status.rollout` as the pending and gate gauges. The gate's series is replaced each
/// pass, so one for an older `waitingFor` (or a gate now open) does not linger at 1.
pub fn export_rollout(m: &Metrics, namespace: &str, name: &str, rollout: Option<&RolloutStatus>) {
    let object = [("namespace", namespace), ("name", name)];
    m.set_gauge(
        metrics::ROLLOUT_PENDING,
        "Servers of a NatsCluster not yet on the target revision.",
        &object,
        pending_servers(rollout) as f64,
    );
    m.remove_gauge(metrics::ROLLOUT_GATE, &object);
    if let Some(gate) = rollout.and_then(|r| r.gate.as_ref()) {
        m.set_gauge(
            metrics::ROLLOUT_GATE,
            "1 while a NatsCluster's rollout gate is closed.",
            &[
                ("namespace", namespace),
                ("name", name),
                (
                    "waiting_for",
                    gate.waiting_for.as_deref().unwrap_or_default(),
                ),
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
                waiting_for: Some("groups not current: ORDERS".into()),
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
        assert!(
            text.contains(r#"waiting_for="groups not current: ORDERS"} 1"#),
            "{text}"
        );
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
