//! The k3s backend: boots a 3-server cluster in containers when a Docker engine answers; otherwise
//! prints why it is skipped (this machine has no Docker engine).

use std::time::Duration;

use sim::TopologySpec;
use sim::backend::{Backend, Fault};
use sim::k3s::{K3sBackend, docker_available};

#[tokio::test]
async fn k3s_backend_runs_a_cluster_where_docker_answers() {
    if let Err(reason) = docker_available().await {
        println!("skipped: k3s backend needs Docker: {reason}");
        // Without Docker, starting must fail with the same honest reason rather than hang.
        let err = K3sBackend::default()
            .start(&TopologySpec::cluster(3))
            .await
            .err()
            .expect("k3s backend started without Docker");
        assert!(err.to_string().contains("not available"), "{err}");
        return;
    }
    let mut dep = K3sBackend::default()
        .start(&TopologySpec::cluster(3))
        .await
        .unwrap();
    let leader = dep.meta_leader(Duration::from_secs(60)).await.unwrap();
    assert!(dep.server_names().contains(&leader));
    dep.fault(&leader, Fault::Kill9).await.unwrap();
    dep.fault(&leader, Fault::Restart).await.unwrap();
    dep.meta_leader(Duration::from_secs(60)).await.unwrap();
}
