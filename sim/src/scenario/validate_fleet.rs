//! The checks of a workload of many streams over several accounts (`fleet`), the steps through
//! the system account and the report's ratios; each refusal names the field and why.

use std::collections::BTreeSet;

use super::report::{ROLLOUT_FIGURES, figure};
use super::*;
use crate::ledger::Figures;

impl Scenario {
    pub(super) fn validate_fleet(&self) -> Result<(), ScenarioError> {
        let t = &self.topology;
        let signed_sim = t.servers > 0 && t.trust == Some(TrustDecl::Generated);
        if !t.accounts.is_empty() && !signed_sim {
            return Err(self.invalid(
                "topology.accounts: the sim signs accounts for a sim topology (servers) under trust: generated only"
                    .into(),
            ));
        }
        let mut seen = BTreeSet::new();
        if let Some(a) = t.accounts.iter().find(|a| !seen.insert(*a)) {
            return Err(self.invalid(format!("topology.accounts: {a} is listed twice")));
        }
        self.validate_stream_templates()?;
        self.validate_publishers()?;
        self.validate_system_steps()?;
        self.validate_ratios()
    }

    /// An account a declaration names is one the sim signs.
    fn known_account(&self, field: &str, account: &Option<String>) -> Result<(), ScenarioError> {
        match account {
            Some(a) if !self.topology.accounts.contains(a) => Err(self.invalid(format!(
                "{field}: account {a} is not one of topology.accounts"
            ))),
            _ => Ok(()),
        }
    }

    /// Templates that expand to distinct names and subjects; every stream, bucket and object
    /// store's name its own, in a known account.
    fn validate_stream_templates(&self) -> Result<(), ScenarioError> {
        let w = &self.workload;
        for st in &w.streams {
            let field = format!("workload.streams {}", st.name);
            self.known_account(&field, &st.account)?;
            let Some(n) = st.count else { continue };
            if n == 0 {
                return Err(self.invalid(format!("{field}: count 0 declares no stream")));
            }
            if !st.name.contains(INDEX) {
                return Err(self.invalid(format!(
                    "{field}: count {n} needs {INDEX} in the name, or its copies share one name"
                )));
            }
            if let Some(s) = st.subjects.iter().find(|s| !s.contains(INDEX)) {
                return Err(self.invalid(format!(
                    "{field}: count {n} needs {INDEX} in every subject, or its copies' subjects overlap ({s})"
                )));
            }
        }
        for (list, b) in [
            ("key_values", &w.key_values),
            ("object_stores", &w.object_stores),
        ]
        .into_iter()
        .flat_map(|(l, bs)| bs.iter().map(move |b| (l, b)))
        {
            self.known_account(&format!("workload.{list} {}", b.bucket), &b.account)?;
        }
        let mut names = BTreeSet::new();
        let all = self
            .streams()
            .into_iter()
            .map(|s| s.name)
            .chain(w.key_values.iter().map(|b| b.stream_name("KV_")))
            .chain(w.object_stores.iter().map(|b| b.stream_name("OBJ_")));
        for name in all {
            if !names.insert(name.clone()) {
                return Err(self.invalid(format!("workload: stream {name} is declared twice")));
            }
        }
        Ok(())
    }

    /// `publishers` instead of `publisher` and `consumers`; each its own name, on a declared
    /// stream of the account it connects as, publishing something.
    fn validate_publishers(&self) -> Result<(), ScenarioError> {
        let w = &self.workload;
        if w.publishers.is_empty() {
            return Ok(());
        }
        if w.publisher.is_some() {
            return Err(self.invalid(
                "workload: publisher and publishers exclude each other; list it under publishers"
                    .into(),
            ));
        }
        if !w.consumers.is_empty() {
            return Err(self.invalid(
                "workload.consumers: with publishers, each publisher names its own consumers"
                    .into(),
            ));
        }
        let streams = self.streams();
        let mut names = BTreeSet::new();
        for p in &w.publishers {
            let field = format!("workload.publishers {}", p.name);
            if !names.insert(&p.name) {
                return Err(self.invalid(format!("{field}: the name is used twice")));
            }
            self.known_account(&field, &p.account)?;
            let Some(st) = streams.iter().find(|s| s.name == p.stream) else {
                return Err(
                    self.invalid(format!("{field}: no stream {} in the workload", p.stream))
                );
            };
            let (theirs, mine) = (self.account_of(&st.account), self.account_of(&p.account));
            if theirs != mine {
                return Err(self.invalid(format!(
                    "{field}: stream {} is in account {}, the publisher connects as {}",
                    p.stream,
                    theirs.as_deref().unwrap_or("-"),
                    mine.as_deref().unwrap_or("-")
                )));
            }
            if p.spec.rate == 0 {
                return Err(self.invalid(format!("{field}: rate 0 publishes nothing")));
            }
        }
        Ok(())
    }

    /// The steps through the system account need a sim topology that has one (config accounts
    /// or signed trust roots); `stop_publishers` needs publishers.
    fn validate_system_steps(&self) -> Result<(), ScenarioError> {
        let t = &self.topology;
        let system = t.servers > 0 && matches!(t.trust, None | Some(TrustDecl::Generated));
        for s in &self.steps {
            let what = s.action.describe();
            match &s.action {
                Action::MoveByHand { .. } | Action::WaitGroupsSettled { .. } if !system => {
                    return Err(self.invalid(format!(
                        "step {what:?}: needs the system account, which a sim topology has (config accounts or trust: generated)"
                    )));
                }
                Action::MoveByHand { to, .. } if to.is_empty() => {
                    return Err(self.invalid(format!("step {what:?}: to names no server tag")));
                }
                Action::StopPublishers {} if self.workload.publishers.is_empty() => {
                    return Err(
                        self.invalid(format!("step {what:?}: the workload has no publishers"))
                    );
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Each ratio under a name of its own, of two figures the steps record.
    fn validate_ratios(&self) -> Result<(), ScenarioError> {
        let step_figures = self.step_figure_names();
        for (name, [of, to]) in &self.ratios {
            let taken = figure(&Figures::default(), name).is_some()
                || ROLLOUT_FIGURES.contains(&name.as_str())
                || step_figures.contains(name.as_str());
            if taken {
                return Err(self.invalid(format!("ratios.{name}: the name is taken")));
            }
            if let Some(f) = [of, to]
                .into_iter()
                .find(|f| !step_figures.contains(f.as_str()))
            {
                return Err(self.invalid(format!("ratios.{name}: {f} is no step's figure")));
            }
        }
        Ok(())
    }
}
