//! Brings the node up, lists its Node, takes it down and prints what still differs on the host.
//! `cargo run -p sim --features kube --example node_up` as root; `NODE_HOLD=1` keeps it up until Ctrl-C.

use std::path::PathBuf;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let cache = std::env::var_os("NATS_OPERATORS_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/nats-operators"))
        })
        .ok_or("no HOME")?;
    let dir = tempfile::tempdir()?;
    let t0 = std::time::Instant::now();
    let node = sim::node::Node::up(&cache, dir.path(), 3).await?;
    println!(
        "node Ready in {:?}; kubeconfig {}",
        t0.elapsed(),
        node.kubeconfig().display()
    );
    if let Some(version) = std::env::var_os("NODE_NATS") {
        let version = version.to_string_lossy().into_owned();
        let binary = cache.join("nats-server").join(&version).join("nats-server");
        node.import_binary(&binary, "nats-server", &version, "docker.io/library/nats")?;
        println!("imported docker.io/library/nats:{version}");
    }
    if std::env::var_os("NODE_HOLD").is_some() {
        println!("holding; Ctrl-C to take it down");
        tokio::signal::ctrl_c().await?;
    }
    let left = node.down().await;
    println!("down; host differences left: {left:?}");
    Ok(())
}
