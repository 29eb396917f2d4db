//! §5.3 A deleted user's live connections: found with a system `$SYS.REQ.SERVER.PING.CONNZ`
//! filtered by account and user public key (monitor.go:407-413), each kicked with
//! `$SYS.REQ.SERVER.<id>.KICK` (events.go:62) on the server that holds it.

use nats_wire::PingReplies;
use nats_wire::monitor::Connz;

/// `(server id, cid)` of every connection of `user` among the CONNZ answers. The servers filter
/// already; the key is checked again so a server ignoring the filter kicks no one else.
pub fn targets(replies: &PingReplies<Connz>, user: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = replies
        .replies
        .iter()
        .flat_map(|r| {
            let server = if r.data.server_id.is_empty() {
                r.server.id.clone()
            } else {
                r.data.server_id.clone()
            };
            r.data
                .connections
                .iter()
                .filter(|c| c.authorized_user == user)
                .map(move |c| (server.clone(), c.cid))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The Ready message of a deleted user while its connections are being kicked: how many remain
/// on which servers. None when none remain, so the finalizer may go.
pub fn kicking_message(user: &str, targets: &[(String, u64)]) -> Option<String> {
    if targets.is_empty() {
        return None;
    }
    let mut servers: Vec<&str> = targets.iter().map(|(s, _)| s.as_str()).collect();
    servers.dedup();
    let n = targets.len();
    Some(format!(
        "deleting: kicking {n} connection{} of revoked user {user} on server{} {}",
        if n == 1 { "" } else { "s" },
        if servers.len() == 1 { "" } else { "s" },
        servers.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_wire::monitor::ConnInfo;
    use nats_wire::{Reply, ServerInfo};
    use rstest::rstest;

    fn reply(server: &str, conns: &[(u64, &str)]) -> Reply<Connz> {
        Reply {
            server: ServerInfo {
                id: server.into(),
                ..ServerInfo::default()
            },
            data: Connz {
                server_id: server.into(),
                connections: conns
                    .iter()
                    .map(|(cid, user)| ConnInfo {
                        cid: *cid,
                        authorized_user: user.to_string(),
                        ..ConnInfo::default()
                    })
                    .collect(),
                ..Connz::default()
            },
        }
    }

    #[rstest]
    #[case::one_connection_per_server(vec![reply("N1", &[(4, "UGONE")]), reply("N2", &[(9, "UGONE")])], vec![("N1", 4), ("N2", 9)])]
    #[case::other_users_are_never_kicked(vec![reply("N1", &[(4, "UGONE"), (5, "UOTHER")])], vec![("N1", 4)])]
    #[case::no_connections(vec![reply("N1", &[]), reply("N2", &[])], vec![])]
    fn kick_targets(#[case] replies: Vec<Reply<Connz>>, #[case] want: Vec<(&str, u64)>) {
        let p = PingReplies {
            request: "$SYS.REQ.SERVER.PING.CONNZ".into(),
            replies,
            failures: vec![],
            expected: None,
        };
        let want: Vec<(String, u64)> = want.into_iter().map(|(s, c)| (s.into(), c)).collect();
        assert_eq!(targets(&p, "UGONE"), want);
    }

    #[rstest]
    #[case::none_remain(vec![], None)]
    #[case::one_on_one_server(vec![("N1", 4)], Some("deleting: kicking 1 connection of revoked user UGONE on server N1"))]
    #[case::several_on_two_servers(vec![("N1", 4), ("N1", 7), ("N2", 9)], Some("deleting: kicking 3 connections of revoked user UGONE on servers N1, N2"))]
    fn kicking(#[case] targets: Vec<(&str, u64)>, #[case] want: Option<&str>) {
        let t: Vec<(String, u64)> = targets.into_iter().map(|(s, c)| (s.into(), c)).collect();
        assert_eq!(kicking_message("UGONE", &t).as_deref(), want);
    }
}
