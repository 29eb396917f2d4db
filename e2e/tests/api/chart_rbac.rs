//! The chart's RBAC comes from one table, `files/rbac.yaml`: each controller's ClusterRole (or, with
//! `watchNamespaces`, its Role in each watched namespace) holds exactly its rows, the release
//! namespace's Role the Lease row, and the permission table of docs/controllers.md and of
//! docs/install.md's RBAC section is generated from it (`just chart` rewrites both; this test
//! fails when either drifts).

use std::collections::{BTreeMap, BTreeSet};

use e2e::chart::{
    self, CONTROLLERS, Helm, NAMESPACE, RBAC_SUBJECTS, RELEASE, Rendered, args_of, render,
    render_yaml,
};
use serde_json::Value;

fn table() -> BTreeMap<String, Vec<chart::RbacRule>> {
    chart::rbac_table().unwrap_or_else(|e| panic!("{e}"))
}

fn rules_of(doc: &Rendered) -> Vec<Value> {
    doc.value["rules"].as_array().cloned().unwrap_or_default()
}

/// The table's rules of `controller` granted in `scope`, as the chart renders them.
fn expected(controller: &str, scope: &str, leader_election: bool) -> Vec<Value> {
    table()[controller]
        .iter()
        .filter(|r| r.scope() == scope)
        .filter(|r| leader_election || r.when.is_none())
        .map(chart::RbacRule::policy_rule)
        .collect()
}

#[test]
fn the_table_names_only_the_three_controllers_the_hook_and_known_verbs() {
    let table = table();
    assert_eq!(
        table.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        RBAC_SUBJECTS.into_iter().collect()
    );
    let verbs: BTreeSet<&str> = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ]
    .into();
    for (controller, rules) in &table {
        for rule in rules {
            assert!(!rule.why.is_empty(), "{controller}: {rule:?} says no why");
            assert!(
                rule.verbs.iter().all(|v| verbs.contains(v.as_str())),
                "{controller}: {rule:?}"
            );
            assert!(
                ["served", "release"].contains(&rule.scope()),
                "{controller}: {rule:?}"
            );
            assert!(
                rule.when.as_deref().is_none_or(|w| w == "leaderElection"),
                "{controller}: {rule:?}"
            );
        }
    }
}

#[test]
fn cluster_wide_each_controller_gets_a_cluster_role_of_its_table_rows() {
    let Some(helm) = Helm::find() else { return };
    let docs = render(&helm, &[]);
    for controller in CONTROLLERS {
        let name = format!("{RELEASE}-{controller}");
        let role = docs
            .iter()
            .find(|d| d.kind() == "ClusterRole" && d.name() == name)
            .unwrap_or_else(|| panic!("no ClusterRole {name}"));
        assert_eq!(
            rules_of(role),
            expected(controller, "served", true),
            "{name}"
        );
        let own = docs
            .iter()
            .find(|d| d.kind() == "Role" && d.name() == format!("{name}-self"))
            .unwrap_or_else(|| panic!("no Role {name}-self"));
        assert_eq!(own.namespace(), NAMESPACE);
        assert_eq!(rules_of(own), expected(controller, "release", true));
        let binding = docs
            .iter()
            .find(|d| d.kind() == "ClusterRoleBinding" && d.name() == name)
            .unwrap_or_else(|| panic!("no ClusterRoleBinding {name}"));
        assert_eq!(binding.value["roleRef"]["name"], name.as_str());
        assert_eq!(binding.value["subjects"][0]["name"], name.as_str());
        assert_eq!(binding.value["subjects"][0]["namespace"], NAMESPACE);
    }
    assert!(
        !docs
            .iter()
            .any(|d| d.kind() == "Role" && !d.name().ends_with("-self"))
    );
}

#[test]
fn namespaced_each_controller_gets_a_role_in_each_watched_namespace_and_the_flag() {
    let Some(helm) = Helm::find() else { return };
    let docs = render_yaml(
        &helm,
        "watchNamespaces: [apps, tenants]\nleaderElection: {enabled: false}\n\
         controllers: {cluster: {replicas: 1}, auth: {replicas: 1}, jetstream: {replicas: 1}}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !docs
            .iter()
            .any(|d| d.kind().starts_with("Cluster") && d.kind() != "CustomResourceDefinition")
    );
    for controller in CONTROLLERS {
        let name = format!("{RELEASE}-{controller}");
        for ns in ["apps", "tenants"] {
            let role = docs
                .iter()
                .find(|d| d.kind() == "Role" && d.name() == name && d.namespace() == ns)
                .unwrap_or_else(|| panic!("no Role {ns}/{name}"));
            assert_eq!(rules_of(role), expected(controller, "served", false));
            assert!(
                docs.iter()
                    .any(|d| d.kind() == "RoleBinding" && d.name() == name && d.namespace() == ns),
                "no RoleBinding {ns}/{name}"
            );
        }
        // Without leader election nothing is granted in the release namespace.
        assert!(!docs.iter().any(|d| d.name() == format!("{name}-self")));
        assert!(
            args_of(&docs, controller).contains(&"--watch-namespaces=apps,tenants".to_string())
        );
    }
}

/// The docs that carry the generated permission table: the controllers' reference and the
/// install guide's RBAC section, both from the one table.
const DOCS_WITH_THE_TABLE: [&str; 2] = ["docs/controllers.md", "docs/install.md"];

#[test]
fn the_docs_permission_table_is_generated_from_the_rbac_table() {
    for doc in DOCS_WITH_THE_TABLE {
        let path = chart::workspace_root().join(doc);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let want = chart::with_docs_table(&text, &chart::rbac_markdown(&table()))
            .unwrap_or_else(|| panic!("{}: the rbac-table markers are missing", path.display()));
        if chart::updating() {
            std::fs::write(&path, &want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            continue;
        }
        assert!(
            text == want,
            "{doc}'s permission table differs from files/rbac.yaml; run `just chart`"
        );
    }
}

/// The documents of the uninstall hook (templates/uninstall-hook.yaml) in `docs`.
fn hook_docs(docs: &[Rendered]) -> Vec<&Rendered> {
    docs.iter()
        .filter(|d| d.source.ends_with("templates/uninstall-hook.yaml"))
        .collect()
}

#[test]
fn the_uninstall_hook_refuses_by_default_with_rbac_of_its_rows_made_only_for_the_hook() {
    let Some(helm) = Helm::find() else { return };
    let docs = render(&helm, &[]);
    let hook = hook_docs(&docs);
    let name = format!("{RELEASE}-uninstall");
    let kinds: Vec<&str> = hook.iter().map(|d| d.kind()).collect();
    assert_eq!(
        kinds,
        ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job"]
    );
    for d in &hook {
        assert_eq!(d.name(), name);
        assert_eq!(
            d.value["metadata"]["annotations"]["helm.sh/hook"],
            "pre-delete",
            "{}",
            d.describe()
        );
    }
    let role = hook[1];
    let want: Vec<Value> = table()["uninstall"]
        .iter()
        .map(chart::RbacRule::policy_rule)
        .collect();
    assert_eq!(rules_of(role), want);
    let job = hook[3];
    let pod = &job.value["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], name.as_str());
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"],
        "localhost/nats-operators/cluster-controller:0.1.0"
    );
    let args: Vec<String> = serde_json::from_value(container["args"].clone()).expect("args");
    assert_eq!(
        args,
        ["uninstall-hook", "--timeout-seconds=240", "--max-named=20"]
    );
    assert_eq!(job.value["spec"]["backoffLimit"], 0);
}

#[test]
fn the_uninstall_hook_deletes_when_asked_in_the_watched_namespaces_with_the_first_enabled_image() {
    let Some(helm) = Helm::find() else { return };
    let docs = render_yaml(
        &helm,
        "uninstall: {deleteResources: true, timeoutSeconds: 90}\nwatchNamespaces: [apps, tenants]\n\
         controllers: {cluster: {enabled: false}}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let hook = hook_docs(&docs);
    for ns in ["apps", "tenants"] {
        assert!(
            hook.iter()
                .any(|d| d.kind() == "Role" && d.namespace() == ns),
            "no Role of the hook in {ns}"
        );
    }
    assert!(!hook.iter().any(|d| d.kind().starts_with("Cluster")));
    let job = hook.iter().find(|d| d.kind() == "Job").expect("the Job");
    let container = &job.value["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"],
        "localhost/nats-operators/auth-controller:0.1.0"
    );
    let args: Vec<String> = serde_json::from_value(container["args"].clone()).expect("args");
    assert_eq!(
        args,
        [
            "uninstall-hook",
            "--delete-resources",
            "--timeout-seconds=90",
            "--max-named=20",
            "--watch-namespaces=apps,tenants"
        ]
    );
    assert_eq!(job.value["spec"]["activeDeadlineSeconds"], 150);

    let off = render_yaml(&helm, "uninstall: {check: false}\n").unwrap_or_else(|e| panic!("{e}"));
    assert!(hook_docs(&off).is_empty());
}
