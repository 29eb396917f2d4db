//! CEL rows of NatsConsumer: every rule with accepted rows beside the refused ones, creates and
//! transitions.

use super::Expect::{Accepted, Refused};
use super::{Case, create, update};

const CONSUMER: &str = "NatsConsumer";

/// The rows of NatsConsumer.
pub fn cases() -> Vec<Case> {
    let mut rows = Vec::new();
    rows.extend(consumer());
    rows
}

fn consumer() -> Vec<Case> {
    vec![
        create(
            "consumer: by stream with connectionRef",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  stream: ARCHIVE\n  deliverPolicy: New\n  ackPolicy: None\n  deliverSubject: payments.archive.tail\n  heartbeat: 5s\n  flowControl: true\n"
            ),
            Accepted,
        ),
        create(
            "consumer: by streamRef, connection inherited",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  ackPolicy: Explicit\n  ackWait: 30s\n  backOff: [1s, 5s, 30s]\n  maxDeliver: 5\n  filterSubject: payments.ledger.>\n"
            ),
            Accepted,
        ),
        create(
            "consumer: stream XOR streamRef (both)",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  stream: LEDGER\n  streamRef:\n    name: ledger\n"
            ),
            Refused("set exactly one of stream"),
        ),
        create(
            "consumer: stream XOR streamRef (neither)",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  ackPolicy: Explicit\n"
            ),
            Refused("set exactly one of stream"),
        ),
        create(
            "consumer: by stream needs connectionRef",
            CONSUMER,
            js!("NatsConsumer", "  stream: LEDGER\n"),
            Refused("needs connectionRef"),
        ),
        create(
            "consumer: by streamRef takes no connectionRef",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  streamRef:\n    name: ledger\n"
            ),
            Refused("inherits the NatsStream's connection"),
        ),
        create(
            "consumer: filterSubject XOR filterSubjects",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  filterSubject: a.>\n  filterSubjects: [\"b.>\", \"c.>\"]\n"
            ),
            Refused("set at most one of filterSubject and filterSubjects"),
        ),
        update(
            "consumer: stream is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  stream: LEDGER\n"
            ),
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  stream: ARCHIVE\n"
            ),
            Refused("stream cannot change"),
        ),
        update(
            "consumer: streamRef is immutable",
            CONSUMER,
            js!("NatsConsumer", "  streamRef:\n    name: ledger\n"),
            js!("NatsConsumer", "  streamRef:\n    name: archive\n"),
            Refused("streamRef cannot change"),
        ),
        update(
            "consumer: connectionRef is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: legacy\n  stream: LEDGER\n"
            ),
            js!(
                "NatsConsumer",
                "  connectionRef:\n    name: modern\n  stream: LEDGER\n"
            ),
            Refused("connectionRef cannot change"),
        ),
        update(
            "consumer: deliverPolicy is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: All\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: New\n"
            ),
            Refused("deliverPolicy cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: deliverPolicy changes with recreateOnImmutableChange",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: All\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  recreateOnImmutableChange: true\n  deliverPolicy: ByStartSequence\n  optStartSeq: 1000\n"
            ),
            Accepted,
        ),
        update(
            "consumer: ackPolicy is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  ackPolicy: Explicit\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  ackPolicy: None\n"
            ),
            Refused("ackPolicy cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: replayPolicy is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  replayPolicy: Instant\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  replayPolicy: Original\n"
            ),
            Refused("replayPolicy cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: optStartSeq is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: ByStartSequence\n  optStartSeq: 10\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: ByStartSequence\n  optStartSeq: 20\n"
            ),
            Refused("optStartSeq cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: optStartTime is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: ByStartTime\n  optStartTime: \"2026-01-01T00:00:00Z\"\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverPolicy: ByStartTime\n  optStartTime: \"2026-02-01T00:00:00Z\"\n"
            ),
            Refused("optStartTime cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: heartbeat is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverSubject: tail\n  heartbeat: 5s\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverSubject: tail\n  heartbeat: 10s\n"
            ),
            Refused("heartbeat cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: flowControl is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverSubject: tail\n  flowControl: true\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  deliverSubject: tail\n  flowControl: false\n"
            ),
            Refused("flowControl cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: maxWaiting is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  maxWaiting: 512\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  maxWaiting: 64\n"
            ),
            Refused("maxWaiting cannot change unless recreateOnImmutableChange"),
        ),
        update(
            "consumer: mutable fields change (maxAckPending, ackWait, description)",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  ackPolicy: Explicit\n  maxAckPending: 1000\n  ackWait: 30s\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  ackPolicy: Explicit\n  maxAckPending: 5000\n  ackWait: 1m\n  description: projector\n"
            ),
            Accepted,
        ),
        update(
            "consumer: the server-side name is immutable",
            CONSUMER,
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  name: projector\n"
            ),
            js!(
                "NatsConsumer",
                "  streamRef:\n    name: ledger\n  name: projector-v2\n"
            ),
            Refused("server-side name"),
        ),
    ]
}
