//! What a story's run reaches besides the cluster's objects ([`Reach`]), and which stories find
//! servers outside the node ([`before`]): story 03's legacy cluster and story 14's nsc servers
//! ([`super::outside`]), story 13's partner supercluster ([`super::partner`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sim::kube_backend::OutsideNet;

use super::outside::{Surroundings, legacy, nsc};

/// What a story's run reaches besides the cluster's objects: the backend's outside network, a
/// directory for what it starts there, the nats-server those servers run, the chart's release.
#[derive(Clone)]
pub struct Reach {
    /// The backend's outside network (the node's or k3s's, [`sim::kube_backend::OutsideNet`]);
    /// `None` when the backend gave none: a story that finds servers outside Kubernetes (03, 13,
    /// 14) then fails saying so.
    pub net: Option<Arc<dyn OutsideNet>>,
    pub dir: PathBuf,
    pub nats_server: PathBuf,
    pub release: crate::on_node::Release,
}

impl Reach {
    /// Starts what `story` finds outside the node and, when the story's controllers run with
    /// other chart values, upgrades the release to them.
    pub async fn enter(
        &self,
        client: &kube::Client,
        story: &str,
    ) -> Result<Option<Surroundings>, String> {
        let short = story.split_once('-').map_or(story, |(n, _)| n);
        let dir = self.dir.join(short);
        let Some(net) = &self.net else {
            return match outside_of(story) {
                true => Err(
                    "this backend gave no network outside Kubernetes for the story's own servers"
                        .into(),
                ),
                false => Ok(None),
            };
        };
        let Some(s) = before(client, story, net.clone(), &dir, &self.nats_server).await? else {
            return Ok(None);
        };
        if let Some(values) = &s.values {
            self.release.upgrade(client, Some(values)).await?;
        }
        Ok(Some(s))
    }

    /// Stops what [`Reach::enter`] started and puts the release's values back.
    pub async fn leave(&self, client: &kube::Client, s: Surroundings) -> Result<(), String> {
        let upgraded = s.values.is_some();
        drop(s);
        if upgraded {
            self.release.upgrade(client, None).await?;
        }
        Ok(())
    }
}

/// Whether `story` finds servers outside Kubernetes ([`before`] starts them).
pub fn outside_of(story: &str) -> bool {
    matches!(
        story.split_once('-').map_or(story, |(n, _)| n),
        "03" | "13" | "14"
    )
}

/// The surroundings of `story` (none for most), with its servers under `dir`, run from the
/// nats-server `binary`, reached through the backend's outside network `net`.
pub async fn before(
    client: &kube::Client,
    story: &str,
    net: Arc<dyn OutsideNet>,
    dir: &Path,
    binary: &Path,
) -> Result<Option<Surroundings>, String> {
    match story.split_once('-').map_or(story, |(n, _)| n) {
        "03" => legacy(&*net, dir, binary).await.map(Some),
        "13" => super::partner::supercluster(client, net, dir, binary)
            .await
            .map(Some),
        "14" => nsc(&*net, dir, binary).await.map(Some),
        _ => Ok(None),
    }
}
