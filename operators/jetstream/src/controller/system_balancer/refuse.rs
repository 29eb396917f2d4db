//! The refuse phase of a NatsSystemBalancer's pass: its claim on the NATS cluster recorded; a
//! second NatsSystemBalancer of the same NATS cluster (the older wins), or a NATS cluster of
//! one server, refused.

use std::collections::BTreeSet;
use std::time::Instant;

use controller_kit::conditions::Decided;
use controller_kit::reconcile::describe;
use nats_api::jetstream::{NatsSystemBalancer, condition, reason};

use super::super::context::{Context, SystemClaim, claim_winner};
use super::super::lock::lock;
use super::gather::Gathered;

/// The refuse phase: Ready=False as this says when refused.
pub(super) fn refuse(ctx: &Context, obj: &NatsSystemBalancer, g: &Gathered) -> Option<Decided> {
    let me = describe(obj);
    let age = (
        obj.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        me.clone(),
    );
    let now = Instant::now();
    let winner = {
        let mut claims = lock(&ctx.moving.system_balancers);
        let pending = claims
            .get(&me)
            .map(|c| c.pending.clone())
            .unwrap_or_default();
        claims.insert(
            me.clone(),
            SystemClaim {
                cluster: g.cluster.clone(),
                age,
                pending,
                leader_accounts: if obj.spec.moves.leader {
                    g.reached.clone()
                } else {
                    BTreeSet::new()
                },
                placement: obj.spec.moves.placement,
                last_pass: now,
            },
        );
        claim_winner(&claims, &g.cluster, now)
    };
    if let Some(w) = winner.filter(|w| *w != me) {
        return Some(Decided::new(
            condition::READY,
            false,
            reason::DUPLICATE_BALANCER,
            format!(
                "{w} already balances NATS cluster {}: at most one NatsSystemBalancer per NATS \
                 cluster",
                g.cluster
            ),
        ));
    }
    if g.view.servers_of(&g.cluster).count() < 2 {
        return Some(Decided::new(
            condition::READY,
            false,
            reason::NOT_CLUSTERED,
            format!(
                "NATS cluster {} has one server: there is nothing to balance",
                g.cluster
            ),
        ));
    }
    None
}
