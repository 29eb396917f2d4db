//! The chart on any Kubernetes backend of the sim ([`sim::kube_backend`]): the node or k3s.
//! [`install`] carries out the backend's plan ([`sim::kube_backend::plan`]) after its start:
//! the images `scripts/image.py` builds (`just image`) and the stories' nats-server images
//! imported, the kubeconfig, the release's namespace, `helm install`; [`conformance`] then runs the
//! stories with the same runner and expectations as on the node (`conformance::run::played`) and
//! stops the cluster. Only start, import, kubeconfig and stop differ between backends.
//!
//! `conformance --backend k3s` (e2e's `conformance` binary, built `--features k3s`) runs this on
//! k3s; without a Docker engine it exits non-zero with the reason (docs/node.md, "k3s").

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use sim::kube_backend::{ImageArchive, KubeBackend, KubeCluster, Release, Step, plan};
use sim::node::fit::Fit;

use crate::conformance::reach::Reach;
use crate::conformance::run::{Conformance, played};
use crate::on_node::{NATS_REPOSITORY, NATS_VERSION, STORY_VERSIONS, deployments_ready};

/// Which backend a run is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Node,
    K3s,
}

/// The conformance binary's arguments: `[--backend node|k3s] [STORY...]` (`--backend=k3s` too);
/// the node by default.
pub fn parse_args(args: &[String]) -> Result<(Backend, Vec<String>), String> {
    let mut backend = Backend::Node;
    let mut stories = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = match a.strip_prefix("--backend") {
            Some("") => it.next().map(String::as_str),
            Some(rest) => rest.strip_prefix('='),
            None => {
                stories.push(a.clone());
                continue;
            }
        };
        backend = match value {
            Some("node") => Backend::Node,
            Some("k3s") => Backend::K3s,
            other => {
                return Err(format!(
                    "--backend takes node or k3s, not {}",
                    other.unwrap_or("nothing")
                ));
            }
        };
    }
    Ok((backend, stories))
}

/// The chart installed on a cluster by [`install`]: the nats image digests by version.
pub struct OnCluster {
    pub cluster: Box<dyn KubeCluster>,
    pub fit: Fit,
}

/// The run's values: the pull policy (the images are imported; a pull would hide a failed
/// import) and the stories' own ([`crate::conformance::run::CHART_VALUES`]). Nothing else: the
/// chart's defaults (on the node, the flavor adds the 1.20 values).
pub const RUN_VALUES: &str = "image:\n  pullPolicy: Never\n";

/// Carries out the plan of a started `cluster` under `dir`: images, kubeconfig, namespace, Helm;
/// then waits for the controllers' Deployments.
pub async fn install(
    cluster: Box<dyn KubeCluster>,
    dir: &Path,
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<OnCluster, (Box<dyn KubeCluster>, String)> {
    match prepare(&*cluster, dir, say).await {
        Ok(fit) => Ok(OnCluster { cluster, fit }),
        Err(e) => Err((cluster, e)),
    }
}

async fn prepare(
    cluster: &dyn KubeCluster,
    dir: &Path,
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<Fit, String> {
    let helm = crate::chart::Helm::find().ok_or("no Helm (scripts/install-helm.sh)")?;
    let mut images: Vec<ImageArchive> = crate::images::controller_archives(&dir.join("images"))?
        .into_iter()
        .map(|(_, archive)| ImageArchive {
            archive,
            base_name: None,
        })
        .collect();
    let mut digests = Vec::new();
    for version in std::iter::once(NATS_VERSION).chain(STORY_VERSIONS.iter().copied()) {
        let binary = sim::install::nats_server(version)
            .map_err(|e| format!("nats-server {version}: {e}"))?;
        let at = dir.join("nats").join(version);
        std::fs::create_dir_all(&at).map_err(|e| format!("{}: {e}", at.display()))?;
        let archive = sim::node::image::single_binary(&at, &binary, "nats-server", version)
            .map_err(|e| format!("the nats-server {version} image: {e}"))?;
        digests.push((version, archive.digest));
        images.push(ImageArchive {
            archive: archive.path,
            base_name: Some(NATS_REPOSITORY.into()),
        });
    }
    let values = dir.join("run-values.yaml");
    std::fs::write(
        &values,
        format!("{RUN_VALUES}{}", crate::conformance::run::CHART_VALUES),
    )
    .map_err(|e| format!("{}: {e}", values.display()))?;
    let release = Release {
        chart: crate::chart::chart_dir(),
        name: crate::chart::RELEASE.into(),
        namespace: crate::chart::NAMESPACE.into(),
        values: vec![values],
    };
    let steps = plan(
        Step::Start {
            backend: cluster.backend(),
            run: vec![],
        },
        cluster.flavor(),
        &images,
        &cluster.kubeconfig(),
        &release,
        &crate::chart::testdata("sim-install-values.yaml"),
        &[],
    );
    let client = cluster.client();
    for step in steps {
        let t = Instant::now();
        match step {
            Step::Start { .. } | Step::Apply(_) | Step::Stop => continue,
            Step::Import(image) => cluster
                .import(&image.archive, image.base_name.as_deref())
                .await
                .map_err(|e| e.to_string())?,
            Step::Kubeconfig(path) if path.exists() => {}
            Step::Kubeconfig(path) => return Err(format!("no kubeconfig at {}", path.display())),
            Step::Namespace(name) => {
                let mut object = Namespace::default();
                object.metadata.name = Some(name.clone());
                Api::<Namespace>::all(client.clone())
                    .create(&PostParams::default(), &object)
                    .await
                    .map_err(|e| format!("namespace {name}: {e}"))?;
            }
            Step::HelmInstall(args) => {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                helm.run_args(&args)
                    .map_err(|e| format!("helm install: {e}"))?;
                deployments_ready(&client, crate::chart::NAMESPACE, Duration::from_secs(300))
                    .await?;
                say(&format!(
                    "helm install to the three controllers Ready in {:.1} s",
                    t.elapsed().as_secs_f64()
                ));
            }
        }
    }
    let (first, rest) = digests.split_first().ok_or("no nats image")?;
    Ok(rest.iter().fold(
        Fit::node(NATS_REPOSITORY, &first.1),
        |fit, (version, digest)| fit.with_version(version, digest),
    ))
}

/// A conformance run on `backend`: started under `dir`, the chart installed ([`install`]), the
/// stories named in `only` (all when empty) played as on the node, the cluster stopped.
pub async fn conformance(
    backend: &dyn KubeBackend,
    dir: &Path,
    only: &[String],
    within: Duration,
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<Conformance, String> {
    let stories = crate::stories::load().map_err(|e| e.to_string())?;
    let chosen = crate::conformance::run::chosen(&stories, only)?;
    let t0 = Instant::now();
    let cluster = backend.start(dir).await.map_err(|e| e.to_string())?;
    say(&format!(
        "{} up in {:.1} s",
        backend.name(),
        t0.elapsed().as_secs_f64()
    ));
    let on = match install(cluster, dir, &mut *say).await {
        Ok(on) => on,
        Err((cluster, why)) => {
            let left = cluster.stop().await;
            return Err(format!("{why}; stopping it left: {left:?}"));
        }
    };
    let reach = Reach {
        net: on.cluster.outside(),
        dir: dir.join("outside"),
        nats_server: crate::on_node::cache()
            .join("nats-server")
            .join(NATS_VERSION)
            .join("nats-server"),
        release: crate::on_node::Release::new(dir, &on.cluster.kubeconfig()),
    };
    let runs = played(
        on.cluster.client(),
        on.fit,
        reach,
        &stories,
        &chosen,
        within,
        say,
    )
    .await;
    let host_left = on.cluster.stop().await;
    Ok(Conformance {
        stories: runs,
        host_left,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::the_node_by_default(&[], Ok((Backend::Node, vec![])))]
    #[case::stories_alone(&["01", "06"], Ok((Backend::Node, vec!["01", "06"])))]
    #[case::k3s_as_two_words(&["--backend", "k3s", "06"], Ok((Backend::K3s, vec!["06"])))]
    #[case::k3s_with_equals(&["01", "--backend=k3s"], Ok((Backend::K3s, vec!["01"])))]
    #[case::node_named(&["--backend", "node"], Ok((Backend::Node, vec![])))]
    #[case::an_unknown_backend(&["--backend", "kind"], Err("not kind"))]
    #[case::a_missing_backend(&["--backend"], Err("not nothing"))]
    fn the_conformance_arguments_name_a_backend_and_stories(
        #[case] args: &[&str],
        #[case] want: Result<(Backend, Vec<&str>), &str>,
    ) {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        match (parse_args(&args), want) {
            (Ok((b, s)), Ok((wb, ws))) => {
                assert_eq!(b, wb);
                assert_eq!(s, ws);
            }
            (Err(e), Err(w)) => assert!(e.contains(w), "{e}"),
            (got, want) => panic!("{got:?} where {want:?} was wanted"),
        }
    }
}
