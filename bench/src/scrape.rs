//! Figures read off a controller binary's /metrics: its passes per kind and the requests it
//! sent to the apiserver (the kit's client layer counts them by verb), so a figure can say how
//! much work each object cost, not only how long it took.

/// `nats_operator_reconcile_total{controller="<kind>"}` (0 without one).
pub fn passes(body: &str, kind: &str) -> f64 {
    sim::testkit::replicas::sample(
        body,
        controller_kit::metrics::RECONCILE_TOTAL,
        &format!("controller=\"{kind}\""),
    )
    .unwrap_or(0.0)
}

/// Every request the binary sent to the apiserver, summed over its verbs.
pub fn requests(body: &str) -> f64 {
    let prefix = format!("{}{{", controller_kit::metrics::KUBE_REQUESTS);
    body.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// What a phase cost per object: passes of `kind` and apiserver requests between `before` and
/// `after` (two scrapes), over `count` objects, as a figure's notes.
pub fn per_object(before: &str, after: &str, kind: &str, count: usize, noun: &str) -> Vec<String> {
    let n = count as f64;
    vec![
        format!(
            "{:.2} passes per {noun}",
            (passes(after, kind) - passes(before, kind)) / n
        ),
        format!(
            "{:.2} apiserver requests per {noun}",
            (requests(after) - requests(before)) / n
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "nats_operator_reconcile_total{controller=\"NatsConnection\"} 3\n\
                        nats_operator_reconcile_total{controller=\"NatsStream\"} 2050\n\
                        nats_operator_kube_requests_total{verb=\"GET\"} 10\n\
                        nats_operator_kube_requests_total{verb=\"PUT\"} 5\n";

    #[test]
    fn passes_and_requests_are_read_off_the_binarys_counters() {
        assert_eq!(passes(BODY, "NatsStream"), 2050.0);
        assert_eq!(passes(BODY, "NatsUser"), 0.0);
        assert_eq!(requests(BODY), 15.0);
        assert_eq!(requests("nothing"), 0.0);
    }

    #[test]
    fn per_object_divides_the_difference_of_two_scrapes() {
        let before = "nats_operator_reconcile_total{controller=\"NatsStream\"} 50\n\
                      nats_operator_kube_requests_total{verb=\"GET\"} 5\n";
        assert_eq!(
            per_object(before, BODY, "NatsStream", 1000, "stream"),
            [
                "2.00 passes per stream",
                "0.01 apiserver requests per stream"
            ]
        );
    }
}
