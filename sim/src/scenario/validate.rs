//! A scenario's checks before anything runs: steps in time order with unique ids and known
//! figures, expectations on known figures with well-formed rules, a topology that can be built,
//! known controllers and their `replicas:`.

use std::collections::BTreeSet;

use super::report::{ROLLOUT_FIGURES, Rule, figure};
use super::*;
use crate::ledger::Figures;

impl Scenario {
    pub fn validate(&self) -> Result<(), ScenarioError> {
        self.validate_steps()?;
        let step_figures = self.step_figure_names();
        self.validate_status_steps(&step_figures)?;
        for (k, v) in &self.expect {
            if figure(&Figures::default(), k).is_none()
                && !ROLLOUT_FIGURES.contains(&k.as_str())
                && !step_figures.contains(k.as_str())
                && !self.is_leader_figure(k)
                && !self.is_count_figure(k)
            {
                return Err(self.invalid(format!("expectation on unknown figure {k:?}")));
            }
            Rule::parse(v).map_err(|e| self.invalid(format!("expectation {k}: {e}")))?;
        }
        self.validate_leader_spreads()?;
        self.validate_topology()?;
        if let Some(c) = &self.controllers
            && let Some(bad) = c.iter().find(|c| !CONTROLLER_NAMES.contains(&c.as_str()))
        {
            return Err(self.invalid(format!("no controller named {bad:?}")));
        }
        self.validate_replicas()?;
        self.validate_fleet()
    }

    /// `replicas:` names controllers the host runs, 2 or 3 of each; `kill_leader` and
    /// `restart_controller` name a controller run that way and one that is not.
    fn validate_replicas(&self) -> Result<(), ScenarioError> {
        let runs = |c: &str| match &self.controllers {
            Some(list) => list.iter().any(|n| n == c),
            None => CONTROLLER_NAMES.contains(&c),
        };
        for (c, n) in &self.replicas {
            if !runs(c) {
                return Err(self.invalid(format!(
                    "replicas.{c}: no controller {c:?} runs in this scenario"
                )));
            }
            if !(2..=3).contains(n) {
                return Err(self.invalid(format!(
                    "replicas.{c}: {n} replicas; 2 or 3 run under leader election"
                )));
            }
        }
        for s in &self.steps {
            match &s.action {
                Action::KillLeader { controller } if !self.replicas.contains_key(controller) => {
                    return Err(self.invalid(format!(
                        "kill_leader: controller {controller:?} is not in replicas:"
                    )));
                }
                Action::RestartController { controller }
                    if self.replicas.contains_key(controller) =>
                {
                    return Err(self.invalid(format!(
                        "restart_controller: controller {controller:?} runs as replicas: use kill_leader"
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Every `record_leader_spread` name its own, not another figure's; leaders counted only
    /// where the workload has streams.
    fn validate_leader_spreads(&self) -> Result<(), ScenarioError> {
        let mut names = BTreeSet::new();
        for name in self.leader_spread_names() {
            let taken = figure(&Figures::default(), name).is_some()
                || ROLLOUT_FIGURES.contains(&name)
                || LEADER_FIGURES.contains(&name);
            if taken || !names.insert(name) {
                return Err(self.invalid(format!("figure name {name:?} is taken")));
            }
        }
        let counts = !names.is_empty() || self.expect.contains_key(super::leaders::END_SPREAD);
        if counts && self.workload.streams.is_empty() {
            return Err(self.invalid(
                "stream leaders are counted over the workload's streams, and it has none".into(),
            ));
        }
        Ok(())
    }

    /// The names of the figures the steps record.
    pub fn step_figure_names(&self) -> BTreeSet<&str> {
        self.steps
            .iter()
            .filter_map(|s| s.figure.as_ref().map(|f| f.name.as_str()))
            .collect()
    }

    /// Steps in time order; ids unique; a figure measured since an earlier step's id, under a
    /// name of its own; every client a step names declared.
    fn validate_steps(&self) -> Result<(), ScenarioError> {
        let mut last = Duration::ZERO;
        let mut ids: BTreeSet<&str> = BTreeSet::new();
        let mut figures: BTreeSet<&str> = BTreeSet::new();
        for s in &self.steps {
            let what = s.action.describe();
            if s.at < last {
                return Err(self.invalid(format!(
                    "steps must be in time order ({what} comes after a later step)"
                )));
            }
            last = s.at;
            if let Some(f) = &s.figure {
                if !ids.contains(f.since.as_str()) {
                    return Err(self.invalid(format!(
                        "figure {} of step {what:?} is measured since {:?}, which no earlier step is",
                        f.name, f.since
                    )));
                }
                let taken = figure(&Figures::default(), &f.name).is_some()
                    || ROLLOUT_FIGURES.contains(&f.name.as_str())
                    || self.is_leader_figure(&f.name);
                if taken || !figures.insert(&f.name) {
                    return Err(self.invalid(format!("figure name {:?} is taken", f.name)));
                }
            }
            if let Some(id) = &s.id
                && !ids.insert(id)
            {
                return Err(self.invalid(format!("step id {id:?} is used twice")));
            }
            if let Some(c) = s.action.client()
                && !self.clients.iter().any(|d| d.name == c)
            {
                return Err(self.invalid(format!("step {what:?} names no declared client")));
            }
        }
        let mut names = BTreeSet::new();
        if let Some(c) = self.clients.iter().find(|c| !names.insert(&c.name)) {
            return Err(self.invalid(format!("client {:?} is declared twice", c.name)));
        }
        Ok(())
    }

    /// The fault layer and the steps that need it: a sim topology's, `lose_unsynced` only where
    /// some store is on it.
    fn validate_store_faults(&self) -> Result<(), ScenarioError> {
        let t = &self.topology;
        let needs_layer = self
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::LoseUnsynced { .. }));
        let store_step = self.steps.iter().any(|s| {
            matches!(
                s.action,
                Action::LoseUnsynced { .. } | Action::Corrupt { .. } | Action::ReadReplicas { .. }
            )
        });
        if (store_step || !t.fault_layer.is_empty() || !t.sync_interval.is_empty())
            && !t.nats_clusters.is_empty()
        {
            return Err(self.invalid(
                "fault_layer, sync_interval, lose_unsynced, corrupt and read_replicas need a sim topology (servers): a NatsCluster's servers sync as its spec.jetstream.syncInterval says".into(),
            ));
        }
        if needs_layer && t.fault_layer.is_empty() {
            return Err(self.invalid(
                "lose_unsynced needs topology.fault_layer: a store on a plain directory has no unsynced writes the sim can drop".into(),
            ));
        }
        Ok(())
    }

    /// Either a sim topology or NatsClusters; a trust mode that fits the kind.
    fn validate_topology(&self) -> Result<(), ScenarioError> {
        let t = &self.topology;
        let sim_topology = t.servers > 0 && t.clusters > 0;
        let nats_clusters = !t.nats_clusters.is_empty();
        if sim_topology == nats_clusters {
            return Err(self.invalid(
                "the topology needs either servers (a sim topology) or nats_clusters (manifests), not both"
                    .into(),
            ));
        }
        self.validate_store_faults()?;
        self.validate_route_cuts()?;
        match t.trust {
            Some(TrustDecl::Generated) if sim_topology && !t.leafs.is_empty() => Err(self.invalid(
                "topology.trust: generated boots a sim topology's clusters in operator mode; it has no leafs"
                    .into(),
            )),
            Some(TrustDecl::Auth) if !sim_topology || t.auth_plane.is_empty() => Err(self.invalid(
                "topology.trust: auth boots a sim topology (servers) under the auth_plane manifests, which it needs"
                    .into(),
            )),
            Some(TrustDecl::Auth) if !self.workload.is_empty() => Err(self.invalid(
                "under trust: auth the JetStream workload has no user to connect as; use clients"
                    .into(),
            )),
            _ if t.trust != Some(TrustDecl::Auth) && !t.auth_plane.is_empty() => Err(self.invalid(
                "topology.auth_plane is read with trust: auth only".into(),
            )),
            _ => Ok(()),
        }
    }
}
