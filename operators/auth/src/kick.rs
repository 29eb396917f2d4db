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
}
