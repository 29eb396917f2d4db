//! A Delete whose servers Kubernetes is tearing down (issue 43, on a real node): `kubectl delete
//! namespace` of a namespace holding a NatsCluster and the JetStream resources on it deletes the
//! servers' pods, StatefulSets and PVCs at once, whatever the NatsCluster's deletion guard says
//! (the namespace controller deletes every kind; a finalizer on a pod does not stop its
//! containers). The servers are gone within their lame duck, often before a NatsStream's
//! deletion reached them, and a Delete that waited for a server to answer would then hold the
//! namespace for ever.
//!
//! So, when a `deletionPolicy: Delete` resource's deletion fails to reach NATS, it is released
//! when **every** server its NatsConnection names is the client Service (or a pod name) of a
//! NatsCluster that is being deleted (or already gone) **in a namespace being deleted** ([`fate_of`],
//! [`goes_with_servers`]):
//! the stream's data goes with the servers and their claims. Anything else — a server that is
//! merely unreachable, a NatsCluster deleted on its own (its guard keeps its servers running
//! while data remains, so the Delete will reach them), a server outside Kubernetes — still
//! holds the Delete, as before. A `DeletedWithServers` Event says so where the namespace still
//! takes Events (a terminating one refuses new objects, Events included; the controller logs it).
//!
//! This needs `get` on NatsClusters and Namespaces (files/rbac.yaml); without them (e.g. a
//! namespaced install, where a Role cannot grant a Namespace) the lookup fails and the Delete
//! holds as before.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use nats_api::cluster::NatsCluster;
use nats_api::common::ObjectReference;
use nats_api::nats::NatsConnection;

use super::context::Context;

/// The Event reason of a Delete released because its servers are torn down with their namespace.
pub const DELETED_WITH_SERVERS: &str = "DeletedWithServers";

/// The NatsCluster (namespace, name) a server URL names, relative to the connection's namespace
/// `own`: `<cluster>[.<ns>[.svc[.<domain>]]]` (the client Service), or a server's own name
/// `<pod>.<cluster>-headless.<ns>.svc…`. None for an address (an IP) or no host.
pub fn cluster_of(url: &str, own: &str) -> Option<(String, String)> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host_port = rest.split(['/', '?']).next()?;
    let host_port = host_port.rsplit_once('@').map_or(host_port, |(_, h)| h);
    let host = host_port
        .rsplit_once(':')
        .map_or(host_port, |(h, _)| h)
        .trim_end_matches('.');
    if host.is_empty() || host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
        return None;
    }
    let parts: Vec<&str> = host.split('.').collect();
    let (service, ns) = match parts.iter().position(|p| *p == "svc") {
        Some(i) if i >= 2 => (parts[i - 2], parts[i - 1]),
        Some(_) => return None,
        None if parts.len() == 1 => (parts[0], own),
        None if parts.len() == 2 => (parts[0], parts[1]),
        None => return None,
    };
    let cluster = service.strip_suffix("-headless").unwrap_or(service);
    Some((ns.to_string(), cluster.to_string()))
}

/// What is known of the NatsCluster behind one server URL: None when the URL names none or it
/// cannot be read; else whether it is being deleted and its namespace too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fate {
    pub cluster_deleting: bool,
    pub namespace_deleting: bool,
}

/// The fate of one server's NatsCluster from what the apiserver answered: `cluster` and
/// `namespace` say whether each is being deleted, `None` when it is gone. A namespace gone took
/// everything in it; a NatsCluster gone from a namespace being deleted went with it (its guard
/// released once its servers stopped answering) and so did its servers. A NatsCluster gone from a
/// live namespace keeps the Delete: what serves that name is not known to be going.
pub fn fate_of(cluster: Option<bool>, namespace: Option<bool>) -> Fate {
    match namespace {
        None => Fate {
            cluster_deleting: true,
            namespace_deleting: true,
        },
        Some(namespace_deleting) => Fate {
            cluster_deleting: cluster.unwrap_or(namespace_deleting),
            namespace_deleting,
        },
    }
}

/// Whether a Delete that cannot reach its servers goes with them: every server URL names a
/// NatsCluster being deleted in a namespace being deleted (and there is at least one).
pub fn goes_with_servers(fates: &[Option<Fate>]) -> bool {
    !fates.is_empty()
        && fates
            .iter()
            .all(|f| f.is_some_and(|f| f.cluster_deleting && f.namespace_deleting))
}

/// The NatsCluster(s) `conn` (absolute) reaches when they are all being torn down with their
/// namespace ([`goes_with_servers`]): `NatsCluster ns/name, …`; None otherwise, or when anything
/// cannot be read.
pub(super) async fn with_servers(ctx: &Context, conn: &ObjectReference) -> Option<String> {
    let ns = conn.namespace.clone().unwrap_or_default();
    let client = &ctx.shared.client;
    let connection = Api::<NatsConnection>::namespaced(client.clone(), &ns)
        .get_opt(&conn.name)
        .await
        .ok()??;
    let mut fates = Vec::new();
    let mut names = Vec::new();
    for url in &connection.spec.servers {
        let Some((cns, name)) = cluster_of(url, &ns) else {
            fates.push(None);
            continue;
        };
        // An answer that is not a read (no permission, a timeout) keeps the Delete.
        let cluster = Api::<NatsCluster>::namespaced(client.clone(), &cns)
            .get_opt(&name)
            .await;
        let namespace = Api::<Namespace>::all(client.clone()).get_opt(&cns).await;
        fates.push(match (cluster, namespace) {
            (Ok(c), Ok(n)) => Some(fate_of(
                c.map(|c| c.meta().deletion_timestamp.is_some()),
                n.map(|n| n.metadata.deletion_timestamp.is_some()),
            )),
            _ => None,
        });
        let named = format!("NatsCluster {cns}/{name}");
        if !names.contains(&named) {
            names.push(named);
        }
    }
    goes_with_servers(&fates).then(|| names.join(", "))
}

/// Says that `obj`'s Delete went with the servers of `clusters` (log, and an Event where the
/// namespace still takes one).
pub(super) async fn released<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    what: &str,
    clusters: &str,
) {
    let message = format!(
        "deletionPolicy Delete: {what} could not be reached; it goes with the servers of \
         {clusters}, deleted with their namespace (their pods and claims)"
    );
    tracing::warn!(
        "{} {}/{}: {message}",
        K::kind(&()),
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    );
    ctx.shared
        .events
        .publish(obj, true, DELETED_WITH_SERVERS, message)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::client_service_long("tls://demo.nats-tenant.svc:4222", Some(("nats-tenant", "demo")))]
    #[case::client_service_domain("nats://demo.apps.svc.cluster.local:4222", Some(("apps", "demo")))]
    #[case::service_and_namespace("nats://demo.apps:4222", Some(("apps", "demo")))]
    #[case::bare_service_in_its_own_namespace("nats://demo:4222", Some(("own", "demo")))]
    #[case::a_servers_pod_name("nats://demo-0.demo-headless.apps.svc:4222", Some(("apps", "demo")))]
    #[case::with_credentials_in_the_url("nats://u:p@demo.apps.svc:4222", Some(("apps", "demo")))]
    #[case::an_address("nats://10.96.0.12:4222", None)]
    #[case::outside_kubernetes("tls://nats-1.legacy.example.internal:4222", None)]
    fn a_server_url_names_its_natscluster(#[case] url: &str, #[case] want: Option<(&str, &str)>) {
        assert_eq!(
            cluster_of(url, "own"),
            want.map(|(n, c)| (n.to_string(), c.to_string()))
        );
    }

    const TORN: Option<Fate> = Some(Fate {
        cluster_deleting: true,
        namespace_deleting: true,
    });

    #[rstest]
    #[case::both_being_deleted(Some(true), Some(true), TORN)]
    #[case::the_cluster_gone_from_a_namespace_being_deleted(None, Some(true), TORN)]
    #[case::the_namespace_gone(None, None, TORN)]
    #[case::the_cluster_gone_from_a_live_namespace(None, Some(false), Some(Fate { cluster_deleting: false, namespace_deleting: false }))]
    #[case::a_cluster_deleted_alone(Some(true), Some(false), Some(Fate { cluster_deleting: true, namespace_deleting: false }))]
    #[case::a_live_cluster_in_a_namespace_being_deleted(Some(false), Some(true), Some(Fate { cluster_deleting: false, namespace_deleting: true }))]
    fn a_servers_fate_from_what_the_apiserver_answered(
        #[case] cluster: Option<bool>,
        #[case] namespace: Option<bool>,
        #[case] want: Option<Fate>,
    ) {
        assert_eq!(Some(fate_of(cluster, namespace)), want);
    }

    #[rstest]
    #[case::its_servers_torn_down_with_their_namespace(vec![TORN], true)]
    #[case::every_server_must_be(vec![TORN, TORN, TORN], true)]
    #[case::a_natscluster_deleted_alone_keeps_its_servers(vec![Some(Fate { cluster_deleting: true, namespace_deleting: false })], false)]
    #[case::a_namespace_going_but_not_yet_its_cluster(vec![Some(Fate { cluster_deleting: false, namespace_deleting: true })], false)]
    #[case::one_server_not_a_natscluster(vec![TORN, None], false)]
    #[case::no_servers(vec![], false)]
    fn a_delete_goes_with_its_servers_only_when_kubernetes_tears_them_all_down(
        #[case] fates: Vec<Option<Fate>>,
        #[case] want: bool,
    ) {
        assert_eq!(goes_with_servers(&fates), want);
    }
}
