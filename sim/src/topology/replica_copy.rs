//! Reading one replica's own copy of a stream: the bytes a server holds, not what the stream's
//! leader serves.
//!
//! The server is stopped, its store directory copied (through the fault layer when the store is
//! on it: the copy is what the server itself would read on its next start), and a standalone
//! nats-server — JetStream on, no cluster, no gateways, the same accounts — is started on the
//! copy. It recovers the stream from the copy's message blocks alone and answers the ordinary
//! JetStream API: stream info for the replica's message count and first and last sequence, a
//! get per sequence for what it holds there.
//!
//! Why not ask the running replica: nats-server has no request that reads one named replica.
//! A direct get (`allow_direct`, `$JS.API.DIRECT.GET.<stream>`) is answered by whichever replica's
//! queue subscription the request reaches, the reply does not say which one, a follower catching
//! up stops answering, and the stream would have to be created with `allow_direct` — a setting the
//! scenario under test does not ask for. `$SYS.REQ.SERVER.PING.JSZ` gives each server's own count
//! and sequences, but not the messages. A stopped server's copy is exactly that replica's, by
//! construction. The cost: the server is down while its copy is taken (the caller restarts it).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::{Topology, TopologyError};
use crate::nats_conf::ServerConfig;
use crate::server::Server;

/// What one replica's own copy of a stream holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaCopy {
    pub server: String,
    /// Whether the copy holds the stream at all.
    pub has_stream: bool,
    pub messages: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    /// By stream sequence, each message the copy holds.
    pub held: BTreeMap<u64, StoredMessage>,
    /// The reader's warnings and errors while it recovered the copy (a damaged block, a
    /// stream it could not recover).
    pub warnings: Vec<String>,
}

/// One message of a replica's copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Its `Nats-Msg-Id`, where it is the sim's (`crate::traffic::parse_msg_id`).
    pub id: Option<u64>,
    pub subject: String,
    pub payload: Vec<u8>,
}

impl Topology {
    /// Reads stopped server `server`'s own copy of `stream` (see the module doc), connecting to
    /// the reader with `creds` (the contents of a creds file) where the accounts need them. The
    /// server stays stopped; the copy and the reader are gone when this returns.
    pub async fn read_replica_copy(
        &mut self,
        server: &str,
        stream: &str,
        creds: Option<&str>,
        timeout: Duration,
    ) -> Result<ReplicaCopy, TopologyError> {
        let s = self.server_mut(server)?;
        if s.is_running() {
            return Err(TopologyError::Invalid(format!(
                "{server} is running: its copy of a stream is read only while it is down"
            )));
        }
        let store = s
            .store_dir()
            .ok_or_else(|| TopologyError::Invalid(format!("{server} runs no JetStream store")))?
            .to_path_buf();
        let reader_dir = self.scratch(&format!("replica-copy-{server}"));
        if reader_dir.exists() {
            std::fs::remove_dir_all(&reader_dir).map_err(TopologyError::TempDir)?;
        }
        let copy = reader_dir.join("store");
        copy_dir(&store, &copy).map_err(TopologyError::TempDir)?;
        super::stream_meta::make_single_replica(&copy).map_err(TopologyError::TempDir)?;
        let config = reader_config(&self.server(server)?.config, &reader_dir, copy);
        let mut reader = Server::new(
            self.server(server)?.binary().to_path_buf(),
            reader_dir.clone(),
            format!("{server}-copy"),
            config,
        );
        reader.start().await?;
        let read = read_copy(&reader, server, stream, creds, timeout).await;
        let warnings = warnings(&reader.log_path());
        reader.kill9()?;
        drop(reader);
        std::fs::remove_dir_all(&reader_dir).map_err(TopologyError::TempDir)?;
        read.map(|c| ReplicaCopy { warnings, ..c })
    }
}

/// The reader's config: the server's own accounts and JetStream settings on `store`, on ports of
/// its own, with no cluster, gateway or leaf links.
fn reader_config(of: &ServerConfig, dir: &Path, store: std::path::PathBuf) -> ServerConfig {
    let mut c = ServerConfig::new(
        format!("{}-copy", of.name),
        crate::ports::free_port(),
        crate::ports::free_port(),
        dir.join("nats.pid"),
    );
    c.jetstream = of.jetstream.clone().map(|mut js| {
        js.store_dir = store;
        js
    });
    c.extra = of.extra.clone();
    c
}

/// The reader log's warning and error lines, without their pid and time stamp.
fn warnings(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            l.find("[WRN]")
                .or_else(|| l.find("[ERR]"))
                .map(|i| l[i..].trim().to_string())
        })
        .collect()
}

/// Copies directory `from` to `to`, files and subdirectories.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Reads `stream` from the reader, once it has recovered it (or answers it has none).
async fn read_copy(
    reader: &Server,
    server: &str,
    stream: &str,
    creds: Option<&str>,
    timeout: Duration,
) -> Result<ReplicaCopy, TopologyError> {
    let opts = match creds {
        Some(c) => async_nats::ConnectOptions::with_credentials(c)
            .map_err(|e| TopologyError::Invalid(format!("the creds: {e}")))?,
        None => async_nats::ConnectOptions::new(),
    };
    let client = opts
        .connect(reader.client_url())
        .await
        .map_err(|e| TopologyError::Invalid(format!("connecting to {server}'s copy: {e}")))?;
    let js = async_nats::jetstream::new(client);
    let what = format!("{server}'s copy of {stream} read");
    Ok(crate::wait::poll(&what, timeout, || {
        let js = js.clone();
        async move { read_stream(&js, server, stream).await.map(Some) }
    })
    .await?)
}

async fn read_stream(
    js: &async_nats::jetstream::Context,
    server: &str,
    stream: &str,
) -> Result<ReplicaCopy, String> {
    use async_nats::jetstream::stream::RawMessageErrorKind;
    let mut copy = ReplicaCopy {
        server: server.to_string(),
        has_stream: false,
        messages: 0,
        first_seq: 0,
        last_seq: 0,
        held: BTreeMap::new(),
        warnings: Vec::new(),
    };
    let mut s = match js.get_stream(stream).await {
        Ok(s) => s,
        Err(e) if e.to_string().contains("not found") => return Ok(copy),
        Err(e) => return Err(e.to_string()),
    };
    let state = s.info().await.map_err(|e| e.to_string())?.state.clone();
    copy.has_stream = true;
    copy.messages = state.messages;
    copy.first_seq = state.first_sequence;
    copy.last_seq = state.last_sequence;
    if state.messages == 0 {
        return Ok(copy);
    }
    for seq in state.first_sequence..=state.last_sequence {
        match s.get_raw_message(seq).await {
            Ok(m) => {
                let id = m
                    .headers
                    .get(crate::traffic::MSG_ID)
                    .and_then(|v| crate::traffic::parse_msg_id(v.as_str()));
                copy.held.insert(
                    seq,
                    StoredMessage {
                        id,
                        subject: m.subject.to_string(),
                        payload: m.payload.to_vec(),
                    },
                );
            }
            Err(e) if matches!(e.kind(), RawMessageErrorKind::NoMessageFound) => {}
            Err(e) => return Err(format!("{stream} seq {seq}: {e}")),
        }
    }
    Ok(copy)
}
