//! What the passes that move streams (both balancers and the evacuation) share in their
//! gather and act phases: the connection reached as a named outcome ([`Reached`]), the JSZ
//! ping over system credentials ([`ping`]), and a leader stepdown toward the chosen member
//! ([`stepdown`]).

use kube::Resource;
use nats_api::common::ObjectReference;
use nats_wire::monitor::{Jsz, JszOptions, Placement};
use nats_wire::{PingReplies, Wire, WireError};

use super::context::Context;
use super::error::Error;
use super::outcome::Stop;
use super::reach::reach;
use crate::balance::PlannedMove;
use crate::references;

/// The connection a pass names, reached or not.
pub(super) enum Reached {
    /// Its NATS client.
    Client(async_nats::Client),
    /// Not reached: Ready=False with this reason and message.
    Not(&'static str, String),
}

/// `obj`'s `spec.connectionRef` (`conn`, relative to `obj`'s namespace; a grant checked when it
/// crosses) reached, or why not as Ready's reason and message; only a failure of the Kubernetes
/// API is an error.
pub(super) async fn reached<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    conn: &ObjectReference,
) -> Result<Reached, Error> {
    let ns = obj.meta().namespace.clone().unwrap_or_default();
    let conn = references::absolute(conn, &ns);
    let check_grant = conn.namespace.as_deref() != Some(ns.as_str());
    match reach(ctx, obj, &conn, check_grant).await {
        Ok(c) => Ok(Reached::Client(c)),
        Err(Stop::Failed(e)) => Err(e),
        Err(Stop::Held(d)) => Ok(Reached::Not(d.reason, d.message)),
        Err(Stop::NotReady(b) | Stop::Waiting(b) | Stop::Refused(b) | Stop::Terminal(b, _)) => {
            Ok(Reached::Not(b.reason, b.message))
        }
    }
}

/// One JSZ ping through the census, as `key`'s pass; or why not as Ready's message: no server
/// answered (the connection, `conn`, has no system account credentials) or the ping failed.
pub(super) async fn ping(
    ctx: &Context,
    key: &str,
    conn: &str,
    wire: &Wire,
    options: &JszOptions,
) -> Result<PingReplies<Jsz>, String> {
    match ctx.census.ping(key, wire, options).await {
        Ok(r) if !r.replies.is_empty() => Ok(r),
        Ok(_) | Err(WireError::NoResponders { .. }) | Err(WireError::Timeout { .. }) => {
            Err(format!(
                "no server answered $SYS.REQ.SERVER.PING.JSZ over NatsConnection {conn}: \
                 spec.connectionRef must name a connection with system account credentials"
            ))
        }
        Err(e) => Err(format!("the JSZ ping: {e}")),
    }
}

/// A leader move on the server through `wire`: a stepdown of the stream's or the consumer's
/// group toward the chosen member (nats-server 2.11 and later honour the preferred server; an
/// older one picks any).
pub(super) async fn stepdown(wire: Wire, m: &PlannedMove) -> Result<(), WireError> {
    let placement = Placement {
        preferred: m.to.clone().unwrap_or_default(),
        ..Default::default()
    };
    match &m.consumer {
        Some(c) => {
            wire.consumer_leader_stepdown(&m.stream, c, Some(&placement))
                .await
        }
        None => {
            wire.stream_leader_stepdown(&m.stream, Some(&placement))
                .await
        }
    }
}
