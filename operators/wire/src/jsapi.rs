//! The `$JS.API.*` requests the controllers make (jetstream_api.go): peer removal and
//! evacuation of a server, placement moves of a stream by the system account and their
//! cancellation, leader stepdowns of a stream, a consumer and the meta group, and the meta group's
//! peers as the meta leader reports them.
//!
//! SERVER.REMOVE, SERVER.EVACUATE, ACCOUNT.STREAM.MOVE and CANCEL_MOVE and META.LEADER.STEPDOWN
//! are answered by the meta leader alone and only for the system account; stream and consumer
//! stepdowns resolve the caller's account (a per-account user, or the system account through an
//! account's jetstream-stepdown export).

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::excerpt;
use crate::monitor::{ClusterInfo, JszOptions, MetaClusterInfo, Placement, StreamConfigView};
use crate::request::json_body;
use crate::{Collect, PingReplies, Wire, WireError};

/// The error block of a `$JS.API.*` answer.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct JsApiError {
    code: i64,
    err_code: u64,
    description: String,
}

/// The common part of a `$JS.API.*` answer plus the body the request promises.
#[derive(Debug, Deserialize)]
struct JsAnswer<T> {
    #[serde(default)]
    error: Option<JsApiError>,
    #[serde(flatten)]
    body: T,
}

/// `success` of the answers that only acknowledge.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Success {
    success: bool,
}

/// Names a server to SERVER.REMOVE or SERVER.EVACUATE: by name, or by peer id, which takes
/// precedence when both are set (jetstream_api.go JSApiMetaServerRemoveRequest).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PeerRef {
    #[serde(rename = "peer", skip_serializing_if = "String::is_empty")]
    pub server_name: String,
    #[serde(rename = "peer_id", skip_serializing_if = "String::is_empty")]
    pub peer_id: String,
}

impl PeerRef {
    pub fn name(server_name: &str) -> Self {
        PeerRef {
            server_name: server_name.to_string(),
            ..Default::default()
        }
    }

    pub fn id(peer_id: &str) -> Self {
        PeerRef {
            peer_id: peer_id.to_string(),
            ..Default::default()
        }
    }

    fn label(&self) -> String {
        if self.peer_id.is_empty() {
            self.server_name.clone()
        } else {
            self.peer_id.clone()
        }
    }
}

/// A placement move's request (jetstream_api.go JSApiMetaServerStreamMoveRequest): `server` (in
/// `cluster`/`domain`) is the peer to move off, `tags` ephemeral placement tags added to the
/// stream's own for choosing the new peers; the stream's config keeps its placement as it was.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StreamMove {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl StreamMove {
    /// Move to servers carrying all of `tags` (an evacuation's `to.serverTags`).
    pub fn to_tags<S: Into<String>>(tags: impl IntoIterator<Item = S>) -> Self {
        StreamMove {
            tags: tags.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }
}

/// What the meta leader answers to a move or its cancellation: the stream as it now stands.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct StreamUpdate {
    pub config: Option<StreamConfigView>,
    pub cluster: Option<ClusterInfo>,
}

#[derive(Serialize)]
struct StepdownRequest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    placement: Option<&'a Placement>,
}

/// The meta group as its leader reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetaGroup {
    /// The NATS cluster the meta leader is in.
    pub leader_cluster: String,
    /// Server name of the meta leader.
    pub leader: String,
    /// Every peer, the leader first.
    pub peers: Vec<MetaPeer>,
    /// The size the leader knows the group to have.
    pub cluster_size: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetaPeer {
    pub name: String,
    pub peer_id: String,
    pub current: bool,
    pub offline: bool,
}

impl MetaGroup {
    fn from_meta(info: &MetaClusterInfo) -> Self {
        let mut peers = vec![MetaPeer {
            name: info.leader.clone(),
            peer_id: info.peer.clone(),
            current: true,
            offline: false,
        }];
        peers.extend(info.replicas.iter().map(|p| MetaPeer {
            name: p.name.clone(),
            peer_id: p.peer.clone(),
            current: p.current,
            offline: p.offline,
        }));
        MetaGroup {
            leader_cluster: info.name.clone(),
            leader: info.leader.clone(),
            peers,
            cluster_size: info.cluster_size,
        }
    }

    /// The peer names, sorted.
    pub fn peer_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.peers.iter().map(|p| p.name.clone()).collect();
        names.sort();
        names
    }
}

impl Wire {
    fn js_subject(&self, tail: &str) -> String {
        format!("{}.{tail}", self.js_api_prefix())
    }

    async fn js_request<T: DeserializeOwned + Default>(
        &self,
        subject: &str,
        payload: Bytes,
    ) -> Result<T, WireError> {
        let body = self.request_raw(subject, payload, None).await?;
        let answer: JsAnswer<T> =
            serde_json::from_slice(&body).map_err(|source| WireError::Decode {
                request: subject.to_string(),
                server: None,
                body: excerpt(&body),
                source,
            })?;
        if let Some(e) = answer.error {
            return Err(WireError::JetStream {
                request: subject.to_string(),
                server: None,
                code: e.code,
                err_code: e.err_code,
                description: e.description,
            });
        }
        Ok(answer.body)
    }

    async fn js_ack(&self, subject: &str, payload: Bytes) -> Result<(), WireError> {
        let s: Success = self.js_request(subject, payload).await?;
        if s.success {
            Ok(())
        } else {
            Err(WireError::JetStream {
                request: subject.to_string(),
                server: None,
                code: 0,
                err_code: 0,
                description: "answer without success".to_string(),
            })
        }
    }

    /// `$JS.API.SERVER.REMOVE`: removes a peer from the meta group (and so from the NATS system's
    /// JetStream). The peer rejoins under the same name only after the removal tombstone lapses.
    pub async fn server_remove(&self, peer: &PeerRef) -> Result<(), WireError> {
        let subject = self.js_subject("SERVER.REMOVE");
        self.js_ack(&subject, json_body(peer))
            .await
            .map_err(|e| with_server(e, peer.label()))
    }

    /// `$JS.API.SERVER.EVACUATE` (2.15): moves every stream copy off a server, within each stream's
    /// NATS cluster.
    pub async fn server_evacuate(&self, peer: &PeerRef) -> Result<(), WireError> {
        let subject = self.js_subject("SERVER.EVACUATE");
        self.js_ack(&subject, json_body(peer))
            .await
            .map_err(|e| with_server(e, peer.label()))
    }

    /// `$JS.API.ACCOUNT.STREAM.MOVE.<account>.<stream>`: a placement move, system account only,
    /// answered by the meta leader with the stream as it now stands.
    pub async fn account_stream_move(
        &self,
        account: &str,
        stream: &str,
        request: &StreamMove,
    ) -> Result<StreamUpdate, WireError> {
        let subject = self.js_subject(&format!("ACCOUNT.STREAM.MOVE.{account}.{stream}"));
        self.js_request(&subject, json_body(request)).await
    }

    /// `$JS.API.ACCOUNT.STREAM.CANCEL_MOVE.<account>.<stream>`: rolls a pending move back.
    pub async fn account_stream_cancel_move(
        &self,
        account: &str,
        stream: &str,
    ) -> Result<StreamUpdate, WireError> {
        let subject = self.js_subject(&format!("ACCOUNT.STREAM.CANCEL_MOVE.{account}.{stream}"));
        self.js_request(&subject, Bytes::new()).await
    }

    /// `$JS.API.STREAM.LEADER.STEPDOWN.<stream>`: a leader move, optionally toward `placement`.
    pub async fn stream_leader_stepdown(
        &self,
        stream: &str,
        placement: Option<&Placement>,
    ) -> Result<(), WireError> {
        let subject = self.js_subject(&format!("STREAM.LEADER.STEPDOWN.{stream}"));
        self.js_ack(&subject, json_body(&StepdownRequest { placement }))
            .await
    }

    /// `$JS.API.CONSUMER.LEADER.STEPDOWN.<stream>.<consumer>`.
    pub async fn consumer_leader_stepdown(
        &self,
        stream: &str,
        consumer: &str,
        placement: Option<&Placement>,
    ) -> Result<(), WireError> {
        let subject = self.js_subject(&format!("CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}"));
        self.js_ack(&subject, json_body(&StepdownRequest { placement }))
            .await
    }

    /// `$JS.API.META.LEADER.STEPDOWN`, system account only.
    pub async fn meta_leader_stepdown(
        &self,
        placement: Option<&Placement>,
    ) -> Result<(), WireError> {
        let subject = self.js_subject("META.LEADER.STEPDOWN");
        self.js_ack(&subject, json_body(&StepdownRequest { placement }))
            .await
    }

    /// The meta group's peers as the meta leader reports them (a leader-only JSZ ping, which
    /// crosses gateways, so a meta leader in another NATS cluster answers too). `Ok(None)` when
    /// no leader answered within the deadline: the caller then judges from the followers.
    pub async fn meta_group(&self, collect: Collect) -> Result<Option<MetaGroup>, WireError> {
        let options = JszOptions {
            leader_only: true,
            ..Default::default()
        };
        // The leader is the only answer, so stop at the first one.
        let collect = Collect {
            expect: Some(1),
            ..collect
        };
        match self.ping_jsz(&options, collect).await {
            Ok(replies) => Ok(meta_group_of(&replies)),
            Err(WireError::Timeout { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// How the meta group is known: from its leader, or, when no leader answered, from the servers
/// that did (the design's FromFollowers: every server that answers counts as a member).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaView {
    FromLeader(MetaGroup),
    FromFollowers {
        /// Names of the JetStream servers that answered, sorted.
        answered: Vec<String>,
    },
}

impl Wire {
    /// One JSZ ping to every server (it crosses gateways): the meta leader's view of the group if
    /// the leader is among the answers, else the answering servers.
    pub async fn meta_view(
        &self,
        filter: &crate::ServerFilter,
        collect: Collect,
    ) -> Result<MetaView, WireError> {
        let options = JszOptions {
            filter: filter.clone(),
            ..Default::default()
        };
        let replies = self.ping_jsz(&options, collect).await?;
        Ok(meta_view_of(&replies))
    }
}

/// [`MetaView`] from JSZ answers.
pub fn meta_view_of(replies: &PingReplies<crate::monitor::Jsz>) -> MetaView {
    match meta_group_of(replies) {
        Some(group) => MetaView::FromLeader(group),
        None => {
            let mut answered: Vec<String> = replies
                .replies
                .iter()
                .filter(|r| !r.data.disabled)
                .map(|r| r.server.name.clone())
                .collect();
            answered.sort();
            MetaView::FromFollowers { answered }
        }
    }
}

/// The meta group from JSZ answers: the leader's view where the leader answered.
pub fn meta_group_of(replies: &PingReplies<crate::monitor::Jsz>) -> Option<MetaGroup> {
    replies.replies.iter().find_map(|r| {
        let meta = r.data.meta_cluster.as_ref()?;
        (!meta.leader.is_empty() && meta.leader == r.server.name)
            .then(|| MetaGroup::from_meta(meta))
    })
}

fn with_server(e: WireError, server: String) -> WireError {
    match e {
        WireError::Timeout { request, after, .. } => WireError::Timeout {
            request,
            server: Some(server),
            after,
        },
        WireError::NoResponders { request, .. } => WireError::NoResponders {
            request,
            server: Some(server),
        },
        WireError::JetStream {
            request,
            code,
            err_code,
            description,
            ..
        } => WireError::JetStream {
            request,
            server: Some(server),
            code,
            err_code,
            description,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn peer_ref_bodies() {
        assert_eq!(
            serde_json::to_value(PeerRef::name("s3")).unwrap(),
            json!({"peer": "s3"})
        );
        assert_eq!(
            serde_json::to_value(PeerRef::id("abc")).unwrap(),
            json!({"peer_id": "abc"})
        );
    }

    #[test]
    fn move_to_tags_body() {
        assert_eq!(
            serde_json::to_value(StreamMove::to_tags(["az:b"])).unwrap(),
            json!({"tags": ["az:b"]})
        );
    }

    #[test]
    fn stepdown_without_placement_is_an_empty_body() {
        assert!(json_body(&StepdownRequest { placement: None }).is_empty());
    }

    #[test]
    fn js_error_decodes() {
        let a: JsAnswer<Success> = serde_json::from_value(json!({
            "type": "io.nats.jetstream.api.v1.meta_server_remove_response",
            "error": {"code": 400, "err_code": 10044, "description": "server is not a member of the cluster"}
        }))
        .unwrap();
        let e = a.error.unwrap();
        assert_eq!(e.err_code, 10044);
        assert!(!a.body.success);
    }

    #[test]
    fn meta_group_puts_the_leader_first() {
        let info: MetaClusterInfo = serde_json::from_value(json!({
            "name": "c1", "leader": "s1", "peer": "p1", "cluster_size": 3,
            "replicas": [{"name": "s2", "current": true, "peer": "p2", "active": 1},
                         {"name": "s3", "current": false, "offline": true, "peer": "p3", "active": 1}]
        }))
        .unwrap();
        let g = MetaGroup::from_meta(&info);
        assert_eq!(g.peers[0].name, "s1");
        assert_eq!(g.peer_names(), vec!["s1", "s2", "s3"]);
        assert!(g.peers[2].offline);
    }

    fn jsz_reply(name: &str, leader: &str) -> crate::Reply<crate::monitor::Jsz> {
        crate::Reply {
            server: crate::ServerInfo {
                name: name.into(),
                ..Default::default()
            },
            data: serde_json::from_value(json!({
                "meta_cluster": {"name": "c1", "leader": leader, "cluster_size": 3}
            }))
            .unwrap(),
        }
    }

    #[test]
    fn meta_view_prefers_the_leaders_answer() {
        let replies = PingReplies {
            request: "JSZ".into(),
            replies: vec![jsz_reply("s2", "s1"), jsz_reply("s1", "s1")],
            failures: vec![],
            expected: None,
        };
        match meta_view_of(&replies) {
            MetaView::FromLeader(g) => assert_eq!(g.leader, "s1"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn meta_view_without_the_leader_counts_the_answering_servers() {
        let replies = PingReplies {
            request: "JSZ".into(),
            replies: vec![jsz_reply("s3", ""), jsz_reply("s2", "s1")],
            failures: vec![],
            expected: None,
        };
        assert_eq!(
            meta_view_of(&replies),
            MetaView::FromFollowers {
                answered: vec!["s2".into(), "s3".into()]
            }
        );
    }

    #[test]
    fn errors_name_the_removed_peer() {
        let e = with_server(
            WireError::JetStream {
                request: "$JS.API.SERVER.REMOVE".into(),
                server: None,
                code: 400,
                err_code: 1,
                description: "x".into(),
            },
            "s3".into(),
        );
        assert_eq!(e.server(), Some("s3"));
        assert!(e.to_string().contains("on server s3"), "{e}");
    }
}
