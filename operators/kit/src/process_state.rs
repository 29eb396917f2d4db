//! The process around a binary's controllers, as their run loops see it: whether this replica
//! leads (only then does a pass run), whether it is stopping (no new pass starts), and whether
//! each run loop's watch has its first list in (readiness, `/readyz`).
//!
//! [`crate::reconcile::run`] obeys the [`Process`] it runs under: a binary's `main` builds one
//! (see [`crate::start::run`]) and runs its controllers' future in it with [`Process::scope`];
//! every run loop inside reads it once when it starts ([`Process::current`]). Outside a scope
//! (the sim's in-process controllers, the tests) a run loop always leads and never stops, so
//! those paths need nothing. The scope is a task-local: a run loop spawned on a task of its own
//! leaves it, and must be spawned inside `Process::current().scope(..)` to stay in it. It is a
//! scope rather than a Context field so that the one wiring point is each binary's `main`, not
//! every controller's Context.
//!
//! What a standby does: its watches run and fill its stores (it is ready once they have), and
//! each pass waits at the [`Process::gate`]. A pass that had to wait is not run on the copy it
//! was handed (that copy is as old as the wait): it is requeued at once, so the pass that runs
//! reads the store as it is when leadership came.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;

tokio::task_local! {
    static CURRENT: Process;
}

/// Where this replica stands in its controller's election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Waiting for the Lease: watches run, passes wait.
    Standby,
    /// Holding the Lease (or running without an election): passes run.
    Leading,
    /// Led and no longer may: passes wait for good, and the binary exits.
    Lost,
}

/// What the [`Process::gate`] says to a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// This replica leads: run.
    Open,
    /// This replica came to lead while the pass waited: run again on the store's current copy.
    Opened,
    /// The process is stopping: start nothing.
    Stopping,
}

/// Whether every run loop's watch has its first list in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Some run loop started and every one's first list is in.
    pub ready: bool,
    /// The kinds of the run loops still waiting for their first list.
    pub waiting: Vec<String>,
}

#[derive(Debug)]
struct State {
    role: Role,
    stopping: bool,
    /// The run loops entered and not yet ended: id → (kind, first list in).
    loops: BTreeMap<u64, (String, bool)>,
    /// The passes running: id → the object's kind and key (what the drain waits on).
    passes: BTreeMap<u64, String>,
    next: u64,
}

/// The process's state, shared by its run loops, its elector, its probes and its `main`.
#[derive(Debug, Clone)]
pub struct Process {
    state: Arc<watch::Sender<State>>,
}

/// A run loop entered into its [`Process`]: it counts for readiness and for the drain until it
/// drops.
#[derive(Debug)]
pub struct Entered {
    process: Process,
    id: u64,
}

impl Entered {
    /// The run loop's watch has its first list in.
    pub fn synced(&self) {
        self.process.state.send_modify(|s| {
            if let Some(l) = s.loops.get_mut(&self.id) {
                l.1 = true;
            }
        });
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        self.process.state.send_modify(|s| {
            s.loops.remove(&self.id);
        });
    }
}

/// A pass running under its [`Process`]: named among the unfinished ones until it drops.
#[derive(Debug)]
pub struct Passing {
    process: Process,
    id: u64,
}

impl Drop for Passing {
    fn drop(&mut self) {
        self.process.state.send_if_modified(|s| {
            s.passes.remove(&self.id);
            false
        });
    }
}

/// What a drain still waits on: the run loops not ended and the passes running.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unfinished {
    /// The kinds of the run loops not ended.
    pub loops: Vec<String>,
    /// The passes running, as `Kind namespace/name`.
    pub passes: Vec<String>,
}

impl Process {
    fn with_role(role: Role) -> Self {
        let (state, _) = watch::channel(State {
            role,
            stopping: false,
            loops: BTreeMap::new(),
            passes: BTreeMap::new(),
            next: 0,
        });
        Self {
            state: Arc::new(state),
        }
    }

    /// A process without an election: it leads from the start.
    pub fn leading() -> Self {
        Self::with_role(Role::Leading)
    }

    /// A candidate: it leads once its elector ([`crate::leader::Elector`]) says so.
    pub fn standby() -> Self {
        Self::with_role(Role::Standby)
    }

    /// The process the caller runs under ([`Process::scope`]); outside any, one that leads and
    /// never stops.
    pub fn current() -> Self {
        CURRENT
            .try_with(Clone::clone)
            .unwrap_or_else(|_| Self::leading())
    }

    /// Runs `fut` under this process: every run loop it starts obeys it.
    pub fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> + use<F> {
        CURRENT.scope(self.clone(), fut)
    }

    /// Where this replica stands.
    pub fn role(&self) -> Role {
        self.state.borrow().role
    }

    /// Whether passes run.
    pub fn leads(&self) -> bool {
        self.role() == Role::Leading
    }

    /// Records where this replica stands (the elector's call).
    pub fn set_role(&self, role: Role) {
        self.state.send_if_modified(|s| {
            let changed = s.role != role;
            s.role = role;
            changed
        });
    }

    /// Waits until the role is other than `seen`, and returns it.
    pub async fn role_changed(&self, seen: Role) -> Role {
        let mut rx = self.state.subscribe();
        match rx.wait_for(|s| s.role != seen).await {
            Ok(s) => s.role,
            // The sender lives in `self`: it cannot close while this waits.
            Err(_) => seen,
        }
    }

    /// Starts the graceful shutdown: no new pass starts, the run loops end once their passes
    /// have.
    pub fn stop(&self) {
        self.state
            .send_if_modified(|s| !std::mem::replace(&mut s.stopping, true));
    }

    /// Resolves once [`Process::stop`] is called (for `Controller::graceful_shutdown_on`).
    pub fn stopping(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut rx = self.state.subscribe();
        async move {
            let _ = rx.wait_for(|s| s.stopping).await;
        }
    }

    /// Waits until a pass may run, or until the process stops: see [`Gate`].
    pub async fn gate(&self) -> Gate {
        let mut rx = self.state.subscribe();
        {
            let s = rx.borrow_and_update();
            if s.stopping {
                return Gate::Stopping;
            }
            if s.role == Role::Leading {
                return Gate::Open;
            }
        }
        match rx.wait_for(|s| s.stopping || s.role == Role::Leading).await {
            Ok(s) if !s.stopping => Gate::Opened,
            _ => Gate::Stopping,
        }
    }

    /// Enters a run loop over `kind`: not ready until [`Entered::synced`], drained once dropped.
    pub fn enter(&self, kind: &str) -> Entered {
        let mut id = 0;
        self.state.send_modify(|s| {
            id = s.next;
            s.next += 1;
            s.loops.insert(id, (kind.to_string(), false));
        });
        Entered {
            process: self.clone(),
            id,
        }
    }

    /// Whether every run loop entered has its first list in (and one has entered at all).
    pub fn readiness(&self) -> Readiness {
        let s = self.state.borrow();
        let waiting: Vec<String> = s
            .loops
            .values()
            .filter(|(_, synced)| !synced)
            .map(|(kind, _)| kind.clone())
            .collect();
        Readiness {
            ready: !s.loops.is_empty() && waiting.is_empty(),
            waiting,
        }
    }

    /// Records a pass over `object` (`Kind namespace/name`) running until the guard drops.
    pub fn passing(&self, object: String) -> Passing {
        let mut id = 0;
        self.state.send_if_modified(|s| {
            id = s.next;
            s.next += 1;
            s.passes.insert(id, object);
            false
        });
        Passing {
            process: self.clone(),
            id,
        }
    }

    /// What a drain still waits on: named when it takes too long.
    pub fn unfinished(&self) -> Unfinished {
        let s = self.state.borrow();
        Unfinished {
            loops: s.loops.values().map(|(kind, _)| kind.clone()).collect(),
            passes: s.passes.values().cloned().collect(),
        }
    }

    /// Waits until no run loop is left (after [`Process::stop`]: every pass has finished).
    pub async fn drained(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| s.loops.is_empty()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_standby_gate_opens_when_it_comes_to_lead_and_a_leaders_gate_is_open() {
        let p = Process::standby();
        let waiting = tokio::spawn({
            let p = p.clone();
            async move { p.gate().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        p.set_role(Role::Leading);
        assert_eq!(waiting.await.expect("the gate"), Gate::Opened);
        assert_eq!(p.gate().await, Gate::Open);
    }

    #[tokio::test]
    async fn stopping_closes_the_gate_of_a_waiting_pass_and_of_a_leader() {
        let p = Process::standby();
        let waiting = tokio::spawn({
            let p = p.clone();
            async move { p.gate().await }
        });
        tokio::task::yield_now().await;
        p.stop();
        assert_eq!(waiting.await.expect("the gate"), Gate::Stopping);
        let leader = Process::leading();
        leader.stop();
        assert_eq!(leader.gate().await, Gate::Stopping);
        tokio::time::timeout(Duration::from_secs(1), leader.stopping())
            .await
            .expect("stopping resolves once stopped");
    }

    #[tokio::test]
    async fn a_lost_role_never_opens_the_gate() {
        let p = Process::leading();
        p.set_role(Role::Lost);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), p.gate())
                .await
                .is_err()
        );
    }

    #[test]
    fn ready_once_every_loop_entered_has_its_first_list_and_not_before_any_entered() {
        let p = Process::standby();
        assert_eq!(
            p.readiness(),
            Readiness {
                ready: false,
                waiting: vec![]
            }
        );
        let a = p.enter("NatsStream");
        let b = p.enter("NatsConsumer");
        a.synced();
        assert_eq!(p.readiness().waiting, ["NatsConsumer"]);
        b.synced();
        assert!(p.readiness().ready, "a standby counts as ready");
    }

    #[tokio::test]
    async fn drained_once_every_loop_has_dropped() {
        let p = Process::leading();
        let a = p.enter("NatsStream");
        p.stop();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), p.drained())
                .await
                .is_err()
        );
        drop(a);
        tokio::time::timeout(Duration::from_secs(1), p.drained())
            .await
            .expect("drained");
    }

    #[test]
    fn the_unfinished_name_the_loops_and_the_passes_still_running() {
        let p = Process::leading();
        let _loop = p.enter("NatsStream");
        let one = p.passing("NatsStream nats/orders".into());
        let _two = p.passing("NatsStream nats/audit".into());
        assert_eq!(
            p.unfinished(),
            Unfinished {
                loops: vec!["NatsStream".into()],
                passes: vec![
                    "NatsStream nats/orders".into(),
                    "NatsStream nats/audit".into()
                ],
            }
        );
        drop(one);
        assert_eq!(
            p.unfinished().passes,
            vec!["NatsStream nats/audit".to_string()]
        );
    }

    #[tokio::test]
    async fn current_is_the_scoped_process_and_outside_a_scope_one_that_leads() {
        assert!(Process::current().leads());
        let p = Process::standby();
        let inside = p.scope(async { Process::current().role() }).await;
        assert_eq!(inside, Role::Standby);
    }
}
