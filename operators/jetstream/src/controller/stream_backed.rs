//! The kinds that are one stream on the server — NatsStream, NatsKeyValue, NatsObjectStore —
//! behind [`StreamBacked`], so one pass serves the three: each says its spec, its policies, its
//! server-side name and how its spec maps to the stream's config and back.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use nats_api::common::ObjectReference;
use nats_api::jetstream::{
    AdoptionPolicy, DeletionPolicy, NatsKeyValue, NatsKeyValueSpec, NatsObjectStore,
    NatsObjectStoreSpec, NatsStream, NatsStreamSpec, TerminalPolicy,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::drift::Field;
use crate::lifecycle_policies::Kind;
use crate::server_config::MappingError;
use crate::{kv_config, object_config, stream_config};

/// A kind that is one stream on the server.
pub trait StreamBacked:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The kind's spec.
    type Spec: Serialize + DeserializeOwned + Clone + Send + Sync;
    /// The lifecycle kind.
    const KIND: Kind;
    /// What the server object is called in messages.
    const NOUN: &'static str;
    /// The spec.
    fn spec(&self) -> &Self::Spec;
    /// The connection the resource names.
    fn connection_ref(&self) -> &ObjectReference;
    /// adoptionPolicy, deletionPolicy, terminalPolicy.
    fn policies(&self) -> (AdoptionPolicy, DeletionPolicy, TerminalPolicy);
    /// The name users know (stream name, bucket name).
    fn display_name(&self) -> String;
    /// The server-side stream name.
    fn stream_name(&self) -> String;
    /// The stream config `spec` asks for, owned by `uid`.
    fn desired(&self, spec: &Self::Spec, uid: &str) -> Result<Map<String, Value>, MappingError>;
    /// The fields compared for drift.
    fn fields() -> &'static [Field];
    /// The spec read from the server's config (refuses a stream that is not of this kind).
    fn spec_from_server(spec: &Self::Spec, server: &Value) -> Result<Self::Spec, MappingError>;
    /// The server object in messages: "stream ORDERS", "key-value bucket config".
    fn what(&self) -> String {
        format!("{} {}", Self::NOUN, self.display_name())
    }
}

impl StreamBacked for NatsStream {
    type Spec = NatsStreamSpec;
    const KIND: Kind = Kind::Stream;
    const NOUN: &'static str = "stream";
    fn spec(&self) -> &Self::Spec {
        &self.spec
    }
    fn connection_ref(&self) -> &ObjectReference {
        &self.spec.connection_ref
    }
    fn policies(&self) -> (AdoptionPolicy, DeletionPolicy, TerminalPolicy) {
        let s = &self.spec;
        (s.adoption_policy, s.deletion_policy, s.terminal_policy)
    }
    fn display_name(&self) -> String {
        NatsStream::stream_name(self).to_string()
    }
    fn stream_name(&self) -> String {
        NatsStream::stream_name(self).to_string()
    }
    fn desired(&self, spec: &Self::Spec, uid: &str) -> Result<Map<String, Value>, MappingError> {
        stream_config::desired(NatsStream::stream_name(self), spec, uid)
    }
    fn fields() -> &'static [Field] {
        stream_config::STREAM_FIELDS
    }
    fn spec_from_server(spec: &Self::Spec, server: &Value) -> Result<Self::Spec, MappingError> {
        stream_config::spec_from_server(spec, server)
    }
}

impl StreamBacked for NatsKeyValue {
    type Spec = NatsKeyValueSpec;
    const KIND: Kind = Kind::KeyValue;
    const NOUN: &'static str = "key-value bucket";
    fn spec(&self) -> &Self::Spec {
        &self.spec
    }
    fn connection_ref(&self) -> &ObjectReference {
        &self.spec.connection_ref
    }
    fn policies(&self) -> (AdoptionPolicy, DeletionPolicy, TerminalPolicy) {
        let s = &self.spec;
        (s.adoption_policy, s.deletion_policy, s.terminal_policy)
    }
    fn display_name(&self) -> String {
        self.bucket_name().to_string()
    }
    fn stream_name(&self) -> String {
        kv_config::stream_name(self.bucket_name())
    }
    fn desired(&self, spec: &Self::Spec, uid: &str) -> Result<Map<String, Value>, MappingError> {
        kv_config::desired(self.bucket_name(), spec, uid)
    }
    fn fields() -> &'static [Field] {
        kv_config::KV_FIELDS
    }
    fn spec_from_server(spec: &Self::Spec, server: &Value) -> Result<Self::Spec, MappingError> {
        kv_config::spec_from_server(spec, server)
    }
}

impl StreamBacked for NatsObjectStore {
    type Spec = NatsObjectStoreSpec;
    const KIND: Kind = Kind::ObjectStore;
    const NOUN: &'static str = "object store";
    fn spec(&self) -> &Self::Spec {
        &self.spec
    }
    fn connection_ref(&self) -> &ObjectReference {
        &self.spec.connection_ref
    }
    fn policies(&self) -> (AdoptionPolicy, DeletionPolicy, TerminalPolicy) {
        let s = &self.spec;
        (s.adoption_policy, s.deletion_policy, s.terminal_policy)
    }
    fn display_name(&self) -> String {
        self.bucket_name().to_string()
    }
    fn stream_name(&self) -> String {
        object_config::stream_name(self.bucket_name())
    }
    fn desired(&self, spec: &Self::Spec, uid: &str) -> Result<Map<String, Value>, MappingError> {
        object_config::desired(self.bucket_name(), spec, uid)
    }
    fn fields() -> &'static [Field] {
        object_config::OBJECT_FIELDS
    }
    fn spec_from_server(spec: &Self::Spec, server: &Value) -> Result<Self::Spec, MappingError> {
        object_config::spec_from_server(spec, server)
    }
}
