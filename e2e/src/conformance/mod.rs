//! The conformance run (`just conformance`, issue #15): every story of `docs/stories/` applied
//! in story order against the Helm-installed controllers on the sim's node, each step's status
//! examples reached by the objects they name.
//!
//! [`steps`] orders a story into its steps; [`matches::conforms`] says whether a status shows
//! what an example shows; [`applicability`] says which stories need what this node cannot give
//! them; [`fixtures`] brings what a story leaves to the platform team; [`run`] applies and
//! watches on the node.

pub mod actions;
pub mod dial;
pub mod fixtures;
pub mod fresh;
pub mod issuer;
mod kinds;
pub mod load;
pub mod matches;
pub mod outside;
pub mod partner;
pub mod reach;
pub mod run;
pub mod sites;
pub mod skew;
mod watch;

use crate::stories::{Document, StatusExample, Story};

/// One step of a story: the manifests applied at it, then the examples its objects reach.
#[derive(Debug)]
pub struct Step<'a> {
    pub number: u32,
    pub manifests: Vec<&'a Document>,
    pub examples: Vec<&'a StatusExample>,
}

/// The steps of `story` in order: every number a manifest or a status example names (an
/// example may show a state reached after the last manifest, e.g. a transfer finishing).
pub fn steps(story: &Story) -> Vec<Step<'_>> {
    let mut numbers: Vec<u32> = story
        .manifests
        .iter()
        .map(|d| d.step)
        .chain(story.status_examples.iter().map(|e| e.step))
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers
        .into_iter()
        .map(|number| Step {
            number,
            manifests: story
                .manifests
                .iter()
                .filter(|d| d.step == number)
                .collect(),
            examples: story
                .status_examples
                .iter()
                .filter(|e| e.step == number)
                .collect(),
        })
        .collect()
}

/// The namespaces `story` declares (its Namespace objects): a story that declares one starts
/// it fresh on the shared node, so what an earlier story left there (story 02's NatsCluster
/// `demo` in `nats-system`, before story 09's) is deleted first. A story that uses a namespace
/// without declaring it builds on the story before it.
pub fn declared_namespaces(story: &Story) -> Vec<String> {
    let there = sites::elsewhere(&story.name);
    let mut out: Vec<String> = Vec::new();
    for d in story
        .manifests
        .iter()
        .filter(|d| d.object.kind == "Namespace")
    {
        let name = match there.filter(|t| t.holds(&d.file)) {
            Some(t) => t.namespace(&d.object.name).to_string(),
            None => d.object.name.clone(),
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    // A site another story placed beside a home namespace goes with that home: story 06's west
    // (a supercluster member of the east this story replaces) and story 10's edge (a leaf of the
    // hub) would otherwise run on, under a NATS operator nobody signs for any more.
    for site in sites::all() {
        if out.iter().any(|n| n == site.trust_from) {
            for ns in site.node_namespaces() {
                if !out.iter().any(|n| n == ns) {
                    out.push(ns.to_string());
                }
            }
        }
    }
    out
}

/// Whether a story runs on the node as written (fitted: [`sim::node::fit`]), and why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applicability {
    Runs,
    /// Cannot run on this node at all: what the story is about is missing here.
    NotHere(&'static str),
    /// Could run here once the run brings what it lacks (named): not yet. A run with any such
    /// story fails, so that the gap shows.
    NotYet(&'static str),
}

/// The story `story` builds on, when it is not what the node holds: stories 04 and 05 admit
/// team accounts to story 02's NatsOperator `demo`, which a run of them alone has not made;
/// story 07 balances story 02's NatsCluster `demo` (its auth plane, accounts and streams), which
/// story 06 starting `nats-system` fresh has replaced; story 08 moves a stream across story 06's
/// supercluster, which story 07's replay of story 02 has replaced in turn. The run plays the
/// ground story again first when the object it left is missing. The ground story's number, and
/// the object (apiVersion, kind, namespace, name) whose absence says it is needed.
pub fn ground(story: &str) -> Option<(&'static str, [&'static str; 4])> {
    let cluster = |name| {
        [
            "cluster.nats.mikluko.io/v1beta1",
            "NatsCluster",
            "nats-system",
            name,
        ]
    };
    let operator = [
        "auth.nats.mikluko.io/v1beta1",
        "NatsOperator",
        "nats-system",
        "demo",
    ];
    match story.split_once('-').map_or(story, |(n, _)| n) {
        "04" | "05" => Some(("02", operator)),
        "07" => Some(("02", cluster("demo"))),
        "08" => Some(("06", cluster("east"))),
        _ => None,
    }
}

/// What each story needs that the single node (no registry, no Prometheus Operator) lacks, read
/// off its manifests. cert-manager's issuers are played by the run ([`issuer`]), the gateway and
/// leafnode listeners' outside names answered by the node's cluster DNS
/// ([`sim::node::dns::outside_names`]).
pub fn applicability(story: &str) -> Applicability {
    use Applicability::*;
    match story.split_once('-').map_or(story, |(n, _)| n) {
        "01" | "02" | "03" | "04" | "05" | "06" | "07" | "08" | "09" | "10" | "11" | "13"
        | "14" => Runs,
        "12" => NotHere(
            "its subject is the exporter sidecar and the Prometheus Operator's ServiceMonitor: \
             neither the exporter image nor the Prometheus Operator is obtainable offline",
        ),
        _ => NotYet("a story this table does not know yet"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_story_building_on_another_names_it_and_the_cluster_it_left() {
        assert_eq!(
            ground("07-balancing").map(|(n, o)| (n, o[3])),
            Some(("02", "demo"))
        );
        assert_eq!(
            ground("08-stream-transfer").map(|(n, o)| (n, o[3])),
            Some(("06", "east"))
        );
        assert_eq!(
            ground("04-team-self-service").map(|(n, o)| (n, o[1], o[3])),
            Some(("02", "NatsOperator", "demo"))
        );
        assert_eq!(ground("09-acceptance"), None);
    }

    #[test]
    fn the_quickstart_is_five_steps_with_its_examples_where_they_belong() {
        let stories = crate::stories::load().expect("docs/stories parses");
        let quickstart = stories
            .iter()
            .find(|s| s.name == "01-quickstart")
            .expect("story 01");
        let shape: Vec<(u32, usize, usize)> = steps(quickstart)
            .iter()
            .map(|s| (s.number, s.manifests.len(), s.examples.len()))
            .collect();
        assert_eq!(
            shape,
            vec![(1, 2, 1), (2, 1, 1), (3, 2, 1), (4, 1, 1), (5, 1, 0)]
        );
    }

    #[rstest::rstest]
    #[case::the_quickstart("01-quickstart", &["nats"])]
    #[case::the_acceptance(
        "09-acceptance",
        &["nats-system", "requests", "dev", "nats-system-west", "nats-edge"]
    )]
    #[case::building_on_story_09("11-evacuation", &[])]
    #[case::east_and_west(
        "06-supercluster",
        &["nats-system", "nats-system-west", "nats-edge"]
    )]
    fn a_story_starts_the_namespaces_it_declares_fresh(#[case] name: &str, #[case] want: &[&str]) {
        let stories = crate::stories::load().expect("docs/stories parses");
        let story = stories.iter().find(|s| s.name == name).expect("the story");
        assert_eq!(declared_namespaces(story), want);
    }

    #[test]
    fn every_story_is_in_the_table() {
        for story in crate::stories::load().expect("docs/stories parses") {
            assert_ne!(
                applicability(&story.name),
                Applicability::NotYet("a story this table does not know yet"),
                "{}",
                story.name
            );
        }
    }

    #[test]
    fn an_example_after_the_last_manifest_is_a_step_of_its_own() {
        let stories = crate::stories::load().expect("docs/stories parses");
        let transfer = stories
            .iter()
            .find(|s| s.name == "08-stream-transfer")
            .expect("story 08");
        let last = steps(transfer).pop().expect("steps");
        assert_eq!(
            (last.number, last.manifests.len(), last.examples.len()),
            (3, 0, 1)
        );
    }
}
