use super::*;
use rstest::rstest;

#[rstest]
#[case::a_live_object_with_what_it_wants_is_applied(true, true, false, Step::Apply)]
#[case::a_live_object_wanting_none_and_having_none_is_applied(false, false, false, Step::Apply)]
#[case::a_live_object_gets_the_finalizer_it_wants_first(false, true, false, Step::AddThenApply)]
#[case::a_live_object_loses_the_finalizer_it_no_longer_wants(
    true,
    false,
    false,
    Step::RemoveThenApply
)]
#[case::a_deletion_with_the_finalizer_runs_the_cleanup(true, true, true, Step::Cleanup)]
#[case::a_deletion_runs_the_cleanup_even_when_no_longer_wanted(true, false, true, Step::Cleanup)]
#[case::a_deletion_without_the_finalizer_is_not_ours_to_hold(false, true, true, Step::Nothing)]
fn the_step_follows_from_has_wants_and_deleting(
    #[case] has: bool,
    #[case] wants: bool,
    #[case] deleting: bool,
    #[case] want: Step,
) {
    assert_eq!(step(has, wants, deleting), want);
}

fn list(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[rstest]
#[case::the_first_finalizer_creates_the_list_while_there_is_none(
    &[],
    json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["ours"]},
    ])
)]
#[case::beside_another_it_appends_while_the_list_is_as_read(
    &["theirs"],
    json!([
        {"op": "test", "path": "/metadata/finalizers", "value": ["theirs"]},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "ours"},
    ])
)]
fn adding_is_guarded_by_the_list_as_read(#[case] finalizers: &[&str], #[case] want: Value) {
    assert_eq!(add_ops(&list(finalizers), "ours"), want);
}

#[rstest]
#[case::alone(&["ours"], Some(json!([
    {"op": "test", "path": "/metadata/finalizers/0", "value": "ours"},
    {"op": "remove", "path": "/metadata/finalizers/0"},
])))]
#[case::after_another_it_removes_only_its_own_index(&["theirs", "ours", "more"], Some(json!([
    {"op": "test", "path": "/metadata/finalizers/1", "value": "ours"},
    {"op": "remove", "path": "/metadata/finalizers/1"},
])))]
#[case::not_there_nothing_is_written(&["theirs"], None)]
fn removing_is_guarded_by_the_entry_at_its_index(
    #[case] finalizers: &[&str],
    #[case] want: Option<Value>,
) {
    assert_eq!(remove_ops(&list(finalizers), "ours"), want);
}

#[test]
fn has_finds_the_finalizer_by_name() {
    let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
    assert!(!has(&cm, "ours"));
    cm.metadata.finalizers = Some(list(&["theirs", "ours"]));
    assert!(has(&cm, "ours"));
    assert!(!has(&cm, "other"));
}

#[test]
fn a_failed_finalizer_write_is_counted_as_finalizer_and_names_the_object() {
    let e = WriteError {
        object: "ConfigMap nats/a".into(),
        finalizer: "ours".into(),
        op: Op::Remove,
        source: kube::Error::LinesCodecMaxLineLengthExceeded,
    };
    assert_eq!(e.metric_label(), "finalizer");
    assert!(
        e.to_string()
            .starts_with("ConfigMap nats/a: removing finalizer ours: "),
        "{e}"
    );
}
