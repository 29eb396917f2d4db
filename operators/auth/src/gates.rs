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
    use super::*;
    use controller_kit::conditions::{Desired, now, upsert};
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
        upsert(
            &mut c,
            &Desired::new(
                condition::REVOCATIONS_UNRECOVERED,
                unrecovered,
                reason::RECOVERING_REVOCATIONS,
                "",
            ),
            Some(1),
            &now(),
        );
        assert_eq!(may_push_system_account(&c), may);
    }

    #[test]
    fn retiring_keys_in_use() {
        let retiring = vec!["AOLD".to_string(), "AGONE".to_string()];
        assert_eq!(retiring_in_use(&retiring, ["ANEW", "AOLD"]), ["AOLD"]);
        assert!(retiring_in_use(&retiring, ["ANEW"]).is_empty());
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
