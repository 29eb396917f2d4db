//! One pass over a NatsCluster, as its phases, each a function returning the value the next
//! ones take:
//!
//! 1. gather — trust roots, preloaded accounts, leaf remotes and their Secrets → [`Gathered`]
//! 2. observe — what the servers say before anything is written → [`Seen`]
//! 3. refuse — what holds the pass: the design's refusals and waits → [`Holds`]
//! 4. plan — every server's plan and revision, pure → [`Planned`]
//! 5. apply — certificates, leaf remotes' Secret, shared objects, absent servers → [`Applied`]
//! 6. step — at most one rollout step: chosen by the rollout core → [`Chosen`], taken →
//!    [`Taken`]
//! 7. observe again — the servers as the port sees them after the step, when it created or
//!    stepped one ([`observe_again`]; else the first observation stands) → [`Rolled`]
//! 8. judge — the conditions → [`Verdicts`]
//! 9. write status — `status` by server-side apply → when to look again
//!
//! The servers are observed before the refusals because adding or removing auth is judged from
//! how they run, and the gate reads how they are. Phases 5 to 7 run only when nothing holds
//! the pass ([`go`]); a failing server-lifecycle port in them is written as Ready=False
//! ReconcileFailed and retried with a backoff ([`caught`]). Only a failure to reach the
//! Kubernetes API fails the reconcile.
//!
//! [`Gathered`]: super::gather::Gathered
//! [`Seen`]: super::observe_servers::Seen
//! [`Holds`]: super::refuse::Holds
//! [`Planned`]: super::plan_servers::Planned
//! [`Applied`]: super::apply::Applied
//! [`Chosen`]: super::step_rollout::Chosen
//! [`Taken`]: super::step_rollout::Taken
//! [`Verdicts`]: super::judge::Verdicts
//! [`observe_again`]: super::observe_servers::observe_again

use std::time::Duration;

use nats_api::cluster::NatsCluster;

use super::apply::apply;
use super::context::Context;
use super::error::Error;
use super::gather::gather;
use super::judge::judge;
use super::observe_servers::{observe, observe_again};
use super::plan_servers::plan;
use super::refuse::{Go, go, refuse};
use super::step_rollout::{choose, take};
use super::write_status::write_status;
use super::written::{Rolled, Written, caught, held, tell_foreign};
use crate::server_lifecycle::ServerLifecycle;

/// One pass over `cluster`; returns when to look again.
pub async fn pass<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
) -> Result<Duration, Error> {
    let gathered = gather(&ctx.shared.client, &ctx.shared.scope.namespaces, cluster).await?;
    let seen = observe(ctx, cluster).await?;
    let holds = refuse(cluster, &ctx.settings, &gathered, &seen);
    let planned = plan(cluster, &gathered, ctx.server_lifecycle.layout(cluster));
    let written = match go(cluster, &holds, &planned) {
        Go::Unowned(e) => Written::Unowned(e),
        Go::Held(hold) => held(ctx, cluster, &seen, &planned.plans, hold).await,
        Go::Ahead(owner) => {
            let rolled = async {
                let applied = apply(ctx, cluster, &owner, &gathered, &seen, &planned).await?;
                let chosen = choose(ctx, cluster, &seen, &holds, &applied).await?;
                let taken = take(ctx, cluster, &seen, &holds, &applied, &chosen).await?;
                let observed = match observe_again(&applied.creating, &chosen.decision.action) {
                    true => ctx.server_lifecycle.observe(cluster).await?,
                    false => applied.before.clone(),
                };
                let rolled = Rolled::new(cluster, applied, chosen, taken, observed);
                tell_foreign(ctx, cluster, &rolled.foreign).await;
                Ok(rolled)
            };
            caught(ctx, cluster, rolled.await).await?
        }
    };
    let verdicts = judge(cluster, &gathered, &seen, &holds, &planned, &written);
    write_status(ctx, cluster, &seen, &planned, &written, &verdicts).await
}
