//! §5.3 User presets: the one table of subjects each preset grants. The controller presets grant
//! exactly the subjects their controller requests (as `nats-wire` spells them) and subscribe
//! under their own inbox `_INBOX.<preset>.>` and to the server events their controller listens to,
//! nothing else; docs/permissions.md is rendered from this table.

use nats_api::auth::UserPreset;
use nats_claims::{Permission, Permissions};

/// Every preset, in the order the permissions page lists them.
pub const ALL: [UserPreset; 5] = [
    UserPreset::ClusterController,
    UserPreset::JetStreamController,
    UserPreset::AuthController,
    UserPreset::Readonly,
    UserPreset::Leafnode,
];

/// One subject a preset may publish to, and which request of its controller needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub subject: &'static str,
    pub why: &'static str,
}

const fn g(subject: &'static str, why: &'static str) -> Grant {
    Grant { subject, why }
}

/// The local prefix under which the system account imports an account's jetstream-stepdown
/// export (§5.4): `$JS.<account key>.API`, so the system balancer reaches an account's stepdowns
/// with `Wire::with_js_domain(<account key>)` (see [`stepdown_domain`]).
pub fn stepdown_api_prefix(account_key: &str) -> String {
    format!("$JS.{}.API", stepdown_domain(account_key))
}

/// The "domain" the system balancer dials an account's stepdowns with: the account's public key.
pub fn stepdown_domain(account_key: &str) -> &str {
    account_key
}

const CLUSTER_CONTROLLER: &[Grant] = &[
    g("$SYS.REQ.SERVER.PING.STATSZ", "server roster and liveness"),
    g(
        "$SYS.REQ.SERVER.PING.VARZ",
        "config digest and load time of every server",
    ),
    g(
        "$SYS.REQ.SERVER.PING.JSZ",
        "meta group, Raft groups held (Settled gate, deletion guard)",
    ),
    g(
        "$SYS.REQ.SERVER.PING.HEALTHZ",
        "server health (rollout gate)",
    ),
    g("$SYS.REQ.SERVER.PING.GATEWAYZ", "GatewaysConnected"),
    g("$SYS.REQ.SERVER.PING.LEAFZ", "LeafnodesConnected"),
    g(
        "$SYS.REQ.SERVER.*.VARZ",
        "confirm one server's reload by config_digest and config_load_time",
    ),
    g(
        "$SYS.REQ.SERVER.*.JSZ",
        "Raft groups one server holds before its removal",
    ),
    g("$SYS.REQ.SERVER.*.HEALTHZ", "one server's health"),
    g("$SYS.REQ.SERVER.*.RELOAD", "config reload of one server"),
    g(
        "$JS.API.SERVER.EVACUATE",
        "scale-down and replacement: evacuate a server",
    ),
    g(
        "$JS.API.SERVER.REMOVE",
        "scale-down and replacement: remove a peer",
    ),
    g(
        "$JS.API.META.LEADER.STEPDOWN",
        "step a leaving server down from meta leadership",
    ),
];

const JETSTREAM_CONTROLLER: &[Grant] = &[
    g("$SYS.REQ.SERVER.PING.STATSZ", "server roster (ServersDown)"),
    g(
        "$SYS.REQ.SERVER.PING.JSZ",
        "meta group, streams and leaders per server (balancers, evacuation, Settled)",
    ),
    g(
        "$JS.API.ACCOUNT.STREAM.MOVE.*.*",
        "placement moves and evacuation",
    ),
    g(
        "$JS.API.ACCOUNT.STREAM.CANCEL_MOVE.*.*",
        "cancel pending moves of a deleted evacuation",
    ),
    g(
        "$JS.*.API.STREAM.LEADER.STEPDOWN.*",
        "stream leader moves through an account's jetstream-stepdown export",
    ),
    g(
        "$JS.*.API.CONSUMER.LEADER.STEPDOWN.*.*",
        "consumer leader moves through an account's jetstream-stepdown export",
    ),
];

const AUTH_CONTROLLER: &[Grant] = &[
    g("$SYS.REQ.CLAIMS.UPDATE", "push account JWTs"),
    g(
        "$SYS.REQ.CLAIMS.DELETE",
        "delete accounts (status.deletedAccounts)",
    ),
    g(
        "$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP",
        "status.distribution and revocation recovery",
    ),
    g(
        "$SYS.REQ.SERVER.PING.STATSZ",
        "server roster for status.distribution",
    ),
    g(
        "$SYS.REQ.SERVER.PING.CONNZ",
        "a deleted user's live connections",
    ),
    g("$SYS.REQ.SERVER.*.KICK", "kick a deleted user's connection"),
];

/// The server events the auth controller listens to.
const AUTH_CONTROLLER_EVENTS: &[Grant] = &[
    g(
        nats_wire::events::LAME_DUCK_EVENTS,
        "servers entering lame duck mode: the roster forgets them sooner",
    ),
    g(
        nats_wire::events::SHUTDOWN_EVENTS,
        "servers shutting down: the roster forgets them sooner",
    ),
];

const READONLY: &[Grant] = &[
    g("$JS.API.INFO", "account JetStream usage"),
    g("$JS.API.STREAM.NAMES", "list streams"),
    g("$JS.API.STREAM.LIST", "list streams"),
    g("$JS.API.STREAM.INFO.*", "stream info"),
    g("$JS.API.STREAM.MSG.GET.*", "read a stored message"),
    g("$JS.API.DIRECT.GET.>", "read a stored message directly"),
    g("$JS.API.CONSUMER.NAMES.*", "list consumers"),
    g("$JS.API.CONSUMER.LIST.*", "list consumers"),
    g("$JS.API.CONSUMER.INFO.*.*", "consumer info"),
];

/// The subjects `preset` may publish to.
pub fn publish(preset: UserPreset) -> &'static [Grant] {
    match preset {
        UserPreset::ClusterController => CLUSTER_CONTROLLER,
        UserPreset::JetStreamController => JETSTREAM_CONTROLLER,
        UserPreset::AuthController => AUTH_CONTROLLER,
        UserPreset::Readonly => READONLY,
        UserPreset::Leafnode => &[],
    }
}

/// The server events `preset` may subscribe to beyond its inbox.
pub fn events(preset: UserPreset) -> &'static [Grant] {
    match preset {
        UserPreset::AuthController => AUTH_CONTROLLER_EVENTS,
        _ => &[],
    }
}

/// The subjects `preset` may subscribe to: a controller preset its own inbox and its
/// controller's [`events`].
pub fn subscribe(preset: UserPreset) -> Vec<String> {
    match preset.inbox_prefix() {
        Some(inbox) => std::iter::once(format!("{inbox}.>"))
            .chain(events(preset).iter().map(|g| g.subject.to_string()))
            .collect(),
        None => match preset {
            UserPreset::Readonly => vec![">".into()],
            _ => vec![],
        },
    }
}

/// The connection types `preset` allows (none listed: any).
pub fn connection_types(preset: UserPreset) -> &'static [&'static str] {
    match preset {
        UserPreset::Leafnode => &["LEAFNODE", "LEAFNODE_WS"],
        _ => &[],
    }
}

/// The JWT permissions of `preset`. The leafnode preset restricts the connection type only:
/// a leaf carries the whole account across.
pub fn permissions(preset: UserPreset) -> Permissions {
    let publish: Vec<&str> = publish(preset).iter().map(|g| g.subject).collect();
    let subscribe = subscribe(preset);
    Permissions {
        publish: if publish.is_empty() {
            Permission::default()
        } else {
            Permission::allow(publish)
        },
        subscribe: if subscribe.is_empty() {
            Permission::default()
        } else {
            Permission::allow(subscribe)
        },
        response: None,
    }
}

/// docs/permissions.md, rendered from the table above.
pub fn permissions_page() -> String {
    let mut out = String::from(
        "# NATS permissions of the user presets\n\n\
         <!-- Generated from operators/auth/src/presets.rs; `cargo test -p auth-controller` fails when \
         this page drifts. Regenerate with `AUTH_PRESETS_UPDATE_DOCS=1 cargo test -p auth-controller \
         permissions_page`. -->\n\n\
         A NatsUser takes `permissions` or a `preset`. The controller presets (`cluster-controller`, \
         `jetstream-controller`, `auth-controller`) are for users of a NatsSystemAccount: each grants \
         exactly the subjects its controller requests and subscribes only under its own inbox \
         `_INBOX.<preset>.>`, which that controller dials with, so no controller reads another's \
         replies, and to the server events that controller listens to. `readonly` and `leafnode` are for users of a NatsAccount. Anything not listed is \
         refused by the server.\n\n\
         A preset scopes subjects, not NATS clusters: `$JS.API.SERVER.REMOVE` names its peer in the \
         payload, so a cluster-controller user can remove a server from any NATS cluster of the \
         supercluster.\n",
    );
    for preset in ALL {
        out.push_str(&format!("\n## `{}`\n\n", preset.as_str()));
        let grants = publish(preset);
        if grants.is_empty() {
            out.push_str("Publish: any subject of the account.\n");
        } else {
            out.push_str("| Publish | Why |\n|---|---|\n");
            for g in grants {
                out.push_str(&format!("| `{}` | {} |\n", g.subject, g.why));
            }
        }
        let subs = subscribe(preset);
        if subs.is_empty() {
            out.push_str("\nSubscribe: any subject of the account.\n");
        } else {
            let list: Vec<String> = subs.iter().map(|s| format!("`{s}`")).collect();
            out.push_str(&format!("\nSubscribe: {}.\n", list.join(", ")));
        }
        for g in events(preset) {
            out.push_str(&format!("\n`{}`: {}.\n", g.subject, g.why));
        }
        let types = connection_types(preset);
        if !types.is_empty() {
            let list: Vec<String> = types.iter().map(|s| format!("`{s}`")).collect();
            out.push_str(&format!("\nConnection types: {}.\n", list.join(", ")));
        }
    }
    out.push_str(
        "\nThe system account imports each account's `jetstream-stepdown` export under \
         `$JS.<account public key>.API`, so the system balancer moves an account's leaders with \
         `$JS.<key>.API.STREAM.LEADER.STEPDOWN.<stream>` and \
         `$JS.<key>.API.CONSUMER.LEADER.STEPDOWN.<stream>.<consumer>` (nats-wire's \
         `Wire::with_js_domain(<key>)`).\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_wire::monitor::{ping_subject, server_subject};
    use nats_wire::sys::{CLAIMS_DELETE, CLAIMS_UPDATE, claims_lookup_subject, kick_subject};
    use rstest::rstest;

    /// NATS subject matching: `*` one token, `>` the rest.
    pub(crate) fn matches(pattern: &str, subject: &str) -> bool {
        let mut p = pattern.split('.');
        let mut s = subject.split('.');
        loop {
            match (p.next(), s.next()) {
                (Some(">"), Some(_)) => return true,
                (Some("*"), Some(_)) => {}
                (Some(a), Some(b)) if a == b => {}
                (None, None) => return true,
                _ => return false,
            }
        }
    }

    fn allowed(preset: UserPreset, subject: &str) -> bool {
        publish(preset).iter().any(|g| matches(g.subject, subject))
    }

    // Subjects as the controllers' requests spell them (nats-wire), each preset's own.
    #[rstest]
    #[case::cluster_statsz_ping(UserPreset::ClusterController, ping_subject("STATSZ"), true)]
    #[case::cluster_reload(
        UserPreset::ClusterController,
        nats_wire::sys::reload_subject("NSRV1"),
        true
    )]
    #[case::cluster_varz_of_one_server(
        UserPreset::ClusterController,
        server_subject("NSRV1", "VARZ"),
        true
    )]
    #[case::cluster_server_remove(
        UserPreset::ClusterController,
        "$JS.API.SERVER.REMOVE".to_string(),
        true
    )]
    #[case::cluster_cannot_push_claims(UserPreset::ClusterController, CLAIMS_UPDATE.to_string(), false)]
    #[case::cluster_cannot_kick(UserPreset::ClusterController, kick_subject("NSRV1"), false)]
    #[case::jetstream_stream_move(
        UserPreset::JetStreamController,
        "$JS.API.ACCOUNT.STREAM.MOVE.AACC.ORDERS".to_string(),
        true
    )]
    #[case::jetstream_cancel_move(
        UserPreset::JetStreamController,
        "$JS.API.ACCOUNT.STREAM.CANCEL_MOVE.AACC.ORDERS".to_string(),
        true
    )]
    #[case::jetstream_stepdown_through_import(
        UserPreset::JetStreamController,
        format!("{}.STREAM.LEADER.STEPDOWN.ORDERS", stepdown_api_prefix("AACC")),
        true
    )]
    #[case::jetstream_cannot_reload(
        UserPreset::JetStreamController,
        nats_wire::sys::reload_subject("NSRV1"),
        false
    )]
    #[case::jetstream_cannot_remove_servers(
        UserPreset::JetStreamController,
        "$JS.API.SERVER.REMOVE".to_string(),
        false
    )]
    #[case::auth_claims_update(UserPreset::AuthController, CLAIMS_UPDATE.to_string(), true)]
    #[case::auth_claims_delete(UserPreset::AuthController, CLAIMS_DELETE.to_string(), true)]
    #[case::auth_claims_lookup(UserPreset::AuthController, claims_lookup_subject("AACC"), true)]
    #[case::auth_connz_ping(UserPreset::AuthController, ping_subject("CONNZ"), true)]
    #[case::auth_kick(UserPreset::AuthController, kick_subject("NSRV1"), true)]
    #[case::auth_cannot_reload(
        UserPreset::AuthController,
        nats_wire::sys::reload_subject("NSRV1"),
        false
    )]
    #[case::auth_cannot_move_streams(
        UserPreset::AuthController,
        "$JS.API.ACCOUNT.STREAM.MOVE.AACC.ORDERS".to_string(),
        false
    )]
    #[case::readonly_stream_info(UserPreset::Readonly, "$JS.API.STREAM.INFO.ORDERS".to_string(), true)]
    #[case::readonly_cannot_create_streams(
        UserPreset::Readonly,
        "$JS.API.STREAM.CREATE.ORDERS".to_string(),
        false
    )]
    #[case::readonly_cannot_publish_data(UserPreset::Readonly, "orders.new".to_string(), false)]
    fn a_preset_grants_its_controllers_requests_only(
        #[case] preset: UserPreset,
        #[case] subject: String,
        #[case] want: bool,
    ) {
        assert_eq!(allowed(preset, &subject), want, "{subject}");
    }

    #[rstest]
    #[case::cluster_controller(UserPreset::ClusterController, "_INBOX.cluster-controller.>")]
    #[case::jetstream_controller(UserPreset::JetStreamController, "_INBOX.jetstream-controller.>")]
    #[case::auth_controller(UserPreset::AuthController, "_INBOX.auth-controller.>")]
    fn a_controller_preset_subscribes_only_under_its_inbox_and_to_its_events(
        #[case] preset: UserPreset,
        #[case] inbox: &str,
    ) {
        let want: Vec<String> = std::iter::once(inbox.to_string())
            .chain(events(preset).iter().map(|g| g.subject.to_string()))
            .collect();
        assert_eq!(subscribe(preset), want);
        assert_eq!(
            format!("{}.>", nats_wire::preset_inbox_prefix(preset.as_str())),
            inbox,
            "the dial prefix and the preset's subscribe grant agree"
        );
    }

    #[test]
    fn leafnode_preset_allows_only_leaf_connections() {
        assert_eq!(
            connection_types(UserPreset::Leafnode),
            ["LEAFNODE", "LEAFNODE_WS"]
        );
        assert!(permissions(UserPreset::Leafnode).is_empty());
    }

    #[rstest]
    #[case::star_one_token("$SYS.REQ.SERVER.*.KICK", "$SYS.REQ.SERVER.N1.KICK", true)]
    #[case::star_not_two("$SYS.REQ.SERVER.*.KICK", "$SYS.REQ.SERVER.A.B.KICK", false)]
    #[case::gt_rest("_INBOX.x.>", "_INBOX.x.a.b", true)]
    #[case::gt_needs_a_token("_INBOX.x.>", "_INBOX.x", false)]
    fn subject_matching(#[case] p: &str, #[case] s: &str, #[case] want: bool) {
        assert_eq!(matches(p, s), want);
    }

    #[test]
    fn permissions_page_matches_the_table() {
        let path = sim::checkout::path("docs/permissions.md");
        let page = permissions_page();
        if std::env::var_os("AUTH_PRESETS_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &page).unwrap();
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == page,
            "docs/permissions.md drifted from operators/auth/src/presets.rs; regenerate with AUTH_PRESETS_UPDATE_DOCS=1"
        );
    }
}
