//! Asking one server to reload over the system user (design §4.2): `$SYS.REQ.SERVER.<id>.RELOAD`,
//! confirmed by `/varz` — the `config_digest` of what was rendered and a later
//! `config_load_time`, or for rotated certificates the NotAfter each listener loaded. Any error
//! tells the caller to restart the server instead. The rules are [`crate::reload`]'s.

use std::collections::BTreeMap;
use std::time::Duration;

use nats_wire::{Collect, ServerFilter, Wire};

use crate::reload::{Confirmation, LoadedConfig, ReloadDecision, ReloadTiming, judge};

fn loaded(v: &nats_wire::monitor::Varz) -> LoadedConfig {
    LoadedConfig {
        config_digest: v.config_digest.clone(),
        load_time_nanos: v.config_load_time.and_then(|t| t.timestamp_nanos_opt()),
    }
}

/// The server named `server_name`: its id and its `/varz`, over `$SYS`. Every request is
/// bounded: over a connection that is down the client waits for it to come back.
async fn find_server(
    wire: &Wire,
    server_name: &str,
    timing: ReloadTiming,
) -> Result<(String, nats_wire::monitor::Varz), String> {
    let bound = timing.request + Duration::from_secs(1);
    let filter = ServerFilter::server_name(server_name);
    let ping = wire.ping_varz(&filter, Collect::expecting(1, timing.request));
    let replies = match tokio::time::timeout(bound, ping).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(format!("reading /varz of {server_name}: {e}")),
        Err(_) => {
            return Err(format!(
                "reading /varz of {server_name}: no answer within {bound:?}"
            ));
        }
    };
    replies
        .replies
        .into_iter()
        .find(|r| r.server.name == server_name)
        .map(|r| (r.server.id, r.data))
        .ok_or_else(|| format!("{server_name} did not answer VARZ over the system account"))
}

/// `$SYS.REQ.SERVER.<id>.RELOAD`, bounded: a reload that cannot be asked for is an error.
async fn ask_reload(
    wire: &Wire,
    server_name: &str,
    id: &str,
    timing: ReloadTiming,
) -> Result<(), String> {
    let bound = timing.request + Duration::from_secs(1);
    match tokio::time::timeout(bound, wire.reload(id)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("reload of {server_name} failed: {e}")),
        Err(_) => Err(format!(
            "reload of {server_name}: no answer within {bound:?}"
        )),
    }
}

/// Asks server `server_name` to reload the config it was given (already written through the
/// server lifecycle's `write_config`), and confirms it by `/varz` (over `$SYS`, where the system user
/// reaches every server) against `expected_digest`, the [`config_digest`](crate::reload::config_digest) of what was rendered.
/// A reload that read the file the server already ran (the new one not projected into the pod
/// yet) is asked for again every `timing.reask` until `timing.confirm_within`. Any error — the
/// server not found, the request refused (a restart-only field), a timeout, a digest neither
/// the old nor the expected — yields [`ReloadDecision::Restart`] naming it.
pub async fn reload_server(
    wire: &Wire,
    server_name: &str,
    expected_digest: &str,
    timing: ReloadTiming,
) -> ReloadDecision {
    let restart = |reason: String| ReloadDecision::Restart { reason };
    let bound = timing.request + Duration::from_secs(1);
    let (id, varz) = match find_server(wire, server_name, timing).await {
        Ok(found) => found,
        Err(why) => return restart(why),
    };
    let before = loaded(&varz);
    if before.config_digest == expected_digest {
        return ReloadDecision::AlreadyCurrent;
    }
    if let Err(why) = ask_reload(wire, server_name, &id, timing).await {
        return restart(why);
    }
    let deadline = tokio::time::Instant::now() + timing.confirm_within;
    let mut asked = tokio::time::Instant::now();
    let mut last: String;
    loop {
        match tokio::time::timeout(bound, wire.varz(&id)).await {
            Err(_) => last = format!("/varz not answered within {bound:?}"),
            Ok(Err(e)) => last = e.to_string(),
            Ok(Ok(reply)) => match judge(&before, &loaded(&reply.data), expected_digest) {
                Confirmation::Confirmed => return ReloadDecision::Reloaded,
                Confirmation::WrongDigest { reported } => {
                    return restart(format!(
                        "{server_name} reloaded config {reported}, not the rendered {expected_digest}"
                    ));
                }
                Confirmation::NotProjected => {
                    last = format!(
                        "{server_name} reloaded the config it ran ({}): the rendered one has not reached it",
                        before.config_digest
                    );
                    if asked.elapsed() >= timing.reask {
                        if let Err(why) = ask_reload(wire, server_name, &id, timing).await {
                            return restart(why);
                        }
                        asked = tokio::time::Instant::now();
                    }
                }
                Confirmation::Pending => {
                    last = format!(
                        "config_digest {} loaded at {:?}",
                        reply.data.config_digest, reply.data.config_load_time
                    );
                }
            },
        }
        if tokio::time::Instant::now() >= deadline {
            return restart(format!(
                "reload of {server_name} not confirmed within {:?} ({last})",
                timing.confirm_within
            ));
        }
        tokio::time::sleep(timing.poll).await;
    }
}

/// Asks server `server_name` to reload so that its listeners load the certificates their
/// Secrets hold now (`want`: listener → NotAfter, unix seconds), and confirms it by the NotAfter
/// `/varz` reports for each (a reload moves no `config_digest` when only certificates changed).
/// Not confirmed within `timing.confirm_within` is an error naming what the server still
/// serves: on Kubernetes the kubelet may not have refreshed the mounted Secret yet, and the
/// next pass asks again.
pub async fn reload_for_certificates(
    wire: &Wire,
    server_name: &str,
    want: &BTreeMap<String, i64>,
    timing: ReloadTiming,
) -> Result<(), String> {
    let bound = timing.request + Duration::from_secs(1);
    let (id, _) = find_server(wire, server_name, timing).await?;
    ask_reload(wire, server_name, &id, timing).await?;
    let deadline = tokio::time::Instant::now() + timing.confirm_within;
    let mut last = String::new();
    loop {
        if let Ok(Ok(reply)) = tokio::time::timeout(bound, wire.varz(&id)).await {
            let loaded: BTreeMap<String, i64> = reply
                .data
                .loaded_certificates()
                .into_iter()
                .map(|(l, t)| (l, t.timestamp()))
                .collect();
            let stale = crate::certificate_reload::stale(want, &loaded);
            if stale.is_empty() {
                return Ok(());
            }
            last = format!("still serving the old certificate of {}", stale.join(", "));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "reload of {server_name} for rotated certificates not confirmed within {:?}{}",
                timing.confirm_within,
                if last.is_empty() {
                    String::new()
                } else {
                    format!(" ({last})")
                }
            ));
        }
        tokio::time::sleep(timing.poll).await;
    }
}
