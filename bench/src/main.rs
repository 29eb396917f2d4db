//! `just bench`: the project's performance figures, each as a ratio against its floor measured
//! in the same run (see [`summary`]). Writes `target/bench/summary.json` and the table of
//! docs/performance.md; prints every figure with its floor, ratio and goal. Goals are never
//! asserted: on a shared 2-core machine a figure measures the machine too.
//!
//! The binaries it runs are the checkout's own debug builds (`just bench` builds them first).

mod render;
mod streams;
mod summary;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "bench",
    about = "The project's performance figures against their floors"
)]
struct Cli {
    /// Run only the figures whose name starts with this (e.g. `render`, `streams`).
    #[arg(long)]
    only: Option<String>,
    /// Where the controller binaries are (default: target/debug of the checkout).
    #[arg(long)]
    binaries: Option<PathBuf>,
    /// Do not rewrite docs/performance.md.
    #[arg(long)]
    no_docs: bool,
}

fn workspace() -> PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

async fn run(cli: &Cli) -> anyhow::Result<Vec<summary::Figure>> {
    let wanted = |name: &str| cli.only.as_deref().is_none_or(|o| name.starts_with(o));
    let bins = cli
        .binaries
        .clone()
        .unwrap_or_else(|| workspace().join("target").join("debug"));
    let mut figures = Vec::new();
    if wanted("render") {
        println!("render: planning and rendering a 30-server supercluster ...");
        figures.push(render::figure()?);
    }
    if wanted("streams") || wanted("rss") {
        let binary = bins.join("jetstream-controller");
        anyhow::ensure!(
            binary.is_file(),
            "{} is not built: run `cargo build -p jetstream-controller` (just bench does)",
            binary.display()
        );
        println!("streams: 1,000 NatsStreams under the jetstream-controller binary ...");
        figures.extend(streams::figures(&binary).await?);
    }
    Ok(figures)
}

fn write(figures: &[summary::Figure], docs: bool) -> anyhow::Result<()> {
    let dir = workspace().join("target").join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("summary.json");
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
    match write(&figures, !cli.no_docs && cli.only.is_none()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
