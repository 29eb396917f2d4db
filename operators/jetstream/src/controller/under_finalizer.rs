//! A pass on the kit's finalizer path, as the balancers, the evacuation and the consumers run it;
//! the object as the finalizer write left it is recorded as an echo ([`finalizer_written`]).

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
    let read_at = obj.meta().resource_version.clone();
    finalizer::reconcile(
        &api,
        FINALIZER,
        obj,
        true,
        |o| {
            finalizer_written(&c, read_at.as_deref(), &*o);
            live(o, c)
        },
        |o| cleanup(o, ctx),
    )
    .await
}

/// Records `o`, the object the apply path runs on, as a version the pass worked from when the
/// finalizer write made it (its resourceVersion is not the one read, `read_at`): its watch event
/// is the pass's own echo and wakes no other ([`controller_kit::echoes`]).
pub(super) fn finalizer_written<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    read_at: Option<&str>,
    o: &K,
) {
    if finalizer_wrote(read_at, o.meta().resource_version.as_deref()) {
        ctx.shared.echoes.worked_from(o);
    }
}

/// Whether the object the apply path runs on, at resourceVersion `now`, is one the finalizer
/// write made rather than the one read at `read_at` (already the watch event that woke the pass).
fn finalizer_wrote(read_at: Option<&str>, now: Option<&str>) -> bool {
    now.is_some() && now != read_at
}

#[cfg(test)]
mod tests {
    use super::finalizer_wrote;
    use rstest::rstest;

    #[rstest]
    #[case::the_finalizer_added(Some("10"), Some("11"), true)]
    #[case::the_finalizer_there_already(Some("10"), Some("10"), false)]
    #[case::read_without_a_version(None, Some("11"), true)]
    #[case::written_without_a_version(Some("10"), None, false)]
    fn only_a_version_the_finalizer_write_made_is_its_echo(
        #[case] read_at: Option<&str>,
        #[case] now: Option<&str>,
        #[case] want: bool,
    ) {
        assert_eq!(finalizer_wrote(read_at, now), want);
    }
}
