//! What calls for a pass over a NatsCluster, and the controller that runs them: its own
//! StatefulSets, ConfigMaps and Services, its servers' pods (by instance label), the objects it
//! reads (NatsOperatorTrust, NatsAccountTrust, NatsConnection, NatsReferenceGrant) and the
//! Secrets it reads (listener certificates, the system user's creds, the leaf remotes' creds and
//! CAs): a change to any is a pass at once, not at the next resync.

use std::sync::Arc;

use controller_kit::reconcile::Read;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use nats_api::cluster::NatsCluster;

use super::context::Context;
use super::reconcile::reconcile;
use crate::objects::{labels, tls_secret_name};
use crate::route_ca;
use crate::server_lifecycle::ServerLifecycle;

/// Watches that carry no more than a pass needs: metadata alone (a Secret's data, a pod's spec
/// never pass through this controller's watches; a change still shows as a new resourceVersion).
type Meta<K> = PartialObjectMeta<K>;

/// Only this controller's own objects, by the label it puts on each: its watches grow with its
/// NatsClusters, not with the cluster.
fn own_objects() -> watcher::Config {
    watcher::Config::default().labels(&format!(
        "{}={}",
        labels::MANAGED_BY,
        labels::MANAGED_BY_VALUE
    ))
}

/// The NatsCluster a pod of one of its servers belongs to (by its instance label).
fn pod_owner(pod: impl Resource) -> Option<ObjectRef<NatsCluster>> {
    if pod.labels().get(labels::NAME).map(String::as_str) != Some(labels::NAME_VALUE) {
        return None;
    }
    let instance = pod.labels().get(labels::INSTANCE)?;
    Some(ObjectRef::new(instance).within(&pod.namespace()?))
}

/// Whether `cluster` reads the object `kind` `namespace/name` (its trust roots, a preloaded or
/// leaf-bound account, a leaf remote's connection), or, for a NatsReferenceGrant, any object in
/// the grant's namespace: a change to it calls for a pass at once.
pub fn refers_to(cluster: &NatsCluster, kind: &str, namespace: &str, name: &str) -> bool {
    let own = cluster.namespace().unwrap_or_default();
    let spec = &cluster.spec;
    let auth = spec.auth.as_ref();
    let mut refs: Vec<(&str, &nats_api::common::ObjectReference)> = vec![];
    if let Some(a) = auth {
        refs.push(("NatsOperatorTrust", &a.trust_ref));
        refs.extend(a.account_trust_refs.iter().map(|r| ("NatsAccountTrust", r)));
    }
    for r in &spec.leaf_remotes {
        refs.push(("NatsConnection", &r.connection_ref));
        if let Some(a) = &r.local_account_trust_ref {
            refs.push(("NatsAccountTrust", a));
        }
    }
    refs.iter().any(|(k, r)| {
        let ns = r.namespace.as_deref().unwrap_or(&own);
        match kind {
            "NatsReferenceGrant" => ns == namespace && ns != own,
            _ => *k == kind && ns == namespace && r.name == name,
        }
    })
}

/// The Secrets `cluster` reads, as (namespace, name): the client, route, gateway and leafnode
/// TLS Secrets, the system user's creds, and each leaf remote's NatsConnection creds and CA (in
/// the connection's namespace; `connections` are the NatsConnections known).
pub fn secrets_read(
    cluster: &NatsCluster,
    connections: &[Arc<nats_api::nats::NatsConnection>],
) -> Vec<(String, String)> {
    let own = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let spec = &cluster.spec;
    // Every listener's certificate Secret, whoever writes it (the user, cert-manager, or this
    // controller for the self-signed routes): a rotation is reloaded or restarted at once.
    let listeners = [
        ("client", spec.tls.as_ref()),
        (
            "gateway",
            spec.gateway.as_ref().and_then(|g| g.tls.as_ref()),
        ),
        (
            "leafnodes",
            spec.leafnodes.as_ref().and_then(|l| l.tls.as_ref()),
        ),
    ];
    let mut out: Vec<(String, String)> = listeners
        .into_iter()
        .filter_map(|(listener, tls)| Some(tls_secret_name(&name, listener, Some(tls?))))
        .map(|n| (own.clone(), n))
        .collect();
    if spec.route_tls_enabled() {
        let tls = spec.routes.as_ref().and_then(|r| r.tls.as_ref());
        match tls.and_then(|t| t.secret_ref.as_ref()) {
            Some(r) => out.push((own.clone(), r.name.clone())),
            None => out.push((own.clone(), route_ca::routes_tls_secret(&name))),
        }
    }
    if let Some(c) = spec
        .auth
        .as_ref()
        .and_then(|a| a.system_credentials.as_ref())
    {
        out.push((own.clone(), c.secret_key_ref.name.clone()));
    }
    for remote in &spec.leaf_remotes {
        let ns = remote.connection_ref.namespace.as_deref().unwrap_or(&own);
        let Some(conn) = connections.iter().find(|c| {
            c.namespace().as_deref() == Some(ns) && c.name_any() == remote.connection_ref.name
        }) else {
            continue;
        };
        let creds = conn.spec.credentials.as_ref().map(|c| &c.secret_key_ref);
        let ca = conn
            .spec
            .tls
            .as_ref()
            .and_then(|t| t.ca.as_ref())
            .map(|c| &c.secret_key_ref);
        out.extend(
            creds
                .into_iter()
                .chain(ca)
                .map(|r| (ns.to_string(), r.name.clone())),
        );
    }
    out
}

/// The NatsClusters among `clusters` that read the Secret `secret`: a rotated certificate or
/// creds file calls for a pass at once, not at the next resync.
fn secret_readers(
    clusters: &[Arc<NatsCluster>],
    connections: &[Arc<nats_api::nats::NatsConnection>],
    secret: &impl Resource,
) -> Vec<ObjectRef<NatsCluster>> {
    let key = (secret.namespace().unwrap_or_default(), secret.name_any());
    clusters
        .iter()
        .filter(|c| secrets_read(c, connections).contains(&key))
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

/// The NatsClusters in `store` that read `obj`, an object of kind `K` (or its metadata).
fn readers<K: Resource<DynamicType = ()>>(
    store: &kube::runtime::reflector::Store<NatsCluster>,
    obj: &impl Resource,
) -> Vec<ObjectRef<NatsCluster>> {
    let kind = K::kind(&());
    let ns = obj.meta().namespace.clone().unwrap_or_default();
    let name = obj.meta().name.clone().unwrap_or_default();
    store
        .state()
        .iter()
        .filter(|c| refers_to(c, &kind, &ns, &name))
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

/// Runs the NatsCluster controller until it ends (it runs forever): its watches, handed to the
/// kit's run loop (a fresh read, the span, the count, the error policy, the relist redrive),
/// beside the NatsConnection reflector the Secret watch maps through.
pub async fn run<L: ServerLifecycle>(ctx: Arc<Context<L>>) {
    use nats_api::nats::{NatsAccountTrust, NatsConnection, NatsOperatorTrust, NatsReferenceGrant};
    let client = ctx.shared.client.clone();
    // Every watch in the namespaces watched (`--watch-namespaces`), one per namespace.
    let scope = ctx.shared.scope.clone();
    let ns = &scope.namespaces;
    let pods =
        watcher::Config::default().labels(&format!("{}={}", labels::NAME, labels::NAME_VALUE));
    let controller = controller_kit::watch::controller::<NatsCluster>(
        &client,
        &scope,
        watcher::Config::default(),
    );
    let store = controller.store();
    let (s1, s2, s3, s4, s5) = (
        store.clone(),
        store.clone(),
        store.clone(),
        store.clone(),
        store,
    );
    // The NatsConnections known, so a Secret maps to the leaf remotes whose connection reads it.
    let (connections, connections_in_sync) =
        controller_kit::watch::store::<NatsConnection>(&client, &scope, watcher::Config::default());
    let controller = controller
        .owns_stream(ns.touched::<Meta<StatefulSet>>(&client, own_objects()))
        .owns_stream(ns.touched::<Meta<ConfigMap>>(&client, own_objects()))
        .owns_stream(ns.touched::<Meta<Service>>(&client, own_objects()))
        .watches_stream(ns.touched::<Meta<Pod>>(&client, pods), pod_owner)
        .watches_stream(
            ns.touched::<Meta<NatsOperatorTrust>>(&client, watcher::Config::default()),
            move |o| readers::<NatsOperatorTrust>(&s1, &o),
        )
        .watches_stream(
            ns.touched::<Meta<NatsAccountTrust>>(&client, watcher::Config::default()),
            move |o| readers::<NatsAccountTrust>(&s2, &o),
        )
        .watches_stream(
            ns.touched::<Meta<NatsConnection>>(&client, watcher::Config::default()),
            move |o| readers::<NatsConnection>(&s3, &o),
        )
        .watches_stream(
            ns.touched::<Meta<NatsReferenceGrant>>(&client, watcher::Config::default()),
            move |o| readers::<NatsReferenceGrant>(&s4, &o),
        )
        .watches_stream(
            ns.touched::<Meta<Secret>>(&client, watcher::Config::default()),
            move |o| secret_readers(&s5.state(), &connections.state(), &o),
        );
    let controller = controller_kit::reconcile::run(controller, ctx, Read::Fresh, reconcile::<L>);
    futures::join!(controller, connections_in_sync);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_maps_to_its_natscluster_by_instance_label() {
        let mut p = Pod::default();
        p.metadata.namespace = Some("nats".into());
        p.metadata.labels = Some(labels::server("demo", "demo-1"));
        let r = pod_owner(p.clone()).expect("a NatsCluster");
        assert_eq!(r.name, "demo");
        assert_eq!(r.namespace.as_deref(), Some("nats"));
        p.metadata.labels = Some([(labels::INSTANCE.to_string(), "demo".to_string())].into());
        assert!(pod_owner(p).is_none(), "not a NATS pod");
    }

    #[test]
    fn a_natscluster_reads_its_trusts_connections_and_grants_into_their_namespaces() {
        let c: NatsCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.nats.mikluko.io/v1beta1",
            "kind": "NatsCluster",
            "metadata": {"name": "edge", "namespace": "edge"},
            "spec": {
                "version": "2.15.0", "replicas": 1,
                "auth": {"trustRef": {"name": "t"}, "accountTrustRefs": [{"name": "a", "namespace": "shared"}]},
                "leafRemotes": [{"connectionRef": {"name": "hub", "namespace": "hubs"}, "localAccountTrustRef": {"name": "b"}}],
            },
        }))
        .expect("a NatsCluster");
        assert!(refers_to(&c, "NatsOperatorTrust", "edge", "t"));
        assert!(!refers_to(&c, "NatsOperatorTrust", "other", "t"));
        assert!(refers_to(&c, "NatsAccountTrust", "shared", "a"));
        assert!(refers_to(&c, "NatsAccountTrust", "edge", "b"));
        assert!(!refers_to(&c, "NatsAccountTrust", "edge", "a"));
        assert!(refers_to(&c, "NatsConnection", "hubs", "hub"));
        assert!(!refers_to(&c, "NatsConnection", "edge", "hub"));
        assert!(refers_to(&c, "NatsReferenceGrant", "hubs", "any"));
        assert!(refers_to(&c, "NatsReferenceGrant", "shared", "any"));
        assert!(
            !refers_to(&c, "NatsReferenceGrant", "edge", "any"),
            "no grant is needed in its own namespace"
        );
    }

    #[rstest::rstest]
    #[case::client_tls("edge", "client-tls", true)]
    #[case::route_tls("edge", "routes-tls", true)]
    #[case::gateway_tls("edge", "gw-tls", true)]
    #[case::leafnode_tls("edge", "leaf-tls", true)]
    #[case::system_creds("edge", "sys-creds", true)]
    #[case::remote_creds("hubs", "hub-creds", true)]
    #[case::remote_ca("hubs", "hub-ca", true)]
    #[case::same_name_other_namespace("hubs", "client-tls", false)]
    #[case::remote_creds_in_own_namespace("edge", "hub-creds", false)]
    #[case::unread("edge", "other", false)]
    #[case::unknown_connection_reads_nothing("hubs", "ghost-creds", false)]
    fn a_secret_maps_to_the_natsclusters_reading_it(
        #[case] namespace: &str,
        #[case] name: &str,
        #[case] read: bool,
    ) {
        use nats_api::nats::NatsConnection;
        let c: NatsCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.nats.mikluko.io/v1beta1",
            "kind": "NatsCluster",
            "metadata": {"name": "edge", "namespace": "edge"},
            "spec": {
                "version": "2.15.0", "replicas": 1,
                "tls": {"secretRef": {"name": "client-tls"}},
                "routes": {"tls": {"secretRef": {"name": "routes-tls"}}},
                "gateway": {"name": "edge", "discovery": "Explicit", "remotes": [{"name": "edge", "url": "nats://edge:7222"}], "tls": {"secretRef": {"name": "gw-tls"}}},
                "leafnodes": {"tls": {"secretRef": {"name": "leaf-tls"}}},
                "auth": {"trustRef": {"name": "t"}, "systemCredentials": {"secretKeyRef": {"name": "sys-creds"}}},
                "leafRemotes": [
                    {"connectionRef": {"name": "hub", "namespace": "hubs"}},
                    {"connectionRef": {"name": "ghost", "namespace": "hubs"}},
                ],
            },
        }))
        .expect("a NatsCluster");
        let conn: NatsConnection = serde_json::from_value(serde_json::json!({
            "apiVersion": "nats.mikluko.io/v1beta1",
            "kind": "NatsConnection",
            "metadata": {"name": "hub", "namespace": "hubs"},
            "spec": {
                "servers": ["tls://hub:7422"],
                "credentials": {"secretKeyRef": {"name": "hub-creds"}},
                "tls": {"ca": {"secretKeyRef": {"name": "hub-ca"}}},
            },
        }))
        .expect("a NatsConnection");
        let mut secret = Secret::default();
        secret.metadata.namespace = Some(namespace.into());
        secret.metadata.name = Some(name.into());
        let found = secret_readers(&[Arc::new(c)], &[Arc::new(conn)], &secret);
        assert_eq!(
            found.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            if read { vec!["edge"] } else { vec![] },
            "{namespace}/{name}"
        );
    }

    #[rstest::rstest]
    #[case::self_signed_routes("version: 2.15.0\nreplicas: 1\n", &["demo-routes-tls"])]
    #[case::routes_off("version: 2.15.0\nreplicas: 1\nroutes: {tls: {enabled: false}}\n", &[])]
    #[case::cert_manager_listeners(
        "version: 2.15.0\nreplicas: 1\ntls: {certManager: {issuerRef: {name: ca}}}\nroutes: {tls: {certManager: {issuerRef: {name: ca}}}}\n",
        &["demo-client-tls", "demo-routes-tls"]
    )]
    fn certificates_written_by_others_are_read_too(#[case] spec: &str, #[case] want: &[&str]) {
        let spec: nats_api::cluster::NatsClusterSpec = serde_yaml::from_str(spec).expect("spec");
        let mut c = NatsCluster::new("demo", spec);
        c.metadata.namespace = Some("nats".into());
        let mut got: Vec<String> = secrets_read(&c, &[]).into_iter().map(|(_, n)| n).collect();
        got.sort();
        assert_eq!(got, want);
    }
}
