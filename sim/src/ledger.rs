//! The traffic ledger: every publish, ack and delivery, and the figures derived from them
//! (acknowledged messages lost, delivered twice, publish-ack timeouts, max ack gap, leadership changes).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// One thing that happened, stamped with milliseconds since the ledger started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A publish attempt of message `id` (attempt 1 is the first try).
    Publish { at_ms: u64, id: u64, attempt: u32 },
    /// The stream acknowledged message `id` at `stream_seq` (`duplicate` when the server deduplicated it).
    Ack {
        at_ms: u64,
        id: u64,
        stream_seq: u64,
        duplicate: bool,
    },
    /// No ack arrived within the publisher's ack timeout; the publisher retries with the same Nats-Msg-Id.
    AckTimeout { at_ms: u64, id: u64, attempt: u32 },
    /// The publish failed outright (e.g. no responders while no leader is elected).
    PublishError {
        at_ms: u64,
        id: u64,
        attempt: u32,
        error: String,
    },
    /// The publisher gave up on message `id`.
    GaveUp { at_ms: u64, id: u64 },
    /// Consumer `consumer` received message `id` stored at `stream_seq`.
    Delivery {
        at_ms: u64,
        consumer: String,
        id: u64,
        stream_seq: u64,
        redelivered: bool,
    },
    /// The stream's leader as observed by the watcher (None: no leader answered).
    Leader {
        at_ms: u64,
        stream: String,
        leader: Option<String>,
    },
    /// The JetStream meta leader as the watcher saw it (None: no server named one).
    MetaLeader { at_ms: u64, leader: Option<String> },
    /// A scenario step started or finished (timeline marker).
    Step { at_ms: u64, text: String },
}

impl Event {
    pub fn at_ms(&self) -> u64 {
        match self {
            Event::Publish { at_ms, .. }
            | Event::Ack { at_ms, .. }
            | Event::AckTimeout { at_ms, .. }
            | Event::PublishError { at_ms, .. }
            | Event::GaveUp { at_ms, .. }
            | Event::Delivery { at_ms, .. }
            | Event::Leader { at_ms, .. }
            | Event::MetaLeader { at_ms, .. }
            | Event::Step { at_ms, .. } => *at_ms,
        }
    }
}

/// The figures a scenario's expectations are checked against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Distinct messages the publisher tried to send.
    pub published: u64,
    /// Distinct messages the stream acknowledged.
    pub acknowledged: u64,
    /// Acknowledged messages that some consumer never received, the consumers having drained.
    pub lost: u64,
    /// Acknowledged messages some consumer had not received when the drain deadline passed: the
    /// machine was too slow to tell them lost or late, so they are counted here, never as lost
    /// (and the run fails, naming the deadline).
    #[serde(default)]
    pub undrained: u64,
    /// Messages stored more than once (two stream sequences for one Nats-Msg-Id).
    pub duplicated: u64,
    /// Messages a consumer received more than once (a second copy or a redelivery).
    pub delivered_twice: u64,
    /// Deliveries the server marked as redeliveries.
    pub redeliveries: u64,
    pub ack_timeouts: u64,
    pub publish_errors: u64,
    /// Messages the publisher gave up on (never acknowledged).
    pub unacknowledged: u64,
    /// Longest time between two consecutive publish acks (ms), from the first ack to the last.
    pub max_ack_gap_ms: u64,
    /// Leadership changes seen (transitions between two different known leaders).
    pub leadership_changes: u64,
    /// Lost messages per consumer.
    pub lost_by_consumer: BTreeMap<String, u64>,
    /// With several publishers: the most publish-ack timeouts one of them saw (a timing).
    #[serde(default)]
    pub ack_timeouts_max_per_publisher: u64,
}

impl Figures {
    /// The figures of several publishers' ledgers as one: counts summed, the longest ack gap
    /// and the most ack timeouts of one publisher kept, every consumer's losses listed.
    pub fn sum<'a>(each: impl IntoIterator<Item = &'a Figures>) -> Figures {
        let mut t = Figures::default();
        for f in each {
            t.published += f.published;
            t.acknowledged += f.acknowledged;
            t.lost += f.lost;
            t.undrained += f.undrained;
            t.duplicated += f.duplicated;
            t.delivered_twice += f.delivered_twice;
            t.redeliveries += f.redeliveries;
            t.ack_timeouts += f.ack_timeouts;
            t.publish_errors += f.publish_errors;
            t.unacknowledged += f.unacknowledged;
            t.max_ack_gap_ms = t.max_ack_gap_ms.max(f.max_ack_gap_ms);
            t.leadership_changes += f.leadership_changes;
            t.ack_timeouts_max_per_publisher = t.ack_timeouts_max_per_publisher.max(f.ack_timeouts);
            t.lost_by_consumer.extend(f.lost_by_consumer.clone());
        }
        t
    }
}

/// A shared, append-only event log.
#[derive(Debug, Clone)]
pub struct Ledger {
    start: Instant,
    events: Arc<Mutex<Vec<Event>>>,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new()
    }
}

impl Ledger {
    pub fn new() -> Self {
        Ledger {
            start: Instant::now(),
            events: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// A ledger of its own on this one's clock: one publisher's among several, whose message
    /// ids and consumers are its own.
    pub fn sibling(&self) -> Ledger {
        Ledger {
            start: self.start,
            events: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Milliseconds since the ledger started.
    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    pub fn record(&self, event: Event) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
    }

    pub fn step(&self, text: impl Into<String>) {
        self.record(Event::Step {
            at_ms: self.now_ms(),
            text: text.into(),
        });
    }

    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Ids acknowledged so far.
    pub fn acknowledged_ids(&self) -> BTreeSet<u64> {
        acked(&self.events())
    }

    /// Ids delivered to `consumer` so far.
    pub fn delivered_ids(&self, consumer: &str) -> BTreeSet<u64> {
        self.events()
            .iter()
            .filter_map(|e| match e {
                Event::Delivery {
                    consumer: c, id, ..
                } if c == consumer => Some(*id),
                _ => None,
            })
            .collect()
    }

    pub fn figures(&self, consumers: &[String]) -> Figures {
        figures(&self.events(), consumers)
    }
}

fn acked(events: &[Event]) -> BTreeSet<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Ack { id, .. } => Some(*id),
            _ => None,
        })
        .collect()
}

/// The figures of an event list; `consumers` names every consumer that was expected to receive
/// every acknowledged message (a consumer with no deliveries at all still counts).
pub fn figures(events: &[Event], consumers: &[String]) -> Figures {
    let mut f = Figures::default();
    let acked = acked(events);
    f.acknowledged = acked.len() as u64;

    let mut published = BTreeSet::new();
    let mut seqs_by_id: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut deliveries: BTreeMap<(&str, u64), u64> = BTreeMap::new();
    let mut delivered: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    let mut ack_times = Vec::new();
    let mut leaders: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    let mut gave_up = BTreeSet::new();
    for c in consumers {
        delivered.entry(c.as_str()).or_default();
    }
    for e in events {
        match e {
            Event::Publish { id, .. } => {
                published.insert(*id);
            }
            Event::Ack {
                at_ms,
                id,
                stream_seq,
                ..
            } => {
                seqs_by_id.entry(*id).or_default().insert(*stream_seq);
                ack_times.push(*at_ms);
            }
            Event::AckTimeout { .. } => f.ack_timeouts += 1,
            Event::PublishError { .. } => f.publish_errors += 1,
            Event::GaveUp { id, .. } => {
                gave_up.insert(*id);
            }
            Event::Delivery {
                consumer,
                id,
                stream_seq,
                redelivered,
                ..
            } => {
                seqs_by_id.entry(*id).or_default().insert(*stream_seq);
                *deliveries.entry((consumer.as_str(), *id)).or_default() += 1;
                delivered.entry(consumer.as_str()).or_default().insert(*id);
                if *redelivered {
                    f.redeliveries += 1;
                }
            }
            Event::Leader { stream, leader, .. } => {
                let Some(now) = leader.as_deref() else {
                    continue; // a gap in answers is not a change of leader
                };
                if let Some(Some(prev)) = leaders.get(stream.as_str())
                    && *prev != now
                {
                    f.leadership_changes += 1;
                }
                leaders.insert(stream.as_str(), Some(now));
            }
            Event::MetaLeader { .. } | Event::Step { .. } => {}
        }
    }
    f.published = published.len() as u64;
    f.unacknowledged = gave_up.difference(&acked).count() as u64;
    f.duplicated = seqs_by_id.values().filter(|s| s.len() > 1).count() as u64;
    let twice: BTreeSet<u64> = deliveries
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((_, id), _)| *id)
        .collect();
    f.delivered_twice = twice.len() as u64;
    let mut lost_any = BTreeSet::new();
    for (c, got) in &delivered {
        let missing: Vec<u64> = acked.difference(got).copied().collect();
        f.lost_by_consumer
            .insert(c.to_string(), missing.len() as u64);
        lost_any.extend(missing);
    }
    f.lost = lost_any.len() as u64;
    ack_times.sort_unstable();
    f.max_ack_gap_ms = ack_times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(at_ms: u64, id: u64) -> Event {
        Event::Publish {
            at_ms,
            id,
            attempt: 1,
        }
    }
    fn ack(at_ms: u64, id: u64, stream_seq: u64) -> Event {
        Event::Ack {
            at_ms,
            id,
            stream_seq,
            duplicate: false,
        }
    }
    fn deliver(at_ms: u64, consumer: &str, id: u64, stream_seq: u64) -> Event {
        Event::Delivery {
            at_ms,
            consumer: consumer.to_string(),
            id,
            stream_seq,
            redelivered: false,
        }
    }
    fn leader(at_ms: u64, l: Option<&str>) -> Event {
        Event::Leader {
            at_ms,
            stream: "S".into(),
            leader: l.map(str::to_string),
        }
    }
    fn c(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn clean_run_has_nothing_lost_or_duplicated() {
        let ev = vec![
            publish(0, 1),
            ack(5, 1, 1),
            deliver(6, "pull", 1, 1),
            publish(10, 2),
            ack(15, 2, 2),
            deliver(16, "pull", 2, 2),
        ];
        let f = figures(&ev, &c(&["pull"]));
        assert_eq!(f.published, 2);
        assert_eq!(f.acknowledged, 2);
        assert_eq!(f.lost, 0);
        assert_eq!(f.duplicated, 0);
        assert_eq!(f.delivered_twice, 0);
        assert_eq!(f.max_ack_gap_ms, 10);
    }

    #[test]
    fn an_acknowledged_message_no_consumer_saw_is_lost() {
        let ev = vec![
            ack(1, 1, 1),
            ack(2, 2, 2),
            ack(3, 3, 3),
            deliver(4, "a", 1, 1),
            deliver(4, "a", 3, 3),
            deliver(4, "b", 1, 1),
            deliver(4, "b", 2, 2),
            deliver(4, "b", 3, 3),
        ];
        let f = figures(&ev, &c(&["a", "b"]));
        assert_eq!(f.lost, 1);
        assert_eq!(f.lost_by_consumer["a"], 1);
        assert_eq!(f.lost_by_consumer["b"], 0);
    }

    #[test]
    fn a_consumer_that_received_nothing_loses_everything() {
        let ev = vec![ack(1, 1, 1), ack(2, 2, 2)];
        assert_eq!(figures(&ev, &c(&["idle"])).lost, 2);
    }

    #[test]
    fn an_unacknowledged_message_is_not_lost_but_counted() {
        let ev = vec![
            publish(0, 1),
            Event::AckTimeout {
                at_ms: 2000,
                id: 1,
                attempt: 1,
            },
            Event::GaveUp { at_ms: 9000, id: 1 },
        ];
        let f = figures(&ev, &c(&["a"]));
        assert_eq!((f.lost, f.unacknowledged, f.ack_timeouts), (0, 1, 1));
    }

    #[test]
    fn two_stream_sequences_for_one_id_is_a_duplicate() {
        // A retried publish that escaped deduplication: stored at 7 and at 9.
        let ev = vec![
            ack(1, 4, 7),
            ack(2, 4, 9),
            deliver(3, "a", 4, 7),
            deliver(3, "a", 4, 9),
        ];
        let f = figures(&ev, &c(&["a"]));
        assert_eq!(f.duplicated, 1);
        assert_eq!(f.delivered_twice, 1);
    }

    #[test]
    fn a_redelivery_is_delivered_twice_but_not_duplicated() {
        let ev = vec![
            ack(1, 4, 7),
            deliver(2, "a", 4, 7),
            Event::Delivery {
                at_ms: 30_000,
                consumer: "a".into(),
                id: 4,
                stream_seq: 7,
                redelivered: true,
            },
        ];
        let f = figures(&ev, &c(&["a"]));
        assert_eq!((f.duplicated, f.delivered_twice, f.redeliveries), (0, 1, 1));
    }

    #[test]
    fn deduplicated_retry_is_not_a_duplicate() {
        let ev = vec![
            ack(1, 4, 7),
            Event::Ack {
                at_ms: 2,
                id: 4,
                stream_seq: 7,
                duplicate: true,
            },
        ];
        assert_eq!(figures(&ev, &[]).duplicated, 0);
    }

    #[test]
    fn max_ack_gap_is_the_longest_silence_between_acks_in_time_order() {
        // Out-of-order recording (concurrent publishers) is sorted first.
        let ev = vec![
            ack(100, 1, 1),
            ack(3100, 3, 3),
            ack(200, 2, 2),
            ack(3150, 4, 4),
        ];
        assert_eq!(figures(&ev, &[]).max_ack_gap_ms, 2900);
    }

    #[test]
    fn leadership_changes_ignore_gaps_and_repeats() {
        let ev = vec![
            leader(0, Some("c1-0")),
            leader(100, Some("c1-0")),
            leader(200, None),
            leader(300, Some("c1-1")),
            leader(400, None),
            leader(500, Some("c1-1")),
            leader(600, Some("c1-2")),
        ];
        assert_eq!(figures(&ev, &[]).leadership_changes, 2);
    }

    #[test]
    fn several_publishers_sum_their_counts_and_keep_the_worst_gap_and_timeouts() {
        let a = Figures {
            published: 10,
            acknowledged: 10,
            lost: 1,
            ack_timeouts: 3,
            max_ack_gap_ms: 40,
            lost_by_consumer: [("a-pull".to_string(), 1)].into(),
            ..Figures::default()
        };
        let b = Figures {
            published: 5,
            acknowledged: 4,
            unacknowledged: 1,
            ack_timeouts: 1,
            max_ack_gap_ms: 900,
            lost_by_consumer: [("b-pull".to_string(), 0)].into(),
            ..Figures::default()
        };
        let t = Figures::sum([&a, &b]);
        assert_eq!((t.published, t.acknowledged, t.lost), (15, 14, 1));
        assert_eq!((t.unacknowledged, t.ack_timeouts), (1, 4));
        assert_eq!(
            (t.max_ack_gap_ms, t.ack_timeouts_max_per_publisher),
            (900, 3)
        );
        assert_eq!(t.lost_by_consumer.len(), 2);
    }

    #[test]
    fn a_sibling_ledger_shares_the_clock_not_the_events() {
        let l = Ledger::new();
        l.step("main");
        let s = l.sibling();
        s.record(ack(s.now_ms(), 1, 1));
        assert_eq!((l.events().len(), s.events().len()), (1, 1));
        assert!(s.now_ms() >= l.events()[0].at_ms());
    }

    #[test]
    fn ledger_records_concurrently() {
        let l = Ledger::new();
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for i in 0..100 {
                        l.record(ack(l.now_ms(), t * 1000 + i, t * 1000 + i));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(l.acknowledged_ids().len(), 400);
    }
}
