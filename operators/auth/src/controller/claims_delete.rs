//! Deleted accounts leave every server (§5.2, §7): CLAIMS.DELETE, signed by the NATS operator, to
//! every server that has not confirmed it. A server is known by its id, which nats-server draws
//! anew at every start, so one that was away during a deletion, restarted, or joined later has
//! confirmed nothing and is sent every deleted account ([`crate::deletions::Confirmed`]); its
//! resolver directory may still hold them, and the resolver's catch-up sync only adds.
//!
//! A confirmation is void once the account's JWT is pushed again ([`crate::deletions::Pushes`]):
//! an account pass that began before the deletion may push after the servers confirmed it.
//!
//! The NatsOperator's pass sends every listed deletion to every server, confirmed or not: a
//! server that returns holding a deleted account may hand it to a peer through the resolver's
//! own sync (CLAIMS.PACK, which only adds) before our CLAIMS.DELETE reaches it, and no
//! confirmation can tell. Between passes the rejoin watch looks at the roster every second or
//! two and sends what some server has not confirmed, so a server returning is sent the deletions
//! within seconds of answering STATSZ, whatever the pass interval.

use std::sync::Arc;
use std::time::Duration;

use nats_api::auth::DeletedAccount;
use nats_claims::NKey;
use nats_wire::Collect;

use super::Context;
use super::nats::{PING, collect, system_wire};
use super::time::unix_now;

/// How often the rejoin watch looks at the roster while accounts are listed deleted (each look
/// also collects STATSZ answers for up to [`PING`]).
const REJOIN_WATCH: Duration = Duration::from_secs(1);

/// One NatsOperator's deleted accounts and the key that signs their CLAIMS.DELETE.
#[derive(Clone)]
pub(crate) struct Deletions {
    pub accounts: Vec<String>,
    pub signer: NKey,
    /// The operator's roster key ([`super::nats::roster_key`]).
    pub roster: String,
}

/// Sends CLAIMS.DELETE for `deleted` of NatsOperator `operator` (namespace/name; its roster
/// under `roster`, [`super::nats::roster_key`]) to every server, whatever they confirmed before,
/// and leaves them to the rejoin watch until the next pass. Returns the account keys sent; a
/// failure is retried by the watch and the next pass.
pub(crate) async fn send_deletes(
    ctx: &Context,
    (operator, roster): (&str, &str),
    deleted: &[DeletedAccount],
    signer: &NKey,
) -> Result<Vec<String>, String> {
    let accounts: Vec<String> = deleted.iter().map(|d| d.public_key.clone()).collect();
    if accounts.is_empty() {
        // Nothing listed: the watch stops for this operator and its memory goes.
        ctx.deletions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(operator);
        ctx.confirmed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(operator);
        return Ok(vec![]);
    }
    ctx.deletions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(
            operator.to_string(),
            Deletions {
                accounts: accounts.clone(),
                signer: signer.clone(),
                roster: roster.to_string(),
            },
        );
    // The pass's sweep: nothing counts as confirmed.
    ctx.confirmed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(operator);
    let collect = collect(ctx, roster);
    send_unconfirmed(ctx, (operator, roster), &accounts, signer, collect).await
}

/// STATSZ for the roster's ids, then CLAIMS.DELETE of whatever some of them have not confirmed;
/// the servers that answer are recorded as having confirmed it.
async fn send_unconfirmed(
    ctx: &Context,
    (operator, roster): (&str, &str),
    accounts: &[String],
    signer: &NKey,
    statsz_collect: Collect,
) -> Result<Vec<String>, String> {
    let Some(wire) = system_wire(ctx).await? else {
        return Ok(vec![]);
    };
    let statsz = super::nats::ping_statsz(ctx, &wire, statsz_collect).await?;
    let ids: Vec<String> = statsz.replies.iter().map(|r| r.server.id.clone()).collect();
    super::nats::observe_roster(ctx, roster, &statsz, None);
    let sent = {
        let pushes = ctx.pushes.lock().unwrap_or_else(|p| p.into_inner());
        let mut confirmed = ctx.confirmed.lock().unwrap_or_else(|p| p.into_inner());
        let c = confirmed.entry(operator.to_string()).or_default();
        c.retain(&ids, accounts);
        pushes.counts(&c.unconfirmed(accounts, &ids, &pushes))
    };
    if sent.is_empty() {
        return Ok(vec![]);
    }
    let keys: Vec<String> = sent.iter().map(|(k, _)| k.clone()).collect();
    let request =
        crate::deletions::delete_request(signer, &keys, unix_now()).map_err(|e| e.to_string())?;
    let answers = wire
        .claims_delete(&request, Collect::expecting(ids.len(), PING))
        .await
        .map_err(|e| format!("CLAIMS.DELETE: {e}"))?;
    let answered: Vec<String> = answers
        .replies
        .iter()
        .map(|r| r.server.id.clone())
        .collect();
    ctx.confirmed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(operator.to_string())
        .or_default()
        .record(&answered, &sent);
    if let Some(f) = answers.failures.first() {
        return Err(format!("CLAIMS.DELETE refused: {f}"));
    }
    Ok(keys)
}

/// Between the NatsOperators' passes: every [`REJOIN_WATCH`] while some operator lists deleted
/// accounts, the roster is asked (for a full [`PING`], so a server just back is heard) and any
/// server that has not confirmed a deletion is sent it. Runs for the life of the process.
pub(crate) async fn rejoin_watch(ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(REJOIN_WATCH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let watched: Vec<(String, Deletions)> = ctx
            .deletions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (operator, d) in watched {
            match send_unconfirmed(
                &ctx,
                (&operator, &d.roster),
                &d.accounts,
                &d.signer,
                Collect::until(PING),
            )
            .await
            {
                Ok(sent) if !sent.is_empty() => {
                    tracing::info!(operator, accounts = ?sent, "CLAIMS.DELETE sent to a server that had not confirmed it");
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(operator, error = %e, "rejoin watch"),
            }
        }
    }
}
