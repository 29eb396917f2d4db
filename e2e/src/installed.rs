//! The chart installed into a test kube-apiserver 1.20 (the real RBAC authorizer; no kubelet, so
//! its Deployments never run): its CRDs, ServiceAccounts and RBAC, for a test that runs a
//! controller binary as its chart ServiceAccount, as its pod would. The verdict is the server's:
//! its audit log holds every request the ServiceAccount made ([`sim::apiserver::AuditEvent`]), and
//! [`Installed::assert_nothing_refused`] fails naming each one the RBAC authorizer forbade.
//!
//! ```no_run
//! # async fn f() {
//! let Some(chart) = e2e::installed::Installed::cluster_wide(&["apps"]).await else { return };
//! let sa = chart.identity("jetstream").await;
//! // ... run the binary with KUBECONFIG=sa.kubeconfig() and drive it ...
//! chart.assert_nothing_refused(&sa);
//! # }
//! ```

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use sim::apiserver::{Access, ApiServer, AuditEvent, ServiceAccountIdentity};
use sim::testkit::{KillOnDrop, OUTPUT_TAIL, WAIT};

use crate::chart::{self, Helm, NAMESPACE, RELEASE};

/// How long the RBAC authorizer may take to have the chart's bindings in force.
const IN_FORCE: Duration = Duration::from_secs(30);

/// The flags that make a binary elect its leader on the Lease in the release namespace, as the
/// chart's Deployment does (`--leader-elect`, and `POD_NAMESPACE` there).
pub const LEADER_ELECTION: [&str; 3] = ["--leader-elect", "--leader-elect-namespace", NAMESPACE];

/// The chart installed as [`RELEASE`] in [`NAMESPACE`].
pub struct Installed {
    /// The server it is installed in.
    pub api: ApiServer,
    /// Its `watchNamespaces` (empty: cluster-wide).
    watch_namespaces: Vec<String>,
}

impl Installed {
    /// A kube-apiserver 1.20 with [`NAMESPACE`] and `namespaces`, and the chart installed
    /// cluster-wide (`sim-install-values.yaml`: the defaults, leader election on). `None`, after
    /// saying why, where there is no Helm.
    pub async fn cluster_wide(namespaces: &[&str]) -> Option<Installed> {
        Self::install(&[], namespaces).await
    }

    /// As [`Installed::cluster_wide`], installed with `watchNamespaces: watch` (each created):
    /// a Role and RoleBinding per controller in each of them.
    pub async fn namespaced(watch: &[&str], namespaces: &[&str]) -> Option<Installed> {
        Self::install(watch, namespaces).await
    }

    async fn install(watch: &[&str], namespaces: &[&str]) -> Option<Installed> {
        let helm = Helm::find()?;
        let api = ApiServer::kube_1_20()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for ns in [NAMESPACE].iter().chain(namespaces).chain(watch) {
            api.create_namespace(ns)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let values = tempfile::Builder::new()
            .suffix(".yaml")
            .tempfile()
            .unwrap_or_else(|e| panic!("a temp values file: {e}"));
        let yaml = format!(
            "watchNamespaces: {}\n",
            serde_json::to_string(watch).unwrap_or_default()
        );
        std::fs::write(values.path(), yaml).unwrap_or_else(|e| panic!("writing values: {e}"));
        let sim_values = chart::testdata("sim-install-values.yaml");
        helm.install(api.kubeconfig(), &[&sim_values, values.path()])
            .unwrap_or_else(|e| panic!("helm install: {e}"));
        let crds: Vec<String> = nats_api::crds::all()
            .into_iter()
            .map(|c| c.metadata.name.unwrap_or_default())
            .collect();
        api.wait_established(&crds)
            .await
            .unwrap_or_else(|e| panic!("the chart's CRDs: {e}"));
        Some(Installed {
            api,
            watch_namespaces: watch.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// The name of `controller`'s ServiceAccount (`cluster`, `auth`, `jetstream`).
    pub fn service_account(controller: &str) -> String {
        format!("{RELEASE}-{controller}")
    }

    /// The identity of `controller`'s chart ServiceAccount, once the authorizer allows it
    /// everything [`Installed::granted`] lists (asked as the admin: no refusal of it is audited).
    pub async fn identity(&self, controller: &str) -> ServiceAccountIdentity {
        let sa = self
            .api
            .service_account_identity(NAMESPACE, &Self::service_account(controller))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        self.api
            .wait_allowed(&sa.username(), &self.granted(controller), IN_FORCE)
            .await
            .unwrap_or_else(|e| panic!("the chart's RBAC of {controller}: {e}"));
        sa
    }

    /// Every request `files/rbac.yaml` grants `controller` in this install: each verb on each
    /// resource of each rule, `served` rules cluster-wide (or in each watched namespace), the
    /// `release` rules (leader election is on) in [`NAMESPACE`].
    pub fn granted(&self, controller: &str) -> Vec<Access> {
        let table = chart::rbac_table().unwrap_or_else(|e| panic!("{e}"));
        let served: Vec<Option<String>> = if self.watch_namespaces.is_empty() {
            vec![None]
        } else {
            self.watch_namespaces.iter().cloned().map(Some).collect()
        };
        let mut out = Vec::new();
        for rule in table.get(controller).into_iter().flatten() {
            let places = match rule.scope() {
                "release" => vec![Some(NAMESPACE.to_owned())],
                _ => served.clone(),
            };
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let names: Vec<Option<String>> = if rule.resource_names.is_empty() {
                        vec![None]
                    } else {
                        rule.resource_names.iter().cloned().map(Some).collect()
                    };
                    for verb in &rule.verbs {
                        for namespace in &places {
                            for name in &names {
                                out.push(Access {
                                    verb: verb.clone(),
                                    group: group.clone(),
                                    resource: resource.clone(),
                                    namespace: namespace.clone(),
                                    name: name.clone(),
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// After a run as `sa`: panics naming every request refused it as forbidden (by the RBAC
    /// authorizer or an admission plugin checking a permission: one `files/rbac.yaml` lacks), or when nothing was asked as `sa` at all (the run did
    /// not use the identity); prints what it asked, and which granted (verb, resource) pairs it
    /// never used. Returns its requests.
    pub fn assert_nothing_refused(&self, sa: &ServiceAccountIdentity) -> Vec<AuditEvent> {
        let user = sa.username();
        let events = self.api.audit_of(&user).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !events.is_empty(),
            "no request as {user} is audited: the run did not use its identity"
        );
        let refused = refusals(&events);
        assert!(
            refused.is_empty(),
            "{user} was refused {} of its {} requests (files/rbac.yaml lacks them):\n{}",
            events.iter().filter(|e| e.forbidden()).count(),
            events.len(),
            refused.join("\n")
        );
        let used: BTreeSet<String> = events
            .iter()
            .map(|e| kind_key(&e.verb, &e.resource))
            .collect();
        let unused: BTreeSet<String> = self
            .granted(&controller_of(sa))
            .iter()
            .map(|a| kind_key(&a.verb, &audit_resource(a)))
            .filter(|k| !used.contains(k))
            .collect();
        eprintln!(
            "{user}: {} requests, 0 refused; {} distinct (verb, resource) used; granted and unused: {unused:?}",
            events.len(),
            used.len()
        );
        events
    }

    /// A guard that, should the test panic while it lives (a wait timed out), prints what the
    /// RBAC authorizer refused `sa` so far: the likely reason.
    pub fn show_refusals_on_panic<'a>(
        &'a self,
        sa: &'a ServiceAccountIdentity,
    ) -> RefusalsOnPanic<'a> {
        RefusalsOnPanic { chart: self, sa }
    }
}

/// See [`Installed::show_refusals_on_panic`].
pub struct RefusalsOnPanic<'a> {
    chart: &'a Installed,
    sa: &'a ServiceAccountIdentity,
}

impl Drop for RefusalsOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let user = self.sa.username();
            match self.chart.api.audit_of(&user) {
                Ok(events) => eprintln!("refused to {user} so far: {:#?}", refusals(&events)),
                Err(e) => eprintln!("the audit log of {user}: {e}"),
            }
        }
    }
}

/// The forbidden requests among `events`, each once with how often it was asked.
fn refusals(events: &[AuditEvent]) -> Vec<String> {
    let mut counted: Vec<(String, usize)> = Vec::new();
    for e in events.iter().filter(|e| e.forbidden()) {
        let line = e.to_string();
        match counted.iter_mut().find(|(l, _)| *l == line) {
            Some((_, n)) => *n += 1,
            None => counted.push((line, 1)),
        }
    }
    counted
        .into_iter()
        .map(|(line, n)| {
            if n == 1 {
                line
            } else {
                format!("{line} (×{n})")
            }
        })
        .collect()
}

/// `verb resource[.group][/subresource]`, as the audit log names a request's kind.
fn kind_key(verb: &str, resource: &str) -> String {
    format!("{verb} {resource}")
}

/// An access's resource as the audit log writes it: `resource.group/subresource`.
fn audit_resource(a: &Access) -> String {
    let (resource, sub) = match a.resource.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (a.resource.as_str(), None),
    };
    let mut out = resource.to_owned();
    if !a.group.is_empty() {
        out = format!("{out}.{}", a.group);
    }
    if let Some(sub) = sub {
        out = format!("{out}/{sub}");
    }
    out
}

/// `cluster` of `nats-system/nats-operators-cluster` (the chart's ServiceAccount names).
fn controller_of(sa: &ServiceAccountIdentity) -> String {
    let account = sa.service_account();
    account
        .strip_prefix(&format!("{NAMESPACE}/{RELEASE}-"))
        .unwrap_or_else(|| panic!("{account} is not a ServiceAccount of the chart"))
        .to_owned()
}

/// Sends the binary SIGTERM, as the kubelet stops its pod, and waits until it exits 0: it
/// drained and (with leader election) released its Lease, each request as its identity.
pub async fn stop(child: &mut KillOnDrop, what: &str) {
    let status = child
        .terminate(WAIT)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        status.success(),
        "{what} exited {status} after SIGTERM; the last {OUTPUT_TAIL} lines of its output:\n{}",
        child.output_tail(OUTPUT_TAIL)
    );
}

/// Whether the binary `program` serves `--watch-namespaces` (its `--help` names it); prints why
/// a test skips where not.
pub fn serves_watch_namespaces(program: &Path) -> bool {
    let help = std::process::Command::new(program)
        .arg("--help")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let serves = help.contains("--watch-namespaces");
    if !serves {
        eprintln!(
            "SKIPPED: {} has no --watch-namespaces flag yet, so it cannot run under a namespaced \
             install (it watches every namespace); the cluster-wide run covers it until then",
            program.display()
        );
    }
    serves
}
