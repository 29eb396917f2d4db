//! What the cluster controller refuses to render, and why (design §4.1, §4.3), as pure
//! decisions over the spec and what the reconciler observed. Each refusal carries the reason a
//! condition reports and how it holds the NatsCluster.

use controller_kit::blocked::Blocked;
use controller_kit::conditions::Decided;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use nats_api::cluster::{NatsClusterSpec, ResolverType, condition, reason};
use nats_api::nats::NatsOperatorTrust;
use nats_claims::{Account, Operator};

use crate::plan::{ResolvedTrust, resolver_type};

/// How a refusal holds the NatsCluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Nothing is rendered: Ready and Progressing read False.
    Refused,
    /// The servers are held until an input changes: Progressing reads True.
    Waiting,
    /// Objects could not be written: Ready reads False.
    Failed,
}

/// A refusal: what blocks the NatsCluster (the kit's [`Blocked`]: the reason a condition
/// reports and a message naming what is wrong) and how it holds it. It reads as its
/// [`Blocked`]: `refusal.reason`, `refusal.message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub blocked: Blocked,
    pub hold: Hold,
}

impl Refusal {
    /// A refusal for `reason`, saying `message`, holding as `hold`.
    pub fn new(reason: &'static str, hold: Hold, message: impl Into<String>) -> Self {
        Self {
            blocked: Blocked::new(reason, message),
            hold,
        }
    }

    /// Progressing for this hold: True while the controller waits, False when it refuses.
    pub fn progressing(&self) -> Decided {
        Decided::new(
            condition::PROGRESSING,
            self.hold == Hold::Waiting,
            self.reason,
            self.message.clone(),
        )
    }
}

impl std::ops::Deref for Refusal {
    type Target = Blocked;

    fn deref(&self) -> &Blocked {
        &self.blocked
    }
}

/// A gateway without TLS is refused unless the controller runs with
/// `--allow-gateway-without-tls`: without a certificate any server could join the supercluster.
pub fn gateway_without_tls(spec: &NatsClusterSpec, allow_without_tls: bool) -> Option<Refusal> {
    let gw = spec.gateway.as_ref()?;
    (gw.tls.is_none() && !allow_without_tls).then(|| {
        Refusal::new(
            reason::GATEWAY_WITHOUT_TLS,
            Hold::Refused,
            "spec.gateway has no tls: gateways have no other authentication, so the controller renders none without --allow-gateway-without-tls",
        )
    })
}

/// A gateway Secret is usable only with ca.crt, which peers are verified against both ways; a
/// certificate from a public issuer (ACME) has none and would admit anyone it issued for.
/// `secret_keys` are the keys of the gateway's Secret, `None` while it does not exist.
pub fn gateway_certificate(
    spec: &NatsClusterSpec,
    secret_name: &str,
    secret_keys: Option<&[&str]>,
) -> Option<Refusal> {
    spec.gateway.as_ref()?.tls.as_ref()?;
    let missing = match secret_keys {
        None => format!("Secret {secret_name} does not exist yet"),
        Some(keys) if !keys.contains(&"ca.crt") => {
            format!("Secret {secret_name} holds no ca.crt to verify gateway peers with")
        }
        Some(keys) => {
            let absent: Vec<&str> = ["tls.crt", "tls.key"]
                .into_iter()
                .filter(|k| !keys.contains(k))
                .collect();
            if absent.is_empty() {
                return None;
            }
            format!("Secret {secret_name} lacks {}", absent.join(", "))
        }
    };
    Some(Refusal::new(
        reason::GATEWAY_CERTIFICATE_NOT_READY,
        Hold::Waiting,
        missing,
    ))
}

/// `spec.auth.systemCredentials` names a Secret that does not exist (`missing`: its
/// namespace/name): the pass waits for it, naming it — not "systemCredentials is not set".
pub fn system_credentials_missing(missing: Option<&str>) -> Option<Refusal> {
    missing.map(|secret| {
        Refusal::new(
            reason::SECRET_NOT_FOUND,
            Hold::Waiting,
            format!("Secret {secret} named by spec.auth.systemCredentials does not exist"),
        )
    })
}

/// The trust roots a NatsCluster boots from, read from its NatsOperatorTrust (`None` when it
/// does not exist): the NATS operator JWT and the system account JWT it signed.
pub fn resolve_trust(
    trust_name: &str,
    trust: Option<&NatsOperatorTrust>,
) -> Result<ResolvedTrust, Refusal> {
    let Some(trust) = trust else {
        return Err(Refusal::new(
            reason::TRUST_NOT_FOUND,
            Hold::Waiting,
            format!("NatsOperatorTrust {trust_name} does not exist"),
        ));
    };
    let Some((operator_jwt, system_jwt)) = trust.jwts() else {
        return Err(Refusal::new(
            reason::TRUST_NOT_READY,
            Hold::Waiting,
            format!("NatsOperatorTrust {trust_name} holds no operator and system account JWTs yet"),
        ));
    };
    let invalid = |what: String| {
        Refusal::new(
            reason::TRUST_INVALID,
            Hold::Waiting,
            format!("NatsOperatorTrust {trust_name}: {what}"),
        )
    };
    let operator = nats_claims::decode::<Operator>(operator_jwt)
        .map_err(|e| invalid(format!("the operator JWT does not decode: {e}")))?;
    let system = nats_claims::decode::<Account>(system_jwt)
        .map_err(|e| invalid(format!("the system account JWT does not decode: {e}")))?;
    if !operator.did_sign(&system.issuer, &system.subject) {
        return Err(invalid(format!(
            "the system account JWT was signed by {}, which is not operator {} nor one of its signing keys",
            system.issuer, operator.subject
        )));
    }
    let named = &operator.nats.system_account;
    if !named.is_empty() && *named != system.subject {
        return Err(invalid(format!(
            "the operator names system account {named}, the system account JWT is for {}",
            system.subject
        )));
    }
    Ok(ResolvedTrust {
        operator_jwt: operator_jwt.into(),
        system_account: system.subject,
        system_account_jwt: system_jwt.into(),
    })
}

/// Adding or removing the auth plane of a running NATS cluster is refused: clients and
/// streams live in the global account on one side and in accounts on the other, and no reload
/// or rollout carries them across. `running_with_auth` is `None` before any server runs.
pub fn auth_change(spec: &NatsClusterSpec, running_with_auth: Option<bool>) -> Option<Refusal> {
    let wanted = spec.auth.is_some();
    let running = running_with_auth?;
    (running != wanted).then(|| {
        let what = if wanted { "adding" } else { "removing" };
        Refusal::new(
            reason::AUTH_CHANGE_BLOCKED,
            Hold::Waiting,
            format!("{what} spec.auth on a running NATS cluster is not supported; create a new NatsCluster"),
        )
    })
}

/// A leaf preloading an account through a literal NatsAccountTrust runs the Full resolver on
/// jetstream.volumeClaimTemplate, so what it synced survives a restart; without one it must set
/// Cache. `literal_preloads` names the literal NatsAccountTrusts it preloads.
pub fn leaf_preload(spec: &NatsClusterSpec, literal_preloads: &[String]) -> Option<Refusal> {
    if !spec.is_leaf() || literal_preloads.is_empty() {
        return None;
    }
    let has_volume = spec
        .jetstream
        .as_ref()
        .is_some_and(|j| j.volume_claim_template.is_some());
    let cache = resolver_type(spec, true) == ResolverType::Cache;
    (!has_volume && !cache).then(|| {
        Refusal::new(
            reason::UNSUPPORTED_SPEC,
            Hold::Refused,
            format!(
                "a leaf preloading accounts through literal NatsAccountTrusts ({}) needs spec.jetstream.volumeClaimTemplate for its Full resolver, or spec.auth.resolver: Cache",
                literal_preloads.join(", ")
            ),
        )
    })
}

/// An existing object of a name the NatsCluster renders.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedObject {
    pub kind: String,
    pub name: String,
    pub owner_references: Vec<OwnerReference>,
}

/// Whether `refs` make the NatsCluster with uid `owner_uid` the object's controller.
pub fn controlled_by(refs: &[OwnerReference], owner_uid: &str) -> bool {
    refs.iter()
        .any(|r| r.controller == Some(true) && r.uid == owner_uid)
}

/// The controller writes no object it does not control; every such object of a rendered name is
/// named, in the order observed.
pub fn foreign_objects(observed: &[ObservedObject], owner_uid: &str) -> Option<Refusal> {
    let foreign: Vec<String> = observed
        .iter()
        .filter(|o| !controlled_by(&o.owner_references, owner_uid))
        .map(|o| format!("{} {}", o.kind, o.name))
        .collect();
    (!foreign.is_empty()).then(|| {
        Refusal::new(
            reason::RECONCILE_FAILED,
            Hold::Failed,
            format!(
                "not controlled by this NatsCluster, left untouched: {}",
                foreign.join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::spec;
    use nats_api::nats::{NatsOperatorTrustSpec, NatsOperatorTrustStatus};
    use nats_claims::{AccountClaims, KeyKind, NKey, OperatorClaims};

    const GW: &str = "version: 2.15.1\nreplicas: 1\nauth: {trustRef: {name: t}}\ngateway: {discovery: Explicit, remotes: [{name: w, url: 'nats://w:7222'}]";

    #[rstest::rstest]
    #[case::no_secret_missing(
        "systemCredentials unset, or its Secret found: nothing waits",
        None,
        None
    )]
    #[case::the_secret_missing(
        "its Secret missing: SecretNotFound naming namespace/name",
        Some("nats/sys-creds"),
        Some("Secret nats/sys-creds named by spec.auth.systemCredentials does not exist")
    )]
    fn a_missing_system_credentials_secret_waits_naming_it(
        #[case] _case: &str,
        #[case] missing: Option<&str>,
        #[case] message: Option<&str>,
    ) {
        let r = system_credentials_missing(missing);
        assert_eq!(r.as_ref().map(|r| r.message.as_str()), message);
        if let Some(r) = r {
            assert_eq!(r.reason, reason::SECRET_NOT_FOUND);
            assert_eq!(r.hold, Hold::Waiting);
        }
    }

    #[rstest::rstest]
    #[case("version: 2.15.1\nreplicas: 1\n", false, None)]
    #[case(&format!("{GW}}}\n"), false, Some(reason::GATEWAY_WITHOUT_TLS))]
    #[case(&format!("{GW}}}\n"), true, None)]
    #[case(&format!("{GW}, tls: {{secretRef: {{name: gw}}}}}}\n"), false, None)]
    fn gateway_without_tls_is_refused_unless_allowed(
        #[case] yaml: &str,
        #[case] allow: bool,
        #[case] want: Option<&str>,
    ) {
        let r = gateway_without_tls(&spec(yaml), allow);
        assert_eq!(r.as_ref().map(|r| r.reason), want);
        if let Some(r) = r {
            assert_eq!(r.hold, Hold::Refused);
        }
    }

    #[rstest::rstest]
    #[case(None, Some("does not exist"))]
    #[case(Some(&["tls.crt", "tls.key"][..]), Some("no ca.crt"))]
    #[case(Some(&["tls.crt", "ca.crt"][..]), Some("lacks tls.key"))]
    #[case(Some(&["tls.crt", "tls.key", "ca.crt"][..]), None)]
    fn a_gateway_secret_without_ca_holds_the_servers(
        #[case] keys: Option<&[&str]>,
        #[case] want: Option<&str>,
    ) {
        let s = spec(&format!("{GW}, tls: {{secretRef: {{name: gw}}}}}}\n"));
        let r = gateway_certificate(&s, "gw", keys);
        assert_eq!(r.is_some(), want.is_some());
        if let (Some(r), Some(w)) = (r, want) {
            assert_eq!(r.reason, reason::GATEWAY_CERTIFICATE_NOT_READY);
            assert_eq!(r.hold, Hold::Waiting);
            assert!(r.message.contains(w), "{}", r.message);
        }
        // No gateway TLS (refused separately): nothing to wait for.
        assert!(gateway_certificate(&spec(&format!("{GW}}}\n")), "gw", None).is_none());
    }

    struct Keys {
        op: NKey,
        sys: NKey,
        other_op: NKey,
    }

    fn keys() -> Keys {
        Keys {
            op: NKey::generate(KeyKind::Operator),
            sys: NKey::generate(KeyKind::Account),
            other_op: NKey::generate(KeyKind::Operator),
        }
    }

    fn literal(op: Option<String>, sys: Option<String>) -> NatsOperatorTrust {
        NatsOperatorTrust::new(
            "t",
            NatsOperatorTrustSpec {
                operator_ref: None,
                operator_jwt: op,
                system_account_jwt: sys,
            },
        )
    }

    #[test]
    fn trust_decisions() {
        let k = keys();
        let op_jwt = OperatorClaims::new(k.op.public_key())
            .system_account(k.sys.public_key())
            .encode(&k.op)
            .expect("op");
        let sys_jwt = AccountClaims::new(k.sys.public_key())
            .encode(&k.op)
            .expect("sys");
        let foreign_sys = AccountClaims::new(k.sys.public_key())
            .encode(&k.other_op)
            .expect("foreign");
        let other_account = NKey::generate(KeyKind::Account);
        let wrong_sys = AccountClaims::new(other_account.public_key())
            .encode(&k.op)
            .expect("wrong");
        let reference_pending = {
            let mut t = NatsOperatorTrust::new(
                "t",
                NatsOperatorTrustSpec {
                    operator_ref: Some(nats_api::common::ObjectReference {
                        name: "op".into(),
                        namespace: None,
                    }),
                    operator_jwt: None,
                    system_account_jwt: None,
                },
            );
            t.status = Some(NatsOperatorTrustStatus::default());
            t
        };

        let cases: Vec<(Option<NatsOperatorTrust>, Option<&str>)> = vec![
            (None, Some(reason::TRUST_NOT_FOUND)),
            (Some(reference_pending), Some(reason::TRUST_NOT_READY)),
            (
                Some(literal(Some("garbage".into()), Some(sys_jwt.clone()))),
                Some(reason::TRUST_INVALID),
            ),
            (
                Some(literal(Some(op_jwt.clone()), Some(foreign_sys))),
                Some(reason::TRUST_INVALID),
            ),
            (
                Some(literal(Some(op_jwt.clone()), Some(wrong_sys))),
                Some(reason::TRUST_INVALID),
            ),
            (
                // An account JWT where the operator's belongs.
                Some(literal(Some(sys_jwt.clone()), Some(sys_jwt.clone()))),
                Some(reason::TRUST_INVALID),
            ),
            (
                Some(literal(Some(op_jwt.clone()), Some(sys_jwt.clone()))),
                None,
            ),
        ];
        for (i, (trust, want)) in cases.into_iter().enumerate() {
            let got = resolve_trust("t", trust.as_ref());
            match (got, want) {
                (Ok(t), None) => {
                    assert_eq!(t.system_account, k.sys.public_key());
                    assert_eq!(t.operator_jwt, op_jwt);
                    assert_eq!(t.system_account_jwt, sys_jwt);
                }
                (Err(r), Some(w)) => {
                    assert_eq!(r.reason, w, "case {i}: {}", r.message);
                    assert!(r.message.contains("NatsOperatorTrust t"), "{}", r.message);
                }
                (got, want) => panic!("case {i}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[rstest::rstest]
    #[case("version: 2.15.1\nreplicas: 1\n", None, None)]
    #[case(
        "version: 2.15.1\nreplicas: 1\nauth: {trustRef: {name: t}}\n",
        None,
        None
    )]
    #[case("version: 2.15.1\nreplicas: 1\n", Some(false), None)]
    #[case(
        "version: 2.15.1\nreplicas: 1\nauth: {trustRef: {name: t}}\n",
        Some(true),
        None
    )]
    #[case(
        "version: 2.15.1\nreplicas: 1\nauth: {trustRef: {name: t}}\n",
        Some(false),
        Some("adding")
    )]
    #[case("version: 2.15.1\nreplicas: 1\n", Some(true), Some("removing"))]
    fn auth_cannot_be_added_or_removed_on_a_running_cluster(
        #[case] yaml: &str,
        #[case] running: Option<bool>,
        #[case] want: Option<&str>,
    ) {
        let r = auth_change(&spec(yaml), running);
        assert_eq!(r.is_some(), want.is_some());
        if let (Some(r), Some(w)) = (r, want) {
            assert_eq!(r.reason, reason::AUTH_CHANGE_BLOCKED);
            assert!(r.message.starts_with(w), "{}", r.message);
        }
    }

    const LEAF: &str =
        "version: 2.15.1\nreplicas: 1\nleafRemotes: [{connectionRef: {name: hub}}]\n";

    #[rstest::rstest]
    // A hub, or a leaf preloading nothing literally: fine.
    #[case(
        "version: 2.15.1\nreplicas: 1\nauth: {trustRef: {name: t}}\n",
        true,
        false
    )]
    #[case(&format!("{LEAF}auth: {{trustRef: {{name: t}}}}\n"), false, false)]
    // A leaf preloading literally, Full resolver, no volume: refused.
    #[case(&format!("{LEAF}auth: {{trustRef: {{name: t}}}}\n"), true, true)]
    #[case(&format!("{LEAF}auth: {{trustRef: {{name: t}}, resolver: Full}}\n"), true, true)]
    // With Cache, or on a volume: fine.
    #[case(&format!("{LEAF}auth: {{trustRef: {{name: t}}, resolver: Cache}}\n"), true, false)]
    #[case(
        &format!("{LEAF}auth: {{trustRef: {{name: t}}}}\njetstream:\n  domain: leaf\n  volumeClaimTemplate: {{spec: {{resources: {{requests: {{storage: 1Gi}}}}}}}}\n"),
        true,
        false
    )]
    fn a_leaf_preloading_literally_needs_a_volume_or_cache(
        #[case] yaml: &str,
        #[case] literal: bool,
        #[case] refused: bool,
    ) {
        let names = if literal {
            vec!["app".to_string()]
        } else {
            vec![]
        };
        let r = leaf_preload(&spec(yaml), &names);
        assert_eq!(r.is_some(), refused, "{r:?}");
        if let Some(r) = r {
            assert_eq!(r.reason, reason::UNSUPPORTED_SPEC);
            assert!(r.message.contains("app"));
        }
    }

    fn oref(uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "cluster.nats.mikluko.io/v1beta1".into(),
            kind: "NatsCluster".into(),
            name: "demo".into(),
            uid: uid.into(),
            controller,
            block_owner_deletion: None,
        }
    }

    fn obj(kind: &str, name: &str, refs: Vec<OwnerReference>) -> ObservedObject {
        ObservedObject {
            kind: kind.into(),
            name: name.into(),
            owner_references: refs,
        }
    }

    #[test]
    fn objects_not_controlled_by_the_cluster_are_named() {
        let observed = vec![
            obj("StatefulSet", "demo-0", vec![oref("mine", Some(true))]),
            obj("Service", "demo", vec![]),
            obj("ConfigMap", "demo-0-config", vec![oref("mine", None)]),
            obj("StatefulSet", "demo-1", vec![oref("other", Some(true))]),
        ];
        let r = foreign_objects(&observed, "mine").expect("refusal");
        assert_eq!(r.reason, reason::RECONCILE_FAILED);
        assert_eq!(r.hold, Hold::Failed);
        assert!(
            r.message
                .ends_with("Service demo, ConfigMap demo-0-config, StatefulSet demo-1"),
            "{}",
            r.message
        );
        assert!(!r.message.contains("demo-0,"));
        assert!(foreign_objects(&observed[..1], "mine").is_none());
        assert!(foreign_objects(&[], "mine").is_none());
    }

    #[test]
    fn a_waiting_hold_progresses_a_refusal_does_not() {
        let r = Refusal::new(reason::TRUST_NOT_FOUND, Hold::Waiting, "m");
        assert!(r.progressing().status);
        let r = Refusal {
            hold: Hold::Refused,
            ..r
        };
        assert!(!r.progressing().status);
    }
}
