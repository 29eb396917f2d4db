//! The conditions that hold signing or pushing: no system connection (§5.2), the system account
//! under RevocationsUnrecovered (§5.2), retiring signing keys still in use (§5.1 rotation), and
//! an adopted account whose JWT carries claims the controller cannot sign again (adoption).

use nats_api::auth::{DroppedClaims, condition, reason};

/// Distributed False, reason NoSystemConnection, for every account and user, where the
/// controller runs without --system-connection: nothing is pushed, no deleted user is kicked.
pub fn distributed_without_connection(has_system_connection: bool) -> Option<(bool, &'static str)> {
    (!has_system_connection).then_some((false, reason::NO_SYSTEM_CONNECTION))
}

/// The system account JWT is not pushed while its NatsOperator reads RevocationsUnrecovered True.
pub fn may_push_system_account(
    operator_conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> bool {
    !controller_kit::conditions::is_true(operator_conditions, condition::REVOCATIONS_UNRECOVERED)
}

/// Whether an adopted account (keys brought from elsewhere, never pushed from here) must wait
/// with its push: only once the servers were asked which JWT they hold can the adoption rule
/// compare it, and a push in a pass that could not ask would overwrite a richer JWT unjudged
/// (seen in a gate run: the lookup failed, the push of the same pass got through). Without a
/// system connection nothing is pushed anyway.
pub fn push_waits_for_lookup(adopted_unpushed: bool, asked: bool, connection: bool) -> bool {
    adopted_unpushed && connection && !asked
}

/// The retiring signing keys that still signed something live (RetiringKeysInUse): a retiring
/// key is removed only after everything it signed was re-signed with another.
pub fn retiring_in_use<'a>(
    retiring: &'a [String],
    issuers_in_use: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let in_use: Vec<&str> = issuers_in_use.into_iter().collect();
    retiring
        .iter()
        .filter(|k| in_use.contains(&k.as_str()))
        .cloned()
        .collect()
}

/// The fields of an adopted account's current JWT (the one the servers hold) that re-signing it
/// from spec as `new_jwt` (signed, not yet pushed) would drop, as JSON paths (`nats.mappings`, …).
pub fn dropped_by_resign(
    current_jwt: &str,
    new_jwt: &str,
) -> Result<Vec<String>, nats_claims::Error> {
    let new: nats_claims::AccountClaims = nats_claims::decode(new_jwt)?;
    Ok(nats_claims::RawToken::parse(current_jwt)?.dropped_fields(&new))
}

/// Adopting an account whose JWT has fields the controller would drop when it re-signs from spec:
/// refused (reason AdoptionDropsClaims) unless spec.adoption.droppedClaims is Accept.
pub fn adoption(dropped_fields: &[String], policy: DroppedClaims) -> Result<(), String> {
    if dropped_fields.is_empty() || policy == DroppedClaims::Accept {
        Ok(())
    } else {
        Err(format!(
            "{}: re-signing from spec would drop {}",
            reason::ADOPTION_DROPS_CLAIMS,
            dropped_fields.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    #[rstest::rstest]
    #[case::adopted_not_asked(true, false, true, true)]
    #[case::adopted_asked(true, true, true, false)]
    #[case::adopted_no_connection(true, false, false, false)]
    #[case::pushed_before(false, false, true, false)]
    fn an_adopted_account_is_pushed_only_after_the_servers_were_asked(
        #[case] adopted_unpushed: bool,
        #[case] asked: bool,
        #[case] connection: bool,
        #[case] waits: bool,
    ) {
        assert_eq!(
            super::push_waits_for_lookup(adopted_unpushed, asked, connection),
            waits
        );
    }

    use super::*;
    use controller_kit::conditions::{Decided, now};
    use rstest::rstest;

    #[rstest]
    #[case::with_connection(true, None)]
    #[case::without_connection(false, Some((false, "NoSystemConnection")))]
    fn no_system_connection(#[case] has: bool, #[case] want: Option<(bool, &str)>) {
        assert_eq!(distributed_without_connection(has), want);
    }

    #[rstest]
    #[case::recovered(false, true)]
    #[case::revocations_unrecovered(true, false)]
    fn system_account_push_gate(#[case] unrecovered: bool, #[case] may: bool) {
        let mut c = vec![];
        Decided::new(
            condition::REVOCATIONS_UNRECOVERED,
            unrecovered,
            reason::RECOVERING_REVOCATIONS,
            "",
        )
        .upsert(&mut c, Some(1), &now());
        assert_eq!(may_push_system_account(&c), may);
    }

    #[test]
    fn retiring_keys_in_use() {
        let retiring = vec!["AOLD".to_string(), "AGONE".to_string()];
        assert_eq!(retiring_in_use(&retiring, ["ANEW", "AOLD"]), ["AOLD"]);
        assert!(retiring_in_use(&retiring, ["ANEW"]).is_empty());
    }

    #[test]
    fn resigning_from_spec_drops_what_the_spec_cannot_say() {
        use nats_claims::{AccountClaims, KeyKind, NKey, WeightedMapping};
        let op = NKey::generate(KeyKind::Operator);
        let acct = NKey::generate(KeyKind::Account).public_key();
        let mut old = AccountClaims::new(acct.clone()).name("legacy");
        old.nats.mappings.insert(
            "legacy.>".into(),
            vec![WeightedMapping {
                subject: "orders.>".into(),
                weight: 100,
                cluster: String::new(),
            }],
        );
        let old_jwt = old.encode(&op).unwrap();
        let new = AccountClaims::new(acct).name("orders").encode(&op).unwrap();
        let dropped = dropped_by_resign(&old_jwt, &new).unwrap();
        assert!(
            dropped.iter().any(|d| d.contains("mappings")),
            "{dropped:?}"
        );
        let same = dropped_by_resign(&new, &new).unwrap();
        assert!(same.is_empty(), "{same:?}");
    }

    #[rstest]
    #[case::nothing_dropped(&[], DroppedClaims::Refuse, true)]
    #[case::dropped_and_refused(&["nats.mappings"], DroppedClaims::Refuse, false)]
    #[case::dropped_and_accepted(&["nats.mappings"], DroppedClaims::Accept, true)]
    fn adoption_of_dropped_claims(
        #[case] dropped: &[&str],
        #[case] policy: DroppedClaims,
        #[case] ok: bool,
    ) {
        let d: Vec<String> = dropped.iter().map(|s| s.to_string()).collect();
        assert_eq!(adoption(&d, policy).is_ok(), ok);
    }
}
