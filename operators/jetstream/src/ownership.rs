//! The ownership marker (§6.3): the owning resource's UID in the server object's own metadata map.
//!
//! The controller owns one key, [`OWNER_METADATA_KEY`]; every other key is the user's. nats-server
//! adds keys of its own under `_nats.` (API level, server version), which are neither the user's
//! nor the controller's and are ignored everywhere.

use std::collections::BTreeMap;

pub use nats_api::jetstream::OWNER_METADATA_KEY;
use serde_json::{Map, Value};

/// The prefix of metadata keys nats-server writes itself.
pub const SERVER_METADATA_PREFIX: &str = "_nats.";

/// Who owns an object found on the server, as its ownership marker says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No object of this name exists.
    Absent,
    /// The marker names this resource's UID.
    OwnedByThis,
    /// The marker names another resource's UID.
    OwnedByOther(String),
    /// The object exists without a marker.
    Unowned,
}

/// The user's metadata with the ownership marker merged in; the marker overrides a user value
/// under the same key, since the controller owns that key.
pub fn merge_marker(user: Option<&BTreeMap<String, String>>, uid: &str) -> Map<String, Value> {
    let mut out: Map<String, Value> = user
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != OWNER_METADATA_KEY)
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    out.insert(
        OWNER_METADATA_KEY.to_string(),
        Value::String(uid.to_string()),
    );
    out
}

/// The owner of a server object from its config JSON (`None` when no object exists).
pub fn found(server_config: Option<&Value>, uid: &str) -> Found {
    let Some(config) = server_config else {
        return Found::Absent;
    };
    match config
        .get("metadata")
        .and_then(|m| m.get(OWNER_METADATA_KEY))
        .and_then(Value::as_str)
    {
        None | Some("") => Found::Unowned,
        Some(owner) if owner == uid => Found::OwnedByThis,
        Some(owner) => Found::OwnedByOther(owner.to_string()),
    }
}

/// The user's part of a server object's metadata: without the marker and the server's own keys.
/// `None` when nothing is left, so an adopted spec stays free of an empty map.
pub fn user_metadata(server_config: &Value) -> Option<BTreeMap<String, String>> {
    let map: BTreeMap<String, String> = server_config
        .get("metadata")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != OWNER_METADATA_KEY && !k.starts_with(SERVER_METADATA_PREFIX))
        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
        .collect();
    (!map.is_empty()).then_some(map)
}

/// Metadata as compared for drift: the server's own keys dropped.
pub fn comparable_metadata(metadata: Option<&Value>) -> BTreeMap<String, Value> {
    metadata
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| !k.starts_with(SERVER_METADATA_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    const UID: &str = "4f1c-this";

    #[rstest]
    #[case::no_object_on_the_server(None, Found::Absent)]
    #[case::marker_names_this_resource(Some(json!({"metadata": {OWNER_METADATA_KEY: UID}})), Found::OwnedByThis)]
    #[case::marker_names_another_resource(Some(json!({"metadata": {OWNER_METADATA_KEY: "other"}})), Found::OwnedByOther("other".into()))]
    #[case::no_metadata_at_all(Some(json!({"name": "ORDERS"})), Found::Unowned)]
    #[case::metadata_without_marker(Some(json!({"metadata": {"team": "a", "_nats.ver": "2.15.1"}})), Found::Unowned)]
    #[case::empty_marker_is_no_marker(Some(json!({"metadata": {OWNER_METADATA_KEY: ""}})), Found::Unowned)]
    fn the_marker_decides_who_owns_a_server_object(
        #[case] server: Option<Value>,
        #[case] want: Found,
    ) {
        assert_eq!(found(server.as_ref(), UID), want);
    }

    #[rstest]
    #[case::no_user_metadata(None, json!({OWNER_METADATA_KEY: UID}))]
    #[case::user_keys_kept(Some(vec![("team", "payments")]), json!({"team": "payments", OWNER_METADATA_KEY: UID}))]
    #[case::user_cannot_forge_the_marker(Some(vec![(OWNER_METADATA_KEY, "forged")]), json!({OWNER_METADATA_KEY: UID}))]
    fn the_marker_is_merged_into_the_users_metadata(
        #[case] user: Option<Vec<(&str, &str)>>,
        #[case] want: Value,
    ) {
        let user: Option<BTreeMap<String, String>> =
            user.map(|u| u.into_iter().map(|(k, v)| (k.into(), v.into())).collect());
        assert_eq!(Value::Object(merge_marker(user.as_ref(), UID)), want);
    }

    #[rstest]
    #[case::marker_and_server_keys_dropped(json!({"metadata": {OWNER_METADATA_KEY: UID, "_nats.level": "1", "team": "a"}}), Some(vec![("team", "a")]))]
    #[case::only_marker_leaves_nothing(json!({"metadata": {OWNER_METADATA_KEY: UID}}), None)]
    #[case::no_metadata(json!({}), None)]
    fn adoption_keeps_only_the_users_metadata(
        #[case] server: Value,
        #[case] want: Option<Vec<(&str, &str)>>,
    ) {
        let want = want.map(|u| u.into_iter().map(|(k, v)| (k.into(), v.into())).collect());
        assert_eq!(user_metadata(&server), want);
    }
}
