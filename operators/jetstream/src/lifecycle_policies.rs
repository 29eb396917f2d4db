//! The lifecycle policies (§6.3) and the Synced report (§6.4) as decisions on observations.
//!
//! adoptionPolicy × who owns the server object → what to do; deletionPolicy × the connection's
//! state × ownership → what deleting the resource does; terminalPolicy → whether a Terminal
//! resource is rechecked; the comparison's outcome → the Synced condition.

use nats_api::jetstream::{AdoptionPolicy, DeletionPolicy, TerminalPolicy, reason};

use crate::drift::Decision;
use crate::ownership::Found;

/// The JetStream object kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// NatsStream.
    Stream,
    /// NatsConsumer.
    Consumer,
    /// NatsKeyValue.
    KeyValue,
    /// NatsObjectStore.
    ObjectStore,
}

impl Kind {
    /// The deletionPolicy when spec omits it: Retain for data (streams, buckets, object
    /// stores), Delete for consumers, which hold only delivery state.
    pub fn default_deletion_policy(self) -> DeletionPolicy {
        match self {
            Kind::Stream | Kind::KeyValue | Kind::ObjectStore => DeletionPolicy::Retain,
            Kind::Consumer => DeletionPolicy::Delete,
        }
    }
}

/// Why a resource is Terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalReason {
    /// An object of this name exists without a marker and adoptionPolicy is Never.
    ExistsUnowned,
    /// The object's marker names another resource.
    OwnedByOther,
    /// adoptionPolicy is Adopt and no object of this name exists.
    NotFound,
}

impl TerminalReason {
    /// The condition reason.
    pub fn reason(self) -> &'static str {
        match self {
            TerminalReason::ExistsUnowned => reason::EXISTS_UNOWNED,
            TerminalReason::OwnedByOther => reason::OWNED_BY_OTHER,
            TerminalReason::NotFound => reason::NOT_FOUND,
        }
    }
}

/// What a reconcile does to the server object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Create the object from spec, with the marker.
    Create,
    /// Compare with spec and correct drift.
    Update,
    /// Write the server's config into spec, then mark the object as owned (Adopt).
    AdoptIntoSpec,
    /// Apply spec with the marker, then fill omitted spec fields from the server (AdoptOrCreate).
    LateInitialize,
    /// Touch nothing; report Terminal with this reason.
    Terminal(TerminalReason),
}

/// adoptionPolicy × what the server holds → the action (§6.3; ACK's semantics).
pub fn plan(adoption: AdoptionPolicy, found: &Found) -> Action {
    use AdoptionPolicy as P;
    match (adoption, found) {
        (_, Found::OwnedByThis) => Action::Update,
        (_, Found::OwnedByOther(_)) => Action::Terminal(TerminalReason::OwnedByOther),
        (P::Never | P::AdoptOrCreate, Found::Absent) => Action::Create,
        (P::Adopt, Found::Absent) => Action::Terminal(TerminalReason::NotFound),
        (P::Never, Found::Unowned) => Action::Terminal(TerminalReason::ExistsUnowned),
        (P::Adopt, Found::Unowned) => Action::AdoptIntoSpec,
        (P::AdoptOrCreate, Found::Unowned) => Action::LateInitialize,
    }
}

/// Whether the action takes over an object that existed before the resource (Adopted=True,
/// reason FoundUnowned; status.ownership.origin Adopted).
pub fn adopts(action: Action) -> bool {
    matches!(action, Action::AdoptIntoSpec | Action::LateInitialize)
}

/// Whether the resource's spec keeps being late-initialized after each apply: AdoptOrCreate fills
/// omitted fields from the server; Never and Adopt leave spec as written (Adopt wrote it whole).
pub fn late_initializes(adoption: AdoptionPolicy) -> bool {
    adoption == AdoptionPolicy::AdoptOrCreate
}

/// The NatsConnection a resource being deleted names, as the controller finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// It exists, is admitted, and can be dialed.
    Usable,
    /// It no longer exists.
    Gone,
    /// It crosses namespaces and no NatsReferenceGrant admits it any more.
    NotGranted,
}

/// What deleting the resource does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleanup {
    /// Delete the object from the server, then drop the finalizer.
    DeleteOnServer,
    /// Leave the object on the server and drop the finalizer.
    Retain,
    /// Drop the finalizer without running the policy or reaching the server: the connection is
    /// gone or no longer granted.
    Release,
}

/// deletionPolicy × connection state × ownership → the cleanup (§6.3). An object this resource does
/// not own is never deleted, whatever the policy.
pub fn on_deletion(policy: DeletionPolicy, connection: ConnectionState, found: &Found) -> Cleanup {
    match (connection, policy, found) {
        (ConnectionState::Gone | ConnectionState::NotGranted, _, _) => Cleanup::Release,
        (ConnectionState::Usable, DeletionPolicy::Delete, Found::OwnedByThis) => {
            Cleanup::DeleteOnServer
        }
        (ConnectionState::Usable, _, _) => Cleanup::Retain,
    }
}

/// Whether deleting the resource reaches the server at all: only deletionPolicy Delete over a
/// usable connection does (to find whether this resource owns the object before deleting it).
/// Retain releases without dialing, so a NatsConnection pointing at nothing reachable never holds
/// a Retain deletion; a Delete deletion held by an unreachable server is released by setting
/// deletionPolicy Retain on the resource being deleted.
pub fn dials_on_deletion(policy: DeletionPolicy, connection: ConnectionState) -> bool {
    policy == DeletionPolicy::Delete && connection == ConnectionState::Usable
}

/// Whether a Terminal resource is reconciled again: after an edit of its spec always; on a resync
/// only under terminalPolicy Retry.
pub fn recheck_terminal(policy: TerminalPolicy, spec_edited: bool) -> bool {
    spec_edited || policy == TerminalPolicy::Retry
}

/// The Synced condition after a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncedReport {
    /// The condition's status.
    pub status: bool,
    /// The condition's reason.
    pub reason: &'static str,
    /// The fields concerned (drifted, corrected or refused).
    pub fields: Vec<String>,
    /// Whether this pass records a DriftCorrected event (one per correction).
    pub drift_corrected_event: bool,
}

/// The Synced report of a pass. An update that follows an edit of spec is the resource doing what
/// it was told (True, MatchesSpec); an update or recreate with spec unchanged corrects drift made
/// out of band (False, DriftCorrected, reported by this one pass: the next pass finds the object
/// in sync and reports True again); a refused change cannot be applied (False, SyncFailed).
pub fn synced(decision: &Decision, spec_edited: bool) -> SyncedReport {
    let report = |status, reason, fields: &Vec<String>, event| SyncedReport {
        status,
        reason,
        fields: fields.clone(),
        drift_corrected_event: event,
    };
    match decision {
        Decision::InSync => report(true, reason::MATCHES_SPEC, &Vec::new(), false),
        Decision::Update(f) | Decision::Recreate(f) if spec_edited => {
            report(true, reason::MATCHES_SPEC, f, false)
        }
        Decision::Update(f) | Decision::Recreate(f) => {
            report(false, reason::DRIFT_CORRECTED, f, true)
        }
        Decision::Refused(f) => report(false, reason::SYNC_FAILED, f, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::jetstream::{
        NatsConsumerSpec, NatsKeyValueSpec, NatsObjectStoreSpec, NatsStreamSpec,
    };
    use rstest::rstest;
    use serde_json::json;

    fn other() -> Found {
        Found::OwnedByOther("someone-else".into())
    }

    #[rstest]
    #[case::never_creates_when_absent(AdoptionPolicy::Never, Found::Absent, Action::Create)]
    #[case::never_updates_its_own(AdoptionPolicy::Never, Found::OwnedByThis, Action::Update)]
    #[case::never_goes_terminal_on_another_owner(
        AdoptionPolicy::Never,
        other(),
        Action::Terminal(TerminalReason::OwnedByOther)
    )]
    #[case::never_goes_terminal_exists_unowned(
        AdoptionPolicy::Never,
        Found::Unowned,
        Action::Terminal(TerminalReason::ExistsUnowned)
    )]
    #[case::adopt_requires_the_object_to_exist(
        AdoptionPolicy::Adopt,
        Found::Absent,
        Action::Terminal(TerminalReason::NotFound)
    )]
    #[case::adopt_updates_once_owned(AdoptionPolicy::Adopt, Found::OwnedByThis, Action::Update)]
    #[case::adopt_never_takes_from_another_owner(
        AdoptionPolicy::Adopt,
        other(),
        Action::Terminal(TerminalReason::OwnedByOther)
    )]
    #[case::adopt_writes_the_config_into_spec(
        AdoptionPolicy::Adopt,
        Found::Unowned,
        Action::AdoptIntoSpec
    )]
    #[case::adopt_or_create_creates_when_absent(
        AdoptionPolicy::AdoptOrCreate,
        Found::Absent,
        Action::Create
    )]
    #[case::adopt_or_create_updates_its_own(
        AdoptionPolicy::AdoptOrCreate,
        Found::OwnedByThis,
        Action::Update
    )]
    #[case::adopt_or_create_never_takes_from_another_owner(
        AdoptionPolicy::AdoptOrCreate,
        other(),
        Action::Terminal(TerminalReason::OwnedByOther)
    )]
    #[case::adopt_or_create_applies_spec_and_late_initializes(
        AdoptionPolicy::AdoptOrCreate,
        Found::Unowned,
        Action::LateInitialize
    )]
    fn adoption_policy_decides_the_action(
        #[case] policy: AdoptionPolicy,
        #[case] found: Found,
        #[case] want: Action,
    ) {
        assert_eq!(plan(policy, &found), want);
    }

    #[rstest]
    #[case::exists_unowned(TerminalReason::ExistsUnowned, "ExistsUnowned")]
    #[case::owned_by_other(TerminalReason::OwnedByOther, "OwnedByOther")]
    #[case::not_found(TerminalReason::NotFound, "NotFound")]
    fn terminal_reasons_are_the_apis(#[case] r: TerminalReason, #[case] text: &str) {
        assert_eq!(r.reason(), text);
    }

    #[rstest]
    #[case::adopt(Action::AdoptIntoSpec, true)]
    #[case::adopt_or_create_of_an_unowned_object(Action::LateInitialize, true)]
    #[case::create(Action::Create, false)]
    #[case::update(Action::Update, false)]
    fn only_taking_over_an_existing_object_is_an_adoption(#[case] a: Action, #[case] want: bool) {
        assert_eq!(adopts(a), want);
    }

    #[rstest]
    #[case::never(AdoptionPolicy::Never, false)]
    #[case::adopt(AdoptionPolicy::Adopt, false)]
    #[case::adopt_or_create(AdoptionPolicy::AdoptOrCreate, true)]
    fn only_adopt_or_create_keeps_late_initializing(#[case] p: AdoptionPolicy, #[case] want: bool) {
        assert_eq!(late_initializes(p), want);
    }

    #[rstest]
    #[case::stream_retains(Kind::Stream, DeletionPolicy::Retain)]
    #[case::key_value_retains(Kind::KeyValue, DeletionPolicy::Retain)]
    #[case::object_store_retains(Kind::ObjectStore, DeletionPolicy::Retain)]
    #[case::consumer_deletes(Kind::Consumer, DeletionPolicy::Delete)]
    fn deletion_policy_defaults_per_kind(#[case] kind: Kind, #[case] want: DeletionPolicy) {
        assert_eq!(kind.default_deletion_policy(), want);
        // The CRD's serde default agrees with the rule.
        let conn = json!({"connectionRef": {"name": "c"}});
        let from_crd = match kind {
            Kind::Stream => {
                serde_json::from_value::<NatsStreamSpec>(conn).map(|s| s.deletion_policy)
            }
            Kind::KeyValue => {
                serde_json::from_value::<NatsKeyValueSpec>(conn).map(|s| s.deletion_policy)
            }
            Kind::ObjectStore => {
                serde_json::from_value::<NatsObjectStoreSpec>(conn).map(|s| s.deletion_policy)
            }
            Kind::Consumer => serde_json::from_value::<NatsConsumerSpec>(
                json!({"connectionRef": {"name": "c"}, "stream": "S"}),
            )
            .map(|s| s.deletion_policy),
        };
        assert_eq!(from_crd.expect("a minimal spec"), want);
    }

    #[rstest]
    #[case::delete_over_a_usable_connection(DeletionPolicy::Delete, ConnectionState::Usable, true)]
    #[case::retain_never_dials(DeletionPolicy::Retain, ConnectionState::Usable, false)]
    #[case::retain_with_the_connection_gone(DeletionPolicy::Retain, ConnectionState::Gone, false)]
    #[case::delete_with_the_connection_gone(DeletionPolicy::Delete, ConnectionState::Gone, false)]
    #[case::delete_no_longer_granted(DeletionPolicy::Delete, ConnectionState::NotGranted, false)]
    fn only_delete_over_a_usable_connection_dials_on_deletion(
        #[case] policy: DeletionPolicy,
        #[case] conn: ConnectionState,
        #[case] want: bool,
    ) {
        assert_eq!(dials_on_deletion(policy, conn), want);
    }

    #[rstest]
    #[case::delete_removes_its_own_object(
        DeletionPolicy::Delete,
        ConnectionState::Usable,
        Found::OwnedByThis,
        Cleanup::DeleteOnServer
    )]
    #[case::retain_keeps_its_own_object(
        DeletionPolicy::Retain,
        ConnectionState::Usable,
        Found::OwnedByThis,
        Cleanup::Retain
    )]
    #[case::delete_never_removes_another_owners_object(
        DeletionPolicy::Delete,
        ConnectionState::Usable,
        other(),
        Cleanup::Retain
    )]
    #[case::delete_never_removes_an_unowned_object(
        DeletionPolicy::Delete,
        ConnectionState::Usable,
        Found::Unowned,
        Cleanup::Retain
    )]
    #[case::delete_of_an_absent_object_just_lets_go(
        DeletionPolicy::Delete,
        ConnectionState::Usable,
        Found::Absent,
        Cleanup::Retain
    )]
    #[case::connection_gone_releases_without_the_policy(
        DeletionPolicy::Delete,
        ConnectionState::Gone,
        Found::OwnedByThis,
        Cleanup::Release
    )]
    #[case::connection_no_longer_granted_releases(
        DeletionPolicy::Delete,
        ConnectionState::NotGranted,
        Found::OwnedByThis,
        Cleanup::Release
    )]
    #[case::retain_with_connection_gone_releases(
        DeletionPolicy::Retain,
        ConnectionState::Gone,
        Found::OwnedByThis,
        Cleanup::Release
    )]
    fn deletion_policy_and_connection_decide_the_cleanup(
        #[case] policy: DeletionPolicy,
        #[case] conn: ConnectionState,
        #[case] found: Found,
        #[case] want: Cleanup,
    ) {
        assert_eq!(on_deletion(policy, conn, &found), want);
    }

    #[rstest]
    #[case::hold_waits_for_an_edit(TerminalPolicy::Hold, false, false)]
    #[case::hold_rechecks_after_an_edit(TerminalPolicy::Hold, true, true)]
    #[case::retry_rechecks_every_resync(TerminalPolicy::Retry, false, true)]
    #[case::retry_rechecks_after_an_edit(TerminalPolicy::Retry, true, true)]
    fn terminal_policy_decides_the_recheck(
        #[case] policy: TerminalPolicy,
        #[case] edited: bool,
        #[case] want: bool,
    ) {
        assert_eq!(recheck_terminal(policy, edited), want);
    }

    fn f(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[rstest]
    #[case::in_sync(Decision::InSync, false, true, "MatchesSpec", false)]
    #[case::out_of_band_edit_corrected(Decision::Update(f(&["maxMsgs"])), false, false, "DriftCorrected", true)]
    #[case::spec_edit_applied_is_not_drift(Decision::Update(f(&["maxMsgs"])), true, true, "MatchesSpec", false)]
    #[case::recreate_after_out_of_band_edit_corrected(Decision::Recreate(f(&["ackPolicy"])), false, false, "DriftCorrected", true)]
    #[case::refused_change(Decision::Refused(f(&["storage"])), false, false, "SyncFailed", false)]
    fn synced_reports_drift_corrected_once_per_correction(
        #[case] decision: Decision,
        #[case] edited: bool,
        #[case] status: bool,
        #[case] reason: &str,
        #[case] event: bool,
    ) {
        let r = synced(&decision, edited);
        assert_eq!(
            (r.status, r.reason, r.drift_corrected_event),
            (status, reason, event)
        );
    }

    #[test]
    fn the_pass_after_a_correction_reports_in_sync_again() {
        let corrected = synced(&Decision::Update(f(&["maxMsgs"])), false);
        let next = synced(&Decision::InSync, false);
        assert_eq!(corrected.reason, "DriftCorrected");
        assert_eq!(
            (next.status, next.reason, next.drift_corrected_event),
            (true, "MatchesSpec", false)
        );
    }
}
