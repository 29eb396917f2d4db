//! What a pass decided ([`Outcome`], written as status by `write_status`), the value a write
//! phase hands on ([`Written`]), and how a pass stops short ([`Stop`]): a Terminal resource held,
//! a refusal, a reference waited for, a server not reachable, or a failure. Each stop becomes the
//! outcome its conditions say, so a pass reads as its phases joined by `?`.

use std::time::Duration;

use controller_kit::blocked::Blocked;
use controller_kit::conditions::{self, Decided};
use controller_kit::reconcile::describe;
use kube::Resource;
use nats_api::jetstream::{
    Ownership, ServerState, StreamTransfer, SyncStatus, TerminalPolicy, condition, reason,
};
use serde::Serialize;
use serde_json::Value;

use super::context::{Context, WAIT_RETRY};
use super::error::Error;
use crate::lifecycle_policies::{self, Action as Plan, TerminalReason};
use crate::ownership::Found;
use crate::server_state;

/// The conditions and state one pass decided; written as status by `write_status`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// Ready, Synced, Terminal, Adopted, in that order, as decided (a type left out keeps what
    /// it was, but Terminal, which is removed).
    pub conditions: Vec<Decided>,
    /// status.ownership (None keeps the previous one).
    pub ownership: Option<Ownership>,
    /// status.server (None keeps the previous one).
    pub server: Option<ServerState>,
    /// Whether the server object was compared in this pass (lastSyncedTime).
    pub compared: bool,
    /// When to look again.
    pub requeue: Option<Duration>,
    /// Spec fields to write after the status (Adopt, late-initialization). After, so the watch
    /// event of the spec write already carries this pass's status (Adopted, ownership).
    pub spec_patch: Option<Value>,
    /// status.transfer of a NatsStream: Some(None) clears it, None keeps the previous one.
    pub transfer: Option<Option<StreamTransfer>>,
}

impl Outcome {
    /// Ready=False and Synced=False saying `blocked`, looked at again after `requeue`.
    fn blocked(blocked: &Blocked, requeue: Duration) -> Self {
        Outcome {
            conditions: vec![
                blocked.condition(condition::READY),
                blocked.condition(condition::SYNCED),
            ],
            requeue: Some(requeue),
            ..Outcome::default()
        }
    }
}

/// What a write phase left on the server: its answer, the Synced condition, and what the pass
/// adopted into spec.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    /// The server's INFO answer after the write (or the one read, when in sync).
    pub reply: Value,
    /// Synced.
    pub synced: Decided,
    /// Adopted=True (FoundUnowned), when this pass took over an object that existed unowned.
    pub adopted: Option<Decided>,
    /// Spec fields to write into the resource.
    pub spec_patch: Option<Value>,
}

impl Written {
    /// The server answered `reply` and matches spec.
    pub fn in_sync(reply: Value, what: &str) -> Self {
        Written {
            reply,
            synced: matches_spec(condition::SYNCED, what),
            adopted: None,
            spec_patch: None,
        }
    }

    /// Adopted=True (FoundUnowned) saying `message`.
    pub fn adopted(self, message: String, spec_patch: Option<Value>) -> Self {
        Written {
            adopted: Some(Decided::new(
                condition::ADOPTED,
                true,
                reason::FOUND_UNOWNED,
                message,
            )),
            spec_patch,
            ..self
        }
    }

    /// The outcome of a pass that wrote: Ready=True, its Synced and Adopted, status.ownership
    /// from the server's marker and `action`, and status.server `server`.
    pub fn outcome(
        self,
        action: Plan,
        previous: Option<&Ownership>,
        what: &str,
        server: ServerState,
    ) -> Outcome {
        let mut conditions = vec![matches_spec(condition::READY, what), self.synced];
        conditions.extend(self.adopted);
        Outcome {
            conditions,
            ownership: server_state::ownership(&self.reply["config"], action, previous),
            server: Some(server),
            compared: true,
            spec_patch: self.spec_patch,
            ..Outcome::default()
        }
    }
}

/// `type_` True, MatchesSpec: "<what> matches spec".
fn matches_spec(type_: &'static str, what: &str) -> Decided {
    Decided::new(
        type_,
        true,
        reason::MATCHES_SPEC,
        format!("{what} matches spec"),
    )
}

/// How a pass stopped short.
#[derive(Debug)]
pub(crate) enum Stop {
    /// A Terminal resource waits for an edit of its spec: its Terminal condition kept.
    Held(Decided),
    /// The server side is not reachable or not ready: looked at again after a backoff.
    NotReady(Blocked),
    /// A reference is awaited (a consumer's stream): looked at again soon.
    Waiting(Blocked),
    /// The server object was compared and the change refused: looked at again at the resync.
    Refused(Blocked),
    /// The resource cannot own the server object: refused, with this Terminal condition.
    Terminal(Blocked, Decided),
    /// A failure: the pass is an error.
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

impl Stop {
    /// A refusal for `reason`: Ready and Synced False.
    pub fn refused(reason: &'static str, message: String) -> Self {
        Stop::Refused(Blocked::new(reason, message))
    }

    /// A write of the server object that did not happen, said by `message`: one the server
    /// never answered (a timeout, no responders, the connection gone) is SyncFailed and tried
    /// again after the object's backoff, as a read that got no answer is; one the server refused
    /// is Rejected until the resync or an edit of spec.
    pub fn unwritten(message: String, e: &crate::jsapi::JsApiError) -> Self {
        match e {
            crate::jsapi::JsApiError::Request { .. } => {
                Stop::NotReady(Blocked::new(reason::SYNC_FAILED, message))
            }
            _ => Stop::refused(reason::REJECTED, message),
        }
    }

    /// A Terminal refusal for `reason`, whose Terminal condition says `terminal_message`.
    pub fn terminal(reason: &'static str, message: String, terminal_message: String) -> Self {
        Stop::Terminal(
            Blocked::new(reason, message),
            Decided::new(condition::TERMINAL, true, reason, terminal_message),
        )
    }

    /// The outcome the stop reads as, or the failure.
    pub fn outcome<K: Resource<DynamicType = ()>>(
        self,
        ctx: &Context,
        obj: &K,
    ) -> Result<Outcome, Error> {
        let resync = ctx.settings.resync;
        Ok(match self {
            Stop::Held(terminal) => Outcome {
                conditions: vec![terminal],
                requeue: Some(resync),
                ..Outcome::default()
            },
            Stop::NotReady(b) => Outcome::blocked(&b, ctx.shared.retry_later(obj)),
            Stop::Waiting(b) => Outcome::blocked(&b, WAIT_RETRY.min(resync)),
            Stop::Refused(b) => Outcome {
                compared: true,
                ..Outcome::blocked(&b, resync)
            },
            Stop::Terminal(b, terminal) => {
                let mut o = Outcome {
                    compared: true,
                    ..Outcome::blocked(&b, resync)
                };
                o.conditions.push(terminal);
                o
            }
            Stop::Failed(e) => return Err(e),
        })
    }

    /// The stop as a deletion's failure: a cleanup that cannot reach the server fails (the
    /// finalizer stays) saying why.
    pub fn cleanup_error<K: Resource<DynamicType = ()>>(self, obj: &K) -> Error {
        let message = match self {
            Stop::Failed(e) => return e,
            Stop::Held(d) => d.message,
            Stop::NotReady(b) | Stop::Waiting(b) | Stop::Refused(b) | Stop::Terminal(b, _) => {
                b.message
            }
        };
        Error::Cleanup {
            object: describe(obj),
            message,
        }
    }
}

/// The hold phase: a Terminal resource is not reconciled again until its spec is edited (or on
/// a resync under terminalPolicy Retry); held, it keeps its Terminal condition.
pub(crate) fn hold(
    previous: &SyncStatus,
    policy: TerminalPolicy,
    spec_edited: bool,
) -> Result<(), Stop> {
    if !conditions::is_true(&previous.conditions, condition::TERMINAL)
        || lifecycle_policies::recheck_terminal(policy, spec_edited)
    {
        return Ok(());
    }
    match conditions::find(&previous.conditions, condition::TERMINAL) {
        Some(c) => Err(Stop::Held(Decided::new(
            condition::TERMINAL,
            true,
            held_reason(&c.reason),
            c.message.clone(),
        ))),
        None => Ok(()),
    }
}

/// The reason of a held Terminal condition, as this controller writes it.
fn held_reason(r: &str) -> &'static str {
    match r {
        "ExistsUnowned" => reason::EXISTS_UNOWNED,
        "OwnedByOther" => reason::OWNED_BY_OTHER,
        "NotFound" => reason::NOT_FOUND,
        "NotABucket" => reason::NOT_A_BUCKET,
        _ => reason::REJECTED,
    }
}

/// What a Terminal plan says about the server object `what`.
pub(crate) fn terminal_message(what: &str, t: TerminalReason, found: &Found) -> String {
    match (t, found) {
        (_, Found::OwnedByOther(owner)) => {
            format!("{what} is owned by another resource (UID {owner})")
        }
        (TerminalReason::NotFound, _) => {
            format!("{what} does not exist; adoptionPolicy Adopt requires it")
        }
        _ => format!("{what} exists and carries no ownership marker; adoptionPolicy Never"),
    }
}

/// Whether the resource's spec changed since the status was last written.
pub(crate) fn spec_edited<K: Resource>(obj: &K, previous: &SyncStatus) -> bool {
    previous.observed_generation != obj.meta().generation
}

/// The previous status.transfer of a NatsStream (None for the other kinds).
pub(crate) fn previous_transfer<K: Serialize>(obj: &K) -> Option<StreamTransfer> {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.pointer("/status/transfer").cloned())
        .and_then(|t| serde_json::from_value(t).ok())
}

/// The previous SyncStatus of any JetStream kind (NatsStream's status is a superset).
pub(crate) fn previous_status<K: Serialize>(obj: &K) -> SyncStatus {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.get("status").cloned())
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
