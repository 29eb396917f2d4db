//! Applying the stories on the node and waiting for their examples ([`story`]).
//!
//! Each step's manifests are server-side applied as the story writes them, fitted to the node
//! ([`sim::node::fit`]), and what the story tells its user to do beside them done
//! ([`super::actions`]); then every example of that step is waited for, each in the background
//! by reading its object until its status [conforms](super::matches::conforms), so that a
//! passing state (midway through a rolling restart) and the state after it are both seen. The
//! next step is applied once each example of this one is reached or its object has stayed
//! unchanged, its current generation observed, for [`QUIET`](super::watch::QUIET): an example may show a state a later step brings (story 02's system
//! account distributed once step 03's cluster runs), so it keeps waiting, up to its deadline.
//! An example with an `observedGeneration` is met only by a status of the object's current
//! generation.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;
use sim::control_plane::Objects;

use super::issuer::Issuers;
use super::reach::Reach;
use super::watch::{POLL, State, Watched};
use super::{Applicability, applicability, steps};
use crate::stories::Story;

/// How one story went.
#[derive(Clone, Debug)]
pub struct StoryRun {
    pub story: String,
    pub outcome: Outcome,
    pub took: Duration,
}

#[derive(Clone, Debug)]
pub enum Outcome {
    /// Every example reached: each with the time from its step's apply.
    Passed(Vec<(String, Duration)>),
    /// The first step that did not: what was applied or waited for, and why.
    Failed {
        step: u32,
        why: String,
    },
    NotHere(&'static str),
    NotYet(&'static str),
}

impl StoryRun {
    pub fn passed(&self) -> bool {
        matches!(self.outcome, Outcome::Passed(_))
    }

    /// One line for the run's table.
    pub fn line(&self) -> String {
        match &self.outcome {
            Outcome::Passed(reached) => format!(
                "{:<22} pass ({} examples, {:.1} s)",
                self.story,
                reached.len(),
                self.took.as_secs_f64()
            ),
            Outcome::Failed { step, why } => {
                format!("{:<22} FAIL at step {step:02}: {why}", self.story)
            }
            Outcome::NotHere(why) => format!("{:<22} not applicable here: {why}", self.story),
            Outcome::NotYet(why) => format!("{:<22} NOT RUN YET: {why}", self.story),
        }
    }
}

/// Runs `story` on the cluster `objects` reaches: each step applied, then its examples waited
/// for, each within `within`.
pub async fn story(
    objects: &Objects,
    issuers: &Issuers,
    reach: &Reach,
    story: &Story,
    within: Duration,
    say: &mut (dyn FnMut(&str) + Send),
) -> StoryRun {
    let t0 = Instant::now();
    let outcome = match applicability(&story.name) {
        Applicability::Runs => play(objects, issuers, reach, story, within, say).await,
        Applicability::NotHere(why) => Outcome::NotHere(why),
        Applicability::NotYet(why) => Outcome::NotYet(why),
    };
    StoryRun {
        story: story.name.clone(),
        outcome,
        took: t0.elapsed(),
    }
}

/// [`story`] where it runs here: its namespaces fresh, what it leaves to the platform applied,
/// what it finds outside the node started (and stopped after), then its steps.
async fn play(
    objects: &Objects,
    issuers: &Issuers,
    reach: &Reach,
    story: &Story,
    within: Duration,
    say: &mut (dyn FnMut(&str) + Send),
) -> Outcome {
    let failed = |why| Outcome::Failed { step: 0, why };
    let fresh = super::declared_namespaces(story);
    match super::fresh::namespaces(&objects.client(), &fresh).await {
        Ok(cleared) if !cleared.is_empty() => say(&format!(
            "  a fresh start: {} deleted with what earlier stories left there",
            cleared.join(", ")
        )),
        Ok(_) => {}
        Err(why) => return failed(why),
    }
    let mut fixtures = match super::fixtures::before(&story.name, issuers) {
        Ok(f) => f,
        Err(e) => return failed(format!("making what the story leaves to the platform: {e}")),
    };
    let client = objects.client();
    let surroundings = match reach.enter(&client, &story.name).await {
        Ok(s) => s,
        Err(why) => return failed(format!("starting what the story finds outside: {why}")),
    };
    if let Some(s) = &surroundings {
        say(&format!(
            "  outside the node: {} (pids {:?})",
            s.said,
            s.pids()
        ));
        fixtures.extend(s.fixtures.iter().cloned());
    }
    let mut outcome = None;
    for fixture in fixtures {
        match apply(objects, &story.dir, &fixture).await {
            Ok(names) => say(&format!("  the platform's {}", names.join(", "))),
            Err(why) => {
                outcome = Some(failed(why));
                break;
            }
        }
    }
    let stand_ins = surroundings
        .as_ref()
        .map_or(&[][..], |s| s.stand_ins.as_slice());
    let outcome = match outcome {
        Some(o) => o,
        None => steps_of(objects, story, stand_ins, within, say).await,
    };
    if let Some(s) = surroundings
        && let Err(why) = reach.leave(&client, s).await
    {
        say(&format!(
            "  putting the release back after the story: {why}"
        ));
    }
    outcome
}

/// Applies `story`'s steps in order, each string of `stand_ins` replaced by the run's, and
/// waits for their examples.
async fn steps_of(
    objects: &Objects,
    story: &Story,
    stand_ins: &[(String, String)],
    within: Duration,
    say: &mut (dyn FnMut(&str) + Send),
) -> Outcome {
    let mut reached = Vec::new();
    let mut watching: Vec<Watched> = Vec::new();
    let there = super::sites::elsewhere(&story.name);
    let mut carried = false;
    for step in steps(story) {
        for doc in &step.manifests {
            let mut value = super::outside::stand_in(&doc.object.value, stand_ins);
            if let Some(there) = there.filter(|t| t.holds(&doc.file))
                && let Err(why) = elsewhere(objects, there, &mut value, &mut carried).await
            {
                return Outcome::Failed {
                    step: step.number,
                    why: format!("placing {doc} in {}: {why}", there.site),
                };
            }
            match apply(objects, &doc.path, &value).await {
                Ok(names) => say(&format!("  applied {doc}: {}", names.join(", "))),
                Err(why) => {
                    return Outcome::Failed {
                        step: step.number,
                        why: format!("applying {doc}: {why}"),
                    };
                }
            }
        }
        for action in super::actions::at(&story.name, step.number) {
            if let Err(why) = super::actions::perform(objects, &action, within).await {
                return Outcome::Failed {
                    step: step.number,
                    why: format!("{action}: {why}"),
                };
            }
            say(&format!("  done: {action}"));
        }
        let client = objects.client();
        let started: Vec<Watched> = step
            .examples
            .iter()
            .map(|e| {
                let mut e = (*e).clone();
                if let (Some(there), Some(ns)) = (there, e.object.namespace.clone()) {
                    let placed = there.placed(story, &e.object.kind, &e.object.name, &ns);
                    e.object.namespace = Some(placed.to_string());
                }
                Watched::start(client.clone(), e, within)
            })
            .collect();
        // On to the next step once each example of this one is reached, failed, or quiet: its
        // object unchanged for QUIET while short of the example (it waits for a later step).
        while started.iter().any(Watched::moving) {
            tokio::time::sleep(POLL).await;
        }
        watching.extend(started);
        if let Some(out) = settle(&mut watching, say, &mut reached) {
            return out;
        }
    }
    // Every step applied: what is left has until its own deadline.
    loop {
        if let Some(out) = settle(&mut watching, say, &mut reached) {
            return out;
        }
        if watching.is_empty() {
            return Outcome::Passed(reached);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Places an object of a file the story applies in its other Kubernetes cluster on the node:
/// in that cluster's namespace, a literal trust copied from the home trust's status, and,
/// before its first object there besides the namespace, the Secrets carried from home.
async fn elsewhere(
    objects: &Objects,
    there: &super::sites::Elsewhere,
    value: &mut Value,
    carried: &mut bool,
) -> Result<(), String> {
    let client = objects.client();
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if kind != "Namespace" && !*carried {
        for c in there.carried {
            carry(&client, c).await?;
        }
        *carried = true;
    }
    if let Some((home_kind, home_name)) = super::sites::home_of(there, kind, &name) {
        let group = if home_kind == "NatsAccount" {
            "auth.nats.mikluko.io"
        } else {
            "nats.mikluko.io"
        };
        let gvk = GroupVersionKind::gvk(group, "v1beta1", home_kind);
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            there.trust_from,
            &kube::api::ApiResource::from_gvk(&gvk),
        );
        let t0 = Instant::now();
        loop {
            let home = api.get_opt(&home_name).await.ok().flatten();
            let status = home
                .as_ref()
                .and_then(|h| h.data.get("status"))
                .cloned()
                .unwrap_or(Value::Null);
            // A trust by reference is left as it is: nothing to wait for.
            let literal = value.pointer("/spec/operatorRef").is_none()
                && value.pointer("/spec/accountRef").is_none();
            if super::sites::literal_trust(value, &status) || !literal {
                break;
            }
            if t0.elapsed() > Duration::from_secs(120) {
                return Err(format!(
                    "the home {home_kind} {}/{home_name} held nothing to copy within 120 s",
                    there.trust_from
                ));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    there.relocate(value);
    Ok(())
}

/// Copies a Secret from home to where the other cluster names it, as External Secrets would,
/// once it exists: its keys, or only those `carried` names.
async fn carry(client: &kube::Client, carried: &super::sites::Carried) -> Result<(), String> {
    use k8s_openapi::api::core::v1::Secret;
    let ((namespace, name), (to, to_name)) = (carried.from, carried.to);
    let from: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let t0 = Instant::now();
    let secret = loop {
        if let Ok(Some(s)) = from.get_opt(name).await {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "Secret {namespace}/{name} did not exist within 120 s"
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let mut data = secret.data.unwrap_or_default();
    if !carried.keys.is_empty() {
        data.retain(|k, _| carried.keys.contains(&k.as_str()));
    }
    let copy = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": to_name, "namespace": to},
        "type": if carried.keys.is_empty() { secret.type_ } else { Some("Opaque".to_string()) },
        "data": data,
    });
    Api::<Secret>::namespaced(client.clone(), to)
        .patch(
            to_name,
            &kube::api::PatchParams::apply("external-secrets").force(),
            &kube::api::Patch::Apply(&copy),
        )
        .await
        .map(|_| ())
        .map_err(|e| format!("carrying Secret {namespace}/{name} to {to}/{to_name}: {e}"))
}

/// Server-side applies one object of a story (`origin` names it in errors); the objects
/// applied, or why not.
async fn apply(
    objects: &Objects,
    origin: &std::path::Path,
    value: &Value,
) -> Result<Vec<String>, String> {
    let text = serde_yaml::to_string(value).map_err(|e| e.to_string())?;
    objects
        .apply_text(origin, &text)
        .await
        .map_err(|e| e.to_string())
}

/// Takes the examples reached or failed out of `watching`, the failure that ends the story if
/// one did; the ones still waiting stay.
fn settle(
    watching: &mut Vec<Watched>,
    say: &mut (dyn FnMut(&str) + Send),
    reached: &mut Vec<(String, Duration)>,
) -> Option<Outcome> {
    let mut still = Vec::new();
    for w in watching.drain(..) {
        match w.state() {
            State::Reached(after) => {
                say(&format!(
                    "  reached {} after {:.1} s (from step {:02})",
                    w.example,
                    after.as_secs_f64(),
                    w.example.step
                ));
                reached.push((w.example.to_string(), after));
            }
            State::Failed(why) => {
                return Some(Outcome::Failed {
                    step: w.example.step,
                    why: format!("{}: {why}", w.example),
                });
            }
            State::Waiting { .. } => still.push(w),
        }
    }
    *watching = still;
    None
}

/// Where one example's wait stands.
/// A whole conformance run on the node.
pub struct Conformance {
    pub stories: Vec<StoryRun>,
    /// How the host differed from its baseline after `down` (empty: restored).
    pub host_left: Vec<String>,
}

impl Conformance {
    /// Every story that can run here ran and passed, and the host is restored: a story not run
    /// yet fails the run.
    pub fn passed(&self) -> bool {
        self.host_left.is_empty()
            && self
                .stories
                .iter()
                .all(|s| s.passed() || matches!(s.outcome, Outcome::NotHere(_)))
    }
}

/// The chart as the stories install it: the auth controller pushes through story 02's
/// NatsConnection of its system user (its README: `--system-connection nats-system/auth`).
pub const CHART_VALUES: &str = "controllers:\n  auth:\n    systemConnection: nats-system/auth\n";

/// The node's volumes for a conformance run: every story's servers, with their claims kept.
pub const VOLUMES: usize = 40;

/// The label the stories' NatsClusters select their node pool by (`podTemplate.spec.nodeSelector`).
pub const NODE_POOL: (&str, &str) = ("node-pool", "nats");

/// What the stories take from the platform besides the chart: the node labelled into the NATS
/// node pool ([`NODE_POOL`]), and cert-manager's Certificate kind, whose issuers the run plays
/// ([`super::issuer`]).
async fn platform(client: &kube::Client) -> Result<(), String> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let (key, value) = NODE_POOL;
    let label = serde_json::json!({"metadata": {"labels": {key: value}}});
    // Every node of the cluster: the sim's node (`sim-node`) or k3s's (its container's hostname).
    let names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing the nodes: {e}"))?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for name in names {
        nodes
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&label),
            )
            .await
            .map_err(|e| format!("labelling the node {name} {key}={value}: {e}"))?;
    }
    super::issuer::install(client).await
}

/// Plays the story `story` builds on ([`super::ground`]) when what it left is not on the node.
async fn ground(
    objects: &Objects,
    issuers: &Issuers,
    reach: &Reach,
    stories: &[Story],
    story: &Story,
    within: Duration,
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<(), String> {
    let Some((number, [api_version, kind, namespace, name])) = super::ground(&story.name) else {
        return Ok(());
    };
    let there = super::kinds::api_of(&objects.client(), api_version, kind, namespace)
        .get_opt(name)
        .await
        .map_err(|e| format!("reading {kind} {namespace}/{name}: {e}"))?;
    if there.is_some() {
        return Ok(());
    }
    let Some(base) = stories.iter().find(|s| s.name.starts_with(number)) else {
        return Err(format!("it builds on story {number}, which is not found"));
    };
    say(&format!(
        "  {kind} {namespace}/{name} is gone: {} first, the ground {} stands on",
        base.name, story.name
    ));
    let run = self::story(objects, issuers, reach, base, within, &mut *say).await;
    say(&format!("  {}", run.line()));
    if run.passed() {
        Ok(())
    } else {
        Err(format!("its ground, story {}, did not pass", base.name))
    }
}

/// The stories named in `only` (all when empty), in story order.
pub fn chosen<'a>(stories: &'a [Story], only: &[String]) -> Result<Vec<&'a Story>, String> {
    let chosen: Vec<&Story> = stories
        .iter()
        .filter(|s| only.is_empty() || only.iter().any(|o| s.name.starts_with(o.as_str())))
        .collect();
    if chosen.is_empty() {
        return Err(format!("no story is named {only:?}"));
    }
    Ok(chosen)
}

/// The node brought up with the chart for a conformance run: [`VOLUMES`], the stories'
/// nats-server versions, [`CHART_VALUES`].
pub fn shape() -> crate::on_node::NodeShape {
    crate::on_node::NodeShape {
        volumes: VOLUMES,
        versions: crate::on_node::STORY_VERSIONS
            .iter()
            .map(|v| v.to_string())
            .collect(),
        values: Some(CHART_VALUES.into()),
    }
}

/// Brings a node up under `dir` with the chart installed, runs the stories named in `only` (all
/// when empty) in story order, each example within `within`, and brings the node down.
pub async fn on_node(
    dir: &std::path::Path,
    only: &[String],
    within: Duration,
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<Conformance, String> {
    let stories = crate::stories::load().map_err(|e| e.to_string())?;
    let chosen = chosen(&stories, only)?;
    let installed = crate::on_node::install_shaped(dir, &shape(), &mut *say).await?;
    let reach = Reach {
        net: Some(std::sync::Arc::new(installed.node.outside())),
        dir: dir.join("outside"),
        nats_server: crate::on_node::cache()
            .join("nats-server")
            .join(crate::on_node::NATS_VERSION)
            .join("nats-server"),
        release: crate::on_node::Release::new(dir, &installed.node.kubeconfig()),
    };
    let runs = played(
        installed.node.client(),
        installed.fit(),
        reach,
        &stories,
        &chosen,
        within,
        say,
    )
    .await;
    let host_left = installed.node.down().await;
    Ok(Conformance {
        stories: runs,
        host_left,
    })
}

/// Runs `chosen` (of `stories`) in order on the cluster `client` reaches, whatever backend runs
/// it: the platform's part, the issuers, each story's ground, then the story.
pub async fn played(
    client: kube::Client,
    fit: sim::node::fit::Fit,
    reach: Reach,
    stories: &[Story],
    chosen: &[&Story],
    within: Duration,
    say: &mut (dyn FnMut(&str) + Send),
) -> Vec<StoryRun> {
    say(&format!(
        "stories fitted to the cluster: {}",
        fit.describe()
    ));
    let platform = platform(&client).await;
    let issuers = std::sync::Arc::new(Issuers::default());
    let issuing = tokio::spawn(super::issuer::run(
        client.clone(),
        issuers.clone(),
        |line| println!("{line}"),
    ));
    let objects = Objects::fitted(client, fit);
    let mut runs = Vec::new();
    for s in chosen {
        say(&format!("--- {}", s.name));
        let ready = match &platform {
            Ok(()) => ground(&objects, &issuers, &reach, stories, s, within, &mut *say).await,
            Err(why) => Err(why.clone()),
        };
        if let Err(why) = ready {
            let run = StoryRun {
                story: s.name.clone(),
                outcome: Outcome::Failed { step: 0, why },
                took: Duration::ZERO,
            };
            say(&run.line());
            runs.push(run);
            continue;
        }
        let run = story(&objects, &issuers, &reach, s, within, &mut *say).await;
        say(&run.line());
        runs.push(run);
    }
    issuing.abort();
    runs
}
