//! The evacuation's rules, row by row against the sentences of §6.6.

use nats_wire::jsapi::{MetaGroup, MetaPeer};

use super::*;
use crate::system_view::ServerSeen;

/// No move refused lately.
fn none() -> BTreeSet<(String, String)> {
    BTreeSet::new()
}

fn server(name: &str, cluster: &str, tags: &[&str]) -> ServerSeen {
    ServerSeen {
        name: name.into(),
        cluster: cluster.into(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
    }
}

fn group(stream: &str, cluster: &str, members: &[&str]) -> GroupSeen {
    GroupSeen {
        account: "APP".into(),
        stream: stream.into(),
        cluster: cluster.into(),
        leader: members.first().map(|m| m.to_string()).unwrap_or_default(),
        peers: members.iter().skip(1).map(|m| m.to_string()).collect(),
        replicas: members.len().max(1),
        ..Default::default()
    }
}

fn meta(peers: &[(&str, bool)]) -> MetaGroup {
    MetaGroup {
        leader_cluster: "west".into(),
        leader: peers[0].0.into(),
        peers: peers
            .iter()
            .map(|(n, offline)| MetaPeer {
                name: n.to_string(),
                offline: *offline,
                current: !offline,
                ..Default::default()
            })
            .collect(),
        cluster_size: peers.len() as i64,
    }
}

/// Two NATS clusters of two servers: east-0/1 (region:east), west-0/1 (region:west); the meta
/// group of all four, none offline.
fn view(groups: Vec<GroupSeen>) -> SystemView {
    SystemView {
        servers: vec![
            server("east-0", "east", &["region:east"]),
            server("east-1", "east", &["region:east"]),
            server("west-0", "west", &["region:west"]),
            server("west-1", "west", &["region:west"]),
        ],
        meta: Some(meta(&[
            ("west-0", false),
            ("west-1", false),
            ("east-0", false),
            ("east-1", false),
        ])),
        meta_leader: Some("west-0".into()),
        groups,
    }
}

fn tags(t: &[&str]) -> Vec<String> {
    t.iter().map(|s| s.to_string()).collect()
}

fn req(stream: &str) -> RequestedMove {
    RequestedMove {
        account: "APP".into(),
        stream: stream.into(),
        time: None,
    }
}

fn owner(kind: &str, name: &str, uid: &str, cluster: Option<&str>) -> Owner {
    Owner {
        kind: kind.into(),
        namespace: "apps".into(),
        name: name.into(),
        uid: uid.into(),
        placement_cluster: cluster.map(String::from),
    }
}

#[test]
fn it_refuses_to_start_while_a_source_server_carries_the_target_tags() {
    let mut v = view(Vec::new());
    v.servers[1].tags.push("tier:fast".into());
    for (target, refused) in [
        (vec!["region:west"], None),
        (vec!["region:east"], Some("east-0, east-1")),
        (vec!["tier:fast"], Some("east-1")),
        // Carrying only one of two target tags cannot be chosen: no refusal.
        (vec!["tier:fast", "region:west"], None),
        (vec!["REGION:EAST"], Some("east-0, east-1")),
    ] {
        let got = refusal(&v, "east", &tags(&target));
        match refused {
            None => assert_eq!(got, None, "{target:?}"),
            Some(names) => {
                let m = got.unwrap_or_else(|| panic!("{target:?} is refused"));
                assert!(m.contains(&format!("server {names} of east")), "{m}");
            }
        }
    }
}

#[test]
fn it_holds_while_a_server_is_down_or_the_meta_group_leaderless() {
    let on_east = group("S", "east", &["east-0", "east-1"]);
    let cases: Vec<(&str, SystemView, Option<&str>)> = vec![
        ("all answer", view(vec![on_east.clone()]), None),
        (
            "no meta leader",
            SystemView {
                meta: None,
                ..view(vec![on_east.clone()])
            },
            Some("the meta group has no leader"),
        ),
        (
            "the leader reports a server offline (any NATS cluster)",
            SystemView {
                meta: Some(meta(&[
                    ("west-0", false),
                    ("west-1", true),
                    ("east-0", false),
                    ("east-1", false),
                ])),
                ..view(vec![on_east.clone()])
            },
            Some("reports west-1 offline"),
        ),
        (
            "a source server holding a copy does not answer",
            {
                let mut v = view(vec![group("S", "east", &["east-0", "east-2"])]);
                v.meta = Some(meta(&[("west-0", false), ("east-0", false)]));
                v
            },
            Some("east-2 did not answer"),
        ),
        (
            "a meta peer does not answer, though not yet offline",
            {
                let mut v = view(vec![on_east.clone()]);
                v.servers.retain(|s| s.name != "east-1");
                v
            },
            Some("east-1 did not answer"),
        ),
    ];
    for (case, v, want) in cases {
        let got = servers_down(&v, "east");
        match want {
            None => assert_eq!(got, None, "{case}"),
            Some(w) => {
                let m = got.unwrap_or_else(|| panic!("{case}: holds"));
                assert!(m.contains(w), "{case}: {m}");
            }
        }
    }
}

#[test]
fn one_move_at_a_time_in_account_then_name_order() {
    let v = view(vec![
        group("A", "east", &["east-0", "east-1"]),
        group("B", "east", &["east-1", "east-0"]),
        group("W", "west", &["west-0", "west-1"]),
    ]);
    let p = plan(&v, "east", &[], &[], &none());
    assert_eq!(p.next, Some(("APP".into(), "A".into())));
    assert_eq!(p.remaining, 2);
    let p = p.requested(controller_kit::conditions::now());
    assert_eq!(p.remaining, 1);
    assert_eq!(p.in_flight.len(), 1);
    assert_eq!(p.next, None);

    // A in flight: nothing else is requested, B still remains.
    let p = plan(&v, "east", &[], &[req("A")], &none());
    assert_eq!(p.next, None);
    assert_eq!(p.in_flight, vec![req("A")]);
    assert_eq!(p.remaining, 1);
}

/// A stream nats-server refused to move lately (story 11's REQUESTS, whose configured tags
/// `region:east` no `region:west` server carries: "no suitable peers for placement") is passed
/// over, so the rest still move; it remains, and the message names it.
#[test]
fn a_refused_move_holds_back_no_other_stream() {
    let v = view(vec![
        group("A", "east", &["east-0", "east-1"]),
        group("B", "east", &["east-1", "east-0"]),
    ]);
    let refused: BTreeSet<(String, String)> = [("APP".to_string(), "A".to_string())].into();
    let p = plan(&v, "east", &[], &[], &refused);
    assert_eq!(p.next, Some(("APP".into(), "B".into())), "B goes, not A");
    assert_eq!(p.remaining, 2);
    assert_eq!(p.refused, vec![("APP".to_string(), "A".to_string())]);
    // B moved: only A remains, refused, and nothing is asked until it may be again.
    let v = view(vec![
        group("A", "east", &["east-0", "east-1"]),
        group("B", "west", &["west-1", "west-0"]),
    ]);
    let p = plan(&v, "east", &[], &[], &refused);
    assert_eq!((p.next.clone(), p.remaining), (None, 1));
    let r = ready(&p, 1, "east");
    assert_eq!((r.status, r.reason), (false, reason::MOVING));
    assert!(
        r.message
            .contains("nats-server refused moving A of account APP"),
        "{}",
        r.message
    );
    // Once the refusal is old, A is asked again.
    assert_eq!(
        plan(&v, "east", &[], &[], &none()).next,
        Some(("APP".into(), "A".into()))
    );
}

#[test]
fn a_move_is_done_once_off_the_source_and_as_its_config_asks() {
    let cases = [
        (
            "still on the source",
            group("A", "east", &["east-0", "east-1"]),
            false,
        ),
        (
            "growing: old and new peers at once",
            group("A", "east", &["east-0", "east-1", "west-0", "west-1"]),
            false,
        ),
        (
            "placed west but a copy still on east",
            {
                let mut g = group("A", "west", &["west-0", "east-1"]);
                g.replicas = 2;
                g
            },
            false,
        ),
        (
            "off the source, settled",
            group("A", "west", &["west-0", "west-1"]),
            true,
        ),
        (
            "off the source, no leader yet",
            {
                let mut g = group("A", "west", &["west-0", "west-1"]);
                g.leader.clear();
                g
            },
            false,
        ),
    ];
    for (case, g, done) in cases {
        let p = plan(&view(vec![g]), "east", &[], &[req("A")], &none());
        assert_eq!(p.done.len(), usize::from(done), "{case}");
        assert_eq!(p.in_flight.len(), usize::from(!done), "{case}");
        assert_eq!(
            p.remaining, 0,
            "{case}: a requested group never counts as remaining"
        );
    }
    // A requested stream deleted meanwhile: neither done nor in flight.
    let p = plan(&view(Vec::new()), "east", &[], &[req("A")], &none());
    assert_eq!((p.done.len(), p.in_flight.len()), (0, 0));
}

#[test]
fn a_resource_setting_placement_cluster_is_never_moved() {
    let mut pinned_east = group("P", "east", &["east-0", "east-1"]);
    pinned_east.owner = Some("uid-p".into());
    let mut pinned_other = group("Q", "east", &["east-0", "east-1"]);
    pinned_other.owner = Some("uid-q".into());
    let mut owned = group("R", "east", &["east-0", "east-1"]);
    owned.owner = Some("uid-r".into());
    let owners = [
        owner("NatsStream", "p", "uid-p", Some("east")),
        // Pinned elsewhere (a transfer of its owner's in progress): left alone, not listed.
        owner("NatsKeyValue", "q", "uid-q", Some("west")),
        owner("NatsStream", "r", "uid-r", None),
        // Pins the source, but its group is not on the source: not listed.
        owner("NatsStream", "gone", "uid-gone", Some("east")),
    ];
    let p = plan(
        &view(vec![pinned_east, pinned_other, owned]),
        "east",
        &owners,
        &[],
        &none(),
    );
    assert_eq!(p.next, Some(("APP".into(), "R".into())));
    assert_eq!(p.remaining, 1);
    assert_eq!(
        p.pinned,
        vec![PinnedResource {
            kind: "NatsStream".into(),
            namespace: "apps".into(),
            name: "p".into(),
        }]
    );
}

#[test]
fn moved_groups_with_no_resource_naming_the_source_are_stale() {
    let mut stale = group("SCRATCH", "west", &["west-0"]);
    stale.placement_cluster = "east".into();
    let mut owned = group("OWNED", "west", &["west-0"]);
    owned.placement_cluster = "east".into();
    owned.owner = Some("uid-o".into());
    let mut elsewhere = group("OTHER", "west", &["west-0"]);
    elsewhere.placement_cluster = "west".into();
    // Its owner was deleted: the marker names a UID no resource has.
    let mut orphan = group("ORPHAN", "west", &["west-1"]);
    orphan.placement_cluster = "east".into();
    orphan.owner = Some("uid-deleted".into());
    let mut still_east = group("STILL", "east", &["east-0"]);
    still_east.placement_cluster = "east".into();
    let owners = [owner("NatsStream", "owned", "uid-o", Some("east"))];
    let p = plan(
        &view(vec![stale, owned, elsewhere, orphan, still_east]),
        "east",
        &owners,
        &[],
        &none(),
    );
    let names: Vec<&str> = p.stale.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["SCRATCH", "ORPHAN"]);
    assert_eq!(p.next, Some(("APP".into(), "STILL".into())));
}

#[test]
fn ready_reads_moving_then_pinned_then_evacuated() {
    let pinned = vec![PinnedResource {
        kind: "NatsStream".into(),
        namespace: "requests".into(),
        name: "invoices".into(),
    }];
    let cases = [
        (
            EvacuationPlan {
                in_flight: vec![req("A")],
                remaining: 5,
                pinned: pinned.clone(),
                ..Default::default()
            },
            14,
            (false, reason::MOVING),
            "14 of 20 streams moved off east; 1 in flight; NatsStream requests/invoices pinned to east",
        ),
        (
            EvacuationPlan {
                pinned: pinned.clone(),
                ..Default::default()
            },
            19,
            (false, reason::PINNED_RESOURCES_REMAIN),
            "19 streams moved off east; NatsStream requests/invoices set placement.cluster east",
        ),
        (
            EvacuationPlan::default(),
            19,
            (true, reason::EVACUATED),
            "19 streams moved off east; none remains",
        ),
        (
            EvacuationPlan {
                remaining: 1,
                ..Default::default()
            },
            0,
            (false, reason::MOVING),
            "0 of 1 streams moved off east; 0 in flight",
        ),
    ];
    for (p, moved, (status, why), message) in cases {
        let d = ready(&p, moved, "east");
        assert_eq!((d.status, d.reason), (status, why), "{message}");
        assert!(d.message.starts_with(message), "{}", d.message);
    }
}
