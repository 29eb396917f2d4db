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
    requests_by_verb(body).values().sum()
}

/// The requests the binary sent to the apiserver, by verb (the kit's client layer's counter).
fn requests_by_verb(body: &str) -> std::collections::BTreeMap<String, f64> {
    let prefix = format!("{}{{", controller_kit::metrics::KUBE_REQUESTS);
    body.lines()
        .filter_map(|l| {
            let (labels, value) = l.strip_prefix(&prefix)?.rsplit_once(' ')?;
            Some((
                label(labels, "verb").to_string(),
                value.parse::<f64>().ok()?,
            ))
        })
        .collect()
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
            "{:.2} apiserver requests per {noun} ({})",
            (requests(after) - requests(before)) / n,
            by_verb(before, after)
        ),
    ]
}

/// The requests the binary sent between two scrapes by verb, the most first (`PATCH 2000, GET
/// 12`): what a figure's requests beyond its floor's were.
pub fn by_verb(before: &str, after: &str) -> String {
    let was = requests_by_verb(before);
    let mut sent: Vec<(String, f64)> = requests_by_verb(after)
        .into_iter()
        .map(|(verb, n)| {
            let d = n - was.get(&verb).copied().unwrap_or(0.0);
            (verb, d)
        })
        .filter(|(_, d)| *d > 0.0)
        .collect();
    sent.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    if sent.is_empty() {
        return "none".into();
    }
    sent.iter()
        .map(|(verb, d)| format!("{verb} {d:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many objects of `kind` whose name passes `named` hold condition `type_` True, as the
/// binary's condition gauge reads (`nats_operator_condition{kind,namespace,name,type,reason} 1`).
pub fn holding(body: &str, kind: &str, type_: &str, named: impl Fn(&str) -> bool) -> usize {
    let prefix = format!("{}{{", controller_kit::metrics::CONDITION);
    body.lines()
        .filter_map(|l| l.strip_prefix(&prefix)?.rsplit_once(' '))
        .filter(|(labels, value)| {
            *value == "1"
                && label(labels, "kind") == kind
                && label(labels, "type") == type_
                && named(label(labels, "name"))
        })
        .count()
}

/// The apiserver's own /metrics (empty when it cannot be read).
pub async fn apiserver_metrics(client: &kube::Client) -> String {
    let Ok(req) = http::Request::get("/metrics").body(Vec::new()) else {
        return String::new();
    };
    client.request_text(req).await.unwrap_or_default()
}

/// The apiserver's latency series (`apiserver_request_duration_seconds`), WATCH and CONNECT left
/// out (they last as long as they are open): each line's labels and value, for `suffix` `_count`
/// or `_sum`.
fn served<'a>(body: &'a str, suffix: &str) -> impl Iterator<Item = (&'a str, f64)> {
    let prefix = format!("apiserver_request_duration_seconds{suffix}{{");
    body.lines().filter_map(move |l| {
        let labels = l.strip_prefix(&prefix)?;
        if labels.contains("verb=\"WATCH\"") || labels.contains("verb=\"CONNECT\"") {
            return None;
        }
        let (labels, value) = labels.rsplit_once(' ')?;
        Some((labels, value.parse().ok()?))
    })
}

/// The value of label `name` in a series' labels (`a="x",b="y"}`), empty without it; a label
/// whose name ends in `name` (`subresource` for `resource`) is not it.
fn label<'a>(labels: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=\"");
    let at = labels
        .match_indices(&key)
        .map(|(i, _)| i)
        .find(|&i| i == 0 || labels[..i].ends_with(','));
    at.and_then(|i| labels[i + key.len()..].split_once('"'))
        .map_or("", |(v, _)| v)
}

/// The apiserver's requests between two scrapes of its /metrics and their mean latency.
pub fn latency(before: &str, after: &str) -> String {
    let total = |body: &str, suffix: &str| served(body, suffix).map(|(_, v)| v).sum::<f64>();
    let count = total(after, "_count") - total(before, "_count");
    let sum = total(after, "_sum") - total(before, "_sum");
    format!(
        "apiserver: {count:.0} requests served meanwhile (the bench's own polls too), mean {:.1} ms",
        if count > 0.0 { sum / count * 1e3 } else { 0.0 }
    )
}

/// The apiserver's requests between two scrapes by verb and resource (`PATCH natsusers/status`),
/// those that took it the most time first, at most `top`: "count × mean ms".
pub fn by_request(before: &str, after: &str, top: usize) -> String {
    let tally = |body: &str| {
        let mut t: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
        for (suffix, slot) in [("_count", 0), ("_sum", 1)] {
            for (labels, v) in served(body, suffix) {
                let sub = label(labels, "subresource");
                let what = format!(
                    "{} {}{}{sub}",
                    label(labels, "verb"),
                    label(labels, "resource"),
                    if sub.is_empty() { "" } else { "/" }
                );
                let e = t.entry(what).or_default();
                if slot == 0 { e.0 += v } else { e.1 += v }
            }
        }
        t
    };
    let (b, a) = (tally(before), tally(after));
    let mut rows: Vec<(String, f64, f64)> = a
        .into_iter()
        .map(|(what, (n, s))| {
            let (n0, s0) = b.get(&what).copied().unwrap_or_default();
            (what, n - n0, s - s0)
        })
        .filter(|(_, n, _)| *n > 0.0)
        .collect();
    rows.sort_by(|x, y| y.2.total_cmp(&x.2));
    rows.iter()
        .take(top)
        .map(|(what, n, s)| format!("{what} {n:.0} × {:.1} ms", s / n * 1e3))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How long the last of `samples` (time, passes so far) has seen no new pass: the time since the
/// count last changed (zero with fewer than two samples).
pub fn quiet_for(samples: &[(std::time::Duration, f64)]) -> std::time::Duration {
    let Some(&(last_at, last)) = samples.last() else {
        return std::time::Duration::ZERO;
    };
    let since = samples
        .iter()
        .rev()
        .take_while(|(_, n)| *n == last)
        .last()
        .map_or(last_at, |(at, _)| *at);
    last_at.saturating_sub(since)
}

/// Waits until the binary on `port` has run no pass of `kind` for `window` (its /metrics read
/// every half second), at most `timeout`; says how long it waited. A figure "at rest" is read
/// after it: right after the last object's status, passes of the objects written last still run.
pub async fn at_rest(
    port: u16,
    kind: &str,
    window: std::time::Duration,
    timeout: std::time::Duration,
) -> anyhow::Result<std::time::Duration> {
    let start = std::time::Instant::now();
    let mut samples = Vec::new();
    loop {
        let body = sim::testkit::metrics(port)
            .await
            .map_err(anyhow::Error::msg)?;
        samples.push((start.elapsed(), passes(&body, kind)));
        if quiet_for(&samples) >= window {
            return Ok(start.elapsed());
        }
        if start.elapsed() >= timeout {
            anyhow::bail!(
                "{kind} passes still ran after {:.0} s ({} so far)",
                timeout.as_secs_f64(),
                samples.last().map_or(0.0, |s| s.1)
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "nats_operator_reconcile_total{controller=\"NatsConnection\"} 3\n\
                        nats_operator_reconcile_total{controller=\"NatsStream\"} 2050\n\
                        nats_operator_kube_requests_total{verb=\"GET\"} 10\n\
                        nats_operator_kube_requests_total{verb=\"PUT\"} 5\n";

    #[test]
    fn holding_counts_the_objects_whose_condition_reads_true() {
        let series = |kind: &str, name: &str, type_: &str, v: u8| {
            format!(
                "nats_operator_condition{{kind=\"{kind}\",namespace=\"nats\",name=\"{name}\",type=\"{type_}\",reason=\"R\"}} {v}"
            )
        };
        let body = [
            "# TYPE nats_operator_condition gauge".to_string(),
            series("NatsUser", "u0", "Ready", 1),
            series("NatsUser", "u1", "Ready", 0),
            series("NatsUser", "u2", "Ready", 1),
            series("NatsUser", "u2", "Synced", 1),
            series("NatsUser", "other", "Ready", 1),
            series("NatsAccount", "u3", "Ready", 1),
        ]
        .join("\n");
        let numbered = |n: &str| n.starts_with('u') && n[1..].parse::<u32>().is_ok();
        assert_eq!(holding(&body, "NatsUser", "Ready", numbered), 2);
        assert_eq!(holding(&body, "NatsUser", "Ready", |_| true), 3);
        assert_eq!(holding(&body, "NatsUser", "Synced", numbered), 1);
        assert_eq!(holding(&body, "NatsAccount", "Ready", numbered), 1);
        assert_eq!(holding(&body, "NatsStream", "Ready", |_| true), 0);
    }

    #[test]
    fn passes_and_requests_are_read_off_the_binarys_counters() {
        assert_eq!(passes(BODY, "NatsStream"), 2050.0);
        assert_eq!(passes(BODY, "NatsUser"), 0.0);
        assert_eq!(requests(BODY), 15.0);
        assert_eq!(requests("nothing"), 0.0);
    }

    #[test]
    fn requests_are_tallied_by_verb_and_resource_the_costliest_first() {
        let line = |verb: &str, res: &str, sub: &str, n: f64, sum: f64| {
            let l = format!(
                "component=\"apiserver\",group=\"\",resource=\"{res}\",scope=\"resource\",subresource=\"{sub}\",verb=\"{verb}\",version=\"v1\"}}"
            );
            format!(
                "apiserver_request_duration_seconds_count{{{l} {n}\napiserver_request_duration_seconds_sum{{{l} {sum}\n"
            )
        };
        let before =
            line("POST", "secrets", "", 10.0, 0.1) + &line("WATCH", "secrets", "", 1.0, 90.0);
        let after = line("POST", "secrets", "", 1010.0, 8.1)
            + &line("PATCH", "natsusers", "status", 1000.0, 20.0)
            + &line("GET", "natsusers", "", 5.0, 0.01)
            + &line("WATCH", "secrets", "", 2.0, 500.0);
        assert_eq!(
            by_request(&before, &after, 2),
            "PATCH natsusers/status 1000 × 20.0 ms, POST secrets 1000 × 8.0 ms"
        );
        assert_eq!(
            latency(&before, &after),
            "apiserver: 2005 requests served meanwhile (the bench's own polls too), mean 14.0 ms"
        );
        assert_eq!(by_request("", "", 3), "");
    }

    #[rstest::rstest]
    #[case::first("resource=\"secrets\",verb=\"GET\"}", "resource", "secrets")]
    #[case::after_another("group=\"\",resource=\"secrets\"}", "resource", "secrets")]
    #[case::not_the_label_ending_in_it(
        "subresource=\"status\",resource=\"pods\"}",
        "resource",
        "pods"
    )]
    #[case::only_the_label_ending_in_it("subresource=\"status\"}", "resource", "")]
    #[case::empty_value("subresource=\"\",verb=\"GET\"}", "subresource", "")]
    fn a_label_is_found_by_its_whole_name(
        #[case] labels: &str,
        #[case] name: &str,
        #[case] value: &str,
    ) {
        assert_eq!(label(labels, name), value);
    }

    #[rstest::rstest]
    #[case::no_sample(&[], 0)]
    #[case::one_sample(&[(5, 10.0)], 0)]
    #[case::still_counting(&[(0, 1.0), (1, 2.0), (2, 3.0)], 0)]
    #[case::quiet_since_the_second(&[(0, 1.0), (1, 3.0), (2, 3.0), (4, 3.0)], 3)]
    #[case::never_moved(&[(0, 3.0), (2, 3.0), (5, 3.0)], 5)]
    #[case::moved_again(&[(0, 3.0), (2, 3.0), (5, 4.0)], 0)]
    fn quiet_for_is_the_time_since_the_count_last_changed(
        #[case] samples: &[(u64, f64)],
        #[case] quiet: u64,
    ) {
        let samples: Vec<_> = samples
            .iter()
            .map(|&(s, n)| (std::time::Duration::from_secs(s), n))
            .collect();
        assert_eq!(quiet_for(&samples), std::time::Duration::from_secs(quiet));
    }

    #[test]
    fn per_object_divides_the_difference_of_two_scrapes() {
        let before = "nats_operator_reconcile_total{controller=\"NatsStream\"} 50\n\
                      nats_operator_kube_requests_total{verb=\"GET\"} 5\n";
        assert_eq!(
            per_object(before, BODY, "NatsStream", 1000, "stream"),
            [
                "2.00 passes per stream",
                "0.01 apiserver requests per stream (GET 5, PUT 5)"
            ]
        );
    }

    #[test]
    fn requests_by_verb_are_the_differences_the_most_first() {
        let line = |verb: &str, n: u32| {
            format!("nats_operator_kube_requests_total{{verb=\"{verb}\"}} {n}\n")
        };
        let before = [line("GET", 10), line("PATCH", 100)].concat();
        let after = [
            line("GET", 22),
            line("PATCH", 2100),
            line("POST", 8),
            line("PUT", 12),
        ]
        .concat();
        assert_eq!(
            by_verb(&before, &after),
            "PATCH 2000, GET 12, PUT 12, POST 8"
        );
        assert_eq!(by_verb(&after, &after), "none");
        assert_eq!(by_verb("", &line("GET", 3)), "GET 3");
    }
}
