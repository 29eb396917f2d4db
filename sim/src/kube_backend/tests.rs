use super::*;
use rstest::rstest;

fn release() -> Release {
    Release {
        chart: PathBuf::from("/w/deploy/helm/nats-operators"),
        name: "nats-operators".into(),
        namespace: "nats-system".into(),
        values: vec![PathBuf::from("/run/values.yaml")],
    }
}

fn controller(name: &str) -> ImageArchive {
    ImageArchive {
        archive: PathBuf::from(format!("/run/images/{name}-0.1.0.oci.tar")),
        base_name: None,
    }
}

fn nats(version: &str) -> ImageArchive {
    ImageArchive {
        archive: PathBuf::from(format!("/run/nats/{version}/nats-server.tar")),
        base_name: Some("docker.io/library/nats".into()),
    }
}

fn words(s: &[&str]) -> Vec<String> {
    s.iter().map(|w| w.to_string()).collect()
}

#[test]
fn the_k3s_plan_is_start_import_kubeconfig_namespace_helm_apply_stop_in_that_order() {
    let images = vec![controller("cluster-controller"), nats("2.15.0")];
    let stories = words(&["01-quickstart", "06-supercluster"]);
    let got = k3s_plan(Path::new("/run"), &images, &release(), &stories);
    let want = vec![
        Step::Start {
            backend: "k3s",
            run: words(&[
                "docker-run",
                "rancher/k3s:v1.35.0-k3s1",
                "--privileged",
                "--network sim-k3s",
                "-v /run/k3s-conf:/etc/rancher/k3s",
                "-v /run/images:/sim-images",
                "server",
                "--snapshotter=native",
                "--disable=traefik",
                "--disable=metrics-server",
                "--write-kubeconfig-mode=644",
                "--cluster-cidr=10.42.0.0/16",
                "--service-cidr=10.43.0.0/16",
                "--cluster-dns=10.43.0.10",
            ]),
        },
        Step::Import(controller("cluster-controller")),
        Step::Import(nats("2.15.0")),
        Step::Kubeconfig(PathBuf::from("/run/kubeconfig")),
        Step::Namespace("nats-system".into()),
        Step::HelmInstall(words(&[
            "install",
            "/w/deploy/helm/nats-operators",
            "nats-operators",
            "--kubeconfig",
            "/run/kubeconfig",
            "--namespace",
            "nats-system",
            "-f",
            "/run/values.yaml",
        ])),
        Step::Apply("01-quickstart".into()),
        Step::Apply("06-supercluster".into()),
        Step::Stop,
    ];
    assert_eq!(got, want);
}

#[rstest]
#[case::k3s_installs_the_chart_with_its_defaults_no_version_check_override(
    Flavor::Current,
    &["install", "/c", "r", "--kubeconfig", "/k", "--namespace", "ns", "-f", "/run/values.yaml"]
)]
#[case::the_node_120_turns_the_check_off_and_applies_client_side(
    Flavor::Kube120,
    &["install", "/c", "r", "--kubeconfig", "/k", "--namespace", "ns",
      "--disable-openapi-validation", "--server-side", "false",
      "-f", "/t/sim-install-values.yaml", "-f", "/run/values.yaml"]
)]
fn helm_install_args_follow_the_flavor(#[case] flavor: Flavor, #[case] want: &[&str]) {
    let r = Release {
        chart: "/c".into(),
        name: "r".into(),
        namespace: "ns".into(),
        values: vec!["/run/values.yaml".into()],
    };
    let got = helm_install_args(
        &r,
        Path::new("/k"),
        flavor,
        Path::new("/t/sim-install-values.yaml"),
    );
    assert_eq!(got, words(want));
    if flavor == Flavor::Current {
        assert!(
            !got.iter()
                .any(|a| a.contains("kubeVersionCheck") || a.contains("sim-install"))
        );
    }
}

#[rstest]
#[case::a_controller_under_its_own_name(
    controller("auth-controller"),
    &["ctr", "-n", "k8s.io", "images", "import", "/sim-images/auth-controller-0.1.0.oci.tar"]
)]
#[case::nats_under_the_stories_repository_and_by_digest(
    nats("2.15.1"),
    &["ctr", "-n", "k8s.io", "images", "import", "--base-name", "docker.io/library/nats",
      "--digests", "/sim-images/nats-server.tar"]
)]
fn k3s_imports_with_its_own_ctr_into_the_kubelets_namespace(
    #[case] image: ImageArchive,
    #[case] want: &[&str],
) {
    assert_eq!(k3s_import_command(&image), words(want));
}

#[rstest]
#[case::the_server_line_points_at_the_mapped_port(
    "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: AA\n    server: https://127.0.0.1:6443\n  name: default\n",
    "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: AA\n    server: https://127.0.0.1:40123\n  name: default\n"
)]
#[case::nothing_else_changes(
    "kind: Config\ncurrent-context: default\n",
    "kind: Config\ncurrent-context: default\n"
)]
fn k3s_kubeconfig_reaches_the_api_through_dockers_port(#[case] written: &str, #[case] want: &str) {
    assert_eq!(k3s_kubeconfig(written, 40123), want);
}

#[test]
fn the_pinned_k3s_is_at_or_above_the_charts_minimum() {
    let minor: u32 = K3S_IMAGE
        .1
        .strip_prefix("v1.")
        .and_then(|rest| rest.split('.').next())
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let chart = std::fs::read_to_string(crate::checkout::path(
        "deploy/helm/nats-operators/Chart.yaml",
    ))
    .unwrap_or_default();
    // Chart.yaml's annotation nats.mikluko.io/minimum-kubernetes ("1.34"): the minimum the
    // CRDs' CEL rules need, which the templates check.
    let min: u32 = chart
        .lines()
        .find_map(|l| l.trim().strip_prefix("nats.mikluko.io/minimum-kubernetes:"))
        .and_then(|v| v.trim().trim_matches('"').strip_prefix("1."))
        .and_then(|m| m.parse().ok())
        .unwrap_or(u32::MAX);
    assert!(
        minor >= min,
        "k3s 1.{minor} is older than the chart's 1.{min}"
    );
}

#[rstest]
#[case::a_gateway_and_a_leafnode_service_answer_under_example_net(
    &[("10.43.0.7", "east-gateway"), ("10.43.0.9", "hub-leafnodes"), ("10.43.0.2", "east")],
    &["        10.43.0.7 gw.east.example.net", "        10.43.0.9 leaf.hub.example.net"]
)]
#[case::a_headless_or_unassigned_service_answers_nothing(
    &[("None", "east-gateway"), ("", "west-gateway")],
    &[]
)]
fn k3s_answers_the_stories_outside_names_as_the_node_does(
    #[case] services: &[(&str, &str)],
    #[case] want: &[&str],
) {
    let services: Vec<(String, String)> = services
        .iter()
        .map(|(ip, n)| (ip.to_string(), n.to_string()))
        .collect();
    let text = k3s_outside_server(&services);
    let entries: Vec<&str> = text.lines().filter(|l| l.contains(" 10.")).collect();
    assert_eq!(entries, want);
    assert!(
        text.starts_with("example.net:53 {\n    hosts {\n"),
        "{text}"
    );
    assert!(text.contains("        fallthrough\n"), "{text}");
}
