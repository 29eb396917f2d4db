//! CEL rows of `NatsCluster.spec.jetstream.syncInterval`: `always` or a positive duration, each
//! refusal naming the field.

use super::Expect::{Accepted, Refused};
use super::{Case, create};

/// The kind of every row here.
const KIND: &str = "NatsCluster";

/// A NatsCluster with JetStream whose `syncInterval` is `$value` (YAML, as written).
macro_rules! synced {
    ($name:literal, $value:literal) => {
        concat!(
            "apiVersion: cluster.nats.mikluko.io/v1beta1\nkind: NatsCluster\nmetadata:\n  name: ",
            $name,
            "\nspec:\n  version: \"2.15.1\"\n  replicas: 3\n  jetstream:\n    syncInterval: ",
            $value,
            "\n"
        )
    };
}

const MESSAGE: &str = "spec.jetstream.syncInterval must be `always` or a positive duration";

/// The rows.
pub fn cases() -> Vec<Case> {
    vec![
        create(
            "syncInterval: always, the durable default written out",
            KIND,
            synced!("nc-sync-always", "always"),
            Accepted,
        ),
        create(
            "syncInterval: a duration opts out to nats-server's timer",
            KIND,
            synced!("nc-sync-2m", "2m"),
            Accepted,
        ),
        create(
            "syncInterval: compound and fractional Go durations",
            KIND,
            synced!("nc-sync-compound", "1m30.5s"),
            Accepted,
        ),
        create(
            "syncInterval: milliseconds",
            KIND,
            synced!("nc-sync-ms", "500ms"),
            Accepted,
        ),
        create(
            "syncInterval: zero would leave the store unsynced",
            KIND,
            synced!("nc-sync-zero", "0s"),
            Refused(MESSAGE),
        ),
        create(
            "syncInterval: a bare number has no unit",
            KIND,
            synced!("nc-sync-bare", "\"120\""),
            Refused(MESSAGE),
        ),
        create(
            "syncInterval: a word other than always",
            KIND,
            synced!("nc-sync-never", "never"),
            Refused(MESSAGE),
        ),
        create(
            "syncInterval: always is lowercase, as the CRD documents it",
            KIND,
            synced!("nc-sync-upper", "Always"),
            Refused(MESSAGE),
        ),
        create(
            "syncInterval: a negative duration",
            KIND,
            synced!("nc-sync-negative", "\"-2m\""),
            Refused(MESSAGE),
        ),
        create(
            "syncInterval: days are not a Go duration unit",
            KIND,
            synced!("nc-sync-days", "1d"),
            Refused(MESSAGE),
        ),
    ]
}
