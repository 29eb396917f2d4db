//! Trust roots the sim signs for a scenario whose NatsClusters run under an operator
//! (`topology.trust: generated`): an operator, its system account with one system user (the
//! cluster controller's credentials), and a workload account with JetStream and one user whose
//! credentials the scenario's traffic connects with.
//!
//! The manifests name them as variables, each a quoted YAML scalar: `${trust.operator_jwt}`,
//! `${trust.system_account}`, `${trust.system_account_jwt}`, `${trust.system_creds}`,
//! `${trust.account}` and `${trust.account_jwt}` — enough for a literal NatsOperatorTrust, a
//! literal NatsAccountTrust the servers preload (no auth controller needed to push it) and
//! the Secret of `auth.systemCredentials`.
//!
//! [`Roots`] is the part every operator-mode test starts from (an operator, its system account,
//! accounts signed by it, users' creds), so no test signs its own by hand.

use std::collections::BTreeMap;

use nats_claims::{
    AccountClaims, Creds, JetStreamLimits, KeyKind, NKey, NO_LIMIT, OperatorClaims, UserClaims,
};

/// The signed trust roots and credentials.
#[derive(Clone)]
pub struct GeneratedTrust {
    /// Manifest variables (`trust.*`), each value a quoted scalar.
    pub vars: BTreeMap<String, String>,
    /// The workload user's creds file text.
    pub workload_creds: String,
}

impl std::fmt::Debug for GeneratedTrust {
    // Creds hold seeds: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedTrust")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// An operator and its system account, signed fresh: the trust roots an operator-mode topology
/// boots with.
pub struct Roots {
    pub operator: NKey,
    pub system: NKey,
    pub operator_jwt: String,
    pub system_jwt: String,
}

impl std::fmt::Debug for Roots {
    // The keys are seeds: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Roots")
            .field("operator", &self.operator.public_key())
            .field("system", &self.system.public_key())
            .finish_non_exhaustive()
    }
}

impl Roots {
    /// An operator named `name` with a system account `SYS`.
    pub fn sign(name: &str) -> Result<Roots, nats_claims::Error> {
        let operator = NKey::generate(KeyKind::Operator);
        let system = NKey::generate(KeyKind::Account);
        let operator_jwt = OperatorClaims::new(operator.public_key())
            .name(name)
            .system_account(system.public_key())
            .encode(&operator)?;
        let system_jwt = AccountClaims::new(system.public_key())
            .name("SYS")
            .encode(&operator)?;
        Ok(Roots {
            operator,
            system,
            operator_jwt,
            system_jwt,
        })
    }

    /// A fresh account named `name` signed by the operator: its key and JWT.
    pub fn account(&self, name: &str) -> Result<(NKey, String), nats_claims::Error> {
        let key = NKey::generate(KeyKind::Account);
        let jwt = AccountClaims::new(key.public_key())
            .name(name)
            .encode(&self.operator)?;
        Ok((key, jwt))
    }

    /// The operator mode servers boot with: the system account preloaded, and `accounts`
    /// (public key, JWT) besides.
    pub fn operator_mode(&self, accounts: &[(String, String)]) -> crate::OperatorMode {
        let mut preload = vec![(self.system.public_key(), self.system_jwt.clone())];
        preload.extend_from_slice(accounts);
        crate::OperatorMode {
            operator_jwt: self.operator_jwt.clone(),
            system_account: self.system.public_key(),
            preload,
        }
    }
}

/// Signs a fresh operator, system account, system user, workload account and workload user.
pub fn generate() -> Result<GeneratedTrust, String> {
    let fail = |what: &str, e: nats_claims::Error| format!("signing the {what}: {e}");
    let roots = Roots::sign("sim").map_err(|e| fail("trust roots", e))?;
    let account = NKey::generate(KeyKind::Account);
    let account_jwt = AccountClaims::new(account.public_key())
        .name("APP")
        .jetstream(JetStreamLimits {
            memory_storage: NO_LIMIT,
            disk_storage: NO_LIMIT,
            streams: NO_LIMIT,
            consumer: NO_LIMIT,
            ..Default::default()
        })
        .encode(&roots.operator)
        .map_err(|e| fail("workload account JWT", e))?;
    let system_creds =
        user_creds(&roots.system, "cluster-controller").map_err(|e| fail("system user", e))?;
    let workload_creds = user_creds(&account, "app").map_err(|e| fail("workload user", e))?;
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let vars = [
        ("trust.operator_jwt", q(&roots.operator_jwt)),
        ("trust.system_account", q(&roots.system.public_key())),
        ("trust.system_account_jwt", q(&roots.system_jwt)),
        ("trust.system_creds", q(&system_creds)),
        ("trust.account", q(&account.public_key())),
        ("trust.account_jwt", q(&account_jwt)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Ok(GeneratedTrust {
        vars,
        workload_creds,
    })
}

/// A fresh user of `account` named `name`, as a creds file.
pub fn user_creds(account: &NKey, name: &str) -> Result<String, nats_claims::Error> {
    let user = NKey::generate(KeyKind::User);
    let jwt = UserClaims::new(user.public_key())
        .name(name)
        .encode(account)?;
    Ok(Creds::render_key(&jwt, &user)?.expose().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variable_is_a_quoted_scalar_and_the_jwts_chain_to_the_operator() {
        let t = generate().expect("signed");
        let get = |k: &str| -> String {
            serde_json::from_str(&t.vars[k]).unwrap_or_else(|e| panic!("{k}: {e}"))
        };
        let op: OperatorClaims = nats_claims::decode(&get("trust.operator_jwt")).expect("operator");
        assert_eq!(op.nats.system_account, get("trust.system_account"));
        let sys: AccountClaims =
            nats_claims::decode(&get("trust.system_account_jwt")).expect("system account");
        assert_eq!(sys.subject, get("trust.system_account"));
        assert_eq!(sys.issuer, op.subject);
        let app: AccountClaims = nats_claims::decode(&get("trust.account_jwt")).expect("account");
        assert_eq!(app.subject, get("trust.account"));
        assert!(app.nats.limits.jetstream.is_enabled(), "JetStream on");
        assert!(get("trust.system_creds").contains("BEGIN NATS USER JWT"));
        assert!(t.workload_creds.contains("BEGIN USER NKEY SEED"));
        assert!(!format!("{t:?}").contains("SEED"), "Debug hides the seeds");
    }
}
