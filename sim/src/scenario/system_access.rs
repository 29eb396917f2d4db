//! How the steps reach the system account ([`SystemAccess`]): what `move_by_hand` and
//! `wait_groups_settled` (`hand_moves`) and `${sys_servers}` connect with.

/// How the steps reach the system account: the servers' URLs (a config account's user and
/// password in them) and, under signed trust roots, the system user's creds.
#[derive(Clone, Default)]
pub(super) struct SystemAccess {
    pub(super) urls: Vec<String>,
    pub(super) creds: Option<String>,
    /// How many servers answer a ping.
    pub(super) servers: usize,
}

/// The client URLs as the system user of a sim topology's config accounts (`${sys_servers}`:
/// what a NatsConnection of an evacuation or balancer names); None for other topologies.
pub(super) fn system_urls(
    scenario: &super::Scenario,
    deployed: &super::deployed::Deployed,
) -> Option<Vec<String>> {
    let t = &scenario.topology;
    let accounts = t.trust.is_none()
        && t.nats_clusters.is_empty()
        && t.to_spec().auth == crate::topology::Auth::Accounts;
    accounts.then(|| {
        let (user, password) = crate::topology::SYS_USER;
        deployed
            .dep()
            .client_urls()
            .iter()
            .map(|u| u.replacen("nats://", &format!("nats://{user}:{password}@"), 1))
            .collect()
    })
}
