//! The steps on stores, through the filesystem fault layer ([`faultfs`]): a power loss
//! (`lose_unsynced`), a damaged file (`corrupt`), and the audit that reads a stream back and
//! counts what its publisher had acknowledged and it no longer holds (`audit_stream`). Sim
//! topologies only: the layer is mounted by the sim process under each server's store.

use serde::{Deserialize, Serialize};

use super::Action;
use super::deployed::{Deployed, Done};
use super::step_context::resolve;

/// How a `corrupt` step damages a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorruptKind {
    Bitflip,
    Truncate,
}

impl From<CorruptKind> for faultfs::Corruption {
    fn from(k: CorruptKind) -> Self {
        match k {
            CorruptKind::Bitflip => faultfs::Corruption::Bitflip,
            CorruptKind::Truncate => faultfs::Corruption::Truncate,
        }
    }
}

/// A `lose_unsynced` or `corrupt` step on the deployment's servers: SIGKILL and drop what
/// they had not synced, or damage a stopped server's files.
pub(super) async fn run(
    deployed: &mut Deployed,
    action: &Action,
    last_faulted: &mut Option<String>,
) -> Result<Done, String> {
    let topo = deployed.dep_mut();
    match action {
        Action::LoseUnsynced { servers } => {
            let mut names = Vec::new();
            for s in servers {
                names.push(resolve(&*topo, s, last_faulted).await?);
            }
            let lost = topo.lose_unsynced(&names).map_err(|e| e.to_string())?;
            let said = lost
                .iter()
                .map(|(n, l)| {
                    let most = l
                        .by_file
                        .first()
                        .map(|(p, b)| {
                            let p = p
                                .as_ref()
                                .map_or("(unlinked)".into(), |p| p.display().to_string());
                            format!(", most in {p} ({b} B)")
                        })
                        .unwrap_or_default();
                    format!("{n} lost {} B in {} files{most}", l.bytes, l.files)
                })
                .collect::<Vec<_>>()
                .join("; ");
            *last_faulted = names.last().cloned();
            Ok(Done {
                target: Some(said),
                ..Done::default()
            })
        }
        Action::Corrupt {
            server,
            file_glob,
            kind,
        } => {
            let name = resolve(&*topo, server, last_faulted).await?;
            let damage = topo
                .corrupt(&name, file_glob, (*kind).into())
                .map_err(|e| e.to_string())?;
            let said = damage
                .iter()
                .map(|d| format!("{} at {} of {} B", d.path.display(), d.at, d.len_before))
                .collect::<Vec<_>>()
                .join("; ");
            *last_faulted = Some(name.clone());
            Ok(Done {
                target: Some(format!("{name}: {said}")),
                ..Done::default()
            })
        }
        _ => Err(format!("{} is not a step on stores", action.describe())),
    }
}

/// What an `audit_stream` step found: the acknowledged messages of the publisher of `stream`
/// (by `Nats-Msg-Id`) the stream no longer holds.
pub(super) async fn audit_stream(
    deployed: &Deployed,
    ctx: &super::step_context::StepContext,
    stream: &str,
    timeout: std::time::Duration,
) -> Result<Done, String> {
    let ledger = ctx
        .ledgers
        .get(stream)
        .ok_or_else(|| format!("no publisher of the workload publishes to {stream}"))?;
    let addrs: Vec<async_nats::ServerAddr> = deployed
        .dep()
        .client_urls()
        .iter()
        .filter_map(|u| u.parse().ok())
        .collect();
    // Acknowledged before the read begins: each of them must be in the stream by then.
    let acknowledged = ledger.acknowledged_ids();
    let opts = match &ctx.workload_creds {
        Some(creds) => async_nats::ConnectOptions::with_credentials(creds)
            .map_err(|e| format!("the workload's creds: {e}"))?,
        None => async_nats::ConnectOptions::new(),
    };
    let client = opts
        .retry_on_initial_connect()
        .connect(addrs)
        .await
        .map_err(|e| e.to_string())?;
    let js = async_nats::jetstream::new(client);
    let held = crate::wait::poll(&format!("every message of {stream} read"), timeout, || {
        let js = js.clone();
        async move { read_ids(&js, stream).await.map(Some).or(Ok(None)) }
    })
    .await
    .map_err(|e| e.to_string())?;
    let missing = acknowledged.difference(&held).count() as u64;
    Ok(Done {
        target: Some(format!(
            "{stream}: {} acknowledged, {missing} of them missing from the stream ({} held)",
            acknowledged.len(),
            held.len()
        )),
        value: Some(missing),
        ..Done::default()
    })
}

/// The `Nats-Msg-Id`s the stream holds now (none when it is gone); an error while it does
/// not answer yet.
async fn read_ids(
    js: &async_nats::jetstream::Context,
    stream: &str,
) -> Result<std::collections::BTreeSet<u64>, String> {
    use async_nats::jetstream::stream::RawMessageErrorKind;
    let mut s = match js.get_stream(stream).await {
        Ok(s) => s,
        Err(e) if e.to_string().contains("not found") => return Ok(Default::default()),
        Err(e) => return Err(e.to_string()),
    };
    let state = s.info().await.map_err(|e| e.to_string())?.state.clone();
    let mut ids = std::collections::BTreeSet::new();
    if state.messages == 0 {
        return Ok(ids);
    }
    for seq in state.first_sequence..=state.last_sequence {
        match s.get_raw_message(seq).await {
            Ok(m) => {
                if let Some(id) = m
                    .headers
                    .get(crate::traffic::MSG_ID)
                    .and_then(|v| crate::traffic::parse_msg_id(v.as_str()))
                {
                    ids.insert(id);
                }
            }
            Err(e) if matches!(e.kind(), RawMessageErrorKind::NoMessageFound) => {}
            Err(e) => return Err(format!("{stream} seq {seq}: {e}")),
        }
    }
    Ok(ids)
}
