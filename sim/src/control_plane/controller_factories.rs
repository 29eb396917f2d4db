//! The controllers the host knows how to run, each as a factory that starts its task from
//! nothing (what a restart, or another replica, runs again).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;

use crate::local::LocalServerLifecycle;

/// Starts one controller's task from nothing: what a restart runs again.
pub type ControllerFactory =
    Arc<dyn Fn(Client, LocalServerLifecycle) -> BoxFuture<'static, ()> + Send + Sync>;

/// The auth controller pushing every JWT over the NatsConnection `namespace/name` (its
/// `--system-connection`), resyncing every 2 s so a server that returns is brought up to date
/// within a scenario's steps.
pub fn auth_controller_with_system_connection(namespace: &str, name: &str) -> ControllerFactory {
    let connection = auth_controller::controller::SystemConnection {
        namespace: namespace.into(),
        name: name.into(),
    };
    Arc::new(move |client, _| {
        let connection = connection.clone();
        Box::pin(async move {
            let ctx = auth_controller::controller::context(
                client,
                auth_controller::controller::Settings {
                    resync: Duration::from_secs(2),
                    system_connection: Some(connection),
                    ..Default::default()
                },
                controller_kit::metrics::Metrics::default(),
            );
            auth_controller::controller::run(ctx).await;
        })
    })
}

/// The controllers the host knows how to run.
pub fn controllers() -> BTreeMap<&'static str, ControllerFactory> {
    let mut m: BTreeMap<&'static str, ControllerFactory> = BTreeMap::new();
    m.insert(
        "jetstream",
        Arc::new(|client, _| {
            Box::pin(async move {
                let ctx = jetstream_controller::controller::context(
                    client,
                    jetstream_controller::controller::Settings {
                        // Short enough that a scenario sees drift corrected within its steps.
                        resync: Duration::from_secs(10),
                        ..Default::default()
                    },
                    controller_kit::metrics::Metrics::default(),
                );
                jetstream_controller::controller::run(ctx).await;
            })
        }),
    );
    m.insert(
        "auth",
        Arc::new(|client, _| {
            Box::pin(async move {
                // No system connection: JWTs are signed and written, not pushed (a scenario that
                // needs pushes adds its own auth controller with `Host::add_controller`).
                let ctx = auth_controller::controller::context(
                    client,
                    auth_controller::controller::Settings {
                        resync: Duration::from_secs(10),
                        ..Default::default()
                    },
                    controller_kit::metrics::Metrics::default(),
                );
                auth_controller::controller::run(ctx).await;
            })
        }),
    );
    m.insert(
        "cluster",
        Arc::new(|client, server_lifecycle| {
            Box::pin(async move {
                let ctx = cluster_controller::controller::context(
                    client,
                    server_lifecycle,
                    cluster_controller::controller::Settings {
                        // Local servers come up in a second or two: look again soon.
                        recheck: Duration::from_secs(2),
                        ..Default::default()
                    },
                    controller_kit::metrics::Metrics::default(),
                );
                cluster_controller::controller::run(ctx).await;
            })
        }),
    );
    m
}
