//! `just bench`: the project's performance figures, each as a ratio against its floor measured
//! in the same run (see [`summary`]). Writes `target/bench/summary.json` and the table of
//! docs/performance.md, and appends each figure to docs/bench-history.csv ([`history`]); prints
//! every figure with its floor, ratio and goal. Goals are never
//! asserted: on a shared 2-core machine a figure measures the machine too.
//!
//! The binaries it runs are the checkout's own, of the profile the bench itself was built in
//! (the directory of its own executable): `just bench` builds both in release, as users run
//! them, so a resident size or a render time is the shipped binary's, not a debug build's
//! (a debug controller is 128 MB of code and line tables).

mod apply;
mod auth;
mod clusters;
mod cpu;
mod gauge;
mod history;
mod render;
mod rollout;
mod scrape;
mod stats;
mod streams;
mod summary;
mod sync_cost;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "bench",
    about = "The project's performance figures against their floors"
)]
struct Cli {
    /// Run only the figures whose name starts with this (e.g. `render`, `streams`; with
    /// `--scale`, e.g. `scale.clusters`).
    #[arg(long)]
    only: Option<String>,
    /// Where the controller binaries are (default: beside this binary, target/release under
    /// `just bench`).
    #[arg(long)]
    binaries: Option<PathBuf>,
    /// Do not rewrite docs/performance.md.
    #[arg(long)]
    no_docs: bool,
    /// Ten times the scale (issue 40): only the 10,000-object and 100-cluster figures and their
    /// resident sizes, printed, kept in target/bench/summary-scale.json and appended to
    /// docs/bench-history.csv, never written into docs/performance.md's table.
    #[arg(long)]
    scale: bool,
}

fn workspace() -> PathBuf {
    sim::checkout::root()
}

async fn run(cli: &Cli) -> anyhow::Result<Vec<summary::Figure>> {
    let wanted = |name: &str| {
        cli.only
            .as_deref()
            .is_none_or(|o| name.starts_with(o) || o.starts_with(name))
    };
    let bins = cli
        .binaries
        .clone()
        .or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(std::path::Path::to_path_buf))
        })
        .unwrap_or_else(|| workspace().join("target").join("debug"));
    let mut figures = Vec::new();
    if cli.scale && (wanted("scale.clusters") || wanted("rss.cluster_100")) {
        println!("scale: 100 NatsClusters under the cluster-controller binary ...");
        let b = bins.join("cluster-controller");
        anyhow::ensure!(
            b.is_file(),
            "{} is not built (just bench does)",
            b.display()
        );
        figures.extend(clusters::scale_figures(&b).await?);
    }
    if cli.scale && (wanted("streams.ready_10000") || wanted("rss.jetstream_10000")) {
        println!("scale: 10,000 NatsStreams under the jetstream-controller binary ...");
        let b = bins.join("jetstream-controller");
        anyhow::ensure!(
            b.is_file(),
            "{} is not built (just bench does)",
            b.display()
        );
        figures.extend(streams::figures(&b, &streams::SCALE).await?);
    }
    if cli.scale && (wanted("users.distributed_10000") || wanted("rss.auth_10000")) {
        println!("scale: 10,000 NatsUsers in 10 NatsAccounts under the auth-controller binary ...");
        let b = bins.join("auth-controller");
        anyhow::ensure!(
            b.is_file(),
            "{} is not built (just bench does)",
            b.display()
        );
        figures.extend(auth::scale::figures(&b).await?);
    }
    if cli.scale {
        return Ok(figures);
    }
    if wanted("render") {
        println!("render: planning and rendering a 30-server supercluster ...");
        figures.push(render::figure()?);
    }
    if wanted("rollout") {
        println!("rollout: a rolling restart of 3 servers, by the controller and by hand ...");
        figures.push(rollout::figure().await?);
    }
    if wanted("jetstream.sync_cost") {
        println!("jetstream: an R3 file stream at sync_interval always against 2m ...");
        figures.push(sync_cost::figure().await?);
    }
    let binary = |name: &str| {
        let b = bins.join(name);
        anyhow::ensure!(
            b.is_file(),
            "{} is not built: run `cargo build -p {name}` (just bench does)",
            b.display()
        );
        Ok(b)
    };
    if wanted("users") || wanted("kick") || wanted("rss.auth") || wanted("usable") {
        println!(
            "users: 1,000 NatsUsers under the auth-controller binary, a user's connection kicked ..."
        );
        figures.extend(auth::figures(&binary("auth-controller")?).await?);
    }
    if wanted("rss.cluster") {
        println!("clusters: 30 NatsClusters under the cluster-controller binary ...");
        figures.push(clusters::figure(&binary("cluster-controller")?).await?);
    }
    if wanted("streams") || wanted("rss.jetstream") {
        let binary = bins.join("jetstream-controller");
        anyhow::ensure!(
            binary.is_file(),
            "{} is not built: run `cargo build -p jetstream-controller` (just bench does)",
            binary.display()
        );
        println!("streams: 1,000 NatsStreams under the jetstream-controller binary ...");
        figures.extend(streams::figures(&binary, &streams::THOUSAND).await?);
    }
    Ok(figures)
}

/// Writes the summary (`summary-scale.json` under `--scale`), with `docs` the table of
/// docs/performance.md and with `history` the lines of docs/bench-history.csv.
fn write(
    figures: &[summary::Figure],
    scale: bool,
    docs: bool,
    history: bool,
) -> anyhow::Result<()> {
    // Before the table below is written: that write alone would mark every run's tree dirty.
    let commit = history::commit(&workspace());
    let dir = workspace().join("target").join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(if scale {
        "summary-scale.json"
    } else {
        "summary.json"
    });
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&summary::summary(figures))?,
    )?;
    println!("summary: {}", path.display());
    if docs {
        let doc_path = workspace().join("docs").join("performance.md");
        let doc = std::fs::read_to_string(&doc_path)?;
        let updated = summary::replace_table(&doc, &summary::table(figures)).ok_or_else(|| {
            anyhow::anyhow!(
                "{} has no {} … {} markers",
                doc_path.display(),
                summary::BEGIN,
                summary::END
            )
        })?;
        std::fs::write(&doc_path, updated)?;
        println!("table: {}", doc_path.display());
    }
    if history {
        let history_path = workspace().join("docs").join("bench-history.csv");
        let existing = std::fs::read_to_string(&history_path).unwrap_or_default();
        let date = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let run = history::lines(
            figures,
            &commit,
            &date,
            &history::Machine::here().describe(),
        );
        std::fs::write(&history_path, history::appended(&existing, &run))?;
        println!("history: {} (+{} lines)", history_path.display(), run.len());
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let figures = match runtime.block_on(run(&cli)) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("bench: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    print!("\n{}", summary::table(&figures));
    println!("\ngoals are printed, not asserted");
    let full = !cli.no_docs && cli.only.is_none();
    match write(&figures, cli.scale, full && !cli.scale, full) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
