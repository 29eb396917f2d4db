//! A story that declares a Namespace starts it fresh on the shared node ([`namespaces`]): what
//! an earlier story left there is deleted first, and finalizers its controllers cannot finish
//! (a user waiting for servers already gone) are taken off after [`FINALIZERS_GRACE`].

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject};

/// How long a deleted namespace's objects may hold it by their controllers' finalizers (a
/// NatsCluster that still holds JetStream data, a user waiting for its revocation to reach
/// servers already gone) before the run takes the finalizers off: the story that follows needs
/// the namespace, not the end of the one before.
const FINALIZERS_GRACE: Duration = Duration::from_secs(30);

/// Starts each of `namespaces` fresh: deletes it and waits until it is gone, or, for the
/// chart's own namespace (the controllers run there; stories 02 and 09 put their auth plane
/// there), deletes the objects of the project's kinds and cert-manager's in it, and the Secrets
/// issued for them ([`ISSUED`]). The ones cleared.
pub async fn namespaces(
    client: &kube::Client,
    namespaces: &[String],
) -> Result<Vec<String>, String> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    let mut cleared = Vec::new();
    for ns in namespaces {
        let exists = api
            .get_opt(ns)
            .await
            .map_err(|e| format!("reading namespace {ns}: {e}"))?
            .is_some();
        if !exists {
            continue;
        }
        if ns != crate::chart::NAMESPACE {
            let _ = api.delete(ns, &Default::default()).await;
        }
        cleared.push(ns.clone());
    }
    let t0 = Instant::now();
    for ns in &cleared {
        loop {
            let gone = if ns == crate::chart::NAMESPACE {
                project_objects(client, ns, true).await + issued_secrets(client, ns).await == 0
            } else {
                matches!(api.get_opt(ns).await, Ok(None))
            };
            if gone {
                break;
            }
            if t0.elapsed() > Duration::from_secs(300) {
                return Err(format!("namespace {ns} was not cleared within 300 s"));
            }
            if t0.elapsed() > FINALIZERS_GRACE {
                release_finalizers(client, ns).await;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    Ok(cleared)
}

/// The groups whose objects a story applies and the run clears: the project's and
/// cert-manager's.
fn cleared_group(group: &str) -> bool {
    group.ends_with("nats.mikluko.io") || group == "cert-manager.io"
}

/// How many objects of the cleared groups are left in `namespace`; each is deleted as it is
/// counted when `delete`.
async fn project_objects(client: &kube::Client, namespace: &str, delete: bool) -> usize {
    let Some(apis) = cleared_apis(client, namespace).await else {
        return usize::MAX;
    };
    let mut left = 0;
    for api in apis {
        let Ok(list) = api.list(&Default::default()).await else {
            left += 1;
            continue;
        };
        left += list.items.len();
        if delete && !list.items.is_empty() {
            let _ = api
                .delete_collection(&Default::default(), &Default::default())
                .await;
        }
    }
    left
}

/// The namespaced kinds of the cleared groups in `namespace`, one API each; none when
/// discovery fails.
async fn cleared_apis(client: &kube::Client, namespace: &str) -> Option<Vec<Api<DynamicObject>>> {
    let discovery = kube::Discovery::new(client.clone()).run().await.ok()?;
    let apis = discovery
        .groups()
        .filter(|g| cleared_group(g.name()))
        .flat_map(|group| group.recommended_resources())
        .filter(|(_, caps)| caps.scope == kube::discovery::Scope::Namespaced)
        .map(|(ar, _)| Api::namespaced_with(client.clone(), namespace, &ar))
        .collect();
    Some(apis)
}

/// The annotations of Secrets the stories' controllers and issuers wrote, which go with the
/// objects they were written for: cert-manager's issued certificates (a replayed story's
/// cluster must wait for its certificate again, as its example shows) and the auth
/// controller's generated keys.
const ISSUED: [&str; 2] = [
    "cert-manager.io/certificate-name",
    "auth.nats.mikluko.io/generated-for",
];

/// How many Secrets of `namespace` carry an [`ISSUED`] annotation; each is deleted as it is
/// counted.
async fn issued_secrets(client: &kube::Client, namespace: &str) -> usize {
    use k8s_openapi::api::core::v1::Secret;
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let Ok(list) = api.list(&Default::default()).await else {
        return usize::MAX;
    };
    let mut left = 0;
    for s in list.items {
        let issued = s
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| ISSUED.iter().any(|k| a.contains_key(*k)));
        if let (true, Some(name)) = (issued, s.metadata.name.as_deref()) {
            left += 1;
            let _ = api.delete(name, &Default::default()).await;
        }
    }
    left
}

/// Takes the finalizers off every object of the cleared groups left in `namespace`.
async fn release_finalizers(client: &kube::Client, namespace: &str) {
    let Some(apis) = cleared_apis(client, namespace).await else {
        return;
    };
    let none = serde_json::json!({"metadata": {"finalizers": null}});
    for api in apis {
        let Ok(list) = api.list(&Default::default()).await else {
            continue;
        };
        for o in list.items {
            let held = o
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty());
            if let (true, Some(name)) = (held, o.metadata.name.as_deref()) {
                let _ = api
                    .patch(
                        name,
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(&none),
                    )
                    .await;
            }
        }
    }
}
