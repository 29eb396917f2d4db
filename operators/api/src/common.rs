//! Shapes shared by kinds of more than one group.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// A reference to another object by name. A namespace other than the referrer's own is honoured
/// only where a NatsReferenceGrant in that namespace admits it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// Name of the referenced object.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Namespace of the referenced object; the referrer's own namespace when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A key of a Secret in the referrer's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key within the Secret. Defaults depend on what is read: `user.creds` for credentials, `ca.crt` for a CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A Secret in the referrer's namespace, named as a whole (for example a `kubernetes.io/tls` Secret
/// holding `tls.crt`, `tls.key` and, where peers are verified, `ca.crt`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretReference {
    /// Name of the Secret, in the referrer's namespace.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// NATS credentials (a `.creds` file) read from a Secret; `key` defaults to `user.creds`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    /// The Secret, in the referrer's namespace, and its key holding the creds file (`user.creds` when
    /// `key` is omitted, the key a NatsUser writes).
    #[schemars(transform = default_creds_key)]
    pub secret_key_ref: SecretKeyRef,
}

/// A certificate authority bundle read from a Secret; `key` defaults to `ca.crt`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaBundle {
    /// The Secret, in the referrer's namespace, and its key holding the PEM bundle (`ca.crt` when
    /// `key` is omitted, the key cert-manager writes).
    #[schemars(transform = default_ca_key)]
    pub secret_key_ref: SecretKeyRef,
}

/// Writes the design's default key into a `secretKeyRef` schema, so the apiserver fills it in and
/// `kubectl get -o yaml` shows the key that is read.
fn default_secret_key(schema: &mut Schema, key: &str) {
    if let Some(prop) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("key"))
        .and_then(|k| k.as_object_mut())
    {
        prop.insert("default".into(), key.into());
    }
}

fn default_creds_key(schema: &mut Schema) {
    default_secret_key(schema, DEFAULT_CREDS_KEY);
}

fn default_ca_key(schema: &mut Schema) {
    default_secret_key(schema, DEFAULT_CA_KEY);
}

/// Default Secret key for credentials.
pub const DEFAULT_CREDS_KEY: &str = "user.creds";
/// Default Secret key for a CA bundle.
pub const DEFAULT_CA_KEY: &str = "ca.crt";

impl Credentials {
    /// The Secret key to read, with the design's default applied.
    pub fn key(&self) -> &str {
        self.secret_key_ref
            .key
            .as_deref()
            .unwrap_or(DEFAULT_CREDS_KEY)
    }
}

impl CaBundle {
    /// The Secret key to read, with the design's default applied.
    pub fn key(&self) -> &str {
        self.secret_key_ref.key.as_deref().unwrap_or(DEFAULT_CA_KEY)
    }
}

/// Standard conditions list: a list-map keyed by `type`, the metav1.Condition shape.
///
/// Declare a status field as
/// ```text
/// /// Conditions: ...
/// #[serde(default, skip_serializing_if = "Vec::is_empty")]
/// #[schemars(schema_with = "crate::common::conditions_schema")]
/// pub conditions: Conditions,
/// ```
/// so server-side apply merges conditions by `type` and each controller owns the types it writes.
pub type Conditions = Vec<Condition>;

/// Schema of a [`Conditions`] field: an array of metav1.Condition that is a list-map keyed by `type`.
pub fn conditions_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<Condition>();
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

/// Schema of a field whose content the apiserver keeps as given (an object of any shape), such as
/// `podTemplate.spec`.
pub fn preserve_unknown_object_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema of a list-map keyed by `name`, for lists whose entries are merged by name under
/// server-side apply.
pub fn list_map_by_name(schema: &mut Schema) {
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("x-kubernetes-list-type".into(), "map".into());
        obj.insert(
            "x-kubernetes-list-map-keys".into(),
            serde_json::json!(["name"]),
        );
    }
}

/// Condition types shared by every kind.
pub mod condition_type {
    /// The object is in the state its spec asks for.
    pub const READY: &str = "Ready";
}

/// Condition status values as the API writes them.
pub mod condition_status {
    /// The condition holds.
    pub const TRUE: &str = "True";
    /// The condition does not hold.
    pub const FALSE: &str = "False";
    /// Whether the condition holds could not be determined.
    pub const UNKNOWN: &str = "Unknown";
}

/// Field transform for an `Option<SomeEnum>` field: keeps the field's own doc comment as its
/// description. Without it the enum type's doc replaces the field's when kube folds the
/// `anyOf [enum, null]` of an optional enum into one schema. Use as
/// `#[schemars(transform = crate::common::optional_enum_field)]`.
pub fn optional_enum_field(schema: &mut Schema) {
    if let Some(branches) = schema.get_mut("anyOf").and_then(|a| a.as_array_mut()) {
        for branch in branches {
            if let Some(obj) = branch.as_object_mut() {
                obj.remove("description");
            }
        }
    }
}

/// A status with the two fields every status here carries: `observedGeneration` and `conditions`.
/// Lets shared code (condition setting, Ready columns, metrics) work on any kind's status.
pub trait ObservedStatus {
    /// The generation of the spec the status describes.
    fn observed_generation(&self) -> Option<i64>;
    /// Records the generation of the spec the status describes.
    fn set_observed_generation(&mut self, generation: Option<i64>);
    /// The conditions, keyed by `type`.
    fn conditions(&self) -> &Conditions;
    /// The conditions, for writing.
    fn conditions_mut(&mut self) -> &mut Conditions;
    /// The condition of this type, if present.
    fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions().iter().find(|c| c.type_ == type_)
    }
    /// Whether the condition of this type is present with status `True`.
    fn is_true(&self, type_: &str) -> bool {
        self.condition(type_)
            .is_some_and(|c| c.status == condition_status::TRUE)
    }
}

/// Implements [`ObservedStatus`] for status structs with `observed_generation: Option<i64>` and
/// `conditions: Conditions` fields.
#[macro_export]
macro_rules! impl_observed_status {
    ($($status:ty),+ $(,)?) => {$(
        impl $crate::common::ObservedStatus for $status {
            fn observed_generation(&self) -> Option<i64> {
                self.observed_generation
            }
            fn set_observed_generation(&mut self, generation: Option<i64>) {
                self.observed_generation = generation;
            }
            fn conditions(&self) -> &$crate::common::Conditions {
                &self.conditions
            }
            fn conditions_mut(&mut self) -> &mut $crate::common::Conditions {
                &mut self.conditions
            }
        }
    )+};
}
