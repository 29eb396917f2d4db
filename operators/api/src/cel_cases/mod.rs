//! The CEL case table: objects every kind's CEL rules must accept or refuse.
//!
//! Shared by the offline evaluator (`tests/cel_table.rs`, kube-cel) and the platform tests that
//! apply the same rows to a real apiextensions-apiserver, so both judge the rules by the same rows.

/// A whole object of `$group` and `$kind` named `demo` in namespace `team`, with `$spec` (YAML
/// lines indented by two) as its spec.
macro_rules! obj {
    ($group:literal, $kind:literal, $spec:literal) => {
        obj!($group, $kind, "demo", $spec)
    };
    ($group:literal, $kind:literal, $name:literal, $spec:literal) => {
        concat!(
            "apiVersion: ",
            $group,
            "/v1beta1\nkind: ",
            $kind,
            "\nmetadata:\n  name: ",
            $name,
            "\n  namespace: team\nspec:\n",
            $spec
        )
    };
}

macro_rules! auth {
    ($kind:literal, $spec:literal) => {
        obj!("auth.nats.mikluko.io", $kind, $spec)
    };
}

macro_rules! js {
    ($kind:literal, $spec:literal) => {
        obj!("jetstream.nats.mikluko.io", $kind, $spec)
    };
    ($kind:literal, $name:literal, $spec:literal) => {
        obj!("jetstream.nats.mikluko.io", $kind, $name, $spec)
    };
}

pub mod auth_kinds;
pub mod balancers;
pub mod consumers;
pub mod jwt_ttl;
pub mod nats_cluster;
pub mod nats_kinds;
pub mod streams;
pub mod sync_interval;

/// One row of the table: an object (and, for an update, the object it replaces) and the verdict.
#[derive(Clone, Debug)]
pub struct Case {
    /// What the row covers, quoting the rule, e.g. "stream: storage is immutable".
    pub name: &'static str,
    /// CRD kind, e.g. "NatsStream".
    pub kind: &'static str,
    /// Whole object as YAML for a transition (update) case; `None` for a create.
    pub old: Option<&'static str>,
    /// Whole object as YAML (apiVersion, kind, metadata, spec).
    pub new: &'static str,
    /// The verdict the rules must reach.
    pub expect: Expect,
}

/// The verdict of a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Every rule passes.
    Accepted,
    /// Some rule fails with a message containing this substring.
    Refused(&'static str),
}

/// A create row: `new` of `kind` judged alone.
pub(crate) fn create(
    name: &'static str,
    kind: &'static str,
    new: &'static str,
    expect: Expect,
) -> Case {
    Case {
        name,
        kind,
        old: None,
        new,
        expect,
    }
}

/// A transition row: `old` of `kind` replaced by `new`.
pub(crate) fn update(
    name: &'static str,
    kind: &'static str,
    old: &'static str,
    new: &'static str,
    expect: Expect,
) -> Case {
    Case {
        name,
        kind,
        old: Some(old),
        new,
        expect,
    }
}

/// Every row: the `nats` and `cluster` groups' rows (NatsCluster's `syncInterval` among them) followed by the `auth` and `jetstream` groups' (NatsAccount's `jwtTTL` floor last).
pub fn all() -> Vec<Case> {
    let mut cases = nats_kinds::cases();
    cases.extend(nats_cluster::cases());
    cases.extend(sync_interval::cases());
    cases.extend(auth_kinds::cases());
    cases.extend(streams::cases());
    cases.extend(consumers::cases());
    cases.extend(balancers::cases());
    cases.extend(jwt_ttl::cases());
    cases
}
