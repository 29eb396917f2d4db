//! The chart's pre-delete hook (issue 43): `<any controller binary> uninstall-hook`, run by a Job
//! before `helm uninstall` removes the controllers. Once they are gone nothing removes the
//! finalizers they put on NATS resources, so those would stay Terminating for ever (seed 004's
//! deadlock). So the hook, while the controllers still run:
//!
//! - by default **refuses**: when any object of a Nats kind exists in the served namespaces it
//!   exits 1 with a message naming them (kind namespace/name, at most `--max-named`), which Helm
//!   reports as the failed pre-delete hook; the release and everything in it stay;
//! - with `--delete-resources` (the chart's `uninstall.deleteResources`) **deletes** them in the
//!   safe order of docs/uninstall.md, one wave of kinds after another ([`wave`]), and waits until
//!   every one is gone, at most `--timeout-seconds`; what is left then is named with the reason it
//!   is held, and the hook fails (the uninstall stops, the controllers still run).
//!
//! A wave is done when each of its objects is gone or says it waits on another object still
//! there ([`held_by_another`]: a connection `InUse`, a user or account `CredentialsInUse`): the
//! controllers enforce those waits themselves, so the next wave may start.
//!
//! It is a subcommand of the controller binaries rather than a script in another image: the
//! controller images are FROM scratch (no shell, no kubectl), and the kinds, their API groups
//! and their order are this workspace's own types, compiled in, so the hook cannot drift from
//! the CRDs the chart installs and needs nothing the chart does not already ship.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};
use serde_json::Value;

/// The subcommand's name, the first argument of the binary.
pub const SUBCOMMAND: &str = "uninstall-hook";

/// How often the hook looks again while it waits.
const POLL: Duration = Duration::from_secs(1);

/// The hook's flags.
#[derive(Debug, clap::Parser)]
#[command(name = "uninstall-hook")]
pub struct Flags {
    /// Delete every NATS resource in the safe order and wait, instead of refusing.
    #[arg(long)]
    pub delete_resources: bool,
    /// With --delete-resources: how long to wait for every resource to be gone.
    #[arg(long, default_value_t = 240)]
    pub timeout_seconds: u64,
    /// The namespaces the controllers serve (comma-separated); empty: every namespace.
    #[arg(long, value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,
    /// At most this many resources are named in a message; the rest are counted.
    #[arg(long, default_value_t = 20)]
    pub max_named: usize,
    /// Where the message is written too, for `kubectl describe pod` to show.
    #[arg(long, default_value = "/dev/termination-log")]
    pub termination_log: PathBuf,
}

/// Why the hook could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("no Kubernetes client from the environment: {0}")]
    Client(#[source] kube::Error),
    #[error("listing {kind}: {source}")]
    List {
        kind: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting {what}: {source}")]
    Delete {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// One object of a Nats kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Already being deleted.
    pub deleting: bool,
    /// What its status says it waits on, when it says so (see [`held_by_another`]).
    pub held: Option<String>,
    /// Its Ready (or Deleting) condition, `reason: message`, for a message naming it.
    pub state: Option<String>,
}

impl Found {
    fn describe(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The number of waves [`wave`] puts kinds in.
pub const WAVES: usize = 7;

/// The wave a kind is deleted in: what reaches NATS through another object goes before it
/// (docs/uninstall.md, "The safe order"). Consumers, evacuations and balancers first; then the
/// streams, buckets and object stores (their `deletionPolicy: Delete` runs through their
/// connection); the users (revoked while the account, its NatsOperator and the auth controller's
/// system connection still run); the connections (a user whose creds one names waits for it);
/// the accounts; the NatsClusters (their guard waits for the stream data left on them); last the
/// trust roots, grants, system accounts and NatsOperators everything above was admitted by or
/// signed under. A kind this table does not know goes with the first wave.
pub fn wave(kind: &str) -> usize {
    match kind {
        "NatsConsumer" | "NatsClusterEvacuation" | "NatsBalancer" | "NatsSystemBalancer" => 0,
        "NatsStream" | "NatsKeyValue" | "NatsObjectStore" => 1,
        "NatsUser" => 2,
        "NatsConnection" => 3,
        "NatsAccount" => 4,
        "NatsCluster" => 5,
        "NatsSystemAccount" | "NatsOperator" | "NatsOperatorTrust" | "NatsAccountTrust"
        | "NatsReferenceGrant" => 6,
        _ => 0,
    }
}

/// The condition reasons by which an object being deleted says it waits on another object that
/// is still there (the controllers release it once that one is gone).
pub const HELD_REASONS: [&str; 2] = ["InUse", "CredentialsInUse"];

/// What `obj`'s status says it waits on, if one of its conditions carries a [`HELD_REASONS`]
/// reason: `reason: message`.
pub fn held_by_another(obj: &Value) -> Option<String> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| {
            c["reason"]
                .as_str()
                .is_some_and(|r| HELD_REASONS.contains(&r))
        })
        .map(reason_and_message)
}

/// The condition that says most about an object being deleted: `Deleting`, else `Ready`.
fn state_of(obj: &Value) -> Option<String> {
    let conditions = obj["status"]["conditions"].as_array()?;
    ["Deleting", "Ready"].iter().find_map(|t| {
        conditions
            .iter()
            .find(|c| c["type"] == *t)
            .map(reason_and_message)
    })
}

fn reason_and_message(c: &Value) -> String {
    let reason = c["reason"].as_str().unwrap_or_default();
    match c["message"].as_str().unwrap_or_default() {
        "" => reason.to_string(),
        m => format!("{reason}: {m}"),
    }
}

/// Whether a wave's objects `left` let the next wave start: none left, or each being deleted and
/// waiting on another object.
pub fn wave_settled(left: &[Found]) -> bool {
    left.iter().all(|f| f.deleting && f.held.is_some())
}

/// `found` in the order they are deleted: by wave, then namespace and name.
pub fn in_order(mut found: Vec<Found>) -> Vec<Found> {
    found.sort_by(|a, b| {
        (wave(&a.kind), &a.namespace, &a.kind, &a.name).cmp(&(
            wave(&b.kind),
            &b.namespace,
            &b.kind,
            &b.name,
        ))
    });
    found
}

/// Lines naming `found`, at most `max`, then how many more; each with `state` when asked.
pub fn named(found: &[Found], max: usize, with_state: bool) -> String {
    let mut out = String::new();
    for f in found.iter().take(max) {
        out.push_str("\n  ");
        out.push_str(&f.describe());
        if f.deleting {
            out.push_str(" (being deleted)");
        }
        if with_state && let Some(s) = &f.state {
            out.push_str(" — ");
            out.push_str(s);
        }
    }
    if found.len() > max {
        out.push_str(&format!("\n  … and {} more", found.len() - max));
    }
    out
}

/// The refusal: what exists and what to do about it.
pub fn refusal(found: &[Found], max: usize) -> String {
    format!(
        "helm uninstall refused: {} NATS resource(s) still exist, and once the controllers are \
         uninstalled nothing removes their finalizers (they would stay Terminating). Delete them \
         first, in the order of docs/uninstall.md, or set uninstall.deleteResources=true \
         (helm upgrade) for this hook to delete them in that order and wait:{}",
        found.len(),
        named(&in_order(found.to_vec()), max, false)
    )
}

/// The failure of a deletion that did not finish in time: what is left and why.
pub fn timed_out(left: &[Found], max: usize, timeout: Duration) -> String {
    format!(
        "helm uninstall stopped: {} NATS resource(s) were not gone within {} s of their \
         deletion; the controllers still run. Each says why it is held (docs/uninstall.md, \
         \"When a deletion is held\"):{}",
        left.len(),
        timeout.as_secs(),
        named(&in_order(left.to_vec()), max, true)
    )
}

/// The API resource of a CRD's storage version.
fn api_resource(crd: &CustomResourceDefinition) -> ApiResource {
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .or_else(|| crd.spec.versions.first())
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let group = crd.spec.group.clone();
    ApiResource {
        api_version: format!("{group}/{version}"),
        group,
        version,
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    }
}

fn found(kind: &str, o: &DynamicObject) -> Found {
    let value = serde_json::to_value(o).unwrap_or_default();
    Found {
        kind: kind.to_string(),
        namespace: o.metadata.namespace.clone().unwrap_or_default(),
        name: o.metadata.name.clone().unwrap_or_default(),
        deleting: o.metadata.deletion_timestamp.is_some(),
        held: held_by_another(&value),
        state: state_of(&value),
    }
}

/// The hook's view of the cluster: every Nats kind, in the served namespaces.
struct Cluster {
    client: kube::Client,
    kinds: Vec<ApiResource>,
    namespaces: Vec<String>,
}

impl Cluster {
    fn apis(&self, ar: &ApiResource) -> Vec<Api<DynamicObject>> {
        if self.namespaces.is_empty() {
            return vec![Api::all_with(self.client.clone(), ar)];
        }
        self.namespaces
            .iter()
            .map(|ns| Api::namespaced_with(self.client.clone(), ns, ar))
            .collect()
    }

    /// Every object of the kinds in `waves` (all when None). A kind the apiserver does not serve
    /// (its CRD not installed) has none.
    async fn list(&self, only_wave: Option<usize>) -> Result<Vec<Found>, HookError> {
        let mut out = Vec::new();
        for ar in &self.kinds {
            if only_wave.is_some_and(|w| wave(&ar.kind) != w) {
                continue;
            }
            for api in self.apis(ar) {
                match api.list(&ListParams::default()).await {
                    Ok(list) => out.extend(list.items.iter().map(|o| found(&ar.kind, o))),
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(source) => {
                        return Err(HookError::List {
                            kind: ar.kind.clone(),
                            source,
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    async fn delete(&self, f: &Found) -> Result<(), HookError> {
        let Some(ar) = self.kinds.iter().find(|k| k.kind == f.kind) else {
            return Ok(());
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &f.namespace, ar);
        match api.delete(&f.name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(source) => Err(HookError::Delete {
                what: f.describe(),
                source,
            }),
        }
    }
}

/// The outcome of the hook: the line it ends with and whether it succeeded.
enum Outcome {
    Done(String),
    Refused(String),
}

/// Runs the hook with the process's arguments (the first is [`SUBCOMMAND`]).
pub async fn main() -> ExitCode {
    let flags = <Flags as clap::Parser>::parse_from(std::env::args().skip(1));
    let outcome = match run(&flags).await {
        Ok(o) => o,
        Err(e) => Outcome::Refused(format!("uninstall hook: {e}")),
    };
    match outcome {
        Outcome::Done(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Outcome::Refused(message) => {
            eprintln!("{message}");
            // Best effort: the pod's status shows it (`kubectl describe pod`).
            let _ = std::fs::write(&flags.termination_log, &message);
            ExitCode::FAILURE
        }
    }
}

async fn run(flags: &Flags) -> Result<Outcome, HookError> {
    let client = kube::Client::try_default()
        .await
        .map_err(HookError::Client)?;
    let cluster = Cluster {
        client,
        kinds: nats_api::crds::all().iter().map(api_resource).collect(),
        namespaces: flags
            .watch_namespaces
            .iter()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect(),
    };
    let all = cluster.list(None).await?;
    if all.is_empty() {
        return Ok(Outcome::Done(
            "no NATS resources exist: the uninstall may go on".into(),
        ));
    }
    if !flags.delete_resources {
        return Ok(Outcome::Refused(refusal(&all, flags.max_named)));
    }
    let timeout = Duration::from_secs(flags.timeout_seconds);
    let t0 = Instant::now();
    println!(
        "deleting {} NATS resource(s) in the safe order, at most {} s",
        all.len(),
        timeout.as_secs()
    );
    for w in 0..WAVES {
        let objects = cluster.list(Some(w)).await?;
        if objects.is_empty() {
            continue;
        }
        for f in in_order(objects).iter().filter(|f| !f.deleting) {
            println!("wave {w}: deleting {}", f.describe());
            cluster.delete(f).await?;
        }
        loop {
            let left = cluster.list(Some(w)).await?;
            if wave_settled(&left) {
                println!(
                    "wave {w} settled at {:.1} s ({} waiting on others)",
                    t0.elapsed().as_secs_f64(),
                    left.len()
                );
                break;
            }
            if t0.elapsed() >= timeout {
                return Ok(Outcome::Refused(timed_out(&left, flags.max_named, timeout)));
            }
            tokio::time::sleep(POLL).await;
        }
    }
    loop {
        let left = cluster.list(None).await?;
        if left.is_empty() {
            return Ok(Outcome::Done(format!(
                "every NATS resource deleted in {:.1} s: the uninstall may go on",
                t0.elapsed().as_secs_f64()
            )));
        }
        if t0.elapsed() >= timeout {
            return Ok(Outcome::Refused(timed_out(&left, flags.max_named, timeout)));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn f(kind: &str, name: &str, deleting: bool, held: Option<&str>) -> Found {
        Found {
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
            deleting,
            held: held.map(str::to_string),
            state: None,
        }
    }

    #[rstest]
    #[case::consumers_first("NatsConsumer", 0)]
    #[case::evacuations_first("NatsClusterEvacuation", 0)]
    #[case::balancers_first("NatsBalancer", 0)]
    #[case::streams_after_their_consumers("NatsStream", 1)]
    #[case::buckets_with_streams("NatsKeyValue", 1)]
    #[case::object_stores_with_streams("NatsObjectStore", 1)]
    #[case::users_after_what_reaches_nats("NatsUser", 2)]
    #[case::connections_after_the_delete_resources("NatsConnection", 3)]
    #[case::accounts_after_their_users("NatsAccount", 4)]
    #[case::clusters_after_the_data_went("NatsCluster", 5)]
    #[case::operators_last("NatsOperator", 6)]
    #[case::system_account_last("NatsSystemAccount", 6)]
    #[case::grants_last("NatsReferenceGrant", 6)]
    #[case::trust_last("NatsOperatorTrust", 6)]
    fn each_kind_goes_in_its_wave(#[case] kind: &str, #[case] want: usize) {
        assert_eq!(wave(kind), want);
        assert!(want < WAVES);
    }

    #[test]
    fn every_kind_of_the_crds_is_in_the_table() {
        for crd in nats_api::crds::all() {
            let kind = crd.spec.names.kind;
            let known = wave(&kind) != 0
                || [
                    "NatsConsumer",
                    "NatsClusterEvacuation",
                    "NatsBalancer",
                    "NatsSystemBalancer",
                ]
                .contains(&kind.as_str());
            assert!(known, "{kind} has no wave of its own");
        }
    }

    #[rstest]
    #[case::connection_in_use(json!({"status": {"conditions": [{"type": "Deleting", "status": "True", "reason": "InUse", "message": "NatsKeyValue carts"}]}}), Some("InUse: NatsKeyValue carts"))]
    #[case::user_creds_in_use(json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "CredentialsInUse", "message": "orders"}]}}), Some("CredentialsInUse: orders"))]
    #[case::waiting_for_nats_is_not_held_by_another(json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Distributing"}]}}), None)]
    #[case::no_status(json!({}), None)]
    fn a_hold_on_another_object_is_read_off_the_conditions(
        #[case] obj: Value,
        #[case] want: Option<&str>,
    ) {
        assert_eq!(held_by_another(&obj).as_deref(), want);
    }

    #[rstest]
    #[case::nothing_left(vec![], true)]
    #[case::all_held_while_deleting(vec![f("NatsUser", "a", true, Some("CredentialsInUse"))], true)]
    #[case::one_still_working(vec![f("NatsUser", "a", true, Some("CredentialsInUse")), f("NatsUser", "b", true, None)], false)]
    #[case::not_yet_deleting(vec![f("NatsUser", "a", false, Some("CredentialsInUse"))], false)]
    fn a_wave_settles_when_what_is_left_waits_on_others(
        #[case] left: Vec<Found>,
        #[case] want: bool,
    ) {
        assert_eq!(wave_settled(&left), want);
    }

    #[test]
    fn the_refusal_names_each_in_the_safe_order_bounded() {
        let found = vec![
            f("NatsCluster", "demo", false, None),
            f("NatsStream", "orders", false, None),
            f("NatsConsumer", "worker", true, None),
        ];
        let text = refusal(&found, 2);
        assert!(text.contains("3 NATS resource(s)"), "{text}");
        assert!(text.contains("uninstall.deleteResources=true"), "{text}");
        let consumer = text.find("NatsConsumer ns/worker (being deleted)");
        let stream = text.find("NatsStream ns/orders");
        assert!(
            consumer.is_some() && stream.is_some() && consumer < stream,
            "{text}"
        );
        assert!(!text.contains("NatsCluster ns/demo"), "{text}");
        assert!(text.ends_with("… and 1 more"), "{text}");
    }

    #[test]
    fn a_timeout_names_what_is_left_and_why() {
        let mut left = f("NatsCluster", "demo", true, None);
        left.state = Some("JetStreamDataRemains: stream groups remain: orders > ORDERS".into());
        let text = timed_out(&[left], 20, Duration::from_secs(240));
        assert!(text.contains("within 240 s"), "{text}");
        assert!(
            text.contains("NatsCluster ns/demo (being deleted) — JetStreamDataRemains"),
            "{text}"
        );
    }
}
