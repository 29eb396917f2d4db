//! The Helm chart `deploy/helm/nats-operators` as the tests see it: Helm through `scripts/helm.py`
//! (PyPI's helm-python-sdk, Helm v4's own Go SDK; there is no helm binary), a render split into
//! its documents, the RBAC table `files/rbac.yaml` and the docs table generated from it.
//!
//! Helm is optional on a contributor's machine and required in CI: [`Helm::find`] says why it is
//! missing and lets a test skip, unless `CI` is `true`, where a missing Helm is a failure
//! (`.ci/run` installs it with `scripts/install-helm.sh`).
//!
//! ```no_run
//! let Some(helm) = e2e::chart::Helm::find() else { return };
//! let render = helm.template(&[], "nats-operators", "nats-system").expect("renders");
//! for doc in e2e::chart::documents(&render).expect("parses") {
//!     println!("{} {} {}", doc.source, doc.kind(), doc.name());
//! }
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;
use serde_json::Value;

/// The workspace root of the checkout the test runs in (`sim::checkout`).
pub fn workspace_root() -> PathBuf {
    sim::checkout::root()
}

/// The chart's directory.
pub fn chart_dir() -> PathBuf {
    workspace_root().join("deploy/helm/nats-operators")
}

/// The values files and goldens the chart tests use (outside the chart, so never packaged).
pub fn testdata_dir() -> PathBuf {
    workspace_root().join("deploy/helm/testdata")
}

/// Whether goldens and generated docs are rewritten instead of compared (`just chart`).
pub fn updating() -> bool {
    std::env::var_os("CHART_UPDATE").is_some_and(|v| v == "1")
}

/// Helm, reached through `python3 scripts/helm.py`.
#[derive(Debug, Clone)]
pub struct Helm {
    python: String,
    shim: PathBuf,
}

/// What Helm said when it refused: its exit code and stderr.
#[derive(Debug, Clone, thiserror::Error)]
#[error("helm.py {command} exited {code:?}: {stderr}")]
pub struct HelmError {
    /// The shim's subcommand.
    pub command: String,
    /// Its exit code (None: killed by a signal).
    pub code: Option<i32>,
    /// Helm's reason.
    pub stderr: String,
}

impl Helm {
    /// Helm, or `None` after printing why it is missing (no python3, no helm-python-sdk).
    /// Panics instead where `CI=true`: the gate installs it, so there it must run.
    pub fn find() -> Option<Helm> {
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        let helm = Helm {
            python,
            shim: workspace_root().join("scripts/helm.py"),
        };
        let why = match Command::new(&helm.python)
            .arg(&helm.shim)
            .arg("version")
            .output()
        {
            Ok(out) if out.status.success() => return Some(helm),
            Ok(out) => format!(
                "`{} scripts/helm.py version` exited {:?}: {}",
                helm.python,
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => format!("{} cannot be run: {e}", helm.python),
        };
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("Helm is required in CI: {why} (scripts/install-helm.sh installs it)");
        }
        eprintln!("SKIPPED: no Helm: {why}; run scripts/install-helm.sh");
        None
    }

    fn run(&self, args: &[&str]) -> Result<Output, HelmError> {
        let out = Command::new(&self.python)
            .arg(&self.shim)
            .args(args)
            .output()
            .map_err(|e| HelmError {
                command: args.first().copied().unwrap_or_default().into(),
                code: None,
                stderr: e.to_string(),
            })?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(HelmError {
                command: args.first().copied().unwrap_or_default().into(),
                code: out.status.code(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// `helm template` of the chart with `values` files (later ones win), as release `name` in
    /// `namespace`: every document with a `# Source:` line.
    pub fn template(
        &self,
        values: &[&Path],
        name: &str,
        namespace: &str,
    ) -> Result<String, HelmError> {
        let chart = chart_dir();
        let mut args = vec![
            "template".to_string(),
            chart.display().to_string(),
            "--name".into(),
            name.into(),
            "--namespace".into(),
            namespace.into(),
        ];
        for v in values {
            args.push("-f".into());
            args.push(v.display().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&args)
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `helm lint --strict` of the chart with `values`: what it printed, or why it failed.
    pub fn lint(&self, values: &[&Path]) -> Result<String, String> {
        let chart = chart_dir();
        let mut args = vec![
            "lint".to_string(),
            "--strict".into(),
            chart.display().to_string(),
        ];
        for v in values {
            args.push("-f".into());
            args.push(v.display().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match Command::new(&self.python)
            .arg(&self.shim)
            .args(&args)
            .output()
        {
            Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into()),
            Ok(out) => Err(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    /// `helm.py ARGS...`: what it printed, or why Helm refused.
    pub fn run_args(&self, args: &[&str]) -> Result<String, HelmError> {
        self.run(args)
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `helm install` of the chart as [`RELEASE`] in [`NAMESPACE`] through `kubeconfig`, with
    /// `values` files (later ones win), as [`release_args`] runs it against the tests'
    /// kube-apiserver 1.20.
    pub fn install(&self, kubeconfig: &Path, values: &[&Path]) -> Result<String, HelmError> {
        let chart = chart_dir().display().to_string();
        let kubeconfig = kubeconfig.display().to_string();
        let values: Vec<String> = values.iter().map(|v| v.display().to_string()).collect();
        self.run_args(&release_args("install", &chart, &kubeconfig, &values))
    }

    /// `helm test name`, as a child process (the caller plays the kubelet for its pod).
    pub fn spawn_test(
        &self,
        name: &str,
        namespace: &str,
        kubeconfig: &Path,
    ) -> std::io::Result<std::process::Child> {
        Command::new(&self.python)
            .arg(&self.shim)
            .args(["test", name, "--kubeconfig"])
            .arg(kubeconfig)
            .args(["--namespace", namespace, "--timeout", "60"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
    }
}

/// One rendered document.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The template it came from (`nats-operators/templates/rbac.yaml`).
    pub source: String,
    /// The document as JSON.
    pub value: Value,
}

impl Rendered {
    /// `kind`.
    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }

    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        self.value["apiVersion"].as_str().unwrap_or_default()
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// `metadata.namespace`, empty for a cluster-scoped object.
    pub fn namespace(&self) -> &str {
        self.value["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
    }

    /// `Kind namespace/name`, or `Kind name`.
    pub fn describe(&self) -> String {
        match self.namespace() {
            "" => format!("{} {}", self.kind(), self.name()),
            ns => format!("{} {ns}/{}", self.kind(), self.name()),
        }
    }
}

/// The documents of a `helm.py template` output, in order.
pub fn documents(render: &str) -> Result<Vec<Rendered>, String> {
    let mut out = Vec::new();
    for (i, chunk) in render.split("\n---\n").enumerate() {
        let chunk = chunk.strip_prefix("---\n").unwrap_or(chunk);
        let source = chunk
            .lines()
            .find_map(|l| l.strip_prefix("# Source: "))
            .unwrap_or_default()
            .to_string();
        let yaml: serde_yaml::Value =
            serde_yaml::from_str(chunk).map_err(|e| format!("document {i} ({source}): {e}"))?;
        if yaml.is_null() {
            continue;
        }
        let value =
            serde_json::to_value(yaml).map_err(|e| format!("document {i} ({source}): {e}"))?;
        out.push(Rendered { source, value });
    }
    Ok(out)
}

/// The release name and namespace the chart tests render as.
pub const RELEASE: &str = "nats-operators";
/// The release namespace of the chart tests.
pub const NAMESPACE: &str = "nats-system";

/// The arguments of `helm.py install|upgrade` of `chart` as [`RELEASE`] in [`NAMESPACE`] with
/// `values` files. kube-apiserver 1.20 predates x-kubernetes-validations: its OpenAPI refuses the
/// field and its server-side apply cannot type it, so the OpenAPI validation is off and the apply
/// client-side (the apiserver drops the field on write). On 1.34 and later neither is needed.
pub fn release_args<'a>(
    command: &'a str,
    chart: &'a str,
    kubeconfig: &'a str,
    values: &'a [String],
) -> Vec<&'a str> {
    let mut args = vec![
        command,
        chart,
        RELEASE,
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        NAMESPACE,
        "--disable-openapi-validation",
        "--server-side",
        "false",
    ];
    for v in values {
        args.extend(["-f", v.as_str()]);
    }
    args
}

/// A file of [`testdata_dir`].
pub fn testdata(name: &str) -> PathBuf {
    testdata_dir().join(name)
}

/// The render of the chart with `values` files as [`RELEASE`] in [`NAMESPACE`]; panics saying
/// why it does not render or parse.
pub fn render(helm: &Helm, values: &[&Path]) -> Vec<Rendered> {
    let text = helm
        .template(values, RELEASE, NAMESPACE)
        .unwrap_or_else(|e| panic!("the chart does not render: {e}"));
    documents(&text).unwrap_or_else(|e| panic!("the render does not parse: {e}"))
}

/// The render with `yaml` as the only values file, or Helm's reason for refusing it.
pub fn render_yaml(helm: &Helm, yaml: &str) -> Result<Vec<Rendered>, String> {
    let file = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .map_err(|e| format!("a temp values file: {e}"))?;
    std::fs::write(file.path(), yaml).map_err(|e| format!("writing the values: {e}"))?;
    let text = helm
        .template(&[file.path()], RELEASE, NAMESPACE)
        .map_err(|e| e.stderr)?;
    documents(&text)
}

/// The renders every whole-chart check looks at: the default values, `full-values.yaml`
/// (namespaced, every value set) and the default with the ServiceMonitor and PrometheusRule on.
pub fn renders(helm: &Helm) -> Vec<(String, Vec<Rendered>)> {
    let full = testdata("full-values.yaml");
    let monitoring =
        "metrics: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}}\n";
    vec![
        ("default values".into(), render(helm, &[])),
        ("full-values.yaml".into(), render(helm, &[&full])),
        (
            "monitoring on, cluster-wide".into(),
            render_yaml(helm, monitoring).unwrap_or_else(|e| panic!("{e}")),
        ),
    ]
}

/// The Deployment of `controller` (`cluster`, `auth`, `jetstream`) in `docs`; panics when none.
pub fn deployment<'a>(docs: &'a [Rendered], controller: &str) -> &'a Rendered {
    docs.iter()
        .find(|d| {
            d.kind() == "Deployment"
                && d.value["metadata"]["labels"]["app.kubernetes.io/component"]
                    == format!("{controller}-controller").as_str()
        })
        .unwrap_or_else(|| panic!("no Deployment of the {controller} controller"))
}

/// The controller container of `controller`'s Deployment.
pub fn container(docs: &[Rendered], controller: &str) -> Value {
    deployment(docs, controller).value["spec"]["template"]["spec"]["containers"][0].clone()
}

/// The flags `controller` is started with.
pub fn args_of(docs: &[Rendered], controller: &str) -> Vec<String> {
    serde_json::from_value(container(docs, controller)["args"].clone()).unwrap_or_default()
}

/// One rule of `files/rbac.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RbacRule {
    /// API groups ("" is the core group).
    pub api_groups: Vec<String>,
    /// Resources, subresources as `kind/sub`.
    pub resources: Vec<String>,
    /// Verbs.
    pub verbs: Vec<String>,
    /// The only objects it covers (`resourceNames`); empty: every one.
    #[serde(default)]
    pub resource_names: Vec<String>,
    /// Why the controller needs it.
    pub why: String,
    /// `served` (the default) or `release`.
    #[serde(default)]
    pub scope: Option<String>,
    /// `leaderElection`: granted only with leader election.
    #[serde(default)]
    pub when: Option<String>,
}

impl RbacRule {
    /// Where the rule is granted: `served` or `release`.
    pub fn scope(&self) -> &str {
        self.scope.as_deref().unwrap_or("served")
    }

    /// The rule as the PolicyRule the chart renders.
    pub fn policy_rule(&self) -> Value {
        let mut rule = serde_json::json!({
            "apiGroups": self.api_groups,
            "resources": self.resources,
            "verbs": self.verbs,
        });
        if !self.resource_names.is_empty() {
            rule["resourceNames"] = serde_json::json!(self.resource_names);
        }
        rule
    }
}

/// The controllers in the order the chart and the docs list them.
pub const CONTROLLERS: [&str; 3] = ["cluster", "auth", "jetstream"];

/// The keys of `files/rbac.yaml`: the three controllers, then the uninstall hook
/// (templates/uninstall-hook.yaml), in the order the docs table lists them.
pub const RBAC_SUBJECTS: [&str; 4] = ["cluster", "auth", "jetstream", "uninstall"];

/// `files/rbac.yaml`: each controller's rules, and the uninstall hook's.
pub fn rbac_table() -> Result<BTreeMap<String, Vec<RbacRule>>, String> {
    let path = chart_dir().join("files/rbac.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Where the generated table sits in docs/controllers.md and docs/install.md.
pub const DOCS_BEGIN: &str = "<!-- rbac-table: generated from deploy/helm/nats-operators/files/rbac.yaml by `just chart`; do not edit -->";
/// The end of the generated table.
pub const DOCS_END: &str = "<!-- rbac-table end -->";

/// The permission table of docs/controllers.md and docs/install.md, generated from `table`.
pub fn rbac_markdown(table: &BTreeMap<String, Vec<RbacRule>>) -> String {
    let mut md = String::from(
        "| controller | API group | resources | verbs | where | why |\n|---|---|---|---|---|---|\n",
    );
    for name in RBAC_SUBJECTS {
        for rule in table.get(name).into_iter().flatten() {
            let groups = rule
                .api_groups
                .iter()
                .map(|g| if g.is_empty() { "core" } else { g.as_str() })
                .collect::<Vec<_>>()
                .join(", ");
            let code = |items: &[String]| {
                items
                    .iter()
                    .map(|i| format!("`{i}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let place = match (rule.scope(), rule.when.as_deref()) {
                _ if name == "uninstall" => "served namespaces, during `helm uninstall`".into(),
                ("release", Some(w)) => format!("release namespace, with {w}"),
                ("release", None) => "release namespace".into(),
                (_, Some(w)) => format!("served namespaces, with {w}"),
                (_, None) => "served namespaces".into(),
            };
            let resources = if rule.resource_names.is_empty() {
                code(&rule.resources)
            } else {
                format!(
                    "{} named {}",
                    code(&rule.resources),
                    code(&rule.resource_names)
                )
            };
            let _ = writeln!(
                md,
                "| {} | {groups} | {resources} | {} | {place} | {} |",
                if name == "uninstall" {
                    "uninstall hook"
                } else {
                    name
                },
                rule.verbs.join(", "),
                rule.why.replace('|', "\\|")
            );
        }
    }
    md
}

/// `text` with the generated block between [`DOCS_BEGIN`] and [`DOCS_END`] replaced by `table`;
/// `None` when the markers are missing.
pub fn with_docs_table(text: &str, table: &str) -> Option<String> {
    let start = text.find(DOCS_BEGIN)? + DOCS_BEGIN.len();
    let end = start + text[start..].find(DOCS_END)?;
    Some(format!("{}\n{table}{}", &text[..start], &text[end..]))
}
