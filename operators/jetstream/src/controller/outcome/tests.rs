use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use rstest::rstest;

fn terminal(reason: &str) -> SyncStatus {
    SyncStatus {
        observed_generation: Some(1),
        conditions: vec![Condition {
            type_: condition::TERMINAL.into(),
            status: "True".into(),
            reason: reason.into(),
            message: "owned elsewhere".into(),
            observed_generation: Some(1),
            last_transition_time: conditions::now(),
        }],
        ..SyncStatus::default()
    }
}

#[rstest]
#[case::not_terminal_goes_on(SyncStatus::default(), TerminalPolicy::Hold, false, None)]
#[case::terminal_is_held_until_an_edit(
    terminal("OwnedByOther"),
    TerminalPolicy::Hold,
    false,
    Some(reason::OWNED_BY_OTHER)
)]
#[case::an_edit_rechecks_it(terminal("OwnedByOther"), TerminalPolicy::Hold, true, None)]
#[case::retry_rechecks_it_on_a_resync(terminal("NotFound"), TerminalPolicy::Retry, false, None)]
#[case::a_reason_of_its_own_is_kept(
    terminal("NotABucket"),
    TerminalPolicy::Hold,
    false,
    Some(reason::NOT_A_BUCKET)
)]
#[case::an_unknown_reason_reads_rejected(
    terminal("Edited"),
    TerminalPolicy::Hold,
    false,
    Some(reason::REJECTED)
)]
fn a_terminal_resource_is_held_until_its_spec_is_edited(
    #[case] previous: SyncStatus,
    #[case] policy: TerminalPolicy,
    #[case] spec_edited: bool,
    #[case] held: Option<&str>,
) {
    match (hold(&previous, policy, spec_edited), held) {
        (Ok(()), None) => {}
        (Err(Stop::Held(d)), Some(reason)) => {
            assert_eq!(d.reason, reason);
            assert_eq!((d.type_, d.status), (condition::TERMINAL, true));
            assert_eq!(d.message, "owned elsewhere");
        }
        (got, want) => panic!("got {got:?}, want held {want:?}"),
    }
}

#[rstest]
#[case::owned_by_other(
    TerminalReason::OwnedByOther,
    Found::OwnedByOther("u-2".into()),
    "stream ORDERS is owned by another resource (UID u-2)"
)]
#[case::adopt_finds_nothing(
    TerminalReason::NotFound,
    Found::Absent,
    "stream ORDERS does not exist; adoptionPolicy Adopt requires it"
)]
#[case::never_finds_it_unowned(
    TerminalReason::ExistsUnowned,
    Found::Unowned,
    "stream ORDERS exists and carries no ownership marker; adoptionPolicy Never"
)]
fn a_terminal_plan_says_why(#[case] t: TerminalReason, #[case] found: Found, #[case] want: &str) {
    assert_eq!(terminal_message("stream ORDERS", t, &found), want);
}

#[test]
fn a_write_reads_ready_with_its_synced_and_adopted_in_order() {
    let written = Written::in_sync(serde_json::json!({"config": {}}), "stream ORDERS")
        .adopted("adopted".into(), None);
    let o = written.outcome(
        Plan::LateInitialize,
        None,
        "stream ORDERS",
        ServerState::default(),
    );
    let types: Vec<_> = o.conditions.iter().map(|c| (c.type_, c.status)).collect();
    assert_eq!(
        types,
        vec![
            (condition::READY, true),
            (condition::SYNCED, true),
            (condition::ADOPTED, true)
        ]
    );
    assert_eq!(o.conditions[0].message, "stream ORDERS matches spec");
    assert!(o.compared);
}

fn unanswered(kind: async_nats::RequestErrorKind) -> crate::jsapi::JsApiError {
    crate::jsapi::JsApiError::Request {
        subject: "$JS.API.CONSUMER.CREATE.ORDERS".into(),
        source: kind.into(),
    }
}

#[rstest]
#[case::timed_out(
    unanswered(async_nats::RequestErrorKind::TimedOut),
    "NotReady SyncFailed"
)]
#[case::no_responders(
    unanswered(async_nats::RequestErrorKind::NoResponders),
    "NotReady SyncFailed"
)]
#[case::refused_by_the_server(
    crate::jsapi::JsApiError::Refused {
        subject: "$JS.API.CONSUMER.CREATE.ORDERS".into(),
        code: 400,
        err_code: 10012,
        description: "consumer config invalid".into(),
    },
    "Refused Rejected"
)]
#[case::a_reply_that_is_not_json(
    crate::jsapi::JsApiError::BadReply {
        subject: "$JS.API.CONSUMER.CREATE.ORDERS".into(),
        reason: "EOF".into(),
    },
    "Refused Rejected"
)]
fn an_unanswered_write_is_tried_again_and_a_refused_one_waits(
    #[case] e: crate::jsapi::JsApiError,
    #[case] want: &str,
) {
    let got = match Stop::unwritten(format!("writing consumer audit: {e}"), &e) {
        Stop::NotReady(b) => format!("NotReady {}", b.reason),
        Stop::Refused(b) => format!("Refused {}", b.reason),
        other => format!("{other:?}"),
    };
    assert_eq!(got, want);
}
