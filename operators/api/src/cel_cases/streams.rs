//! CEL rows of the stream-backed `jetstream` kinds: NatsStream, NatsKeyValue and NatsObjectStore,
//! every rule with accepted rows beside the refused ones, creates and transitions.
//!
//! Rows cover only rules that are CEL (`x-kubernetes-validations`); bounds the OpenAPI schema
//! enforces are not rows here. (history 1..64, for one)

use super::Expect::{Accepted, Refused};
use super::{Case, create, update};

const STREAM: &str = "NatsStream";
const KV: &str = "NatsKeyValue";
const OBJ: &str = "NatsObjectStore";

/// The rows of the stream-backed kinds.
pub fn cases() -> Vec<Case> {
    let mut rows = Vec::new();
    rows.extend(stream());
    rows.extend(buckets());
    rows
}

fn stream() -> Vec<Case> {
    vec![
        create(
            "stream: a new stream with its config",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  name: ORDERS\n  subjects: [\"orders.>\"]\n  storage: File\n  replicas: 3\n  maxAge: 720h\n  duplicates: 2m\n  retention: Limits\n"
            ),
            Accepted,
        ),
        update(
            "stream: storage is immutable",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  storage: File\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  storage: Memory\n"
            ),
            Refused("storage cannot change once set"),
        ),
        update(
            "stream: storage cannot be removed once set",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  storage: Memory\n"
            ),
            js!("NatsStream", "  connectionRef:\n    name: orders\n"),
            Refused("storage cannot change once set"),
        ),
        update(
            "stream: storage filled in by late initialization",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  adoptionPolicy: AdoptOrCreate\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  adoptionPolicy: AdoptOrCreate\n  storage: File\n  replicas: 1\n"
            ),
            Accepted,
        ),
        update(
            "stream: mirror is immutable",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  mirror:\n    name: ORDERS\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  mirror:\n    name: ORDERS_EU\n"
            ),
            Refused("mirror cannot change once set"),
        ),
        update(
            "stream: allowMsgCounter is immutable",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgCounter: true\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgCounter: false\n"
            ),
            Refused("allowMsgCounter cannot change once set"),
        ),
        update(
            "stream: persistMode is immutable",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  persistMode: Default\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  persistMode: Async\n"
            ),
            Refused("persistMode cannot change once set"),
        ),
        update(
            "stream: retention cannot move to WorkQueue",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  retention: Limits\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  retention: WorkQueue\n"
            ),
            Refused("retention cannot change to or from WorkQueue"),
        ),
        update(
            "stream: retention cannot move from WorkQueue (omitted reads Limits)",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  retention: WorkQueue\n"
            ),
            js!("NatsStream", "  connectionRef:\n    name: orders\n"),
            Refused("retention cannot change to or from WorkQueue"),
        ),
        update(
            "stream: retention Limits to Interest is allowed",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  retention: Limits\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  retention: Interest\n"
            ),
            Accepted,
        ),
        update(
            "stream: sealed is one-way (false to true)",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  sealed: false\n  denyDelete: false\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  sealed: true\n  denyDelete: true\n"
            ),
            Accepted,
        ),
        update(
            "stream: sealed cannot be turned off",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  sealed: true\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  sealed: false\n"
            ),
            Refused("sealed cannot be turned off"),
        ),
        update(
            "stream: denyDelete cannot be turned off",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  denyDelete: true\n"
            ),
            js!("NatsStream", "  connectionRef:\n    name: orders\n"),
            Refused("denyDelete cannot be turned off"),
        ),
        update(
            "stream: denyPurge cannot be turned off",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  denyPurge: true\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  denyPurge: false\n"
            ),
            Refused("denyPurge cannot be turned off"),
        ),
        update(
            "stream: allowMsgTTL cannot be turned off",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgTTL: true\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgTTL: false\n"
            ),
            Refused("allowMsgTTL cannot be turned off"),
        ),
        update(
            "stream: allowMsgSchedules cannot be turned off",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgSchedules: true\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgSchedules: false\n"
            ),
            Refused("allowMsgSchedules cannot be turned off"),
        ),
        update(
            "stream: allowMsgSchedules and allowMsgTTL may be turned on",
            STREAM,
            js!("NatsStream", "  connectionRef:\n    name: orders\n"),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  allowMsgSchedules: true\n  allowMsgTTL: true\n"
            ),
            Accepted,
        ),
        update(
            "stream: connectionRef is immutable",
            STREAM,
            js!("NatsStream", "  connectionRef:\n    name: orders\n"),
            js!("NatsStream", "  connectionRef:\n    name: billing\n"),
            Refused("connectionRef cannot change"),
        ),
        update(
            "stream: the server-side name is immutable",
            STREAM,
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  name: ORDERS\n"
            ),
            js!(
                "NatsStream",
                "  connectionRef:\n    name: orders\n  name: ORDERS_V2\n"
            ),
            Refused("server-side name"),
        ),
        update(
            "stream: spec.name written as metadata.name keeps the server-side name",
            STREAM,
            js!(
                "NatsStream",
                "orders",
                "  connectionRef:\n    name: orders\n"
            ),
            js!(
                "NatsStream",
                "orders",
                "  connectionRef:\n    name: orders\n  name: orders\n  maxMsgs: 1000\n"
            ),
            Accepted,
        ),
        update(
            "stream: dropping spec.name changes the server-side name to metadata.name",
            STREAM,
            js!(
                "NatsStream",
                "orders",
                "  connectionRef:\n    name: orders\n  name: ORDERS\n"
            ),
            js!(
                "NatsStream",
                "orders",
                "  connectionRef:\n    name: orders\n"
            ),
            Refused("server-side name"),
        ),
    ]
}

fn buckets() -> Vec<Case> {
    vec![
        create(
            "key-value: a bucket",
            KV,
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  history: 5\n  ttl: 24h\n  maxValueSize: 64Ki\n  storage: File\n  replicas: 3\n"
            ),
            Accepted,
        ),
        update(
            "key-value: storage is immutable",
            KV,
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  storage: File\n"
            ),
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  storage: Memory\n"
            ),
            Refused("storage cannot change once set"),
        ),
        update(
            "key-value: history and ttl change",
            KV,
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  storage: File\n  history: 5\n"
            ),
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  storage: File\n  history: 10\n  ttl: 1h\n"
            ),
            Accepted,
        ),
        update(
            "key-value: connectionRef is immutable",
            KV,
            js!("NatsKeyValue", "  connectionRef:\n    name: legacy\n"),
            js!("NatsKeyValue", "  connectionRef:\n    name: modern\n"),
            Refused("connectionRef cannot change"),
        ),
        update(
            "key-value: the bucket name is immutable",
            KV,
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  name: sessions\n"
            ),
            js!(
                "NatsKeyValue",
                "  connectionRef:\n    name: legacy\n  name: sessions2\n"
            ),
            Refused("bucket name"),
        ),
        update(
            "object store: storage is immutable",
            OBJ,
            js!(
                "NatsObjectStore",
                "  connectionRef:\n    name: legacy\n  storage: File\n"
            ),
            js!(
                "NatsObjectStore",
                "  connectionRef:\n    name: legacy\n  storage: Memory\n"
            ),
            Refused("storage cannot change once set"),
        ),
        update(
            "object store: ttl, maxBytes and compression change",
            OBJ,
            js!(
                "NatsObjectStore",
                "  connectionRef:\n    name: legacy\n  storage: File\n"
            ),
            js!(
                "NatsObjectStore",
                "  connectionRef:\n    name: legacy\n  storage: File\n  ttl: 2160h\n  maxBytes: 50Gi\n  compression: true\n"
            ),
            Accepted,
        ),
        update(
            "object store: connectionRef is immutable",
            OBJ,
            js!("NatsObjectStore", "  connectionRef:\n    name: legacy\n"),
            js!("NatsObjectStore", "  connectionRef:\n    name: modern\n"),
            Refused("connectionRef cannot change"),
        ),
    ]
}
