//! The monitoring requests over the system account: STATSZ, VARZ, JSZ, CONNZ, LEAFZ, GATEWAYZ,
//! HEALTHZ, each as a ping every server answers (`$SYS.REQ.SERVER.PING.<X>`, events.go) and as a
//! request to one server by id (`$SYS.REQ.SERVER.<id>.<X>`). Field names follow monitor.go.
//!
//! Here: the subjects and the requests; [`options`] what each request takes; [`server`] what a
//! server says of itself (STATSZ, VARZ, HEALTHZ); [`jsz`] JetStream as it sees it (JSZ and the
//! JetStream block of VARZ and STATSZ); [`connections`] its clients, leaf nodes and gateways.

mod connections;
mod jsz;
mod options;
mod server;
#[cfg(test)]
mod tests;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::request::json_body;
use crate::{Collect, PingReplies, Reply, ServerFilter, Wire, WireError};

pub use self::connections::*;
pub use self::jsz::*;
pub use self::options::*;
pub use self::server::*;

/// `$SYS.REQ.SERVER.PING.<kind>`.
pub fn ping_subject(kind: &str) -> String {
    format!("$SYS.REQ.SERVER.PING.{kind}")
}

/// `$SYS.REQ.SERVER.<id>.<kind>`.
pub fn server_subject(server_id: &str, kind: &str) -> String {
    format!("$SYS.REQ.SERVER.{server_id}.{kind}")
}

impl Wire {
    async fn ping_kind<T: DeserializeOwned, O: Serialize>(
        &self,
        kind: &str,
        options: &O,
        collect: Collect,
    ) -> Result<PingReplies<T>, WireError> {
        self.ping(&ping_subject(kind), json_body(options), collect)
            .await
    }

    async fn one_server<T: DeserializeOwned, O: Serialize>(
        &self,
        server_id: &str,
        kind: &str,
        options: &O,
    ) -> Result<Reply<T>, WireError> {
        let subject = server_subject(server_id, kind);
        let reply = self
            .sys_request::<T>(&subject, json_body(options), server_id)
            .await?;
        match reply.data {
            Some(data) => Ok(Reply {
                server: reply.server,
                data,
            }),
            None => Err(WireError::Refused {
                request: subject,
                server: reply.server.label(),
                code: 0,
                description: "answer without data".to_string(),
            }),
        }
    }

    /// `$SYS.REQ.SERVER.PING.STATSZ`: the roster of servers and their stats.
    pub async fn ping_statsz(
        &self,
        filter: &ServerFilter,
        collect: Collect,
    ) -> Result<PingReplies<Statsz>, WireError> {
        self.ping_kind("STATSZ", filter, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.STATSZ`.
    pub async fn statsz(&self, server_id: &str) -> Result<Reply<Statsz>, WireError> {
        self.one_server(server_id, "STATSZ", &ServerFilter::all())
            .await
    }

    /// `$SYS.REQ.SERVER.PING.VARZ`.
    pub async fn ping_varz(
        &self,
        filter: &ServerFilter,
        collect: Collect,
    ) -> Result<PingReplies<Varz>, WireError> {
        self.ping_kind("VARZ", filter, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.VARZ`.
    pub async fn varz(&self, server_id: &str) -> Result<Reply<Varz>, WireError> {
        self.one_server(server_id, "VARZ", &ServerFilter::all())
            .await
    }

    /// `$SYS.REQ.SERVER.PING.JSZ`.
    pub async fn ping_jsz(
        &self,
        options: &JszOptions,
        collect: Collect,
    ) -> Result<PingReplies<Jsz>, WireError> {
        self.ping_kind("JSZ", options, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.JSZ`.
    pub async fn jsz(
        &self,
        server_id: &str,
        options: &JszOptions,
    ) -> Result<Reply<Jsz>, WireError> {
        self.one_server(server_id, "JSZ", options).await
    }

    /// `$SYS.REQ.SERVER.PING.CONNZ`, filtered by account and user as the options say.
    pub async fn ping_connz(
        &self,
        options: &ConnzOptions,
        collect: Collect,
    ) -> Result<PingReplies<Connz>, WireError> {
        self.ping_kind("CONNZ", options, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.CONNZ`.
    pub async fn connz(
        &self,
        server_id: &str,
        options: &ConnzOptions,
    ) -> Result<Reply<Connz>, WireError> {
        self.one_server(server_id, "CONNZ", options).await
    }

    /// `$SYS.REQ.SERVER.PING.LEAFZ`.
    pub async fn ping_leafz(
        &self,
        options: &LeafzOptions,
        collect: Collect,
    ) -> Result<PingReplies<Leafz>, WireError> {
        self.ping_kind("LEAFZ", options, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.LEAFZ`.
    pub async fn leafz(
        &self,
        server_id: &str,
        options: &LeafzOptions,
    ) -> Result<Reply<Leafz>, WireError> {
        self.one_server(server_id, "LEAFZ", options).await
    }

    /// `$SYS.REQ.SERVER.PING.GATEWAYZ`.
    pub async fn ping_gatewayz(
        &self,
        options: &GatewayzOptions,
        collect: Collect,
    ) -> Result<PingReplies<Gatewayz>, WireError> {
        self.ping_kind("GATEWAYZ", options, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.GATEWAYZ`.
    pub async fn gatewayz(
        &self,
        server_id: &str,
        options: &GatewayzOptions,
    ) -> Result<Reply<Gatewayz>, WireError> {
        self.one_server(server_id, "GATEWAYZ", options).await
    }

    /// `$SYS.REQ.SERVER.PING.HEALTHZ`.
    pub async fn ping_healthz(
        &self,
        options: &HealthzOptions,
        collect: Collect,
    ) -> Result<PingReplies<Healthz>, WireError> {
        self.ping_kind("HEALTHZ", options, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.HEALTHZ`.
    pub async fn healthz(
        &self,
        server_id: &str,
        options: &HealthzOptions,
    ) -> Result<Reply<Healthz>, WireError> {
        self.one_server(server_id, "HEALTHZ", options).await
    }
}
