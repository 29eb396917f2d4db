//! The CEL case table (`nats_api::cel_cases`) at apply, on a real apiextensions-apiserver 1.36: the server's
//! CEL compiler must accept every rule of every CRD (within its cost budget), and every row must get the
//! verdict the offline evaluator gives it. Create rows are creates; transition rows create the old object and
//! update it to the new one. A refused row must be refused with a message containing the row's substring.
//!
//! The 1.36 server is built "where it builds" by `scripts/install-apiserver.sh`: if its build failed, this
//! test prints the reason and skips; if nobody ran the script, it fails saying to run it.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::{Client, ResourceExt};
use nats_api::cel_cases::{self, Case, Expect};
use sim::apiserver::{ApiServer, ApiextensionsUnavailable, apiextensions_binary, crd_api_resource};

const GONE_DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn every_cel_case_gets_its_verdict_at_apply_on_apiextensions_apiserver_1_36() {
    match apiextensions_binary() {
        Ok(_) => {}
        Err(reason @ ApiextensionsUnavailable::BuildFailed { .. }) => {
            println!("SKIP CEL at apply: {reason}");
            return;
        }
        Err(missing @ ApiextensionsUnavailable::NotInstalled { .. }) => panic!("{missing}"),
    }
    let server = ApiServer::apiextensions_1_36()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let crds = nats_api::crds::all();
    assert!(!crds.is_empty(), "nats_api::crds::all() returned no CRDs");
    // A rule the 1.36 compiler refuses (syntax, types, cost budget) makes its CRD refused here.
    server
        .install_crds(&crds)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let rules: usize = crds.iter().map(count_rules).sum();

    let cases = cel_cases::all();
    assert!(!cases.is_empty(), "nats_api::cel_cases::all() has no rows");
    let mut failures = Vec::new();
    for (row, case) in cases.iter().enumerate() {
        if let Err(problem) = check(&server.client(), &crds, case).await {
            failures.push(format!(
                "row {row} \"{}\" ({}): {problem}",
                case.name, case.kind
            ));
        }
    }
    let transitions = cases.iter().filter(|c| c.old.is_some()).count();
    let refused = cases
        .iter()
        .filter(|c| matches!(c.expect, Expect::Refused(_)))
        .count();
    println!(
        "CEL at apply (apiextensions-apiserver 1.36): {} CRDs with {rules} CEL rules compiled; {} rows \
         ({} create, {transitions} transition; {} accepted, {refused} refused expected), {} mismatches",
        crds.len(),
        cases.len(),
        cases.len() - transitions,
        cases.len() - refused,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} rows disagree with the apiserver:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Applies one row and compares the apiserver's verdict with the row's.
async fn check(
    client: &Client,
    crds: &[CustomResourceDefinition],
    case: &Case,
) -> Result<(), String> {
    let crd = crds
        .iter()
        .find(|c| c.spec.names.kind == case.kind)
        .ok_or("no CRD of this kind in nats_api::crds::all()")?;
    let resource = crd_api_resource(crd);
    let new = parse(case.new, "new")?;
    let api = if crd.spec.scope == "Namespaced" {
        Api::<DynamicObject>::namespaced_with(
            client.clone(),
            new.namespace().as_deref().unwrap_or("default"),
            &resource,
        )
    } else {
        Api::<DynamicObject>::all_with(client.clone(), &resource)
    };
    let name = new.name_any();
    // Rows reuse names: every row starts from nothing.
    sim::testkit::delete_and_wait(&api, &name, GONE_DEADLINE).await?;

    let verdict = match case.old {
        None => api.create(&PostParams::default(), &new).await.map(drop),
        Some(old) => {
            let old = parse(old, "old")?;
            let created = api
                .create(&PostParams::default(), &old)
                .await
                .map_err(|e| {
                    format!(
                        "the old object of the transition was refused: {}",
                        message(&e)
                    )
                })?;
            let mut new = new.clone();
            new.metadata.resource_version = created.resource_version();
            api.replace(&name, &PostParams::default(), &new)
                .await
                .map(drop)
        }
    };
    sim::testkit::delete_and_wait(&api, &name, GONE_DEADLINE).await?;

    match (&case.expect, verdict) {
        (Expect::Accepted, Ok(())) => Ok(()),
        (Expect::Accepted, Err(e)) => Err(format!("expected accepted, refused: {}", message(&e))),
        (Expect::Refused(want), Ok(())) => {
            Err(format!("expected refused with \"{want}\", accepted"))
        }
        (Expect::Refused(want), Err(e)) => {
            let got = message(&e);
            if got.contains(want) {
                Ok(())
            } else {
                Err(format!(
                    "expected refused with \"{want}\", refused with: {got}"
                ))
            }
        }
    }
}

fn parse(yaml: &str, which: &str) -> Result<DynamicObject, String> {
    serde_yaml::from_str(yaml)
        .map_err(|e| format!("{which} object is not a Kubernetes object: {e}"))
}

fn message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// How many `x-kubernetes-validations` rules a CRD's schemas carry, for the count line.
fn count_rules(crd: &CustomResourceDefinition) -> usize {
    fn walk(value: &serde_json::Value) -> usize {
        match value {
            serde_json::Value::Object(map) => {
                let here = map
                    .get("x-kubernetes-validations")
                    .and_then(|v| v.as_array())
                    .map_or(0, Vec::len);
                here + map.values().map(walk).sum::<usize>()
            }
            serde_json::Value::Array(items) => items.iter().map(walk).sum(),
            _ => 0,
        }
    }
    crd.spec
        .versions
        .iter()
        .filter_map(|v| v.schema.as_ref())
        .map(|s| serde_json::to_value(s).map_or(0, |v| walk(&v)))
        .sum()
}
