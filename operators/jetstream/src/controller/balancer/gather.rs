//! The gather phase of a NatsBalancer's pass: the pools checked, the connection reached, the
//! account's streams and consumers listed, their owners read from the index and assigned to
//! pools ([`Gathered`]); or why the pass stops short ([`Stopped`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::Api;
use nats_api::jetstream::{NatsBalancer, PoolStatus, reason};

use super::super::context::Context;
use super::super::error::Error;
use super::super::index::{self, NotFilled};
use super::super::moves::{Reached, reached};
use super::super::reach::nats_cluster;
use super::pace;
use crate::balance::account::{self, Listed, ListedConsumers};
use crate::balance::gate::{self, Sighting};
use crate::balance::judge::AccountSeen;
use crate::balance::pools::{self, Assignment, Labeled, Owned, PoolDef};
use crate::balance::servers;
use crate::jsapi;
use crate::system_view::SystemView;

/// How long a pass waits for `$SYS.REQ.USER.INFO` (a refused publish is never answered).
const USER_INFO_DEADLINE: Duration = Duration::from_secs(2);

/// What a pass works from.
pub(super) struct Gathered {
    pub client: async_nats::Client,
    pub cluster: String,
    /// The account's name; `None` when USER.INFO and the creds did not say.
    pub account: Option<String>,
    pub listed: Vec<Listed>,
    pub missing: Vec<String>,
    /// The consumers of the streams of `cluster` that have some.
    pub consumers: Vec<ListedConsumers>,
    pub view: SystemView,
    /// The streams of each pool, and the resources matched by several.
    pub assignment: Assignment,
    /// Each pool as status shows it.
    pub pools: Vec<PoolStatus>,
    /// The UIDs of the owners, of any namespace, setting `placement.cluster`.
    pub pinned_uids: BTreeSet<String>,
    /// Each pool's replica skew, in the order of `pools`.
    pub replica_skews: Vec<u32>,
    /// The last system sighting of `cluster`, and when this pass read it.
    pub sighting: Option<Arc<Sighting>>,
    pub sighted_at: Instant,
    /// Why placement is judged only among the servers holding the account's streams, if it is
    /// ([`servers::unseen_note`]).
    pub unseen: Option<String>,
}

impl Gathered {
    /// What the judge phase reads.
    pub fn seen(&self) -> AccountSeen<'_> {
        AccountSeen {
            cluster: &self.cluster,
            account: self.account.as_deref().unwrap_or_default(),
            listed: &self.listed,
            missing: &self.missing,
            consumers: &self.consumers,
            view: &self.view,
            pools: &self.assignment,
            pinned_uids: &self.pinned_uids,
        }
    }
}

/// How a pass stopped before judging: Ready=False with this reason and message, looked at
/// again after `after`.
pub(super) struct Stopped {
    pub reason: &'static str,
    pub message: String,
    pub after: Duration,
}

/// What the gather phase came to.
pub(super) enum Gathering {
    /// Everything the pass judges from.
    Gathered(Box<Gathered>),
    /// Nothing to judge.
    Stopped(Stopped),
}

fn stopped(reason: &'static str, message: String, after: Duration) -> Result<Gathering, Error> {
    Ok(Gathering::Stopped(Stopped {
        reason,
        message,
        after,
    }))
}

fn pool_defs(obj: &NatsBalancer) -> Vec<PoolDef> {
    obj.spec
        .pools
        .iter()
        .map(|p| PoolDef {
            name: p.name.clone(),
            selector: p.selector.clone(),
        })
        .collect()
}

/// The gather phase; only a failure of the Kubernetes API is an error.
pub(super) async fn gather(ctx: &Context, obj: &NatsBalancer) -> Result<Gathering, Error> {
    let defs = pool_defs(obj);
    if let Err(e) = pools::check_pools(&defs) {
        let message = format!("{e}; nothing is moved");
        return stopped(reason::PASS_FAILED, message, pace(&obj.spec.interval));
    }
    // A backoff, counted only when the pass stops short.
    let retry = || ctx.shared.retry_later(obj);
    let client = match reached(ctx, obj, &obj.spec.connection_ref).await? {
        Reached::Client(c) => c,
        Reached::Not(reason, message) => return stopped(reason, message, retry()),
    };
    let cluster = match nats_cluster(&client) {
        Ok(c) => c,
        Err((reason, message)) => return stopped(reason, message, retry()),
    };
    // Yielding judges by account; one that cannot be told (a user whose permissions refuse
    // USER.INFO: no answer) yields to any system balancer of the NATS cluster.
    let account = match tokio::time::timeout(USER_INFO_DEADLINE, jsapi::user_account(&client))
        .await
        .ok()
        .and_then(Result::ok)
        .flatten()
    {
        Some(a) => Some(a),
        None => creds_account(ctx, obj).await,
    };
    let (values, missing) = match jsapi::stream_list(&client).await {
        Ok(l) => l,
        Err(e) => {
            let message = format!(
                "listing the account's streams over NatsConnection {}: {e}",
                obj.spec.connection_ref.name
            );
            return stopped(reason::PASS_FAILED, message, retry());
        }
    };
    ctx.shared.settled(obj);
    let consumers = list_consumers(&client, account::consumer_streams(&values, &cluster)).await;
    let listed: Vec<Listed> = values
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    let view = account::account_view(account.as_deref().unwrap_or_default(), &listed);
    let view = account::with_consumers(view, &consumers);
    // The servers holding none of the account's copies, where a system pass saw them.
    let sighting = ctx.moving.sighting(&cluster);
    let sighted_at = Instant::now();
    let placement = obj.spec.moves.placement;
    let from = gate::gate_from(sighting.as_deref(), &cluster, sighted_at);
    let view = servers::widened(view, &from, &cluster, placement);
    let unseen = servers::unseen_note(&from, &view, &cluster, placement);
    let ns = obj.namespace().unwrap_or_default();
    let (labeled, pinned_uids) = match resources(ctx, &ns, &view).await {
        Ok(r) => r,
        Err(e) => {
            let message = format!("{e}; nothing is moved");
            return stopped(reason::PASS_FAILED, message, index::FILL_WAIT);
        }
    };
    let (assignment, pools, replica_skews) = assigned(&defs, &labeled, &view, &cluster);
    Ok(Gathering::Gathered(Box::new(Gathered {
        client,
        cluster,
        account,
        listed,
        missing,
        consumers,
        view,
        assignment,
        pools,
        pinned_uids,
        replica_skews,
        sighting,
        sighted_at,
        unseen,
    })))
}

/// The streams of `cluster` assigned to pools by their owners' labels, each pool as status
/// shows it, and each pool's replica skew (its gauge).
fn assigned(
    defs: &[PoolDef],
    labeled: &[Labeled],
    view: &SystemView,
    cluster: &str,
) -> (Assignment, Vec<PoolStatus>, Vec<u32>) {
    let in_cluster: Vec<Owned> = view
        .groups
        .iter()
        .filter(|gr| gr.cluster == cluster && gr.consumer.is_none())
        .map(|gr| Owned {
            key: (gr.account.clone(), gr.stream.clone()),
            owner: gr.owner.clone(),
        })
        .collect();
    let assignment = pools::assign(defs, labeled, &in_cluster);
    let (pools, replica_skews) = assignment
        .pools
        .iter()
        .map(|(name, streams)| {
            let skew = pools::pool_skews(view, cluster, streams);
            let status = PoolStatus {
                name: name.clone(),
                streams: u32::try_from(streams.len()).unwrap_or(u32::MAX),
                leader_skew: skew.leaders,
            };
            (status, skew.replicas)
        })
        .unzip();
    (assignment, pools, replica_skews)
}

/// The account of the user `obj`'s connection dials as, read from its creds Secret (a user
/// whose permissions refuse USER.INFO is still its account's); `None` without creds or when
/// unread.
async fn creds_account(ctx: &Context, obj: &NatsBalancer) -> Option<String> {
    let ns = obj.namespace().unwrap_or_default();
    let conn = crate::references::absolute(&obj.spec.connection_ref, &ns);
    let conn_ns = conn.namespace.clone().unwrap_or(ns);
    let spec =
        Api::<nats_api::nats::NatsConnection>::namespaced(ctx.shared.client.clone(), &conn_ns)
            .get_opt(&conn.name)
            .await
            .ok()??
            .spec;
    let r = spec.credentials?.secret_key_ref;
    let key = r
        .key
        .clone()
        .unwrap_or_else(|| crate::dialing::DEFAULT_CREDS_KEY.into());
    let secret =
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(ctx.shared.client.clone(), &conn_ns)
            .get_opt(&r.name)
            .await
            .ok()??;
    let bytes = secret.data?.remove(&key)?.0;
    crate::dialing::creds_account(&String::from_utf8_lossy(&bytes))
}

/// The consumers of each stream named, one CONSUMER.LIST each; a listing that fails holds the
/// pass Unsettled ([`account::consumers_settled`]) rather than failing it.
async fn list_consumers(client: &async_nats::Client, streams: Vec<String>) -> Vec<ListedConsumers> {
    let mut out = Vec::with_capacity(streams.len());
    for stream in streams {
        let mut l = ListedConsumers::default();
        match jsapi::consumer_infos(client, &stream).await {
            Ok((values, missing)) => {
                l.consumers = values
                    .into_iter()
                    .filter_map(|v| serde_json::from_value(v).ok())
                    .collect();
                l.missing = missing;
            }
            Err(e) => l.unlisted = Some(e.to_string()),
        }
        l.stream = stream;
        out.push(l);
    }
    out
}

/// The NatsStreams, NatsKeyValues and NatsObjectStores of `ns` owning a group of `view` (the
/// account's streams), with their labels (the pools' candidates), and the UIDs of those owners,
/// of any namespace, whose spec sets `placement.cluster`: from the index, not the apiserver
/// ([`super::super::index`]). An index not filled yet (the controller just started) stops the
/// pass.
async fn resources(
    ctx: &Context,
    ns: &str,
    view: &SystemView,
) -> Result<(Vec<Labeled>, BTreeSet<String>), NotFilled> {
    let owners = ctx.index.owners_of(index::groups_on(view, None)).await?;
    let (mut labeled, mut pinned) = (Vec::new(), BTreeSet::new());
    for o in owners {
        if o.owner.placement_cluster.is_some() {
            pinned.insert(o.owner.uid.clone());
        }
        if o.owner.namespace == ns {
            labeled.push(Labeled {
                kind: o.owner.kind,
                namespace: o.owner.namespace,
                name: o.owner.name,
                uid: o.owner.uid,
                labels: o.labels,
            });
        }
    }
    Ok((labeled, pinned))
}
