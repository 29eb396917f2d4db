//! The system-account requests that change something: RELOAD and KICK on one server by id
//! (events.go serverReloadReqSubj, clientKickReqSubj), and the full resolver's CLAIMS.UPDATE,
//! CLAIMS.DELETE and ACCOUNT.<key>.CLAIMS.LOOKUP (accounts.go), which every server with a full
//! resolver answers for itself.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::request::json_body;
use crate::{Collect, PingReplies, ServerInfo, Wire, WireError};

pub const CLAIMS_UPDATE: &str = "$SYS.REQ.CLAIMS.UPDATE";
pub const CLAIMS_DELETE: &str = "$SYS.REQ.CLAIMS.DELETE";

/// `$SYS.REQ.SERVER.<id>.RELOAD`.
pub fn reload_subject(server_id: &str) -> String {
    format!("$SYS.REQ.SERVER.{server_id}.RELOAD")
}

/// `$SYS.REQ.SERVER.<id>.KICK`.
pub fn kick_subject(server_id: &str) -> String {
    format!("$SYS.REQ.SERVER.{server_id}.KICK")
}

/// `$SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP`.
pub fn claims_lookup_subject(account_key: &str) -> String {
    format!("$SYS.REQ.ACCOUNT.{account_key}.CLAIMS.LOOKUP")
}

/// A full resolver's answer to CLAIMS.UPDATE or CLAIMS.DELETE (accounts.go ClaimUpdateStatus).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClaimUpdateStatus {
    /// The account the JWT is for (empty for a delete).
    pub account: String,
    pub code: i64,
    /// E.g. `jwt updated`, `deleted 1 accounts`.
    pub message: String,
}

/// One server's answer to CLAIMS.LOOKUP. The answer carries no server identity, so lookups are
/// counted, not attributed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LookupAnswer {
    /// The server's resolver holds this JWT for the account.
    Holds(String),
    /// The server's resolver holds no JWT for the account.
    Absent,
}

impl LookupAnswer {
    pub fn jwt(&self) -> Option<&str> {
        match self {
            LookupAnswer::Holds(j) => Some(j),
            LookupAnswer::Absent => None,
        }
    }
}

#[derive(Serialize)]
struct KickRequest {
    cid: u64,
}

impl Wire {
    /// Asks the server `server_id` to reload its config file. A change the server cannot reload
    /// (one restart-only field rejects the batch) comes back as [`WireError::Refused`] naming the
    /// server and the server's reason.
    pub async fn reload(&self, server_id: &str) -> Result<ServerInfo, WireError> {
        let subject = reload_subject(server_id);
        let reply = self
            .sys_request::<serde_json::Value>(&subject, Bytes::new(), server_id)
            .await?;
        Ok(reply.server)
    }

    /// Disconnects client `cid` (a CONNZ `cid`) on the server `server_id`; an unknown cid comes
    /// back as [`WireError::Refused`].
    pub async fn kick(&self, server_id: &str, cid: u64) -> Result<ServerInfo, WireError> {
        let subject = kick_subject(server_id);
        let reply = self
            .sys_request::<serde_json::Value>(&subject, json_body(&KickRequest { cid }), server_id)
            .await?;
        Ok(reply.server)
    }

    /// Pushes an account JWT to every server's resolver. Every server with a full resolver answers
    /// for itself; `failures` holds the ones that refused it (e.g. an invalid signature).
    pub async fn claims_update(
        &self,
        account_jwt: &str,
        collect: Collect,
    ) -> Result<PingReplies<ClaimUpdateStatus>, WireError> {
        self.ping(
            CLAIMS_UPDATE,
            Bytes::copy_from_slice(account_jwt.as_bytes()),
            collect,
        )
        .await
    }

    /// Deletes accounts from every server's resolver. `delete_request_jwt` is the generic JWT the
    /// NATS operator signs over `{"accounts": [...]}` (accounts.go handleDeleteRequest); servers
    /// need `allow_delete` on their resolver.
    pub async fn claims_delete(
        &self,
        delete_request_jwt: &str,
        collect: Collect,
    ) -> Result<PingReplies<ClaimUpdateStatus>, WireError> {
        self.ping(
            CLAIMS_DELETE,
            Bytes::copy_from_slice(delete_request_jwt.as_bytes()),
            collect,
        )
        .await
    }

    /// Asks every server's resolver which JWT it holds for `account_key`, one answer per server.
    pub async fn claims_lookup(
        &self,
        account_key: &str,
        collect: Collect,
    ) -> Result<Vec<LookupAnswer>, WireError> {
        let subject = claims_lookup_subject(account_key);
        let bodies = self.ping_raw(&subject, Bytes::new(), collect).await?;
        Ok(bodies
            .into_iter()
            .map(|b| {
                if b.is_empty() {
                    LookupAnswer::Absent
                } else {
                    LookupAnswer::Holds(String::from_utf8_lossy(&b).into_owned())
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects() {
        assert_eq!(reload_subject("NID"), "$SYS.REQ.SERVER.NID.RELOAD");
        assert_eq!(kick_subject("NID"), "$SYS.REQ.SERVER.NID.KICK");
        assert_eq!(
            claims_lookup_subject("AKEY"),
            "$SYS.REQ.ACCOUNT.AKEY.CLAIMS.LOOKUP"
        );
    }

    #[test]
    fn kick_body() {
        assert_eq!(&json_body(&KickRequest { cid: 7 })[..], br#"{"cid":7}"#);
    }
}
