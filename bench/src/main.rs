//! `apiforge-bench`: measures a release build of `apiforge` against
//! reference servers and prints one table of figures, targets and verdicts.
//!
//! It builds nothing: it starts `apiforge serve` (and, for the etcd
//! scenarios, a throwaway etcd) on free loopback ports with temporary data
//! directories, warms up, runs every scenario for a fixed duration three
//! times and reports the median. Progress goes to stderr, the table to
//! stdout. The exit code is 0 even when targets fail; it is non-zero only
//! when something could not run.

mod admission;
mod aggregator;
mod apply;
mod client;
mod custom_resources;
mod etcd_raw;
mod fixtures;
mod load;
mod plot;
mod procs;
mod ref_process;
mod reference;
mod report;
mod scaling;
mod scenarios;
mod suite;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use clap::Parser;

/// Benchmark harness of the apiforge server.
#[derive(Debug, Parser)]
#[command(name = "apiforge-bench", version, about)]
struct Cli {
    /// One short run per figure and fewer objects (under 2 minutes).
    #[arg(long)]
    quick: bool,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The apiforge binary to measure.
    #[arg(long, default_value = "target/release/apiforge")]
    apiforge: PathBuf,
    /// An extra argument for every `apiforge serve` the benchmark starts
    /// (repeatable), e.g. `--server-arg=--default-watch-cache-size=1000`.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    server_args: Vec<String>,
    /// Run only these scenarios (repeatable); default: all.
    #[arg(long = "scenario", value_enum)]
    scenarios: Vec<suite::Name>,
    /// Write the scaling scenario's charts (SVG) into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
    /// The object counts of the scaling scenario's steps (default: 1,000,
    /// 10,000, 100,000 and 1,000,000; quick: 1,000 and 10,000).
    #[arg(long, value_delimiter = ',')]
    scale_steps: Vec<usize>,
    #[command(subcommand)]
    command: Option<Command>,
}

/// The benchmark's own helper processes.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Serves one reference server until stdin closes (started by the
    /// benchmark itself, so that the reference's CPU time is its own).
    #[command(hide = true)]
    ReferenceServer(ref_process::ChildArgs),
}

static START: OnceLock<Instant> = OnceLock::new();

/// Prints a progress line to stderr, prefixed with the elapsed time.
macro_rules! progress {
    ($($arg:tt)*) => {
        eprintln!("[{:>6.1}s] {}", $crate::elapsed().as_secs_f64(), format_args!($($arg)*))
    };
}
pub(crate) use progress;

/// Time since the benchmark started.
pub(crate) fn elapsed() -> Duration {
    START.get_or_init(Instant::now).elapsed()
}

/// Durations and sizes of one benchmark run.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// Length of one measured run.
    pub(crate) run: Duration,
    /// Length of the warm-up before the measured runs.
    pub(crate) warmup: Duration,
    /// Measured runs per figure (the median is reported).
    pub(crate) repeats: usize,
    /// Objects in the LIST scenarios.
    pub(crate) list_objects: usize,
    /// Objects in the start-up and memory scenarios.
    pub(crate) big_objects: usize,
    /// Watchers in the watch scenario.
    pub(crate) watchers: usize,
    /// Watches in the idle-watches scenario.
    pub(crate) idle_watchers: usize,
    /// How long the idle-watches scenario's watches stay idle.
    pub(crate) idle_for: Duration,
    /// Writes per second during the watch scenario.
    pub(crate) watch_write_rate: u32,
    /// How long the watch writer runs.
    pub(crate) watch_duration: Duration,
    /// The apiforge binary.
    pub(crate) binary: PathBuf,
    /// Whether `apiforge serve` has `--etcd-servers`.
    pub(crate) etcd: bool,
    /// Object counts of the scaling scenario's steps.
    pub(crate) scale_steps: Vec<usize>,
    /// Where the scaling scenario writes its charts.
    pub(crate) plots: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let _ = START.get_or_init(Instant::now);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> std::process::ExitCode {
    if let Some(Command::ReferenceServer(args)) = cli.command {
        return match ref_process::child_main(args).await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: reference server: {e:#}");
                std::process::ExitCode::from(2)
            }
        };
    }
    if !cli.apiforge.exists() {
        eprintln!(
            "error: {} does not exist; build it first: cargo build --release -p apiforge -p apiforge-bench",
            cli.apiforge.display()
        );
        return std::process::ExitCode::from(2);
    }
    procs::set_server_args(cli.server_args.clone());
    procs::set_rss_settle(Duration::from_secs(if cli.quick { 1 } else { 2 }));
    let etcd =
        procs::supports_etcd(&cli.apiforge) && std::path::Path::new(procs::Etcd::BINARY).exists();
    let settings = Settings {
        run: Duration::from_millis(if cli.quick { 700 } else { 10_000 }),
        warmup: Duration::from_millis(if cli.quick { 200 } else { 2_000 }),
        // The quick run is a smoke test that must stay under 2 minutes: one
        // run per figure (no median).
        repeats: if cli.quick { 1 } else { 3 },
        list_objects: if cli.quick { 2_000 } else { 10_000 },
        big_objects: if cli.quick { 10_000 } else { 100_000 },
        watchers: 1_000,
        idle_watchers: if cli.quick { 1_000 } else { 10_000 },
        idle_for: Duration::from_secs(if cli.quick { 2 } else { 5 }),
        watch_write_rate: 200,
        watch_duration: Duration::from_secs(if cli.quick { 4 } else { 30 }),
        binary: cli.apiforge.clone(),
        etcd,
        scale_steps: if cli.scale_steps.is_empty() {
            scaling::steps(cli.quick)
        } else {
            cli.scale_steps.clone()
        },
        plots: cli.plots.clone(),
    };
    progress!(
        "apiforge-bench: {} run(s) of {:?} per figure; binary {}; etcd backend {}",
        settings.repeats,
        settings.run,
        settings.binary.display(),
        if etcd {
            "available"
        } else {
            "not available (no --etcd-servers)"
        }
    );
    let selected = if cli.scenarios.is_empty() {
        suite::Name::all()
    } else {
        cli.scenarios.clone()
    };
    let (figures, failures) = suite::run_all(&settings, &selected).await;
    print!("{}", report::table(&figures));
    if let Some(path) = &cli.json
        && let Err(e) = report::write_json(path, &figures)
    {
        eprintln!("error: writing {}: {e:#}", path.display());
        return std::process::ExitCode::from(2);
    }
    progress!("done");
    if failures > 0 {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    }
}
