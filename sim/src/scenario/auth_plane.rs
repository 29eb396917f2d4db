//! `topology: { trust: auth, auth_plane: [...] }`: a sim topology under trust roots the auth
//! controller signs, as the live tier's `plane()` builds it (operators/auth/tests).
//!
//! In order: the auth controller runs with a system connection; the auth plane's manifests are
//! applied; once the NatsOperatorTrust reads Mirrored, its operator and system account JWTs and
//! the NatsOperator's system account key boot the sim servers in operator mode (the system
//! account preloaded, every other account pushed); the NatsConnection the controller pushes
//! over is applied, pointed at those servers with the `auth-controller` preset user's creds;
//! then every account of the plane is distributed and every user signed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{TopologyDecl, manifest_path};
use crate::control_plane::{self, Host, ObjectRef};
use crate::topology::{Auth, OperatorMode, Topology};

/// The name of the NatsConnection the auth controller pushes over (`--system-connection`).
pub(super) const SYSTEM_CONNECTION: &str = "auth";
const WAIT: Duration = Duration::from_secs(60);

/// What the runner needs to know of the auth plane's manifests.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Plane {
    /// The NatsOperatorTrust: its namespace holds the system connection too.
    pub(super) trust: ObjectRef,
    /// The NatsOperator the trust mirrors.
    pub(super) operator: ObjectRef,
    /// The creds Secret (name, key) of the NatsUser of preset `auth-controller`.
    pub(super) controller_creds: (String, String),
    /// NatsSystemAccounts and NatsAccounts: waited for until distributed.
    pub(super) accounts: Vec<ObjectRef>,
    /// NatsUsers: waited for until signed.
    pub(super) users: Vec<ObjectRef>,
}

/// The objects of the manifests' documents (after substitution) that the boot needs.
pub(super) fn read_plane(docs: &[Value]) -> Result<Plane, String> {
    let refer = |d: &Value| ObjectRef {
        kind: d["kind"].as_str().unwrap_or_default().into(),
        namespace: d["metadata"]["namespace"]
            .as_str()
            .unwrap_or(control_plane::DEFAULT_NAMESPACE)
            .into(),
        name: d["metadata"]["name"].as_str().unwrap_or_default().into(),
    };
    let of_kind = |k: &'static str| docs.iter().filter(move |d| d["kind"] == k);
    let trusts: Vec<&Value> = of_kind("NatsOperatorTrust").collect();
    let [trust] = trusts.as_slice() else {
        return Err(format!(
            "the auth plane needs exactly one NatsOperatorTrust, has {}",
            trusts.len()
        ));
    };
    let trust_ref = refer(trust);
    let operator = ObjectRef {
        kind: "NatsOperator".into(),
        namespace: trust_ref.namespace.clone(),
        name: trust["spec"]["operatorRef"]["name"]
            .as_str()
            .ok_or("the NatsOperatorTrust names no spec.operatorRef.name")?
            .into(),
    };
    let users: Vec<&Value> = of_kind("NatsUser").collect();
    let controller = users
        .iter()
        .find(|u| u["spec"]["preset"] == "auth-controller")
        .ok_or("the auth plane has no NatsUser of preset auth-controller")?;
    let secret = &controller["spec"]["credentials"]["secretKeyRef"];
    let controller_creds = (
        secret["name"]
            .as_str()
            .ok_or("the auth-controller user names no credentials.secretKeyRef.name")?
            .to_string(),
        secret["key"].as_str().unwrap_or("user.creds").to_string(),
    );
    Ok(Plane {
        trust: trust_ref,
        operator,
        controller_creds,
        accounts: of_kind("NatsSystemAccount")
            .chain(of_kind("NatsAccount"))
            .map(refer)
            .collect(),
        users: users.into_iter().map(refer).collect(),
    })
}

/// Every document of the manifests, `${...}` substituted.
fn documents(paths: &[PathBuf], vars: &BTreeMap<String, String>) -> Result<Vec<Value>, String> {
    let mut docs = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        for doc in serde_yaml::Deserializer::from_str(&control_plane::substitute(&text, vars)) {
            let v = Value::deserialize(doc).map_err(|e| format!("{}: {e}", p.display()))?;
            if !v.is_null() {
                docs.push(v);
            }
        }
    }
    Ok(docs)
}

/// A string of an object's status.
fn status_str(obj: &Value, pointer: &str, what: &ObjectRef) -> Result<String, String> {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| format!("{what} has no {pointer}"))
}

/// Boots the plane and the sim topology under it; returns the topology and the plane read.
pub(super) async fn boot(
    host: &Host,
    decl: &TopologyDecl,
    vars: &BTreeMap<String, String>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<(Topology, Plane), String> {
    let paths: Vec<PathBuf> = decl.auth_plane.iter().map(|p| manifest_path(p)).collect();
    let plane = read_plane(&documents(&paths, vars)?)?;
    host.add_controller(
        "auth",
        control_plane::auth_controller_with_system_connection(
            &plane.trust.namespace,
            SYSTEM_CONNECTION,
        ),
    );
    for p in &paths {
        progress(&format!("applying auth plane manifest {}", p.display()));
        host.apply_manifest(p, vars)
            .await
            .map_err(|e| e.to_string())?;
    }
    let err = |e: control_plane::HostError| e.to_string();
    let trust = host
        .wait_condition(&plane.trust, "Ready=True/Mirrored", WAIT)
        .await
        .map_err(err)?;
    let op = host
        .wait_condition(&plane.operator, "Ready=True/Signed", WAIT)
        .await
        .map_err(err)?;
    let operator_jwt = status_str(&trust, "/status/operatorJWT", &plane.trust)?;
    let sys_jwt = status_str(&trust, "/status/systemAccountJWT", &plane.trust)?;
    let sys_pk = status_str(&op, "/status/systemAccount/publicKey", &plane.operator)?;
    progress(&format!(
        "{} mirrored; booting the servers under operator {}",
        plane.trust, plane.operator.name
    ));
    let spec = decl.to_spec().with_auth(Auth::Operator(OperatorMode {
        operator_jwt,
        system_account: sys_pk.clone(),
        preload: vec![(sys_pk, sys_jwt)],
    }));
    let topology = Topology::start(spec).await.map_err(|e| e.to_string())?;
    if topology.spec.gateways.is_some() {
        topology
            .wait_gateways_connected(WAIT)
            .await
            .map_err(|e| e.to_string())?;
    }
    connect_controller(host, &plane, &topology.client_urls()).await?;
    for a in &plane.accounts {
        host.wait_condition(a, "Distributed=True", WAIT)
            .await
            .map_err(err)?;
    }
    for u in &plane.users {
        host.wait_condition(u, "Ready=True", WAIT)
            .await
            .map_err(err)?;
    }
    progress(&format!(
        "auth plane ready: {} account(s) on every server, {} user(s) signed",
        plane.accounts.len(),
        plane.users.len()
    ));
    Ok((topology, plane))
}

/// Applies the NatsConnection the auth controller pushes over, once its user's creds exist.
async fn connect_controller(host: &Host, plane: &Plane, servers: &[String]) -> Result<(), String> {
    let ns = &plane.trust.namespace;
    let (secret, key) = &plane.controller_creds;
    crate::wait::poll(
        &format!("the auth controller's creds in Secret {ns}/{secret}"),
        WAIT,
        || async {
            match host.secret_text(ns, secret, key).await {
                Ok(Some(_)) => Ok(Some(())),
                Ok(None) => Err("not written yet".to_string()),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let connection = json!({
        "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
        "metadata": {"name": SYSTEM_CONNECTION, "namespace": ns},
        "spec": {
            "servers": servers,
            "credentials": {"secretKeyRef": {"name": secret, "key": key}},
        },
    });
    // JSON is YAML: the host applies it as it applies a manifest.
    host.apply_text(
        Path::new("the auth plane's system connection"),
        &connection.to_string(),
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(())
}

/// The public key of every NatsAccount of the plane, by `Kind/namespace/name`.
pub(super) async fn account_keys(host: &Host, plane: &Plane) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for a in plane.accounts.iter().filter(|a| a.kind == "NatsAccount") {
        if let Ok(obj) = host.get(a).await
            && let Some(pk) = obj.pointer("/status/publicKey").and_then(Value::as_str)
        {
            out.insert(a.to_string(), pk.to_string());
        }
    }
    out
}

/// Where server `server`'s full resolver keeps account `pk`'s JWT (`resolver.dir` of the sim's
/// operator mode; one file per account, not sharded).
pub(super) fn resolver_file(topology: &Topology, server: &str, pk: &str) -> Option<PathBuf> {
    let s = topology.server(server).ok()?;
    Some(s.dir().join("jwt").join(format!("{pk}.jwt")))
}

/// Per account key, the servers whose resolver directory holds its JWT now.
pub(super) fn resolver_held(
    topology: &Topology,
    keys: &BTreeMap<String, String>,
) -> BTreeMap<String, BTreeSet<String>> {
    keys.values()
        .map(|pk| {
            let held = topology
                .server_names()
                .into_iter()
                .filter(|s| resolver_file(topology, s, pk).is_some_and(|f| f.exists()))
                .collect();
            (pk.clone(), held)
        })
        .collect()
}
