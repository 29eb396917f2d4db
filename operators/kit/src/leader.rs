//! Leader election on a coordination.k8s.io/v1 Lease, by client-go's rules (leaderelection.go):
//! a candidate takes the Lease when it has none, has no holder (released), or has been seen
//! unchanged for its `leaseDurationSeconds`, judged by this process's clock from when it first
//! saw that version of the Lease (not from `renewTime`, which is another machine's clock); the
//! leader renews every retry period and stops when no renew has succeeded for the renew deadline.
//! Every write is a replace at the resourceVersion read (or a create), so of two candidates that
//! saw the same Lease only the first write wins.
//!
//! Written here rather than borrowed: `kube-leader-election` is built on kube 4 (this workspace
//! is on kube 5) and judges expiry by `renewTime` against the local clock; `kube-lease-manager`
//! (kube 5) judges expiry the same way, writes by server-side apply rather than at a
//! resourceVersion, and keeps reporting leadership while renewals fail, with no renew deadline —
//! so a leader cut off from the API would go on reconciling after another took the Lease. Here
//! the rules are one pure function, [`step`], with a table test; [`Elector`] carries its answer
//! out against the API.
//!
//! Stricter than client-go in two ways: a leader that reads another holder, or no Lease at all,
//! stops at once (client-go waits for its deadline), and every request of a leader is cut off at
//! its deadline, so the stop comes at the deadline even while a request hangs. The deadline
//! counts from the start of the last write that succeeded, which is no later than when any other
//! candidate can have seen it; a candidate waits the whole lease duration from there, and the
//! renew deadline is shorter, so a leader always stops before another may start.
//!
//! Losing the Lease ends leadership for good: the [`Process`] is marked [`Role::Lost`] (its
//! gate never opens again) and a binary exits non-zero (`crate::start::run`), so what it kept
//! in memory for its objects is dropped with the process and a restarted pod stands by clean,
//! as controller-runtime does. On shutdown [`Elector::release`] clears the holder and sets
//! `leaseDurationSeconds` to 1 (client-go's ReleaseOnCancel), so a standby takes over at its next
//! retry instead of after the lease duration.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use crate::process_state::{Process, Role};

/// The election's three durations (client-go's LeaseDuration, RenewDeadline, RetryPeriod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// How long a candidate waits, from when it saw the Lease last change, before taking it;
    /// written into the Lease as `leaseDurationSeconds` (whole seconds).
    pub lease_duration: Duration,
    /// How long the leader goes on without a successful renew before it stops.
    pub renew_deadline: Duration,
    /// How often every replica reads (and the leader renews) the Lease.
    pub retry_period: Duration,
}

impl Timings {
    /// 15 s, 10 s, 2 s: client-go's and controller-runtime's defaults.
    pub const DEFAULT: Timings = Timings {
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };

    /// The timings, if the lease duration is whole seconds (at least one) and longer than the
    /// renew deadline, which is longer than the retry period, which is more than zero.
    pub fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, String> {
        if lease_duration < Duration::from_secs(1) || lease_duration.subsec_nanos() != 0 {
            return Err(format!(
                "the lease duration ({lease_duration:?}) must be whole seconds, at least 1s"
            ));
        }
        if renew_deadline >= lease_duration {
            return Err(format!(
                "the renew deadline ({renew_deadline:?}) must be shorter than the lease duration ({lease_duration:?}): the leader stops before another may start"
            ));
        }
        if retry_period.is_zero() || retry_period >= renew_deadline {
            return Err(format!(
                "the retry period ({retry_period:?}) must be more than zero and shorter than the renew deadline ({renew_deadline:?})"
            ));
        }
        Ok(Self {
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }
}

/// The Lease as this replica last read or wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its `holderIdentity`; `None` when empty (released).
    pub holder: Option<String>,
    /// Its `leaseDurationSeconds`.
    pub duration: Duration,
    /// When this replica first saw this version of it (its own clock).
    pub at: Instant,
}

impl Seen {
    /// What `lease` says, first seen `at`.
    pub fn of(lease: &Lease, at: Instant) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        Self {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            duration: Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            ),
            at,
        }
    }
}

/// Why a leader stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Lost {
    /// No renew succeeded for the renew deadline.
    #[error("no renew succeeded within the renew deadline")]
    Deadline,
    /// The Lease names another holder (or none).
    #[error("the Lease is held by {0:?}")]
    TakenBy(Option<String>),
    /// The Lease is gone.
    #[error("the Lease was deleted")]
    Gone,
}

/// What the rules say a replica does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// There is no Lease: create it, holding it.
    Create,
    /// The Lease is free or expired: write this replica as its holder.
    Take,
    /// This replica leads: write a new `renewTime`.
    Renew,
    /// Another holds the Lease and it has not expired: look again after the retry period.
    Wait,
    /// This replica led and may no longer: stop every pass now.
    Stop(Lost),
}

/// The election's rules: what replica `me` does at `now`, having last renewed at `renewed`
/// (`Some` while it leads) and last seen the Lease as `seen` (`None`: there is none).
pub fn step(
    me: &str,
    renewed: Option<Instant>,
    seen: Option<&Seen>,
    now: Instant,
    timings: &Timings,
) -> Step {
    if let Some(renewed) = renewed {
        if now >= renewed + timings.renew_deadline {
            return Step::Stop(Lost::Deadline);
        }
        return match seen {
            None => Step::Stop(Lost::Gone),
            Some(s) if s.holder.as_deref() != Some(me) => {
                Step::Stop(Lost::TakenBy(s.holder.clone()))
            }
            Some(_) => Step::Renew,
        };
    }
    match seen {
        None => Step::Create,
        Some(s) => match s.holder.as_deref() {
            None => Step::Take,
            // Our own name on a Lease we do not lead by: a write that took it whose answer was
            // lost. Taking it again is a write at its resourceVersion like any other.
            Some(h) if h == me => Step::Take,
            Some(_) if now >= s.at + s.duration => Step::Take,
            Some(_) => Step::Wait,
        },
    }
}

/// This replica's identity in the Lease: the pod's name (`POD_NAME`, else the hostname) and a
/// random suffix, so a restarted pod of the same name never takes its predecessor's renewals
/// for its own.
pub fn identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "controller".into());
    format!("{base}_{:08x}", rand::random::<u32>())
}

/// Why one request of the election failed.
#[derive(Debug, thiserror::Error)]
pub enum ElectError {
    /// The API answered with an error, or could not be reached.
    #[error("Lease request: {0}")]
    Api(#[from] kube::Error),
    /// No answer before the leader's deadline (or, for a candidate, within the renew deadline).
    #[error("Lease request: no answer within {0:?}")]
    TimedOut(Duration),
}

/// One replica's candidacy for one Lease.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: Timings,
    process: Process,
    /// The Lease as last read or written: its resourceVersion guards the next write.
    lease: Option<Lease>,
    seen: Option<Seen>,
    /// The start of the last write that took or renewed the Lease, while this replica leads.
    renewed: Option<Instant>,
    /// The holder last logged, so a standby logs a change of holder once.
    logged: Option<Option<String>>,
}

impl Elector {
    /// A candidate `identity` for the Lease `namespace/name`, marking `process` Leading while
    /// it holds it and Lost when it loses it.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: String,
        timings: Timings,
        process: Process,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity,
            timings,
            process,
            lease: None,
            seen: None,
            renewed: None,
            logged: None,
        }
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether this replica holds the Lease.
    pub fn leads(&self) -> bool {
        self.renewed.is_some()
    }

    fn decide(&self, now: Instant) -> Step {
        step(
            &self.identity,
            self.renewed,
            self.seen.as_ref(),
            now,
            &self.timings,
        )
    }

    /// A request cut off at the leader's deadline (a candidate's after the renew deadline).
    async fn bounded<T>(
        &self,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, ElectError> {
        let by = match self.renewed {
            Some(renewed) => renewed + self.timings.renew_deadline,
            None => Instant::now() + self.timings.renew_deadline,
        };
        match tokio::time::timeout_at(by, request).await {
            Ok(answer) => Ok(answer?),
            Err(_) => Err(ElectError::TimedOut(self.timings.renew_deadline)),
        }
    }

    fn record(&mut self, lease: Option<Lease>, at: Instant) {
        let same = match (&self.lease, &lease) {
            (Some(old), Some(new)) => {
                old.metadata.resource_version == new.metadata.resource_version
            }
            _ => false,
        };
        let at = match &self.seen {
            Some(s) if same => s.at,
            _ => at,
        };
        self.seen = lease.as_ref().map(|l| Seen::of(l, at));
        self.lease = lease;
    }

    /// Reads the Lease and returns what the rules say to do.
    pub async fn read(&mut self) -> Result<Step, ElectError> {
        let got = self.bounded(self.api.get_opt(&self.name)).await?;
        self.record(got, Instant::now());
        if !self.leads() {
            let holder = self.seen.as_ref().and_then(|s| s.holder.clone());
            if self.logged.as_ref() != Some(&holder) {
                tracing::info!(lease = %self.name, identity = %self.identity, holder = ?holder, "standing by");
                self.logged = Some(holder);
            }
        }
        Ok(self.decide(Instant::now()))
    }

    fn spec(&self, now: &MicroTime, acquire: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.timings.lease_duration.as_secs()).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(acquire.unwrap_or_else(|| now.clone())),
            renew_time: Some(now.clone()),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// Carries out `step` (Create, Take or Renew; any other is no write): `Ok(true)` when this
    /// replica holds the Lease by it, `Ok(false)` when the API refused it because another wrote
    /// first (the Lease exists already, or is no longer at the resourceVersion read).
    pub async fn write(&mut self, step: &Step) -> Result<bool, ElectError> {
        let started = Instant::now();
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let old = self
            .lease
            .as_ref()
            .and_then(|l| l.spec.clone())
            .unwrap_or_default();
        let answer = match step {
            Step::Create => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(self.spec(&now, None, 0)),
                };
                self.bounded(self.api.create(&PostParams::default(), &lease))
                    .await
            }
            Step::Take | Step::Renew => {
                let Some(mut lease) = self.lease.clone() else {
                    return Ok(false);
                };
                let transitions = old.lease_transitions.unwrap_or(0);
                lease.spec = Some(if *step == Step::Renew {
                    self.spec(&now, old.acquire_time.clone(), transitions)
                } else {
                    self.spec(&now, None, transitions.saturating_add(1))
                });
                self.bounded(self.api.replace(&self.name, &PostParams::default(), &lease))
                    .await
            }
            Step::Wait | Step::Stop(_) => return Ok(false),
        };
        match answer {
            Ok(written) => {
                self.record(Some(written), started);
                if self.renewed.is_none() {
                    tracing::info!(lease = %self.name, identity = %self.identity, "leading");
                    self.logged = None;
                }
                self.renewed = Some(started);
                self.process.set_role(Role::Leading);
                Ok(true)
            }
            Err(ElectError::Api(kube::Error::Api(status))) if status.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn lose(&mut self, lost: Lost) -> Lost {
        self.renewed = None;
        self.process.set_role(Role::Lost);
        tracing::error!(lease = %self.name, identity = %self.identity, reason = %lost, "lost the Lease: every pass stops");
        lost
    }

    /// One round: read the Lease, and take, renew or create it as the rules say. `Some` when
    /// this replica led and may no longer (its process is marked Lost first).
    pub async fn round(&mut self) -> Option<Lost> {
        if let Step::Stop(lost) = self.decide(Instant::now()) {
            return Some(self.lose(lost));
        }
        let step = match self.read().await {
            Ok(step) => step,
            Err(e) => {
                if self.leads() {
                    tracing::warn!(lease = %self.name, error = %e, "renewing");
                } else {
                    tracing::debug!(lease = %self.name, error = %e, "reading");
                }
                return match self.decide(Instant::now()) {
                    Step::Stop(lost) => Some(self.lose(lost)),
                    _ => None,
                };
            }
        };
        let refused = match &step {
            Step::Stop(lost) => return Some(self.lose(lost.clone())),
            Step::Wait => return None,
            write => match self.write(write).await {
                Ok(won) => !won,
                Err(e) => {
                    tracing::warn!(lease = %self.name, error = %e, step = ?write, "writing");
                    false
                }
            },
        };
        // Refused while leading: another wrote the Lease. Read who, and stop if it is not us.
        if refused
            && self.leads()
            && let Ok(Step::Stop(lost)) = self.read().await
        {
            return Some(self.lose(lost));
        }
        match self.decide(Instant::now()) {
            Step::Stop(lost) => Some(self.lose(lost)),
            _ => None,
        }
    }

    /// Campaigns, and holds the Lease once it has it, round after round every retry period,
    /// until it loses it; returns why. Cancel-safe: dropping it between or within rounds
    /// leaves the elector to go on with the next call (a dropped write is one that may or may
    /// not have landed, as any write whose answer was lost).
    pub async fn run(&mut self) -> Lost {
        loop {
            if let Some(lost) = self.round().await {
                return lost;
            }
            let next = Instant::now() + self.timings.retry_period;
            let wake = match self.renewed {
                Some(renewed) => next.min(renewed + self.timings.renew_deadline),
                None => next,
            };
            tokio::time::sleep_until(wake).await;
        }
    }

    /// Gives the Lease up if this replica holds it: the process stops leading first, then a
    /// replace at the resourceVersion last written clears the holder and sets
    /// `leaseDurationSeconds` to 1, so a standby takes it at its next retry. `Ok(true)` when
    /// released; `Ok(false)` when there was nothing to release (not leading, past the deadline,
    /// or another holds the Lease now).
    ///
    /// A refused replace (409) is not taken as "another wrote it": the campaign is dropped at
    /// shutdown, and a renew dropped in flight may have landed without this replica learning its
    /// resourceVersion. So the Lease is read again, and while it still names this replica the
    /// release is retried at the version read ([`RELEASE_ATTEMPTS`] in all).
    pub async fn release(&mut self) -> Result<bool, ElectError> {
        if !matches!(self.decide(Instant::now()), Step::Renew) {
            return Ok(false);
        }
        self.process.set_role(Role::Standby);
        let answer = self.release_at_latest().await;
        self.renewed = None;
        answer
    }

    async fn release_at_latest(&mut self) -> Result<bool, ElectError> {
        for _ in 0..RELEASE_ATTEMPTS {
            let Some(mut lease) = self.lease.clone() else {
                return Ok(false);
            };
            let still_ours = lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                == Some(self.identity.as_str());
            if !still_ours {
                return Ok(false);
            }
            let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
            let transitions = lease
                .spec
                .as_ref()
                .and_then(|s| s.lease_transitions)
                .unwrap_or(0);
            lease.spec = Some(LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: Some(1),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(transitions),
                ..LeaseSpec::default()
            });
            let answer = self
                .bounded(self.api.replace(&self.name, &PostParams::default(), &lease))
                .await;
            match answer {
                Ok(written) => {
                    self.record(Some(written), Instant::now());
                    tracing::info!(lease = %self.name, identity = %self.identity, "released the Lease");
                    return Ok(true);
                }
                Err(ElectError::Api(kube::Error::Api(status))) if status.code == 409 => {
                    let latest = self.bounded(self.api.get_opt(&self.name)).await?;
                    self.record(latest, Instant::now());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }
}

/// How many replaces [`Elector::release`] makes at most, each at the version last read.
pub const RELEASE_ATTEMPTS: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const ME: &str = "pod-a_1";
    const OTHER: &str = "pod-b_2";

    fn t() -> Timings {
        Timings::DEFAULT
    }

    fn seen(holder: Option<&str>, duration_s: u64, at: Instant) -> Seen {
        Seen {
            holder: holder.map(str::to_string),
            duration: Duration::from_secs(duration_s),
            at,
        }
    }

    /// Each row: (renewed, seen, now) as seconds after a common origin.
    #[rstest]
    #[case::no_lease_yet_a_candidate_creates_it(None, None, 0, Step::Create)]
    #[case::a_released_lease_without_holder_is_taken_at_once(None, Some((None, 1, 0)), 0, Step::Take)]
    #[case::held_by_another_seen_less_than_its_duration_ago_waits(None, Some((Some(OTHER), 15, 0)), 14, Step::Wait)]
    #[case::held_by_another_unchanged_for_its_duration_is_taken(None, Some((Some(OTHER), 15, 0)), 15, Step::Take)]
    #[case::a_release_that_left_a_holder_and_1s_expires_a_second_after_it_was_seen(None, Some((Some(OTHER), 1, 3)), 4, Step::Take)]
    #[case::our_own_name_on_a_lease_we_do_not_lead_by_is_taken_again(None, Some((Some(ME), 15, 0)), 0, Step::Take)]
    #[case::a_leader_within_its_deadline_renews(Some(0), Some((Some(ME), 15, 0)), 9, Step::Renew)]
    #[case::a_leader_at_its_deadline_stops_before_the_lease_could_expire(Some(0), Some((Some(ME), 15, 0)), 10, Step::Stop(Lost::Deadline))]
    #[case::a_leader_that_reads_another_holder_stops_at_once(Some(0), Some((Some(OTHER), 15, 1)), 1, Step::Stop(Lost::TakenBy(Some(OTHER.into()))))]
    #[case::a_leader_that_reads_no_holder_stops_at_once(Some(0), Some((None, 1, 1)), 1, Step::Stop(Lost::TakenBy(None)))]
    #[case::a_leader_whose_lease_is_deleted_stops_at_once(Some(0), None, 1, Step::Stop(Lost::Gone))]
    fn the_rules(
        #[case] renewed: Option<u64>,
        #[case] lease: Option<(Option<&str>, u64, u64)>,
        #[case] now: u64,
        #[case] want: Step,
    ) {
        let origin = Instant::now();
        let at = |s: u64| origin + Duration::from_secs(s);
        let seen = lease.map(|(holder, d, seen_at)| seen(holder, d, at(seen_at)));
        assert_eq!(
            step(ME, renewed.map(at), seen.as_ref(), at(now), &t()),
            want
        );
    }

    /// Whatever the timings accepted, at no instant may the leader go on while a candidate that
    /// saw its last renew at the earliest possible moment (the write's start) may take.
    #[rstest]
    #[case::defaults(15, 10, 2)]
    #[case::tight(2, 1, 0)]
    fn the_leader_stops_strictly_before_a_candidate_may_take(
        #[case] lease_s: u64,
        #[case] renew_s: u64,
        #[case] retry_ms_or_zero: u64,
    ) {
        let retry = if retry_ms_or_zero == 0 {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(retry_ms_or_zero)
        };
        let timings = Timings::new(
            Duration::from_secs(lease_s),
            Duration::from_secs(renew_s),
            retry,
        )
        .expect("valid timings");
        let renewed = Instant::now();
        let ours = seen(Some(ME), lease_s, renewed);
        let theirs = seen(Some(ME), lease_s, renewed);
        for ms in 0..=(lease_s * 1000 + 10) {
            let now = renewed + Duration::from_millis(ms);
            let leader_goes_on = !matches!(
                step(ME, Some(renewed), Some(&ours), now, &timings),
                Step::Stop(_)
            );
            let candidate_takes = step(OTHER, None, Some(&theirs), now, &timings) == Step::Take;
            assert!(!(leader_goes_on && candidate_takes), "both at {ms} ms");
        }
    }

    #[rstest]
    #[case::defaults(15_000, 10_000, 2_000, Ok(()))]
    #[case::renew_not_shorter_than_lease(10_000, 10_000, 2_000, Err("renew deadline"))]
    #[case::retry_not_shorter_than_renew(15_000, 10_000, 10_000, Err("retry period"))]
    #[case::zero_retry(15_000, 10_000, 0, Err("retry period"))]
    #[case::fractional_lease(1_500, 1_000, 100, Err("whole seconds"))]
    fn timings_order_lease_then_renew_then_retry(
        #[case] lease_ms: u64,
        #[case] renew_ms: u64,
        #[case] retry_ms: u64,
        #[case] want: Result<(), &str>,
    ) {
        let got = Timings::new(
            Duration::from_millis(lease_ms),
            Duration::from_millis(renew_ms),
            Duration::from_millis(retry_ms),
        );
        match (got, want) {
            (Ok(_), Ok(())) => {}
            (Err(e), Err(part)) => assert!(e.contains(part), "{e}"),
            (got, want) => panic!("{got:?}, wanted {want:?}"),
        }
    }

    #[test]
    fn an_identity_is_the_pod_name_and_a_random_suffix() {
        let a = identity();
        let b = identity();
        assert_ne!(a, b);
        let (base, suffix) = a.rsplit_once('_').expect("a suffix");
        assert!(!base.is_empty());
        assert_eq!(suffix.len(), 8);
    }
}
