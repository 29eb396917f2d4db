//! The steps that cut a server's routes inside its cluster and restore them (`cut_routes`,
//! `restore_routes`): a network partition of one server from its peers, through the route
//! proxies of a sim topology with `route_proxies: true` (see `crate::topology` route_cuts).

use super::deployed::{Deployed, Done};
use super::step_context::resolve;
use super::{Action, Scenario, ScenarioError};

/// The step's line: `cut`/`restore` the routes of `server`, to every peer or to those named.
pub(super) fn describe(verb: &str, server: &str, from: &[String]) -> String {
    if from.is_empty() {
        format!("{verb} the routes of {server} to every cluster peer")
    } else {
        format!("{verb} the routes between {server} and {}", from.join(", "))
    }
}

/// Carries out a `cut_routes` or `restore_routes` step; the server cut becomes the last faulted.
pub(super) async fn run(
    deployed: &Deployed,
    action: &Action,
    last_faulted: &mut Option<String>,
) -> Result<Done, String> {
    let (server, from, cut) = match action {
        Action::CutRoutes { server, from } => (server, from, true),
        Action::RestoreRoutes { server, from } => (server, from, false),
        _ => return Err(format!("{} is not a route step", action.describe())),
    };
    let dep = deployed.dep();
    let name = resolve(dep, server, last_faulted).await?;
    let mut peers = Vec::new();
    for f in from {
        peers.push(resolve(dep, f, last_faulted).await?);
    }
    let named = dep
        .route_link(&name, &peers, cut)
        .map_err(|e| e.to_string())?;
    if cut {
        *last_faulted = Some(name.clone());
    }
    Ok(Done {
        target: Some(format!("{name} (peers {})", named.join(", "))),
        ..Done::default()
    })
}

impl Scenario {
    /// `cut_routes` and `restore_routes` need `topology.route_proxies`, which needs a sim
    /// topology.
    pub(super) fn validate_route_cuts(&self) -> Result<(), ScenarioError> {
        let t = &self.topology;
        if t.route_proxies && !t.nats_clusters.is_empty() {
            return Err(self.invalid(
                "route_proxies needs a sim topology (servers): a NatsCluster's routes are the controller's".into(),
            ));
        }
        let step = self.steps.iter().find(|s| {
            matches!(
                s.action,
                Action::CutRoutes { .. } | Action::RestoreRoutes { .. }
            )
        });
        if let Some(s) = step
            && !t.route_proxies
        {
            return Err(self.invalid(format!(
                "{} needs topology.route_proxies: true (routes through proxies the sim can cut)",
                s.action.describe()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rstest::rstest;

    use super::super::*;

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::from_yaml(Path::new("x"), text)
    }

    #[test]
    fn route_cuts_parse_and_reach_the_topology() {
        let s = parse(
            "name: x\ntopology: { servers: 3, route_proxies: true }\nsteps:\n  - { at: 1s, action: cut_routes, server: c1-2 }\n  - { at: 2s, action: cut_routes, server: c1-0, from: [c1-1] }\n  - { at: 3s, action: restore_routes, server: c1-2 }\n",
        )
        .expect("parses");
        assert!(s.topology.to_spec().route_proxies);
        assert_eq!(
            s.steps[0].action.describe(),
            "cut the routes of c1-2 to every cluster peer"
        );
        assert_eq!(
            s.steps[1].action.describe(),
            "cut the routes between c1-0 and c1-1"
        );
        assert!(
            matches!(&s.steps[2].action, Action::RestoreRoutes { server, from } if server == "c1-2" && from.is_empty())
        );
        let plain = parse("name: x\ntopology: { servers: 3 }\n").expect("parses");
        assert!(!plain.topology.to_spec().route_proxies, "off unless asked");
    }

    #[rstest]
    #[case::cut_without_proxies(
        "topology: { servers: 3 }\nsteps:\n  - { at: 1s, action: cut_routes, server: c1-0 }\n",
        "needs topology.route_proxies: true"
    )]
    #[case::restore_without_proxies(
        "topology: { servers: 3 }\nsteps:\n  - { at: 1s, action: restore_routes, server: c1-0 }\n",
        "needs topology.route_proxies: true"
    )]
    #[case::proxies_under_nats_clusters(
        "topology: { nats_clusters: [a.yaml], route_proxies: true }\n",
        "route_proxies needs a sim topology"
    )]
    fn route_cuts_are_refused_where_they_cannot_run(#[case] body: &str, #[case] says: &str) {
        let err = parse(&format!("name: x\n{body}")).expect_err("refused");
        assert!(err.to_string().contains(says), "{err}");
    }
}
