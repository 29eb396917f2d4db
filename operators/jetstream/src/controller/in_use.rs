//! The in-use finalizer on a NatsConnection, `jetstream.nats.mikluko.io/in-use` (issue 43), as
//! `kubernetes.io/pvc-protection` keeps a claim a pod still mounts: a NatsConnection that a
//! JetStream resource with `deletionPolicy: Delete` names cannot go before that resource's
//! deletion has run, so a tenant deleted all at once (an Argo CD prune, one `kubectl delete` of
//! every kind, a namespace) never turns a Delete into a silent Retain because the connection
//! happened to go first.
//!
//! - **Added** ([`protect`]) by the live pass of a NatsStream, NatsKeyValue, NatsObjectStore or
//!   NatsConsumer whose deletionPolicy is Delete, before it writes anything on the server, to the
//!   NatsConnection it reaches (unless that connection is already being deleted: the apiserver
//!   refuses a new finalizer then, and the resource is then no worse off than before).
//! - **Removed** ([`release`]) by the NatsConnection's own pass once the connection is being
//!   deleted and no Delete-policy resource naming it is left, live or being deleted
//!   ([`needers_of`]). While some are left the NatsConnection reads `Deleting=True`,
//!   reason `InUse`, naming them, and is looked at again within seconds.
//! - The same finalizer on a **NatsStream** ([`protect_stream`], [`release_stream`]) keeps it,
//!   once its own deletion has run, while a Delete-policy NatsConsumer bound to it by `streamRef`
//!   (which inherits its connection from it) has not run its deletion.
//! - A connection being deleted but still present is therefore usable: a resource's cleanup
//!   reads it as such ([`super::reach::connection_state`]) and runs its policy over it.
//!
//! The connection's credentials must stay valid meanwhile: the auth controller holds a NatsUser
//! whose creds Secret a NatsConnection still names (its Ready False, `CredentialsInUse`),
//! neither revoking it nor deleting the Secret, and holds the user's NatsAccount from being
//! deleted on the servers (`CLAIMS.DELETE`) while such a user remains.
//!
//! **No cycle.** The waits form a chain that ends on the NATS servers: NatsUser (creds in use)
//! → NatsConnection (in use) → Delete-policy JetStream resources → the servers answering. Nothing
//! in that chain waits on a NatsUser or a NatsAccount: the resources' cleanup needs only the
//! connection, its Secret and a server (kept by the NatsCluster's deletion guard while their
//! data remains, and the guard waits on the data alone, never on a user or connection). A
//! Retain-policy resource needs nothing, so it never holds a connection. Where the chain is cut
//! from outside (a connection removed by hand, a grant withdrawn, a server that never answers),
//! the resource is released as the design says and a `DeletionPolicyNotRun` Warning Event names
//! the server object left; an unreachable server still holds a Delete, as before, until the
//! resource is set to Retain.

use std::time::Duration;

use controller_kit::conditions::{self, Decided};
use controller_kit::finalizer;
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use nats_api::common::ObjectReference;
use nats_api::jetstream::{
    DeletionPolicy, NatsConsumer, NatsKeyValue, NatsObjectStore, NatsStream,
};
use nats_api::nats::{NatsConnection, NatsConnectionStatus};

use super::context::Context;
use super::error::{Error, kube_err};
use crate::lifecycle_policies::ConnectionState;
use crate::references;

/// The finalizer the JetStream controller keeps on a NatsConnection a Delete-policy resource
/// names.
pub const IN_USE_FINALIZER: &str = "jetstream.nats.mikluko.io/in-use";

/// The condition a NatsConnection held by [`IN_USE_FINALIZER`] reads True.
pub const DELETING: &str = "Deleting";

/// The reason of that condition.
pub const IN_USE: &str = "InUse";

/// The Warning Event on a Delete-policy resource released without its policy running.
pub const DELETION_POLICY_NOT_RUN: &str = "DeletionPolicyNotRun";

/// How soon a NatsConnection held in use looks again at what holds it.
const RECHECK: Duration = Duration::from_secs(2);

/// A resource that may need a connection on deletion: who it is, the connection it reaches
/// (absolute), and its deletionPolicy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needer {
    /// "NatsKeyValue ns/name".
    pub object: String,
    /// The connection's namespace.
    pub namespace: String,
    /// The connection's name.
    pub name: String,
    /// Its deletionPolicy.
    pub policy: DeletionPolicy,
}

/// Whether a resource with `policy` needs its connection when it is deleted: only Delete reaches
/// the server then (§6.3).
pub fn needs_connection(policy: DeletionPolicy) -> bool {
    policy == DeletionPolicy::Delete
}

/// What to do about the in-use finalizer of a NatsConnection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Add it.
    Add,
    /// Remove it.
    Remove,
    /// Leave it as it is.
    Keep,
}

/// The in-use rule: a connection `needed` by a Delete-policy resource gets the finalizer while it
/// is live (an object being deleted takes no new finalizer); one being deleted that nothing needs
/// loses it. A live connection nothing needs keeps it until it is deleted: a resource created
/// next would add it again, and a stale finalizer holds nothing once the connection is deleted.
pub fn change(needed: bool, has: bool, deleting: bool) -> Change {
    match (needed, has, deleting) {
        (true, false, false) => Change::Add,
        (false, true, true) => Change::Remove,
        _ => Change::Keep,
    }
}

/// The resources among `all` that hold the connection `namespace/name`: those with deletionPolicy
/// Delete naming it, live or being deleted, in their order.
pub fn needers_of(namespace: &str, name: &str, all: &[Needer]) -> Vec<String> {
    all.iter()
        .filter(|n| n.namespace == namespace && n.name == name && needs_connection(n.policy))
        .map(|n| n.object.clone())
        .collect()
}

/// Why a resource being deleted under `policy` over a connection in `state` is released without
/// its policy running (§6.3), for the Warning Event; None when its policy runs or is Retain.
pub fn not_run(
    policy: DeletionPolicy,
    state: ConnectionState,
    conn: &ObjectReference,
) -> Option<String> {
    let at = format!(
        "{}/{}",
        conn.namespace.as_deref().unwrap_or_default(),
        conn.name
    );
    match (needs_connection(policy), state) {
        (false, _) | (true, ConnectionState::Usable) => None,
        (true, ConnectionState::Gone) => Some(format!("its NatsConnection {at} no longer exists")),
        (true, ConnectionState::NotGranted) => Some(format!(
            "no NatsReferenceGrant admits its NatsConnection {at} any more"
        )),
    }
}

/// The in-use finalizer put on the connection `conn` (absolute) that the live resource `obj`,
/// with `policy`, reaches: done once per connection and process (then remembered), before the
/// resource writes anything on the server.
pub(super) async fn protect<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    conn: &ObjectReference,
    policy: DeletionPolicy,
) -> Result<(), Error> {
    if !needs_connection(policy) {
        return Ok(());
    }
    let ns = conn.namespace.clone().unwrap_or_default();
    if !ctx.shared.scope.namespaces.watches(&ns) {
        return Ok(());
    }
    // Marked already (the connection as the watch cache holds it names its UID): nothing is
    // read or written, so the finalizer costs one write per connection, not one per resource.
    if let Some(c) = ctx.cached_connection(&ns, &conn.name)
        && ctx.in_use_marked(&in_use_key(&ns, &conn.name, &c.uid().unwrap_or_default()))
    {
        return Ok(());
    }
    // One pass at a time reads and marks: those that start together add it once.
    let _adding = ctx.in_use_adding.lock().await;
    let api: Api<NatsConnection> = Api::namespaced(ctx.shared.client.clone(), &ns);
    let Some(c) = api.get_opt(&conn.name).await.map_err(kube_err(obj))? else {
        return Ok(());
    };
    let key = in_use_key(&ns, &conn.name, &c.uid().unwrap_or_default());
    if ctx.in_use_marked(&key) {
        return Ok(());
    }
    let has = finalizer::has(&c, IN_USE_FINALIZER);
    if change(true, has, c.metadata.deletion_timestamp.is_some()) == Change::Add {
        finalizer::add(&api, &c, IN_USE_FINALIZER).await?;
        tracing::info!(
            "NatsConnection {ns}/{}: {IN_USE_FINALIZER} added for {}",
            conn.name,
            controller_kit::reconcile::describe(obj)
        );
    }
    ctx.mark_in_use(key);
    Ok(())
}

/// The key a NatsConnection is marked in use under: `ns/name@uid`.
fn in_use_key(namespace: &str, name: &str, uid: &str) -> String {
    format!("{namespace}/{name}@{uid}")
}

/// The pass of a NatsConnection being deleted: its in-use finalizer removed once nothing needs
/// it; while something does, `Deleting=True InUse` naming what, and the wait until the next look
/// (None once released, or when it carries no in-use finalizer).
pub(super) async fn release(
    ctx: &Context,
    conn: &NatsConnection,
) -> Result<Option<Duration>, Error> {
    if conn.metadata.deletion_timestamp.is_none() || !finalizer::has(conn, IN_USE_FINALIZER) {
        return Ok(None);
    }
    let all = needers(ctx, conn).await?;
    let ns = conn.namespace().unwrap_or_default();
    let holding = needers_of(&ns, &conn.name_any(), &all);
    let api: Api<NatsConnection> = Api::namespaced(ctx.shared.client.clone(), &ns);
    match change(!holding.is_empty(), true, true) {
        Change::Remove => {
            finalizer::remove(&api, conn, IN_USE_FINALIZER).await?;
            ctx.forget_in_use(&in_use_key(
                &ns,
                &conn.name_any(),
                &conn.uid().unwrap_or_default(),
            ));
            Ok(None)
        }
        _ => {
            let message = format!(
                "kept until the deletion of what needs it to reach NATS has run \
                 (deletionPolicy Delete): {}",
                holding.join(", ")
            );
            write_deleting(ctx, conn, &message).await?;
            Ok(Some(RECHECK))
        }
    }
}

/// The in-use finalizer put on the NatsStream `stream` (absolute) that the live consumer `obj`,
/// bound to it by streamRef with `policy`, inherits its connection from: the NatsStream then
/// stays (its own deletion having run) until the consumer's deletion has reached the server
/// through it, so a consumer with deletionPolicy Delete is never released because its stream's
/// resource happened to go first.
pub(super) async fn protect_stream(
    ctx: &Context,
    obj: &NatsConsumer,
    stream: &ObjectReference,
    policy: DeletionPolicy,
) -> Result<(), Error> {
    if !needs_connection(policy) {
        return Ok(());
    }
    let ns = stream.namespace.clone().unwrap_or_default();
    let api: Api<NatsStream> = Api::namespaced(ctx.shared.client.clone(), &ns);
    let Some(s) = api.get_opt(&stream.name).await.map_err(kube_err(obj))? else {
        return Ok(());
    };
    let key = format!(
        "NatsStream {ns}/{}@{}",
        stream.name,
        s.uid().unwrap_or_default()
    );
    if ctx.in_use_marked(&key) {
        return Ok(());
    }
    let has = finalizer::has(&s, IN_USE_FINALIZER);
    if change(true, has, s.metadata.deletion_timestamp.is_some()) == Change::Add {
        finalizer::add(&api, &s, IN_USE_FINALIZER).await?;
    }
    ctx.mark_in_use(key);
    Ok(())
}

/// The pass of a NatsStream being deleted whose own deletion has run: its in-use finalizer
/// removed once no consumer with deletionPolicy Delete bound to it by streamRef is left; the wait
/// until the next look while one is (None once released).
pub(super) async fn release_stream<K: super::stream_backed::StreamBacked>(
    ctx: &Context,
    obj: &K,
) -> Result<Option<Duration>, Error> {
    let ns = obj.meta().namespace.clone().unwrap_or_default();
    let name = obj.meta().name.clone().unwrap_or_default();
    let mut all = Vec::new();
    for api in ctx
        .shared
        .scope
        .namespaces
        .apis::<NatsConsumer>(&ctx.shared.client)
    {
        for o in api
            .list(&ListParams::default())
            .await
            .map_err(kube_err(obj))?
            .items
        {
            if let Some(r) = &o.spec.stream_ref {
                all.push(needer(&o, r, o.spec.deletion_policy));
            }
        }
    }
    let holding = needers_of(&ns, &name, &all);
    if !holding.is_empty() {
        tracing::info!(
            "NatsStream {ns}/{name}: kept for {} (deletionPolicy Delete)",
            holding.join(", ")
        );
        return Ok(Some(RECHECK));
    }
    let api: Api<K> = Api::namespaced(ctx.shared.client.clone(), &ns);
    finalizer::remove(&api, obj, IN_USE_FINALIZER).await?;
    ctx.forget_in_use(&format!(
        "NatsStream {ns}/{name}@{}",
        obj.meta().uid.clone().unwrap_or_default()
    ));
    Ok(None)
}

/// Whether a consumer bound to `stream` went with it: the NatsStream is being deleted and its
/// deletion left no stream on the server (Deleting=True, DeletedOnServer, written before its
/// JetStream finalizer went). Deleting a stream deletes its consumers, so such a consumer's
/// Delete needs no server — which matters once the stream's data no longer keeps the
/// NatsCluster's deletion guard holding the servers (issue 43). A stream released any other way
/// (not owned by its resource, Retain, its servers torn down) does not say it, and its
/// consumers run their own policy.
pub fn went_with_stream(stream: &NatsStream) -> bool {
    stream.metadata.deletion_timestamp.is_some()
        && stream.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == nats_api::jetstream::condition::DELETING
                    && c.status == "True"
                    && c.reason == nats_api::jetstream::reason::DELETED_ON_SERVER
            })
        })
}

/// How soon a resource held in use looks again.
pub(super) fn recheck() -> Duration {
    RECHECK
}

/// Deleting=True, InUse, over the status as read.
async fn write_deleting(ctx: &Context, conn: &NatsConnection, message: &str) -> Result<(), Error> {
    let previous = conn
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let decided = Decided::new(DELETING, true, IN_USE, message);
    let status = NatsConnectionStatus {
        observed_generation: conn.metadata.generation,
        conditions: conditions::merge(
            &previous,
            conn.metadata.generation,
            &[decided],
            &[],
            &conditions::now(),
        ),
    };
    ctx.shared
        .write_status(conn, &status)
        .await
        .map_err(kube_err(conn))?;
    Ok(())
}

/// Every Delete-policy resource of the four kinds in the watched namespaces, with the connection
/// it reaches: its connectionRef, or a consumer's stream's.
async fn needers(ctx: &Context, conn: &NatsConnection) -> Result<Vec<Needer>, Error> {
    let client = &ctx.shared.client;
    let namespaces = &ctx.shared.scope.namespaces;
    let lp = ListParams::default();
    let mut all = Vec::new();
    let mut streams: Vec<NatsStream> = Vec::new();
    for api in namespaces.apis::<NatsStream>(client) {
        streams.extend(api.list(&lp).await.map_err(kube_err(conn))?.items);
    }
    for s in &streams {
        all.push(needer(s, &s.spec.connection_ref, s.spec.deletion_policy));
    }
    for api in namespaces.apis::<NatsKeyValue>(client) {
        for o in api.list(&lp).await.map_err(kube_err(conn))?.items {
            all.push(needer(&o, &o.spec.connection_ref, o.spec.deletion_policy));
        }
    }
    for api in namespaces.apis::<NatsObjectStore>(client) {
        for o in api.list(&lp).await.map_err(kube_err(conn))?.items {
            all.push(needer(&o, &o.spec.connection_ref, o.spec.deletion_policy));
        }
    }
    for api in namespaces.apis::<NatsConsumer>(client) {
        for o in api.list(&lp).await.map_err(kube_err(conn))?.items {
            let own = o.namespace().unwrap_or_default();
            let via_stream = o.spec.stream_ref.as_ref().and_then(|r| {
                let sns = references::namespace_of(r, &own).to_string();
                streams
                    .iter()
                    .find(|s| s.name_any() == r.name && s.namespace().as_deref() == Some(&sns))
                    .map(|s| {
                        references::absolute(
                            &s.spec.connection_ref,
                            &s.namespace().unwrap_or_default(),
                        )
                    })
            });
            if let Some(c) = o.spec.connection_ref.clone().or(via_stream) {
                all.push(needer(&o, &c, o.spec.deletion_policy));
            }
        }
    }
    Ok(all)
}

/// `obj` as a [`Needer`] of `conn` (relative to its namespace).
fn needer<K: Resource<DynamicType = ()>>(
    obj: &K,
    conn: &ObjectReference,
    policy: DeletionPolicy,
) -> Needer {
    let own = obj.meta().namespace.clone().unwrap_or_default();
    Needer {
        object: format!(
            "{} {own}/{}",
            K::kind(&()),
            obj.meta().name.clone().unwrap_or_default()
        ),
        namespace: references::namespace_of(conn, &own).to_string(),
        name: conn.name.clone(),
        policy,
    }
}

/// The Warning Event on `obj`, deleted with deletionPolicy Delete, released without its policy
/// running because its connection is `why`: the server object `what` is left.
pub(super) async fn released_without_policy<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    what: &str,
    why: &str,
) {
    let message = format!(
        "deletionPolicy Delete did not run: {why}, so {what} is left on the server (delete it \
         there, or recreate the NatsConnection and the resource and delete it again)"
    );
    tracing::warn!("{}: {message}", controller_kit::reconcile::describe(obj));
    ctx.shared
        .events
        .publish(obj, true, DELETION_POLICY_NOT_RUN, message)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::a_delete_policy_needs_its_connection_on_deletion(DeletionPolicy::Delete, true)]
    #[case::retain_never_reaches_the_server_on_deletion(DeletionPolicy::Retain, false)]
    fn only_delete_needs_the_connection(#[case] policy: DeletionPolicy, #[case] want: bool) {
        assert_eq!(needs_connection(policy), want);
    }

    #[rstest]
    #[case::a_live_connection_a_delete_resource_needs_gets_it(true, false, false, Change::Add)]
    #[case::a_live_connection_keeps_it(true, true, false, Change::Keep)]
    #[case::a_connection_being_deleted_takes_no_new_finalizer(true, false, true, Change::Keep)]
    #[case::held_while_a_delete_resource_still_needs_it(true, true, true, Change::Keep)]
    #[case::released_once_nothing_needs_it(false, true, true, Change::Remove)]
    #[case::a_live_connection_nothing_needs_keeps_it_until_deleted(
        false,
        true,
        false,
        Change::Keep
    )]
    #[case::nothing_to_do_without_it(false, false, true, Change::Keep)]
    fn the_in_use_rule(
        #[case] needed: bool,
        #[case] has: bool,
        #[case] deleting: bool,
        #[case] want: Change,
    ) {
        assert_eq!(change(needed, has, deleting), want);
    }

    fn at() -> ObjectReference {
        ObjectReference {
            name: "orders".into(),
            namespace: Some("t".into()),
        }
    }

    #[rstest]
    #[case::delete_over_a_usable_connection_runs(
        DeletionPolicy::Delete,
        ConnectionState::Usable,
        None
    )]
    #[case::retain_is_no_surprise(DeletionPolicy::Retain, ConnectionState::Gone, None)]
    #[case::delete_whose_connection_is_gone_is_told(
        DeletionPolicy::Delete,
        ConnectionState::Gone,
        Some("its NatsConnection t/orders no longer exists")
    )]
    #[case::delete_whose_grant_was_withdrawn_is_told(
        DeletionPolicy::Delete,
        ConnectionState::NotGranted,
        Some("no NatsReferenceGrant admits its NatsConnection t/orders any more")
    )]
    fn a_delete_released_without_running_says_why(
        #[case] policy: DeletionPolicy,
        #[case] state: ConnectionState,
        #[case] want: Option<&str>,
    ) {
        assert_eq!(not_run(policy, state, &at()).as_deref(), want);
    }

    fn n(object: &str, ns: &str, name: &str, policy: DeletionPolicy) -> Needer {
        Needer {
            object: object.into(),
            namespace: ns.into(),
            name: name.into(),
            policy,
        }
    }

    #[rstest]
    #[case::a_delete_key_value_holds_it(
        vec![n("NatsKeyValue t/carts", "t", "orders", DeletionPolicy::Delete)],
        vec!["NatsKeyValue t/carts"]
    )]
    #[case::a_retain_stream_does_not(
        vec![n("NatsStream t/orders", "t", "orders", DeletionPolicy::Retain)],
        vec![]
    )]
    #[case::another_connection_does_not(
        vec![n("NatsStream t/x", "t", "system", DeletionPolicy::Delete)],
        vec![]
    )]
    #[case::the_same_name_in_another_namespace_does_not(
        vec![n("NatsStream u/x", "u", "orders", DeletionPolicy::Delete)],
        vec![]
    )]
    #[case::a_delete_consumer_bound_by_stream_ref_holds_its_stream_alike(
        vec![n("NatsConsumer t/worker", "t", "orders", DeletionPolicy::Delete)],
        vec!["NatsConsumer t/worker"]
    )]
    #[case::every_delete_resource_is_named(
        vec![
            n("NatsKeyValue t/carts", "t", "orders", DeletionPolicy::Delete),
            n("NatsStream t/orders", "t", "orders", DeletionPolicy::Retain),
            n("NatsConsumer t/worker", "t", "orders", DeletionPolicy::Delete),
        ],
        vec!["NatsKeyValue t/carts", "NatsConsumer t/worker"]
    )]
    fn what_holds_a_connection(#[case] all: Vec<Needer>, #[case] want: Vec<&str>) {
        assert_eq!(needers_of("t", "orders", &all), want);
    }

    fn stream(
        deleting: bool,
        condition: Option<(&'static str, &'static str, &'static str)>,
    ) -> NatsStream {
        let mut s: NatsStream = serde_json::from_value(serde_json::json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1",
            "kind": "NatsStream",
            "metadata": {"name": "orders", "namespace": "t"},
            "spec": {"connectionRef": {"name": "orders"}, "subjects": ["orders.>"]},
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        if deleting {
            s.metadata.deletion_timestamp = Some(conditions::now());
        }
        let mut conds = vec![Decided::new("Ready", true, "MatchesSpec", "ok")];
        if let Some((t, status, r)) = condition {
            conds.push(Decided::new(t, status == "True", r, "m"));
        }
        let mut list = Vec::new();
        for d in conds {
            d.upsert(&mut list, Some(2), &conditions::now());
        }
        s.status = Some(nats_api::jetstream::NatsStreamStatus {
            conditions: list,
            ..Default::default()
        });
        s
    }

    #[rstest]
    #[case::its_delete_removed_the_stream_from_the_server(
        true,
        Some(("Deleting", "True", "DeletedOnServer")),
        true
    )]
    #[case::a_stream_being_deleted_that_did_not_say_so(true, None, false)]
    #[case::a_live_stream(false, None, false)]
    #[case::a_live_stream_with_a_stale_marker(
        false,
        Some(("Deleting", "True", "DeletedOnServer")),
        false
    )]
    #[case::another_reason(true, Some(("Deleting", "True", "InUse")), false)]
    #[case::not_true(true, Some(("Deleting", "False", "DeletedOnServer")), false)]
    fn when_a_consumer_went_with_its_stream(
        #[case] deleting: bool,
        #[case] condition: Option<(&'static str, &'static str, &'static str)>,
        #[case] want: bool,
    ) {
        assert_eq!(went_with_stream(&stream(deleting, condition)), want);
    }
}
