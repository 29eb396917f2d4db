//! Phase 2, observe: what the servers say before this pass writes anything — through the system user
//! `auth.systemCredentials` names, or each server's monitoring endpoint without one. Their
//! answers say how the servers run (an auth plane or not: the auth-change refusal reads it) and
//! how they are (Settled, which the rollout gate reads).

use controller_kit::conditions::Decided;
use kube::ResourceExt;
use nats_api::cluster::{NatsCluster, names};

use super::context::Context;
use super::error::Error;
use super::read::{secret, secret_key};
use crate::conditions::settled::settled;
use crate::nats::ask_observation::{Asks, over_monitor, over_system};
use crate::nats::system_connection::SystemAccess;
use crate::objects::tls_secret_name;
use crate::observation::Observation;
use crate::rollout::order::Action;
use crate::server_lifecycle::{
    ObservedServer, ServerAddress, ServerLifecycle, ServerLifecycleError,
};

/// What this pass saw of the servers before writing anything.
pub struct Seen {
    /// The servers the port reports Ready, beyond replicas too, and where they are reached:
    /// until removed they are members, and one may be the meta leader, the only reliable judge
    /// of the meta group's currency.
    pub ready: Vec<(String, ServerAddress)>,
    /// The system user the controller asks with, when `auth.systemCredentials` names one that
    /// can be read.
    pub system: Option<SystemAccess>,
    /// The namespace/name of the Secret `auth.systemCredentials` names, when it does not exist.
    pub system_secret_missing: Option<String>,
    pub observation: Observation,
    /// Settled as judged from the observation.
    pub settled: Decided,
    /// Every server as the port observed it, when it could: the apply phase starts from it
    /// rather than asking the port again (one observation a pass where nothing is created or
    /// stepped, [`observe_again`]).
    pub servers: Option<Vec<ObservedServer>>,
}

impl Seen {
    /// The servers as this pass first observed them, or, when that observation failed, as the
    /// port observes them now.
    pub async fn servers_or_observe<L: ServerLifecycle>(
        &self,
        ctx: &Context<L>,
        cluster: &NatsCluster,
    ) -> Result<Vec<ObservedServer>, ServerLifecycleError> {
        match &self.servers {
            Some(servers) => Ok(servers.clone()),
            None => ctx.server_lifecycle.observe(cluster).await,
        }
    }
}

/// Whether a pass observes the servers again after its step, for its status: only when it
/// created servers or its step touched one. A pass that found every server up to date, or
/// was held, changed nothing the first observation saw.
pub fn observe_again(creating: &[String], action: &Action) -> bool {
    !creating.is_empty() || !matches!(action, Action::UpToDate | Action::Held(_))
}

/// Asks the servers of `cluster` the port reports Ready.
pub async fn observe<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
) -> Result<Seen, Error> {
    let spec = &cluster.spec;
    let name = cluster.name_any();
    let servers = ctx.server_lifecycle.observe(cluster).await.ok();
    let observed = servers.clone().unwrap_or_default();
    let ready: Vec<(String, ServerAddress)> = observed
        .iter()
        .filter(|o| o.ready)
        .map(|o| {
            (
                o.server_name.clone(),
                ctx.server_lifecycle.address(cluster, o.ordinal),
            )
        })
        .collect();
    let asks = Asks {
        jetstream: spec.jetstream.is_some(),
        gateways: spec.gateway.is_some(),
        leafnodes: !spec.leaf_remotes.is_empty(),
    };
    let SystemUser {
        access: system,
        missing: system_secret_missing,
    } = system_user(&ctx.shared.client, cluster).await?;
    let observation = if ready.is_empty() {
        Observation {
            failure: Some("no server is Ready".into()),
            ..Default::default()
        }
    } else {
        match &system {
            Some(access) => over_system(&name, &ready, asks, access).await,
            None => over_monitor(&ready, asks).await,
        }
    };
    let expected: Vec<String> = (0..spec.replicas.max(0) as u32)
        .map(|i| names::server(&name, i))
        .collect();
    let settled = settled(&expected, asks.jetstream, &observation);
    Ok(Seen {
        ready,
        system,
        system_secret_missing,
        observation,
        settled,
        servers,
    })
}

/// The system user `auth.systemCredentials` names, as read.
#[derive(Default)]
pub struct SystemUser {
    /// The creds (and the client listener's CA), when the Secret holds them.
    pub access: Option<SystemAccess>,
    /// The Secret's namespace/name, when it does not exist.
    pub missing: Option<String>,
}

/// The system user the controller asks the servers with, when `auth.systemCredentials` names
/// one whose Secret holds it; with the client listener's CA when it runs TLS.
pub async fn system_access(
    client: &kube::Client,
    cluster: &NatsCluster,
) -> Result<Option<SystemAccess>, Error> {
    Ok(system_user(client, cluster).await?.access)
}

/// The system user `auth.systemCredentials` names: its creds, or the Secret that is missing.
pub async fn system_user(
    client: &kube::Client,
    cluster: &NatsCluster,
) -> Result<SystemUser, Error> {
    let ns = cluster.namespace().unwrap_or_default();
    let Some(creds) = cluster
        .spec
        .auth
        .as_ref()
        .and_then(|a| a.system_credentials.as_ref())
    else {
        return Ok(SystemUser::default());
    };
    let key = creds
        .secret_key_ref
        .key
        .as_deref()
        .unwrap_or(nats_api::common::DEFAULT_CREDS_KEY);
    let Some(found) = secret(client, &ns, &creds.secret_key_ref.name).await? else {
        return Ok(SystemUser {
            access: None,
            missing: Some(format!("{ns}/{}", creds.secret_key_ref.name)),
        });
    };
    let Some(text) = secret_key(&found, key).and_then(|b| String::from_utf8(b).ok()) else {
        return Ok(SystemUser::default());
    };
    let ca_pem = match &cluster.spec.tls {
        Some(tls) => secret(
            client,
            &ns,
            &tls_secret_name(&cluster.name_any(), "client", Some(tls)),
        )
        .await?
        .and_then(|s| secret_key(&s, "ca.crt")),
        None => None,
    };
    Ok(SystemUser {
        access: Some(SystemAccess {
            creds: text,
            ca_pem,
        }),
        missing: None,
    })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::rollout::order::Hold;

    #[rstest]
    #[case::up_to_date_nothing_created(&[], Action::UpToDate, false)]
    #[case::held_by_the_gate(&[], Action::Held(Hold::Gate), false)]
    #[case::held_paused(&[], Action::Held(Hold::Paused), false)]
    #[case::a_server_created(&["c-1"], Action::UpToDate, true)]
    #[case::created_while_held(&["c-1"], Action::Held(Hold::Gate), true)]
    #[case::restart_all_touches_every_server(&[], Action::RestartAll(vec![]), true)]
    fn a_pass_observes_again_only_after_it_changed_a_server(
        #[case] creating: &[&str],
        #[case] action: Action,
        #[case] again: bool,
    ) {
        let creating: Vec<String> = creating.iter().map(|s| s.to_string()).collect();
        assert_eq!(observe_again(&creating, &action), again);
    }
}
