//! A pass on the kit's finalizer path, as the balancers, the evacuation and the consumers run it.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use controller_kit::finalizer::{self, Cleanup};
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::jetstream::FINALIZER;
use serde::de::DeserializeOwned;

use super::context::Context;
use super::error::Error;

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
