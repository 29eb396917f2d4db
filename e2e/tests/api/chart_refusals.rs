//! The converse of the controllers' runs as their chart ServiceAccounts: what each must be refused.
//! The chart is installed into kube-apiserver 1.20 (RBAC on), once cluster-wide and once with
//! `watchNamespaces: [apps]`; each row of a table is asked for real, as the row's ServiceAccount
//! (a token of its own, not the admin), and must be answered 403 Forbidden, not merely fail. Each
//! row says why it must be refused. A few twins beside them, the same ServiceAccount asking the
//! permitted neighbour, must succeed: the table cannot pass by asking as the wrong identity.

use std::fmt;

use e2e::chart::NAMESPACE;
use e2e::installed::Installed;
use kube::Client;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use serde_json::{Value, json};
use sim::apiserver::ServiceAccountIdentity;

/// A served namespace of both installs.
const APPS: &str = "apps";
/// A namespace the namespaced install does not serve.
const OTHER: &str = "other";
/// What a named request names (nothing of that name exists: RBAC answers before lookup).
const PROBE: &str = "rbac-probe";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
}

/// A resource as its URL names it.
#[derive(Debug, Clone, Copy)]
struct Res {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    /// A subresource (`status`, `token`).
    sub: Option<&'static str>,
    /// Cluster-scoped (no namespace in its URL).
    cluster_scoped: bool,
}

const fn res(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
) -> Res {
    Res {
        group,
        version,
        plural,
        kind,
        sub: None,
        cluster_scoped: false,
    }
}

const fn cluster_scoped(mut r: Res) -> Res {
    r.cluster_scoped = true;
    r
}

const fn sub(mut r: Res, name: &'static str) -> Res {
    r.sub = Some(name);
    r
}

const SECRETS: Res = res("", "v1", "secrets", "Secret");
const CONFIGMAPS: Res = res("", "v1", "configmaps", "ConfigMap");
const PODS: Res = res("", "v1", "pods", "Pod");
const TOKENS: Res = sub(res("", "v1", "serviceaccounts", "TokenRequest"), "token");
const STATEFULSETS: Res = res("apps", "v1", "statefulsets", "StatefulSet");
const LEASES: Res = res("coordination.k8s.io", "v1", "leases", "Lease");
const CRDS: Res = cluster_scoped(res(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
));
const CLUSTERROLES: Res = cluster_scoped(res(
    "rbac.authorization.k8s.io",
    "v1",
    "clusterroles",
    "ClusterRole",
));
const ROLEBINDINGS: Res = res(
    "rbac.authorization.k8s.io",
    "v1",
    "rolebindings",
    "RoleBinding",
);
const NATSCLUSTERS: Res = res(
    "cluster.nats.mikluko.io",
    "v1beta1",
    "natsclusters",
    "NatsCluster",
);
const NATSCLUSTER_STATUS: Res = sub(NATSCLUSTERS, "status");
const NATSSTREAMS: Res = res(
    "jetstream.nats.mikluko.io",
    "v1beta1",
    "natsstreams",
    "NatsStream",
);
const NATSOPERATORS: Res = res(
    "auth.nats.mikluko.io",
    "v1beta1",
    "natsoperators",
    "NatsOperator",
);

/// One request: `controller`'s ServiceAccount does `verb` on `res` in `ns` (None: cluster-wide,
/// or a cluster-scoped resource), and `why` it must be refused (or, for a twin, why it may).
struct Row {
    controller: &'static str,
    verb: Verb,
    res: Res,
    ns: Option<&'static str>,
    why: &'static str,
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = match self.res.group {
            "" => String::new(),
            g => format!(".{g}"),
        };
        let sub = self.res.sub.map(|s| format!("/{s}")).unwrap_or_default();
        let at = match self.ns {
            Some(ns) => format!("in {ns}"),
            None if self.res.cluster_scoped => String::new(),
            None => "cluster-wide".into(),
        };
        write!(
            f,
            "{} {:?} {}{group}{sub} {at} ({})",
            self.controller, self.verb, self.res.plural, self.why
        )
    }
}

const fn row(
    controller: &'static str,
    verb: Verb,
    res: Res,
    ns: Option<&'static str>,
    why: &'static str,
) -> Row {
    Row {
        controller,
        verb,
        res,
        ns,
        why,
    }
}

/// What any controller's ServiceAccount must be refused, in either install: to write the API
/// itself or RBAC, or to mint another ServiceAccount's token, is to give itself more.
#[rustfmt::skip]
fn escalations() -> Vec<Row> {
    use Verb::*;
    let mut rows = Vec::new();
    for controller in e2e::chart::CONTROLLERS {
        rows.extend([
            row(controller, Create, CRDS, None, "the CRDs are the chart's: one who writes them rewrites any API"),
            row(controller, Create, CLUSTERROLES, None, "writing RBAC is granting itself more"),
            row(controller, Create, ROLEBINDINGS, Some(NAMESPACE), "binding itself to a Role is granting itself more"),
            row(controller, Create, ROLEBINDINGS, Some(APPS), "RBAC stays the chart's in a served namespace too"),
            row(controller, Create, TOKENS, Some(NAMESPACE), "another controller's token is that controller's permissions"),
        ]);
    }
    rows
}

/// The cluster-wide install's refusals: each controller kept to its own kinds.
#[rustfmt::skip]
fn cluster_wide_refused() -> Vec<Row> {
    use Verb::*;
    let mut rows = vec![
        row("jetstream", Create, STATEFULSETS, Some(APPS), "it runs no NATS servers: StatefulSets are the cluster controller's"),
        row("jetstream", Create, SECRETS, Some(APPS), "it reads the Secrets a NatsConnection names and writes none"),
        row("jetstream", Patch, SECRETS, Some(APPS), "it writes no Secret: a patch would rewrite a tenant's credentials"),
        row("jetstream", Delete, SECRETS, Some(APPS), "it writes no Secret, so it deletes none"),
        row("jetstream", Patch, NATSCLUSTER_STATUS, Some(APPS), "a NatsCluster's status is the cluster controller's"),
        row("auth", Delete, STATEFULSETS, Some(APPS), "it signs; it owns no workload"),
        row("auth", List, SECRETS, None, "it reads the Secrets it names, by name: every Secret is not its"),
        row("auth", Watch, SECRETS, Some(NAMESPACE), "a watch would hand it every Secret of the namespace as it changes"),
        row("auth", List, SECRETS, Some(APPS), "it reads only the Secrets a spec names, by name"),
        row("auth", Patch, SECRETS, Some(APPS), "it replaces a creds Secret at the resourceVersion it read: a patch would write over a change it never saw"),
        row("auth", Create, NATSOPERATORS, Some(NAMESPACE), "operators are the user's to declare; it signs them"),
        row("cluster", Delete, PODS, Some(APPS), "a rollout deletes a server's StatefulSet; Pods are the StatefulSet controller's"),
        row("cluster", Delete, SECRETS, Some(APPS), "it deletes no Secret: a withdrawn leaf remote's copy is emptied by a patch"),
        row("cluster", Update, SECRETS, Some(APPS), "its own Secrets are written by server-side apply, never replaced whole"),
        row("cluster", Patch, NATSSTREAMS, Some(APPS), "JetStream resources are the JetStream controller's"),
        row("cluster", Create, LEASES, Some(APPS), "its Lease lives in the release namespace only"),
        row("auth", Update, LEASES, Some("kube-system"), "kube-system's Leases are the control plane's"),
    ];
    rows.extend(escalations());
    rows
}

/// Twins of the cluster-wide refusals: the same ServiceAccounts asking what they are granted.
#[rustfmt::skip]
fn cluster_wide_allowed() -> Vec<Row> {
    use Verb::*;
    vec![
        row("jetstream", List, SECRETS, Some(APPS), "the Secrets a NatsConnection names"),
        row("jetstream", Watch, SECRETS, Some(APPS), "their metadata, so rotated credentials re-dial at once"),
        row("jetstream", List, NATSSTREAMS, Some(APPS), "the streams it serves"),
        row("auth", Get, SECRETS, Some(NAMESPACE), "a Secret it names"),
        row("auth", Update, SECRETS, Some(APPS), "a creds Secret replaced at the resourceVersion it read"),
        row("cluster", Patch, SECRETS, Some(APPS), "a Secret it controls, by server-side apply"),
        row("auth", List, NATSOPERATORS, Some(NAMESPACE), "the operators it signs for"),
        row("cluster", List, PODS, None, "each server's readiness (the rollout gate)"),
        row("cluster", Create, CONFIGMAPS, Some(APPS), "a server's nats.conf"),
        row("cluster", Create, LEASES, Some(NAMESPACE), "its Lease, in the release namespace"),
    ]
}

/// The namespaced install's refusals (`watchNamespaces: [apps]`): nothing outside `apps` but the
/// Lease in the release namespace, and nothing cluster-wide.
#[rustfmt::skip]
fn namespaced_refused() -> Vec<Row> {
    use Verb::*;
    let mut rows = vec![
        row("cluster", Get, SECRETS, Some(OTHER), "the install serves apps only"),
        row("cluster", List, SECRETS, None, "every namespace's Secrets are the cluster-wide install's"),
        row("jetstream", Watch, SECRETS, None, "a watch of every namespace's Secrets is the cluster-wide install's"),
        row("auth", Get, SECRETS, Some(OTHER), "the install serves apps only"),
        row("auth", Create, SECRETS, Some(OTHER), "keys and creds are written only in the served namespaces"),
        row("cluster", Patch, SECRETS, Some(OTHER), "its Secrets are written only in the served namespaces"),
        row("jetstream", List, SECRETS, Some(NAMESPACE), "the release namespace is not served: only the Lease is granted there"),
        row("cluster", List, NATSCLUSTERS, None, "a cluster-wide watch needs the ClusterRole this install does not make"),
        row("cluster", Create, STATEFULSETS, Some(OTHER), "no servers outside the served namespaces"),
        row("cluster", Create, LEASES, Some(APPS), "its Lease lives in the release namespace only"),
    ];
    rows.extend(escalations());
    rows
}

/// Twins of the namespaced refusals.
#[rustfmt::skip]
fn namespaced_allowed() -> Vec<Row> {
    use Verb::*;
    vec![
        row("cluster", List, SECRETS, Some(APPS), "the Secrets of the served namespace"),
        row("jetstream", Watch, SECRETS, Some(APPS), "a watch of the served namespace's Secrets"),
        row("auth", Get, SECRETS, Some(APPS), "a Secret it names in the served namespace"),
        row("cluster", Patch, SECRETS, Some(APPS), "a Secret it controls in the served namespace"),
        row("cluster", List, NATSCLUSTERS, Some(APPS), "the NatsClusters of the served namespace"),
        row("cluster", Create, CONFIGMAPS, Some(APPS), "a server's nats.conf in the served namespace"),
        row("jetstream", Create, LEASES, Some(NAMESPACE), "its Lease, in the release namespace"),
    ]
}

/// The URL of `res` in `ns`.
fn url(res: &Res, ns: Option<&str>) -> String {
    let base = match res.group {
        "" => format!("/api/{}", res.version),
        g => format!("/apis/{g}/{}", res.version),
    };
    match ns {
        Some(ns) if !res.cluster_scoped => format!("{base}/namespaces/{ns}/{}", res.plural),
        _ => format!("{base}/{}", res.plural),
    }
}

/// A body for a create or an update of `res`: the least a valid object of the kind needs.
fn body(row: &Row) -> Vec<u8> {
    let api_version = match row.res.group {
        "" => row.res.version.to_string(),
        g => format!("{g}/{}", row.res.version),
    };
    let doc = match row.res.sub {
        Some("token") => json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {},
        }),
        _ => {
            let mut doc = json!({
                "apiVersion": api_version, "kind": row.res.kind, "metadata": {"name": PROBE},
            });
            if let Some(ns) = row.ns {
                doc["metadata"]["namespace"] = json!(ns);
            }
            doc
        }
    };
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// Asks `row` for real as `client`: Ok, or the server's refusal.
async fn ask(client: &Client, row: &Row) -> Result<(), kube::Error> {
    let r = kube::core::Request::new(url(&row.res, row.ns));
    let pp = PostParams::default();
    let patch: Patch<Value> = Patch::Merge(json!({"metadata": {"labels": {"rbac-probe": "1"}}}));
    // The name asked for: a token is another ServiceAccount's, anything else the probe's.
    let name = match row.res.sub {
        Some("token") => other_account(row),
        _ => PROBE.to_string(),
    };
    let built = match (row.verb, row.res.sub) {
        (Verb::Get, _) => r.get(&name, &Default::default()),
        (Verb::List, _) => r.list(&ListParams::default()),
        (Verb::Watch, _) => r.watch(&WatchParams::default().timeout(5), "0"),
        (Verb::Create, Some(sub)) => r.create_subresource(sub, &name, &pp, body(row)),
        (Verb::Create, None) => r.create(&pp, body(row)),
        (Verb::Update, _) => r.replace(&name, &pp, body(row)),
        (Verb::Patch, Some(sub)) => {
            r.patch_subresource(sub, &name, &PatchParams::default(), &patch)
        }
        (Verb::Patch, None) => r.patch(&name, &PatchParams::default(), &patch),
        (Verb::Delete, _) => r.delete(&name, &DeleteParams::default()),
    };
    let request = built.unwrap_or_else(|e| panic!("{row}: building the request: {e}"));
    if row.verb == Verb::Watch {
        // A granted watch starts (its first answer is 200); take nothing of it.
        return client.request_events::<Value>(request).await.map(drop);
    }
    client.request::<Value>(request).await.map(drop)
}

/// The ServiceAccount a token row asks a token of (another controller's).
fn other_account(row: &Row) -> String {
    let other = match row.controller {
        "cluster" => "auth",
        "auth" => "jetstream",
        _ => "cluster",
    };
    Installed::service_account(other)
}

/// What became of a request, for a failure message.
fn outcome(result: &Result<(), kube::Error>) -> String {
    match result {
        Ok(()) => "allowed".into(),
        Err(e) => sim::testkit::api_error(e),
    }
}

/// Installs the chart (`watch` empty: cluster-wide), then asks every row of `refused` (each
/// must be 403) and of `allowed` (each must succeed) as its ServiceAccount; fails listing every
/// row that did otherwise.
async fn check(watch: &[&str], refused: Vec<Row>, allowed: Vec<Row>) {
    let chart = match watch {
        [] => Installed::cluster_wide(&[APPS, OTHER]).await,
        _ => Installed::namespaced(watch, &[OTHER]).await,
    };
    let Some(chart) = chart else { return };
    // The Secrets the Get twins read, as the admin wrote them.
    for ns in [NAMESPACE, APPS] {
        sim::testkit::apply(
            &chart.api.client(),
            &json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": PROBE, "namespace": ns}, "stringData": {"k": "v"}}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let mut identities: Vec<(&str, ServiceAccountIdentity)> = Vec::new();
    for controller in e2e::chart::CONTROLLERS {
        identities.push((controller, chart.identity(controller).await));
    }
    let client_of = |controller: &str| {
        identities
            .iter()
            .find(|(c, _)| *c == controller)
            .map(|(_, sa)| sa.client())
            .unwrap_or_else(|| panic!("no ServiceAccount of {controller}"))
    };
    let mut wrong = Vec::new();
    for row in &refused {
        let result = ask(&client_of(row.controller), row).await;
        match &result {
            Err(kube::Error::Api(status)) if status.code == 403 => {}
            _ => wrong.push(format!(
                "must be refused 403: {row}; was {}",
                outcome(&result)
            )),
        }
    }
    for row in &allowed {
        let result = ask(&client_of(row.controller), row).await;
        if result.is_err() {
            wrong.push(format!("must be allowed: {row}; was {}", outcome(&result)));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} rows:\n{}",
        wrong.len(),
        refused.len() + allowed.len(),
        wrong.join("\n")
    );
    // The server's own record: each refusal is under the row's ServiceAccount, none under another.
    let mut audited = 0;
    for (_, sa) in &identities {
        audited += chart
            .api
            .refused_to(&sa.username())
            .unwrap_or_else(|e| panic!("{e}"))
            .len();
    }
    assert_eq!(
        audited,
        refused.len(),
        "every refusal audited once, as its ServiceAccount"
    );
    eprintln!(
        "{}: {} requests refused 403, {} twins allowed",
        if watch.is_empty() {
            "cluster-wide"
        } else {
            "namespaced"
        },
        refused.len(),
        allowed.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_wide_each_service_account_is_refused_what_is_not_its_own() {
    check(&[], cluster_wide_refused(), cluster_wide_allowed()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_nothing_outside_the_watched_namespaces_but_the_lease() {
    check(&[APPS], namespaced_refused(), namespaced_allowed()).await;
}
