//! Story 14's servers that trust the operator made with nsc ([`nsc`]): the story's own operator
//! JWT, its system account and the account `legacy-app` as nsc signed them, two users revoked
//! under nsc, and the auth controller's system connection pointed at them.

use super::*;

/// The seeds of story 14's `01-keys.yaml`, read from the story itself.
pub(super) fn story_seed(story_dir: &Path, secret: &str, key: &str) -> Result<NKey, String> {
    let path = story_dir.join("01-keys.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v = <Value as serde::Deserialize>::deserialize(doc)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if v["kind"] == "Secret" && v["metadata"]["name"] == secret {
            let seed = v["stringData"][key]
                .as_str()
                .ok_or_else(|| format!("{}: Secret {secret} has no {key}", path.display()))?;
            return NKey::from_seed(seed.as_bytes()).map_err(|e| format!("{secret}/{key}: {e}"));
        }
    }
    Err(format!("{}: no Secret {secret}", path.display()))
}

/// The operator JWT story 14's `02-adopt.yaml` gives (`spec.jwt` of NatsOperator `legacy`).
pub(super) fn story_operator_jwt(story_dir: &Path) -> Result<String, String> {
    let path = story_dir.join("02-adopt.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v = <Value as serde::Deserialize>::deserialize(doc)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if v["kind"] == "NatsOperator"
            && let Some(jwt) = v["spec"]["jwt"].as_str()
        {
            return Ok(jwt.into());
        }
    }
    Err(format!("{}: no NatsOperator with spec.jwt", path.display()))
}

/// The users nsc revoked under `legacy-app` before the adoption, and when (story 14's
/// `status/03-natsaccount-legacy-app.yaml` shows them carried over).
pub const NSC_REVOCATIONS: [(&str, i64); 2] = [
    (
        "UBGQKXQ4D3IKEXR4XYRYRSRL2PAQ3FDTCSE4XMDCLYICSEDFYI3JX2MC",
        1_785_000_000,
    ),
    (
        "UCQAX2FVANY553UNVOVKDHFO3VGTCC2RGQGQDK5OAX7IECS424FCEDTV",
        1_786_000_000,
    ),
];

/// The NatsConnection (in `nats-legacy`) the auth controller's system connection is during story
/// 14.
pub const NSC_SYSTEM_CONNECTION: &str = "legacy-system";

/// Story 14's servers, trusting the operator made with nsc and holding its accounts as nsc
/// signed them.
pub(in crate::conformance) async fn nsc(
    net: &dyn OutsideNet,
    dir: &Path,
    binary: &Path,
) -> Result<Surroundings, String> {
    let story_dir = crate::stories::stories_dir().join("14-adopt-nsc");
    let operator_signing = story_seed(&story_dir, "legacy-operator-keys", "signing.nk")?;
    let system = story_seed(&story_dir, "legacy-system-keys", "identity.nk")?;
    let system_signing = story_seed(&story_dir, "legacy-system-keys", "signing.nk")?;
    let app = story_seed(&story_dir, "legacy-app-keys", "identity.nk")?;
    let app_signing = story_seed(&story_dir, "legacy-app-keys", "signing.nk")?;
    let operator_jwt = story_operator_jwt(&story_dir)?;
    let operator = nats_claims::decode::<nats_claims::claims::Operator>(&operator_jwt)
        .map_err(|e| format!("story 14's operator JWT: {e}"))?;
    if operator.nats.system_account != system.public_key() {
        return Err("story 14's operator JWT names another system account".into());
    }
    // As nsc signed them, a while ago, with the operator's signing key.
    let issued = now_secs() - 30 * 86_400;
    let system_jwt = AccountClaims::new(system.public_key())
        .name("SYS")
        .signing_key(system_signing.public_key())
        .encode_issued_at(&operator_signing, issued)
        .map_err(signing("the nsc system account"))?;
    let mut legacy_app = AccountClaims::new(app.public_key())
        .name("legacy-app")
        .signing_key(app_signing.public_key())
        .jetstream(JetStreamLimits {
            memory_storage: NO_LIMIT,
            disk_storage: 10_737_418_240,
            streams: 20,
            consumer: NO_LIMIT,
            ..Default::default()
        });
    for (user, at) in NSC_REVOCATIONS {
        legacy_app = legacy_app.revoke_at(user, at);
    }
    legacy_app.nats.mappings.insert(
        "orders.v1.>".into(),
        vec![WeightedMapping {
            subject: "orders.>".into(),
            weight: 100,
            cluster: String::new(),
        }],
    );
    let legacy_app_jwt = legacy_app
        .encode_issued_at(&operator_signing, issued)
        .map_err(signing("the nsc account legacy-app"))?;
    // The system user the auth controller connects as, issued under nsc: by the system
    // account's signing key, the operator requiring signing keys.
    let user = NKey::generate(KeyKind::User);
    let user_jwt = UserClaims::new(user.public_key())
        .name("auth-controller")
        .issuer_account(system.public_key())
        .encode(&system_signing)
        .map_err(signing("the system user"))?;
    let creds = nats_claims::Creds::render_key(&user_jwt, &user)
        .map_err(signing("the system user's creds"))?
        .expose()
        .to_string();
    let cluster = Cluster {
        name: "nsc",
        servers: named(3, "nsc.example.internal", 11),
        operator: Operator {
            jwt: operator_jwt,
            system_account: system.public_key(),
            preload: vec![
                (system.public_key(), system_jwt),
                (app.public_key(), legacy_app_jwt),
            ],
        },
        jetstream: false,
        tls: None,
        gateway: None,
        node_dns: false,
    };
    let servers = start(net, dir, binary, &cluster, &mut Vec::new()).await?;
    let urls: Vec<String> = cluster
        .servers
        .iter()
        .map(|(_, dns, _)| format!("nats://{dns}:{}", PORTS.0))
        .collect();
    Ok(Surroundings {
        said: format!(
            "nsc's NATS cluster outside the node: {}, holding SYS and legacy-app as nsc signed them",
            urls.join(", ")
        ),
        servers,
        tasks: vec![],
        stand_ins: vec![],
        fixtures: vec![
            namespace("nats-legacy"),
            secret(
                "nats-legacy",
                "legacy-system-creds",
                json!({"user.creds": creds}),
            ),
            json!({
                "apiVersion": "nats.mikluko.io/v1beta1",
                "kind": "NatsConnection",
                "metadata": {"name": NSC_SYSTEM_CONNECTION, "namespace": "nats-legacy"},
                "spec": {
                    "servers": urls,
                    "credentials": {"secretKeyRef": {"name": "legacy-system-creds"}},
                },
            }),
        ],
        values: Some(format!(
            "controllers:\n  auth:\n    systemConnection: nats-legacy/{NSC_SYSTEM_CONNECTION}\n"
        )),
    })
}
