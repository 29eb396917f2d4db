//! How an object is named in errors, logs and per-object keys: "Kind namespace/name".

use kube::ResourceExt;
use kube::core::Resource;

/// "Kind namespace/name" of an object, for errors and logs.
pub fn describe<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{} {}/{}",
        K::kind(&()),
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_described_by_kind_namespace_and_name() {
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        cm.metadata.name = Some("a".into());
        cm.metadata.namespace = Some("nats".into());
        assert_eq!(describe(&cm), "ConfigMap nats/a");
    }
}
