//! What a story tells its user to do beside applying its manifests, and the run therefore does
//! at that step ([`at`]): story 11's `kubectl delete natscluster prod-east -n nats-system`, and
//! the stream its README says exists with no resource (`SCRATCH`, whose config still names
//! `prod-east`), which the run leaves behind as a user would: a NatsStream with `deletionPolicy:
//! Retain` applied, Ready, then deleted. Story 05's partner hands over an activation token for
//! the account `core` once it has a key. The run plays the partner: the story's partner key is
//! the documentation's, whose seed no run holds, so the import is pointed at a partner account
//! key the run makes (as the literal trusts of a story's other cluster are filled from this
//! run's keys) and the token is signed with it. A token the import's key did not sign would be
//! refused by every server, and by the auth controller before them.
//!
//! Story 08's stream serves an application before it moves: the run adds its consumers and
//! publishes to it ([`super::load`]), so the move has replicas to catch up and consumers to follow.
//!
//! The table is pure ([`at`], tested beside it); [`perform`] does one action on the node.

use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject};
use serde_json::{Value, json};
use sim::control_plane::Objects;

use super::kinds::api_of;

/// One thing the run does at a step, after the step's manifests.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// `kubectl delete` of one object; the run goes on without waiting for it to be gone (a
    /// finalizer may hold it: that is what the step's example shows).
    Delete {
        api_version: &'static str,
        kind: &'static str,
        namespace: &'static str,
        name: &'static str,
    },
    /// The application of a story's stream: consumers added and data published from the host,
    /// once the stream is Ready ([`super::load`]).
    Load {
        /// The NatsStream (its namespace holds the NatsConnection the load connects with).
        stream: &'static str,
        load: super::load::Load,
    },
    /// A stream with no resource: `object` (a NatsStream with `deletionPolicy: Retain`) applied,
    /// waited for until Ready, then deleted and waited for until gone; the stream stays.
    LeaveBehind { object: Value },
    /// Secret `secret` (key `key`) in `namespace`: an activation token for `subject` (a service
    /// export named `export`) to the NatsAccount `account` of that namespace, signed by a
    /// partner account key the run makes, once the account has its public key.
    /// Story 07's crowded leaders ([`super::skew`]).
    Skew(super::skew::Skew),
    /// A NatsReferenceGrant withdrawn from what it admitted: the NatsUser `user` waited for until
    /// Ready (signed under the grant), then the grant deleted (story 04's "the payments team
    /// deletes the grant").
    Withdraw {
        grant_namespace: &'static str,
        grant: &'static str,
        user_namespace: &'static str,
        user: &'static str,
    },
    SupplyActivation {
        namespace: &'static str,
        account: &'static str,
        /// The partner key the story's import names, replaced by the run's partner's.
        doc_key: &'static str,
        secret: &'static str,
        key: &'static str,
        export: &'static str,
        subject: &'static str,
    },
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Delete {
                kind,
                namespace,
                name,
                ..
            } => write!(f, "kubectl delete {kind} {name} -n {namespace}"),
            Action::SupplyActivation {
                namespace, secret, ..
            } => write!(
                f,
                "the partner's activation token in Secret {namespace}/{secret}"
            ),
            Action::Load { load, .. } => write!(
                f,
                "{} messages of {} bytes published to {} and {} consumers added",
                load.messages,
                load.size,
                load.stream,
                load.consumers.len()
            ),
            Action::Skew(skew) => write!(f, "{skew}"),
            Action::Withdraw {
                grant_namespace,
                grant,
                user_namespace,
                user,
            } => write!(
                f,
                "kubectl delete NatsReferenceGrant {grant} -n {grant_namespace} once NatsUser \
                 {user_namespace}/{user} is Ready"
            ),
            Action::LeaveBehind { object } => write!(
                f,
                "stream {} left with no resource",
                object
                    .pointer("/spec/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            ),
        }
    }
}

/// The actions of `story` at `step`, in order.
pub fn at(story: &str, step: u32) -> Vec<Action> {
    match (story.split_once('-').map_or(story, |(n, _)| n), step) {
        // "Streams with no resource whose config still names the source": one of them.
        ("11", 1) => vec![Action::LeaveBehind {
            object: json!({
                "apiVersion": "jetstream.nats.mikluko.io/v1beta1",
                "kind": "NatsStream",
                "metadata": {"name": "scratch", "namespace": "requests"},
                "spec": {
                    "connectionRef": {"name": "requests"},
                    "name": "SCRATCH",
                    "subjects": ["requests.scratch.>"],
                    "storage": "File",
                    "replicas": 1,
                    "placement": {"cluster": "prod-east"},
                    "deletionPolicy": "Retain",
                },
            }),
        }],
        // "The stream as it runs today": serving, with data and consumers, so that its move has
        // replicas to catch up and consumers to follow (the midway example).
        ("08", 1) => vec![Action::Load {
            stream: "orders",
            load: super::load::Load {
                namespace: "orders",
                connection: "orders",
                stream: "ORDERS",
                subject: "orders.placed",
                consumers: &["billing", "shipping"],
                messages: 120_000,
                size: 1024,
            },
        }],
        ("05", 3) => vec![Action::SupplyActivation {
            namespace: "team-core",
            account: "core",
            doc_key: "ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP",
            secret: "partner-rates-activation",
            key: "activation.jwt",
            export: "rates",
            subject: "partner.rates.>",
        }],
        // "A busy NATS cluster": leaders crowd one server (see skew.rs).
        ("07", 2) => vec![Action::Skew(super::skew::Skew::Crowd {
            streams: &[("orders", "orders"), ("billing", "BILLING")],
            system: "demo",
        })],
        ("07", 3) => vec![Action::Skew(super::skew::Skew::Yield {
            hot: &[("orders", "ORDERS_EU"), ("orders", "ORDERS_US")],
            anchor: ("orders", "ORDERS_ARCHIVE"),
            busy: &[
                ("orders", "orders"),
                ("billing", "BILLING"),
                ("billing", "BILLING_HISTORY"),
            ],
            system: "demo",
            account: "orders",
        })],
        // "After the payments team deletes the grant analytics-readers".
        ("04", 3) => vec![Action::Withdraw {
            grant_namespace: "team-payments",
            grant: "analytics-readers",
            user_namespace: "team-analytics",
            user: "payments-reader",
        }],
        ("11", 3) => vec![Action::Delete {
            api_version: "cluster.nats.mikluko.io/v1beta1",
            kind: "NatsCluster",
            namespace: "nats-system",
            name: "prod-east",
        }],
        _ => vec![],
    }
}

/// Does `action` on the cluster `objects` reaches, each wait within `within`.
pub async fn perform(objects: &Objects, action: &Action, within: Duration) -> Result<(), String> {
    let client = objects.client();
    match action {
        Action::Skew(skew) => super::skew::perform(&client, skew).await,
        Action::Delete {
            api_version,
            kind,
            namespace,
            name,
        } => {
            let api = api_of(&client, api_version, kind, namespace);
            api.delete(name, &DeleteParams::default())
                .await
                .map(|_| ())
                .map_err(|e| format!("deleting {kind} {namespace}/{name}: {e}"))
        }
        Action::SupplyActivation {
            namespace,
            account,
            doc_key,
            secret,
            key,
            export,
            subject,
        } => {
            let api = api_of(
                &client,
                "auth.nats.mikluko.io/v1beta1",
                "NatsAccount",
                namespace,
            );
            let partner = nats_claims::NKey::generate(nats_claims::KeyKind::Account);
            let current = api
                .get(account)
                .await
                .map_err(|e| format!("reading NatsAccount {namespace}/{account}: {e}"))?;
            let imports = partner_named(&current.data, doc_key, &partner.public_key());
            api.patch(
                account,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&json!({"spec": {"imports": imports}})),
            )
            .await
            .map_err(|e| format!("pointing {namespace}/{account}'s import at the partner: {e}"))?;
            let importer = sim::wait::poll(
                &format!("NatsAccount {namespace}/{account} has a public key"),
                within,
                || async {
                    let got = api.get_opt(account).await.map_err(|e| e.to_string())?;
                    Ok(got
                        .as_ref()
                        .and_then(|o| o.data.pointer("/status/publicKey"))
                        .and_then(Value::as_str)
                        .map(str::to_string))
                },
            )
            .await
            .map_err(|e| e.to_string())?;
            let token = nats_claims::ActivationClaims::new(
                importer,
                *subject,
                nats_claims::ExportType::Service,
            )
            .name(*export)
            .encode(&partner)
            .map_err(|e| format!("signing the activation: {e}"))?;
            let object = json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret, "namespace": namespace},
                "stringData": {*key: token},
            });
            let text = serde_yaml::to_string(&object).map_err(|e| e.to_string())?;
            objects
                .apply_text(std::path::Path::new("(the partner)"), &text)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Action::Load { stream, load } => {
            let api = api_of(
                &client,
                "jetstream.nats.mikluko.io/v1beta1",
                "NatsStream",
                load.namespace,
            );
            let what = format!("NatsStream {}/{stream}", load.namespace);
            sim::wait::poll(&format!("{what} Ready"), within, || async {
                let got = api.get_opt(stream).await.map_err(|e| e.to_string())?;
                Ok(got.as_ref().is_some_and(ready).then_some(()))
            })
            .await
            .map_err(|e| e.to_string())?;
            let acked = super::load::fill(&client, load).await?;
            if acked == load.messages {
                Ok(())
            } else {
                Err(format!("{acked} of {} acknowledged", load.messages))
            }
        }
        Action::Withdraw {
            grant_namespace,
            grant,
            user_namespace,
            user,
        } => {
            let users = api_of(
                &client,
                "auth.nats.mikluko.io/v1beta1",
                "NatsUser",
                user_namespace,
            );
            let what = format!("NatsUser {user_namespace}/{user}");
            sim::wait::poll(&format!("{what} Ready"), within, || async {
                let got = users.get_opt(user).await.map_err(|e| e.to_string())?;
                Ok(got.as_ref().is_some_and(ready).then_some(()))
            })
            .await
            .map_err(|e| e.to_string())?;
            let grants = api_of(
                &client,
                "nats.mikluko.io/v1beta1",
                "NatsReferenceGrant",
                grant_namespace,
            );
            grants
                .delete(grant, &DeleteParams::default())
                .await
                .map(|_| ())
                .map_err(|e| format!("deleting NatsReferenceGrant {grant_namespace}/{grant}: {e}"))
        }
        Action::LeaveBehind { object } => {
            let text = serde_yaml::to_string(object).map_err(|e| e.to_string())?;
            objects
                .apply_text(std::path::Path::new("(the run)"), &text)
                .await
                .map_err(|e| e.to_string())?;
            let (namespace, name) = (
                object
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            );
            let api = api_of(
                &client,
                "jetstream.nats.mikluko.io/v1beta1",
                "NatsStream",
                namespace,
            );
            let what = format!("NatsStream {namespace}/{name}");
            sim::wait::poll(&format!("{what} Ready"), within, || async {
                let got = api.get_opt(name).await.map_err(|e| e.to_string())?;
                Ok(got.as_ref().is_some_and(ready).then_some(()))
            })
            .await
            .map_err(|e| e.to_string())?;
            api.delete(name, &DeleteParams::default())
                .await
                .map_err(|e| format!("deleting {what}: {e}"))?;
            sim::wait::poll(&format!("{what} gone"), within, || async {
                let got = api.get_opt(name).await.map_err(|e| e.to_string())?;
                Ok(got.is_none().then_some(()))
            })
            .await
            .map_err(|e| e.to_string())?;
            Ok(())
        }
    }
}

/// `spec.imports` of an object with every import naming `doc_key` naming `partner` instead.
fn partner_named(object: &Value, doc_key: &str, partner: &str) -> Value {
    let mut imports = object
        .pointer("/spec/imports")
        .cloned()
        .unwrap_or_else(|| json!([]));
    for imp in imports.as_array_mut().into_iter().flatten() {
        if imp.get("publicKey").and_then(Value::as_str) == Some(doc_key) {
            imp["publicKey"] = Value::String(partner.to_string());
        }
    }
    imports
}

fn ready(o: &DynamicObject) -> bool {
    o.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rstest::rstest]
    #[case::nothing_beside_the_manifests("09-acceptance", 4, &[])]
    #[case::the_partners_token("05-account-wiring", 3, &["the partner's activation token in Secret team-core/partner-rates-activation"])]
    #[case::the_stream_left_behind("11-evacuation", 1, &["stream SCRATCH left with no resource"])]
    #[case::nothing_at_the_evacuation("11-evacuation", 2, &[])]
    #[case::the_delete_the_readme_tells("11-evacuation", 3, &["kubectl delete NatsCluster prod-east -n nats-system"])]
    #[case::the_grant_withdrawn_once_its_user_is_signed("04-team-self-service", 3, &["kubectl delete NatsReferenceGrant analytics-readers -n team-payments once NatsUser team-analytics/payments-reader is Ready"])]
    fn the_actions_of_a_step(#[case] story: &str, #[case] step: u32, #[case] want: &[&str]) {
        let got: Vec<String> = at(story, step).iter().map(ToString::to_string).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_partners_key_replaces_the_docs_in_the_import_naming_it_only() {
        let object = json!({"spec": {"imports": [
            {"accountRef": {"name": "monitoring"}, "export": "execute"},
            {"publicKey": "ADOC", "export": "rates"},
            {"publicKey": "AOTHER", "export": "fx"},
        ]}});
        assert_eq!(
            partner_named(&object, "ADOC", "APARTNER"),
            json!([
                {"accountRef": {"name": "monitoring"}, "export": "execute"},
                {"publicKey": "APARTNER", "export": "rates"},
                {"publicKey": "AOTHER", "export": "fx"},
            ])
        );
    }

    /// The partner key story 05's import names is the one the run replaces.
    #[test]
    fn story_05s_import_names_the_replaced_key() {
        let stories = crate::stories::load().expect("docs/stories parses");
        let story = stories
            .iter()
            .find(|s| s.name == "05-account-wiring")
            .expect("story 05");
        let Some(Action::SupplyActivation { doc_key, .. }) = at("05", 3).pop() else {
            panic!("story 05's step 3 supplies the token");
        };
        let core = story
            .manifests
            .iter()
            .find(|d| d.object.name == "core")
            .expect("core");
        assert_eq!(
            core.object.value.pointer("/spec/imports/2/publicKey"),
            Some(&json!(doc_key))
        );
    }

    /// The delete story 11 does is the one its README tells, on an object the story declares,
    /// at a step with an example and no manifest.
    #[test]
    fn story_11s_delete_is_its_readmes_and_names_its_object() {
        let stories = crate::stories::load().expect("docs/stories parses");
        let story = stories
            .iter()
            .find(|s| s.name == "11-evacuation")
            .expect("story 11");
        let readme =
            std::fs::read_to_string(story.dir.join("README.md")).expect("story 11's README");
        assert!(readme.contains("kubectl delete natscluster prod-east -n nats-system"));
        assert!(
            story
                .manifests
                .iter()
                .any(|d| d.object.kind == "NatsCluster"
                    && d.object.name == "prod-east"
                    && d.object.namespace.as_deref() == Some("nats-system"))
        );
        let step = super::super::steps(story)
            .into_iter()
            .find(|s| s.number == 3)
            .expect("step 3");
        assert!(step.manifests.is_empty());
        assert_eq!(step.examples.len(), 1);
    }
}
