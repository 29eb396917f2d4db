//! What story 07's balancers have to balance, played by the run: a busy NATS cluster whose
//! leaders crowd one server. Its examples show each balancer after a leader move, and the orders
//! team's balancer holding while the system balancer holds the move lease; on a quiet node new
//! streams' leaders may fall evenly and nothing moves. So the run crowds them, as an
//! application's traffic and restarts do: each account's own user steps its streams' leaders
//! down toward one server ([`crowd`]: `$JS.API.STREAM.LEADER.STEPDOWN` with a preferred
//! placement), then nudges a balancer to look now rather than at its next interval (an
//! annotation: any change of the object starts a pass).
//!
//! - [`Skew::Crowd`] (step 02, once `orders` carries the jetstream-stepdown export): story 02's `orders` and
//!   the billing team's `BILLING` (an account without the export) led by one server; the system
//!   balancer moves `orders`, the one it can.
//! - [`Skew::Yield`] (step 03): the hot pool's two streams led by one server and the orders
//!   balancer nudged: it moves one of them itself. Then `orders` with billing's two streams
//!   on one server (not the one the R1 `ORDERS_ARCHIVE` lives on, so the account's default pool
//!   stays even), the hot streams one on each other server: that server leads the most, and the
//!   system balancer's move off it is of `orders`, the one stream there it can move; nothing
//!   else has a move to make. The system balancer nudged, its move is undone at once (`orders`
//!   led by that server again, as an operator's stepdown would, by a [`Holder`] armed before the
//!   move): the move stays pending and the system balancer holds the lease, renewing it at each
//!   pass. Only then the hot pool crowded
//!   on one server; nudged, the orders balancer, wanting a move, holds with MoveLeaseHeld,
//!   however its passes fall. The run keeps the move undone for [`HOLD_FOR`], so the story's
//!   example is seen, then lets it through.

use std::time::Duration;

use serde_json::{Value, json};

/// The namespace of story 07's objects.
const NAMESPACE: &str = "nats-system";

/// A stream, by the NatsConnection whose user steps it down and its NATS name.
pub type Led = (&'static str, &'static str);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skew {
    /// `streams` led by one server, then the NatsSystemBalancer `system` nudged.
    Crowd {
        streams: &'static [Led],
        system: &'static str,
    },
    /// The hot pool `hot` crowded and the NatsBalancer `account` nudged until it moves one of
    /// them; then `busy` crowded on the server leading `anchor`, `hot` on another, the
    /// NatsSystemBalancer `system` nudged, and `account` nudged while the system balancer's move
    /// is pending.
    Yield {
        hot: &'static [Led],
        anchor: Led,
        busy: &'static [Led],
        system: &'static str,
        account: &'static str,
    },
}

impl std::fmt::Display for Skew {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |s: &[Led]| s.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ");
        match self {
            Skew::Crowd { streams, system } => write!(
                f,
                "the leaders of {} crowded on one server, NatsSystemBalancer {system} nudged",
                names(streams)
            ),
            Skew::Yield { hot, account, .. } => write!(
                f,
                "the leaders of {} crowded and NatsBalancer {account} nudged, then every leader \
                 crowded while the system balancer moves",
                names(hot)
            ),
        }
    }
}

/// How many times a crowding is played before the run gives up on the balancer it waits for.
const ATTEMPTS: usize = 4;

/// Does `skew` on the node `client` reaches.
pub async fn perform(client: &kube::Client, skew: &Skew) -> Result<(), String> {
    match skew {
        Skew::Crowd { streams, system } => {
            crowd(client, streams).await?;
            nudge(client, "NatsSystemBalancer", system).await
        }
        Skew::Yield {
            hot,
            anchor,
            busy,
            system,
            account,
        } => {
            let own = |o: &Value| o.pointer("/status/lastMove/kind").is_some();
            let mut moved = false;
            for _ in 0..ATTEMPTS {
                crowd(client, hot).await?;
                nudge(client, "NatsBalancer", account).await?;
                if watch(
                    client,
                    "NatsBalancer",
                    account,
                    Duration::from_secs(30),
                    own,
                )
                .await
                {
                    moved = true;
                    break;
                }
            }
            if !moved {
                return Err(format!(
                    "NatsBalancer {account} made no move in {ATTEMPTS} crowdings"
                ));
            }
            // Its own move done, its lease released.
            let done = |o: &Value| {
                o.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Holding" && c["reason"] != "MovePending")
                    })
            };
            watch(
                client,
                "NatsBalancer",
                account,
                Duration::from_secs(60),
                done,
            )
            .await;
            let held = |o: &Value| {
                o.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Holding" && c["reason"] == "MoveLeaseHeld")
                    })
            };
            let streams: Vec<Led> = busy.iter().chain(hot.iter()).copied().collect();
            let mut seen = Vec::new();
            for _ in 0..ATTEMPTS {
                // The busy server: not the one the R1 anchor lives on (the account's default
                // pool, `orders` with the anchor, stays even); the hot streams spread over the
                // other two, so nothing but the system balancer has a move to make.
                let anchored = leader(client, *anchor).await?;
                let servers = copies(client, hot[0]).await?;
                let Some(busiest) = servers.iter().find(|s| **s != anchored).cloned() else {
                    return Err(format!("no server but {anchored} holds {}", hot[0].1));
                };
                let rest: Vec<String> = servers.into_iter().filter(|s| *s != busiest).collect();
                let [first, second] = rest.as_slice() else {
                    return Err(format!("{} is not on three servers", hot[0].1));
                };
                crowd_onto(client, busy, &busiest).await?;
                crowd_onto(client, &hot[..1], first).await?;
                crowd_onto(client, &hot[1..], second).await?;
                all_current(client, &streams).await?;
                // Armed before the system balancer moves: its move is undone within tens of
                // milliseconds, before a pass of it can find the move done (its next pass comes
                // at once, on its own status write), so the move stays pending and its lease
                // held, however loaded the machine.
                let holder = Holder::arm(client, busy, &busiest).await?;
                let Some((moved, from)) = system_move(client, system).await? else {
                    seen.push(format!(
                        "no move by the system balancer ({})",
                        holding(client, "NatsSystemBalancer", system).await
                    ));
                    continue;
                };
                let Some(led) = busy.iter().find(|(_, s)| *s == moved).copied() else {
                    seen.push(format!("the system balancer moved {moved}, a hot stream"));
                    continue;
                };
                // Its move undone (the stream led by `from` again): the move stays pending and
                // the system balancer renews the lease at each pass, as long as the run needs.
                // Only then the hot pool crowded: the orders balancer, wanting a move, cannot
                // take the lease, however its passes fall.
                crowd_onto(client, hot, first).await?;
                all_current(client, &streams).await?;
                if from != busiest || pending_of(client, system).await.as_deref() != Some(&moved) {
                    seen.push(format!(
                        "the system balancer's move of {moved} off {from} was found done before \
                         it was undone"
                    ));
                    continue;
                }
                nudge(client, "NatsBalancer", account).await?;
                if watch(
                    client,
                    "NatsBalancer",
                    account,
                    Duration::from_secs(10),
                    held,
                )
                .await
                {
                    // Held for the story's example to be seen, then the move let through.
                    tokio::spawn(release_after(holder, client.clone(), led, from));
                    return Ok(());
                }
                drop(holder);
                let to = elsewhere(client, led, &from).await?;
                crowd_onto(client, &[led], &to).await?;
                let mut leaders = Vec::new();
                for h in hot.iter() {
                    leaders.push(format!("{} on {}", h.1, leader(client, *h).await?));
                }
                seen.push(format!(
                    "the system balancer moved {moved} off {from}, held there; the orders \
                     balancer: {} (its pools {}; the run sees {})",
                    holding(client, "NatsBalancer", account).await,
                    pools_of(client, account).await,
                    leaders.join(", ")
                ));
            }
            Err(format!(
                "NatsBalancer {account} never passed while NatsSystemBalancer {system} held the \
                 move lease, in {ATTEMPTS} crowdings: {}",
                seen.join("; ")
            ))
        }
    }
}

/// How long the run keeps the system balancer's move undone once the orders balancer holds.
const HOLD_FOR: Duration = Duration::from_secs(60);

/// How often a [`Holder`] reads each stream's leader.
const HOLD_EVERY: Duration = Duration::from_millis(25);

/// Keeps streams led by one server: each one's leader read every [`HOLD_EVERY`] over a
/// connection dialed once, and a move off the server stepped back at once. Disarmed when
/// dropped.
struct Holder(tokio::task::JoinHandle<()>);

impl Holder {
    async fn arm(client: &kube::Client, streams: &[Led], on: &str) -> Result<Holder, String> {
        let mut held = Vec::new();
        for (connection, stream) in streams {
            held.push((
                super::dial::connect(client, NAMESPACE, connection).await?,
                *stream,
            ));
        }
        let on = on.to_string();
        Ok(Holder(tokio::spawn(async move {
            loop {
                for (nats, stream) in &held {
                    if let Ok(Some(l)) = leader_of(nats, stream).await
                        && l != on
                        && let Err(e) = step_down(nats, stream, &on).await
                    {
                        eprintln!("holding {stream} on {on}: {e}");
                    }
                }
                tokio::time::sleep(HOLD_EVERY).await;
            }
        })))
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// After [`HOLD_FOR`], `holder` disarmed and `led` stepped down off `from`: the system
/// balancer's move done, its lease released.
async fn release_after(holder: Holder, client: kube::Client, led: Led, from: String) {
    tokio::time::sleep(HOLD_FOR).await;
    drop(holder);
    let released = match elsewhere(&client, led, &from).await {
        Ok(to) => crowd_onto(&client, &[led], &to).await,
        Err(e) => Err(e),
    };
    if let Err(e) = released {
        eprintln!("letting the move of {} through: {e}", led.1);
    }
}

/// The stream of NatsSystemBalancer `name`'s first pending move, if any.
async fn pending_of(client: &kube::Client, name: &str) -> Option<String> {
    let api = balancers(client, "NatsSystemBalancer");
    let o = api.get_opt(name).await.ok()??;
    o.data
        .pointer("/status/pending/0/stream")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Nudges NatsSystemBalancer `name` until a pass of it starts a move (a pass that finds a
/// group still electing holds Unsettled instead): the move's stream and the server it leaves.
async fn system_move(
    client: &kube::Client,
    name: &str,
) -> Result<Option<(String, String)>, String> {
    let api = balancers(client, "NatsSystemBalancer");
    for _ in 0..10 {
        nudge(client, "NatsSystemBalancer", name).await?;
        let seen = sim::wait::poll_every(
            &format!("NatsSystemBalancer {name} has a move pending"),
            Duration::from_secs(3),
            Duration::from_millis(50),
            || async {
                let o = api.get_opt(name).await.map_err(|e| e.to_string())?;
                Ok(o.and_then(|o| {
                    let m = o.data.pointer("/status/pending/0")?;
                    Some((
                        m.get("stream")?.as_str()?.to_string(),
                        m.get("from")?.as_str()?.to_string(),
                    ))
                }))
            },
        )
        .await;
        if let Ok(m) = seen {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// Waits until every stream of `streams` has a leader and every copy current.
async fn all_current(client: &kube::Client, streams: &[Led]) -> Result<(), String> {
    for (connection, stream) in streams {
        let nats = super::dial::connect(client, NAMESPACE, connection).await?;
        sim::wait::poll(
            &format!("stream {stream} led and current"),
            Duration::from_secs(60),
            || async {
                let info =
                    request(&nats, &format!("$JS.API.STREAM.INFO.{stream}"), json!({})).await?;
                Ok(current(&info).then_some(()))
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Whether a STREAM.INFO reply shows a leader and every other copy current.
fn current(info: &Value) -> bool {
    let cluster = &info["cluster"];
    cluster["leader"].as_str().is_some_and(|l| !l.is_empty())
        && cluster["replicas"]
            .as_array()
            .is_none_or(|rs| rs.iter().all(|r| r["current"] == true))
}

/// Steps each of `streams` down, as its connection's user, until one server leads them all:
/// the server leading the first of them now.
pub async fn crowd(client: &kube::Client, streams: &[Led]) -> Result<(), String> {
    let Some(first) = streams.first() else {
        return Ok(());
    };
    let to = leader(client, *first).await?;
    crowd_onto(client, streams, &to).await
}

/// The server leading `stream` once it has a leader.
async fn leader(client: &kube::Client, (connection, stream): Led) -> Result<String, String> {
    let nats = super::dial::connect(client, NAMESPACE, connection).await?;
    sim::wait::poll(
        &format!("stream {stream} has a leader"),
        Duration::from_secs(60),
        || leader_of(&nats, stream),
    )
    .await
    .map_err(|e| e.to_string())
}

/// A server holding a copy of `stream` other than `not` (its leader when that is not `not`).
async fn elsewhere(client: &kube::Client, led: Led, not: &str) -> Result<String, String> {
    copies(client, led)
        .await?
        .into_iter()
        .find(|s| s != not)
        .ok_or_else(|| format!("stream {} has no copy outside {not}", led.1))
}

/// The servers holding a copy of `stream`: its leader first, then the others by name.
async fn copies(client: &kube::Client, (connection, stream): Led) -> Result<Vec<String>, String> {
    let nats = super::dial::connect(client, NAMESPACE, connection).await?;
    let info = request(&nats, &format!("$JS.API.STREAM.INFO.{stream}"), json!({})).await?;
    let cluster = &info["cluster"];
    let mut others: Vec<String> = cluster["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .map(str::to_string)
        .collect();
    others.sort();
    Ok(cluster["leader"]
        .as_str()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .into_iter()
        .chain(others)
        .collect())
}

/// Steps each of `streams` down, as its connection's user, until `to` leads them all.
async fn crowd_onto(client: &kube::Client, streams: &[Led], to: &str) -> Result<(), String> {
    for (connection, stream) in streams {
        let nats = super::dial::connect(client, NAMESPACE, connection).await?;
        sim::wait::poll(
            &format!("stream {stream} led by {to}"),
            Duration::from_secs(60),
            || async {
                if leader_of(&nats, stream).await?.as_deref() == Some(to) {
                    return Ok(Some(()));
                }
                step_down(&nats, stream, to).await?;
                Ok(None)
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The server leading `stream` now, if any.
async fn leader_of(nats: &async_nats::Client, stream: &str) -> Result<Option<String>, String> {
    let reply = request(nats, &format!("$JS.API.STREAM.INFO.{stream}"), json!({})).await?;
    Ok(reply
        .pointer("/cluster/leader")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
        .map(str::to_string))
}

/// Asks `stream`'s leader to step down toward `to` (nats-server's preferred placement).
async fn step_down(nats: &async_nats::Client, stream: &str, to: &str) -> Result<(), String> {
    request(
        nats,
        &format!("$JS.API.STREAM.LEADER.STEPDOWN.{stream}"),
        json!({"placement": {"preferred": to}}),
    )
    .await
    .map(|_| ())
}

/// A JetStream API request; its reply, or the error it carries.
async fn request(nats: &async_nats::Client, subject: &str, body: Value) -> Result<Value, String> {
    let msg = tokio::time::timeout(
        Duration::from_secs(5),
        nats.request(subject.to_string(), body.to_string().into()),
    )
    .await
    .map_err(|_| format!("{subject}: no reply in 5 s"))?
    .map_err(|e| format!("{subject}: {e}"))?;
    let reply: Value =
        serde_json::from_slice(&msg.payload).map_err(|e| format!("{subject}: {e}"))?;
    match reply.get("error") {
        Some(err) => Err(format!("{subject}: {err}")),
        None => Ok(reply),
    }
}

/// The Holding condition of `kind` `name` as "reason: message", for the run's log.
async fn holding(client: &kube::Client, kind: &str, name: &str) -> String {
    let api = balancers(client, kind);
    let Ok(Some(o)) = api.get_opt(name).await else {
        return "not read".into();
    };
    o.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Holding"))
        .map_or("no Holding".into(), |c| {
            format!(
                "{}: {}",
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        })
}

/// status.pools of NatsBalancer `name`, as JSON, for the run's log.
async fn pools_of(client: &kube::Client, name: &str) -> String {
    let api = balancers(client, "NatsBalancer");
    match api.get_opt(name).await {
        Ok(Some(o)) => o
            .data
            .pointer("/status/pools")
            .map_or("none".into(), Value::to_string),
        _ => "not read".into(),
    }
}

/// The API of the JetStream `kind` (a balancer) in story 07's namespace.
fn balancers(client: &kube::Client, kind: &str) -> kube::Api<kube::core::DynamicObject> {
    super::kinds::api_of(client, "jetstream.nats.mikluko.io/v1beta1", kind, NAMESPACE)
}

/// Annotates `kind` `name` so its controller passes now.
async fn nudge(client: &kube::Client, kind: &str, name: &str) -> Result<(), String> {
    let api = balancers(client, kind);
    let at = format!("{:?}", std::time::SystemTime::now());
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&json!({"metadata": {"annotations": {
            "conformance.nats.mikluko.io/nudged": at,
        }}})),
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("nudging {kind} {name}: {e}"))
}

/// Whether `kind` `name` shows `what` within `within` (read every 100 ms).
async fn watch(
    client: &kube::Client,
    kind: &str,
    name: &str,
    within: Duration,
    what: impl Fn(&Value) -> bool,
) -> bool {
    let api = balancers(client, kind);
    let what = &what;
    sim::wait::poll_every(
        &format!("{kind} {name}"),
        within,
        Duration::from_millis(100),
        || async {
            let o = api.get_opt(name).await.map_err(|e| e.to_string())?;
            Ok(o.filter(|o| what(&o.data)).map(|_| ()))
        },
    )
    .await
    .is_ok()
}
