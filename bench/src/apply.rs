//! Applying many objects at once, as a user's `kubectl apply` of a large manifest does: every
//! figure that times "N applied at once" creates them the same way, [`AT_ONCE`] in flight.

use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};

/// Creates in flight at once, as the work floors send their writes too.
pub const AT_ONCE: usize = 32;

/// Creates every one of `docs` through `api`, [`AT_ONCE`] at a time; the first refusal fails it,
/// naming `kind`.
pub async fn create_all(
    api: &Api<DynamicObject>,
    docs: Vec<DynamicObject>,
    kind: &str,
) -> anyhow::Result<()> {
    let made: Vec<Result<DynamicObject, kube::Error>> = futures::stream::iter(docs)
        .map(|d| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &d).await }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    if let Some(Err(e)) = made.into_iter().find(|r| r.is_err()) {
        anyhow::bail!("creating a {kind}: {e}");
    }
    Ok(())
}
