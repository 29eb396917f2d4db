//! What a controller's memory is measured against: Secrets it must not hold (in namespaces it has
//! nothing in, as a shared cluster has thousands), and the resident size of its process.

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

/// Creates `count` Opaque Secrets of `size` bytes each in namespace `namespace` (which must
/// exist), 32 at a time; none is read by any controller.
pub async fn unrelated_secrets(client: &kube::Client, namespace: &str, count: usize, size: usize) {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let payload = ByteString(vec![b'x'; size]);
    let creates = (0..count).map(|i| {
        let (api, payload) = (api.clone(), payload.clone());
        async move {
            let s = Secret {
                metadata: ObjectMeta {
                    name: Some(format!("unrelated-{i}")),
                    ..Default::default()
                },
                data: Some([("blob".to_string(), payload)].into()),
                ..Default::default()
            };
            api.create(&PostParams::default(), &s)
                .await
                .unwrap_or_else(|e| panic!("creating Secret {namespace}/unrelated-{i}: {e}"));
        }
    });
    futures::stream::iter(creates)
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
}

/// The resident set size of process `pid` in KiB (`VmRSS` of /proc/<pid>/status).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
