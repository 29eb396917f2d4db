//! How the users' figure reads its users Ready: off the controller's condition gauge while it runs
//! (`crate::gauge`), then once against the apiserver.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};

use super::{ACCOUNT, COUNT, count, has, numbered, secrets_written};

/// How often the users' figures scrape the controller's /metrics for its condition gauge.
pub(super) const GAUGE_POLL: Duration = Duration::from_millis(100);

/// The NatsUsers `u<i>` the controller's condition gauge reads Ready in a scrape of its /metrics.
pub(super) fn ready_in(body: &str) -> usize {
    crate::scrape::holding(body, "NatsUser", "Ready", |n| numbered(n, "u"))
}

/// Whether the controller's condition gauge reads the account [`ACCOUNT`] Distributed.
pub(super) fn distributed_in(body: &str) -> bool {
    crate::scrape::holding(body, "NatsAccount", "Distributed", |n| n == ACCOUNT) == 1
}

/// The NatsUsers `u<i>` reading Ready.
async fn ready_users(users: &Api<DynamicObject>) -> Result<usize, String> {
    count(users, |u| {
        serde_json::to_value(u).is_ok_and(|v| has(&v, "Ready", "True"))
            && u.metadata.name.as_deref().is_some_and(|n| numbered(n, "u"))
    })
    .await
}

/// What the gauge read, checked once against the apiserver: every NatsUser `u<i>` Ready, every
/// creds Secret written, the account Distributed (waited for, should the apiserver lag).
pub(super) async fn checked(
    users: &Api<DynamicObject>,
    secrets: &Api<Secret>,
    accounts: &Api<DynamicObject>,
) -> anyhow::Result<()> {
    sim::wait::poll(
        "every user Ready, every creds Secret written, the account distributed",
        Duration::from_secs(600),
        || async move {
            let ready = ready_users(users).await?;
            let written = secrets_written(secrets, "u").await?;
            let acc = accounts.get(ACCOUNT).await.map_err(|e| e.to_string())?;
            let distributed =
                serde_json::to_value(&acc).is_ok_and(|v| has(&v, "Distributed", "True"));
            if ready == COUNT && written == COUNT && distributed {
                Ok(Some(()))
            } else {
                Err(format!(
                    "{ready} Ready, {written} creds written, distributed: {distributed}"
                ))
            }
        },
    )
    .await?;
    Ok(())
}
