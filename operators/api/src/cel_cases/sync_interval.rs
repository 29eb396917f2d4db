//! CEL rows of `NatsCluster.spec.jetstream.syncInterval`: `always` or a positive duration, each
//! refusal naming the field.

use super::Case;
use super::Expect::{self, Accepted, Refused};

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

fn create(name: &'static str, new: &'static str, expect: Expect) -> Case {
    Case {
        name,
        kind: "NatsCluster",
        old: None,
        new,
        expect,
    }
}

const MESSAGE: &str = "spec.jetstream.syncInterval must be `always` or a positive duration";

/// The rows.
pub fn cases() -> Vec<Case> {
    vec![
        create(
            "syncInterval: always, the durable default written out",
            synced!("nc-sync-always", "always"),
            Accepted,
        ),
        create(
            "syncInterval: a duration opts out to nats-server's timer",
            synced!("nc-sync-2m", "2m"),
            Accepted,
        ),
        create(
            "syncInterval: compound and fractional Go durations",
            synced!("nc-sync-compound", "1m30.5s"),
            Accepted,
        ),
        create(
            "syncInterval: milliseconds",
            synced!("nc-sync-ms", "500ms"),
            Accepted,
        ),
        create(
            "syncInterval: zero would leave the store unsynced",
            synced!("nc-sync-zero", "0s"),
            Refused(MESSAGE),
        ),
        create(
            "syncInterval: a bare number has no unit",
            synced!("nc-sync-bare", "\"120\""),
            Refused(MESSAGE),
        ),
        create(
            "syncInterval: a word other than always",
            synced!("nc-sync-never", "never"),
            Refused(MESSAGE),
        ),
        create(
            "syncInterval: always is lowercase, as the CRD documents it",
            synced!("nc-sync-upper", "Always"),
            Refused(MESSAGE),
        ),
        create(
            "syncInterval: a negative duration",
            synced!("nc-sync-negative", "\"-2m\""),
            Refused(MESSAGE),
        ),
        create(
            "syncInterval: days are not a Go duration unit",
            synced!("nc-sync-days", "1d"),
            Refused(MESSAGE),
        ),
    ]
}
