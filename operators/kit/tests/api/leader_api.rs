//! `controller_kit::leader` and the run loop's gate against a real kube-apiserver 1.20, on a
//! coordination.k8s.io/v1 Lease: of two candidates exactly one leads; a leader whose task is
//! dropped without releasing (a SIGKILL) is replaced within the lease duration; a released Lease
//! is taken at the next retry, long before it would expire; of two candidates that both saw the
//! Lease expire, the write at the stale resourceVersion loses; and under two processes only the
//! leader's passes run, the standby's once it takes over.
//!
//! Every wait is a poll with a deadline; the deadlines are the only timings asserted.
//!
//! Needs `scripts/install-apiserver.sh` to have run; without the binaries the tests fail saying so.

use std::sync::Arc;
use std::time::Duration;

use controller_kit::context::{HasShared, Shared};
use controller_kit::error::KubeError;
use controller_kit::leader::{Elector, Lost, Step, Timings};
use controller_kit::metrics::Metrics;
use controller_kit::process_state::{Process, Role};
use controller_kit::reconcile::{self, Read};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use sim::apiserver::ApiServer;
use sim::testkit::AbortOnDrop;
use sim::wait::poll;
use tokio::sync::oneshot;

const NS: &str = "leases";
const LEASE: &str = "kit-controller";

/// Short timings, so a lease expires within a test.
fn short() -> Timings {
    Timings::new(
        Duration::from_secs(3),
        Duration::from_secs(2),
        Duration::from_millis(250),
    )
    .expect("valid timings")
}

async fn apiserver() -> ApiServer {
    let api = ApiServer::kube_1_20()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    api.create_namespace(NS)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    api
}

/// One candidate campaigning on its own task: `stop` makes it release the Lease and end,
/// dropping `task` ends it without releasing (as SIGKILL would).
struct Candidate {
    identity: String,
    process: Process,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<bool, Lost>>,
}

impl Candidate {
    fn start(api: &ApiServer, identity: &str, timings: Timings) -> Self {
        let process = Process::standby();
        let mut elector = Elector::new(
            api.client(),
            NS,
            LEASE,
            identity.to_string(),
            timings,
            process.clone(),
        );
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            tokio::select! {
                lost = elector.run() => Err(lost),
                _ = stopped => Ok(elector.release().await.expect("the release is answered")),
            }
        });
        Self {
            identity: identity.to_string(),
            process,
            stop: Some(stop),
            task,
        }
    }

    fn leads(&self) -> bool {
        self.process.leads()
    }

    /// Releases the Lease (SIGTERM); whether there was one to release.
    async fn release(mut self) -> bool {
        let _ = self.stop.take().expect("not stopped yet").send(());
        self.task
            .await
            .expect("the candidate's task")
            .expect("it had not lost the Lease")
    }

    /// Ends the candidate without releasing (SIGKILL).
    fn kill(self) {
        self.task.abort();
    }
}

async fn holder(api: &ApiServer) -> Option<String> {
    Api::<Lease>::namespaced(api.client(), NS)
        .get_opt(LEASE)
        .await
        .expect("the Lease is read")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

/// Waits until `c` leads, for at most `within`.
async fn wait_leads(c: &Candidate, within: Duration) {
    poll(&format!("{} leads", c.identity), within, || async {
        Ok(c.leads().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_candidates_of_one_lease_exactly_one_leads() {
    let api = apiserver().await;
    let a = Candidate::start(&api, "a", short());
    let b = Candidate::start(&api, "b", short());
    poll("one leads", Duration::from_secs(10), || async {
        Ok((a.leads() || b.leads()).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // Over several renewals, never both, and always the one the Lease names.
    for _ in 0..12 {
        assert!(!(a.leads() && b.leads()), "both lead");
        tokio::time::sleep(short().retry_period).await;
    }
    let leader = if a.leads() { &a } else { &b };
    let standby = if a.leads() { &b } else { &a };
    assert!(leader.leads() && !standby.leads());
    assert_eq!(standby.process.role(), Role::Standby);
    assert_eq!(
        holder(&api).await.as_deref(),
        Some(leader.identity.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_within_the_lease_duration() {
    let api = apiserver().await;
    let a = Candidate::start(&api, "a", short());
    wait_leads(&a, Duration::from_secs(10)).await;
    let b = Candidate::start(&api, "b", short());
    // b has read the Lease held by a and stands by.
    poll("b has read the Lease", Duration::from_secs(5), || async {
        Ok((holder(&api).await.as_deref() == Some("a")).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(short().retry_period * 2).await;
    assert!(!b.leads(), "b stands by while a renews");
    a.kill();
    // b takes it once it has seen the Lease unchanged for the lease duration: the deadline is
    // that, one retry to notice, and a retry's slack.
    let t = short();
    wait_leads(
        &b,
        t.lease_duration + t.retry_period * 2 + Duration::from_secs(1),
    )
    .await;
    assert_eq!(holder(&api).await.as_deref(), Some("b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_is_taken_at_the_next_retry() {
    let api = apiserver().await;
    // A lease of 30 s: a takeover within 5 s is the release's doing, not an expiry.
    let long = Timings::new(
        Duration::from_secs(30),
        Duration::from_secs(20),
        Duration::from_millis(250),
    )
    .expect("valid timings");
    let a = Candidate::start(&api, "a", long);
    wait_leads(&a, Duration::from_secs(10)).await;
    let b = Candidate::start(&api, "b", long);
    tokio::time::sleep(long.retry_period * 4).await;
    assert!(!b.leads());
    let a_process = a.process.clone();
    assert!(a.release().await, "a held the Lease to release");
    assert!(!a_process.leads(), "a stops leading before it releases");
    wait_leads(&b, Duration::from_secs(5)).await;
    assert_eq!(holder(&api).await.as_deref(), Some("b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_candidates_that_saw_the_lease_expire_the_write_at_the_stale_version_loses() {
    let api = apiserver().await;
    let leases: Api<Lease> = Api::namespaced(api.client(), NS);
    leases
        .create(
            &PostParams::default(),
            &Lease {
                metadata: ObjectMeta {
                    name: Some(LEASE.into()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some("ghost".into()),
                    lease_duration_seconds: Some(1),
                    ..LeaseSpec::default()
                }),
            },
        )
        .await
        .expect("the ghost's Lease is created");
    let (pb, pc) = (Process::standby(), Process::standby());
    let mut b = Elector::new(api.client(), NS, LEASE, "b".into(), short(), pb.clone());
    let mut c = Elector::new(api.client(), NS, LEASE, "c".into(), short(), pc.clone());
    assert_eq!(b.read().await.expect("b reads"), Step::Wait);
    assert_eq!(c.read().await.expect("c reads"), Step::Wait);
    // Both have now seen the ghost's Lease unchanged for its second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(b.read().await.expect("b reads"), Step::Take);
    assert_eq!(c.read().await.expect("c reads"), Step::Take);
    assert!(c.write(&Step::Take).await.expect("c's write is answered"));
    assert!(
        !b.write(&Step::Take).await.expect("b's write is answered"),
        "b wrote at the resourceVersion c's write replaced"
    );
    assert!(pc.leads() && !pb.leads());
    assert!(c.leads() && !b.leads());
    assert_eq!(holder(&api).await.as_deref(), Some("c"));
    // b's next read sees c's Lease, just changed: it waits.
    assert_eq!(b.read().await.expect("b reads"), Step::Wait);
}

/// The campaign is dropped at shutdown, and a renew dropped in flight may have landed: the
/// Lease then names this replica at a resourceVersion it never learnt. The release reads it again
/// and still clears the holder (before, its replace was refused and the Lease was left to expire,
/// which is what a SIGTERMed replica under load once did in CI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renew_that_landed_unanswered_does_not_stop_the_release() {
    let api = apiserver().await;
    let leases: Api<Lease> = Api::namespaced(api.client(), NS);
    let process = Process::standby();
    let mut a = Elector::new(
        api.client(),
        NS,
        LEASE,
        "a".into(),
        short(),
        process.clone(),
    );
    assert_eq!(a.read().await.expect("a reads"), Step::Create);
    assert!(
        a.write(&Step::Create)
            .await
            .expect("a's create is answered")
    );
    assert!(a.leads());
    // The renew a would have made, landed with its answer lost: same holder, new version.
    let mut landed = leases.get(LEASE).await.expect("the Lease is read");
    let before = landed.metadata.resource_version.clone();
    if let Some(spec) = landed.spec.as_mut() {
        spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now(),
        ));
    }
    let landed = leases
        .replace(LEASE, &PostParams::default(), &landed)
        .await
        .expect("the unanswered renew lands");
    assert_ne!(landed.metadata.resource_version, before);
    assert!(
        a.release().await.expect("the release is answered"),
        "a released the Lease"
    );
    assert!(!process.leads());
    assert_eq!(holder(&api).await.filter(|h| !h.is_empty()), None);
}

/// A release finds the Lease taken by another meanwhile: it leaves it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_leaves_a_lease_another_holds_now() {
    let api = apiserver().await;
    let leases: Api<Lease> = Api::namespaced(api.client(), NS);
    let mut a = Elector::new(
        api.client(),
        NS,
        LEASE,
        "a".into(),
        short(),
        Process::standby(),
    );
    assert!(
        a.write(&Step::Create)
            .await
            .expect("a's create is answered")
    );
    let mut taken = leases.get(LEASE).await.expect("the Lease is read");
    if let Some(spec) = taken.spec.as_mut() {
        spec.holder_identity = Some("b".into());
    }
    leases
        .replace(LEASE, &PostParams::default(), &taken)
        .await
        .expect("b's write lands");
    assert!(!a.release().await.expect("the release is answered"));
    assert_eq!(holder(&api).await.as_deref(), Some("b"));
}

struct Ctx {
    shared: Shared,
}

impl HasShared for Ctx {
    fn shared(&self) -> &Shared {
        &self.shared
    }
}

/// One replica: a ConfigMap controller run by the kit's run loop under its own process, and its
/// elector; dropping it ends both without releasing.
struct Replica {
    process: Process,
    metrics: Metrics,
    _task: AbortOnDrop,
}

fn replica(api: &ApiServer, identity: &str) -> Replica {
    let process = Process::standby();
    let metrics = Metrics::default();
    let ctx = Arc::new(Ctx {
        shared: Shared::new(api.client(), metrics.clone(), "kit-test"),
    });
    let controller = Controller::new(
        Api::<ConfigMap>::namespaced(api.client(), NS),
        watcher::Config::default(),
    );
    let passes = process.scope(reconcile::run(
        controller,
        ctx,
        Read::Cached,
        |_cm: Arc<ConfigMap>, _ctx: Arc<Ctx>| async { Ok::<_, KubeError>(Action::await_change()) },
    ));
    let mut elector = Elector::new(
        api.client(),
        NS,
        LEASE,
        identity.into(),
        short(),
        process.clone(),
    );
    let task = AbortOnDrop::spawn(async move {
        tokio::join!(passes, elector.run());
    });
    Replica {
        process,
        metrics,
        _task: task,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leaders_passes_run_and_the_standbys_run_once_it_takes_over() {
    let api = apiserver().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client(), NS);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("a".into());
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("the ConfigMap is created");
    let a = replica(&api, "a");
    let b = replica(&api, "b");
    let passes = |r: &Replica| r.metrics.reconciles("ConfigMap");
    poll("a pass of the leader", Duration::from_secs(20), || async {
        Ok((passes(&a) + passes(&b) > 0).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    poll(
        "both ready, leader or standby",
        Duration::from_secs(10),
        || async { Ok((a.process.readiness().ready && b.process.readiness().ready).then_some(())) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let (leader, standby) = if a.process.leads() { (a, b) } else { (b, a) };
    assert!(!standby.process.leads());
    assert_eq!(passes(&standby), 0, "a standby runs no pass");
    assert!(passes(&leader) > 0);
    drop(leader);
    let t = short();
    poll(
        "the standby takes over and runs the pass it held",
        t.lease_duration + t.retry_period * 2 + Duration::from_secs(5),
        || async { Ok((passes(&standby) > 0).then_some(())) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(standby.process.leads());
}

/// A run loop stopped before its watch's first list came in ran no pass: it ends at once, as
/// every other loop does, instead of holding the drain (kube's runner waits for the store before
/// it runs anything, its shutdown included). Here the list never comes: apiserver 1.20 serves no
/// resource.k8s.io/v1, as a kind whose CRD is missing or whose list RBAC refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_loop_whose_first_list_never_came_in_ends_when_its_process_stops() {
    use k8s_openapi::api::resource::v1::ResourceClaim;
    let api = apiserver().await;
    let process = Process::leading();
    let ctx = Arc::new(Ctx {
        shared: Shared::new(api.client(), Metrics::default(), "kit-test"),
    });
    let controller = Controller::new(
        Api::<ResourceClaim>::namespaced(api.client(), NS),
        watcher::Config::default(),
    );
    let _loop = AbortOnDrop::spawn(process.scope(reconcile::run(
        controller,
        ctx,
        Read::Cached,
        |_: Arc<ResourceClaim>, _ctx: Arc<Ctx>| async {
            Ok::<_, KubeError>(Action::await_change())
        },
    )));
    poll(
        "the loop entered, its list not in",
        Duration::from_secs(10),
        || async {
            let r = process.readiness();
            Ok((r.waiting == ["ResourceClaim"]).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    process.stop();
    tokio::time::timeout(Duration::from_secs(10), process.drained())
        .await
        .unwrap_or_else(|_| panic!("still running: {:?}", process.unfinished()));
}
