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

/// JetStream with no limits: memory, disk, streams and consumers unbounded.
pub fn unlimited_jetstream() -> JetStreamLimits {
    JetStreamLimits {
        memory_storage: NO_LIMIT,
        disk_storage: NO_LIMIT,
        streams: NO_LIMIT,
        consumer: NO_LIMIT,
        ..Default::default()
    }
}

/// An account named `name` with JetStream and no limits, signed by `roots`' operator.
fn jetstream_account(roots: &Roots, name: &str) -> Result<(NKey, String), nats_claims::Error> {
    let account = NKey::generate(KeyKind::Account);
    let jwt = AccountClaims::new(account.public_key())
        .name(name)
        .jetstream(unlimited_jetstream())
        .encode(&roots.operator)?;
    Ok((account, jwt))
}

/// A sim topology's trust roots (`topology: { servers: .., trust: generated, accounts: [..] }`):
/// what its servers boot with, the system user's creds, and per JetStream account (by name)
/// its user's creds.
pub struct SignedTopology {
    pub operator: crate::OperatorMode,
    pub system_creds: String,
    pub account_creds: BTreeMap<String, String>,
}

impl std::fmt::Debug for SignedTopology {
    // Creds hold seeds: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedTopology")
            .field("accounts", &self.account_creds.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Signs an operator, its system account and user, and one JetStream account with one user per
/// name of `accounts`, every account preloaded into the servers' resolver.
pub fn sign_topology(accounts: &[String]) -> Result<SignedTopology, String> {
    let fail = |what: &str, e: nats_claims::Error| format!("signing the {what}: {e}");
    let roots = Roots::sign("sim").map_err(|e| fail("trust roots", e))?;
    let mut preload = Vec::new();
    let mut account_creds = BTreeMap::new();
    for name in accounts {
        let (key, jwt) =
            jetstream_account(&roots, name).map_err(|e| fail(&format!("account {name}"), e))?;
        let creds = user_creds(&key, &name.to_lowercase())
            .map_err(|e| fail(&format!("user of account {name}"), e))?;
        preload.push((key.public_key(), jwt));
        account_creds.insert(name.clone(), creds);
    }
    Ok(SignedTopology {
        operator: roots.operator_mode(&preload),
        system_creds: user_creds(&roots.system, "sim-system")
            .map_err(|e| fail("system user", e))?,
        account_creds,
    })
}

/// Signs a fresh operator, system account, system user, workload account and workload user.
pub fn generate() -> Result<GeneratedTrust, String> {
    let fail = |what: &str, e: nats_claims::Error| format!("signing the {what}: {e}");
    let roots = Roots::sign("sim").map_err(|e| fail("trust roots", e))?;
    let (account, account_jwt) =
        jetstream_account(&roots, "APP").map_err(|e| fail("workload account JWT", e))?;
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

    #[test]
    fn a_signed_topology_preloads_every_account_with_jetstream_and_gives_each_a_user() {
        let names: Vec<String> = ["A", "B", "C"].iter().map(|s| s.to_string()).collect();
        let t = sign_topology(&names).expect("signed");
        assert_eq!(
            t.operator.preload.len(),
            4,
            "the system account and three more"
        );
        assert_eq!(t.operator.preload[0].0, t.operator.system_account);
        for (key, jwt) in &t.operator.preload[1..] {
            let a: AccountClaims = nats_claims::decode(jwt).expect("account");
            assert_eq!(&a.subject, key);
            assert!(
                a.nats.limits.jetstream.is_enabled(),
                "{} has JetStream",
                a.name
            );
        }
        assert_eq!(t.account_creds.keys().collect::<Vec<_>>(), ["A", "B", "C"]);
        assert!(t.system_creds.contains("BEGIN USER NKEY SEED"));
        assert!(!format!("{t:?}").contains("SEED"), "Debug hides the seeds");
    }
}
