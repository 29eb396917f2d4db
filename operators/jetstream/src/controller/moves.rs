//! What the passes that move streams (both balancers and the evacuation) share: their pass
//! under the finalizer ([`under_finalizer`]), and in their gather and act phases the connection
//! reached as a named outcome ([`Reached`]), the JSZ ping over system credentials ([`ping`]),
//! and a leader stepdown toward the chosen member ([`stepdown`]).

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use controller_kit::finalizer::{self, Cleanup};
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::common::ObjectReference;
use nats_api::jetstream::FINALIZER;
use nats_wire::monitor::{Jsz, JszOptions, Placement};
use nats_wire::{PingReplies, Wire, WireError};
use serde::de::DeserializeOwned;

use super::context::Context;
use super::error::Error;
use super::outcome::Stop;
use super::reach::reach;
use crate::balance::PlannedMove;
use crate::references;

/// `obj`'s pass on the kit's finalizer path: `live` while it lives (the finalizer added first),
/// `cleanup` once it is deleted.
pub(super) async fn under_finalizer<K, L, LF, C, CF>(
    obj: Arc<K>,
    ctx: Arc<Context>,
    live: L,
    cleanup: C,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
    L: FnOnce(Arc<K>, Arc<Context>) -> LF,
    LF: Future<Output = Result<Action, Error>>,
    C: FnOnce(Arc<K>, Arc<Context>) -> CF,
    CF: Future<Output = Result<Cleanup, Error>>,
{
    let api: Api<K> = Api::namespaced(
        ctx.shared.client.clone(),
        &obj.namespace().unwrap_or_default(),
    );
    let c = ctx.clone();
    finalizer::reconcile(
        &api,
        FINALIZER,
        obj,
        true,
        |o| live(o, c),
        |o| cleanup(o, ctx),
    )
    .await
}

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
