//! API tier, on kube-apiserver 1.20: a NatsCluster whose `auth.systemCredentials` names a Secret
//! that does not exist is held with Progressing=True SecretNotFound naming the Secret's
//! namespace/name (not "systemCredentials is not set"), renders nothing meanwhile, and moves on
//! once the Secret appears.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use nats_api::cluster::reason;
use serde_json::json;

use crate::api_cluster::{condition, create_cluster, is, names_of, quickstart, rig, wait_cluster};

const SELECTOR: &str = "app.kubernetes.io/instance=demo";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_system_credentials_secret_reads_secret_not_found_naming_it() {
    const NS: &str = "creds";
    let rig = rig(&[NS]).await;
    let client = rig.client();
    let mut doc = quickstart();
    doc["spec"]["auth"] = json!({
        "trustRef": {"name": "absent"},
        "systemCredentials": {"secretKeyRef": {"name": "sys-creds"}},
    });
    create_cluster(&client, NS, doc).await;
    let c = wait_cluster(&client, NS, "demo", "Progressing SecretNotFound", |c| {
        is(c, "Progressing", "True", reason::SECRET_NOT_FOUND)
    })
    .await;
    let (_, _, message) = condition(&c, "Progressing").expect("Progressing");
    assert!(message.contains("Secret creds/sys-creds"), "{message}");
    assert!(!message.contains("is not set"), "{message}");
    assert!(
        names_of::<StatefulSet>(&client, NS, SELECTOR)
            .await
            .is_empty(),
        "nothing rendered while held"
    );

    // The Secret appearing wakes the NatsCluster: the next wait is the next reference's.
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "sys-creds", "namespace": NS},
        "stringData": {"user.creds": "not read before the trust resolves"},
    }))
    .expect("a Secret");
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("the Secret created");
    wait_cluster(&client, NS, "demo", "Progressing TrustNotFound", |c| {
        is(c, "Progressing", "True", reason::TRUST_NOT_FOUND)
    })
    .await;
}
