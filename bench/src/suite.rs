//! The benchmark suite: the scenario names `--scenario` takes, and running
//! the selected ones in order.

use crate::report::Figure;
use crate::scenarios;
use crate::{Settings, progress};

/// Scenario names for `--scenario`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Name {
    /// GET one object from the cache, 64 connections.
    Get,
    /// LIST all objects in one page and in pages of 500.
    List,
    /// CREATE with 16 and 64 clients (embedded; etcd when available).
    Create,
    /// UPDATE with resourceVersion preconditions, 64 clients.
    Update,
    /// WATCH fan-out to 1,000 watchers at 200 writes/s.
    Watch,
    /// 10,000 idle watches (one connection each): server memory per
    /// watch, idle CPU, and one event to all of them.
    IdleWatches,
    /// Start-up to /readyz, empty and with many objects.
    Startup,
    /// RSS with many 1 KiB objects cached.
    Memory,
    /// Consistent LIST vs resourceVersion=0.
    ConsistentList,
    /// Server-side apply (create and update) vs POST and merge patch.
    Apply,
    /// Garbage collection: owner DELETE to the last of 1,000 dependents
    /// gone (background and foreground; embedded and etcd).
    Gc,
    /// Custom resources vs the compiled-in kind of the same schema (GET,
    /// LIST, create), definition to Established, start-up with 100
    /// definitions and 10,000 custom resources, RSS per cached one.
    Crd,
    /// Creates with 0 and 1 validating/mutating admission webhooks on
    /// loopback: added latency per call, throughput and CPU.
    Admission,
    /// GET through the aggregator's proxy vs GET served by the backend
    /// directly.
    Aggregator,
    /// How cost grows: GET, LIST, watch fan-out, RSS and start-up at
    /// 1,000 to 1,000,000 objects; creates at 1 to 256 clients.
    Scale,
}

impl Name {
    /// Every scenario, in run order.
    pub(crate) fn all() -> Vec<Name> {
        vec![
            Name::Get,
            Name::List,
            Name::ConsistentList,
            Name::Create,
            Name::Update,
            Name::Apply,
            Name::Watch,
            Name::IdleWatches,
            Name::Startup,
            Name::Memory,
            Name::Gc,
            Name::Crd,
            Name::Admission,
            Name::Aggregator,
            Name::Scale,
        ]
    }

    fn label(self) -> &'static str {
        match self {
            Name::Get => "get",
            Name::List => "list",
            Name::Create => "create",
            Name::Update => "update",
            Name::Watch => "watch",
            Name::IdleWatches => "idle-watches",
            Name::Startup => "startup",
            Name::Memory => "memory",
            Name::ConsistentList => "consistent-list",
            Name::Apply => "apply",
            Name::Gc => "gc",
            Name::Crd => "crd",
            Name::Admission => "admission",
            Name::Aggregator => "aggregator",
            Name::Scale => "scale",
        }
    }
}

/// Runs the selected scenarios; returns the figures and how many scenarios
/// could not run.
pub(crate) async fn run_all(settings: &Settings, selected: &[Name]) -> (Vec<Figure>, usize) {
    let mut figures = Vec::new();
    let mut failures = 0;
    let has = |n: Name| selected.contains(&n);
    let mut record = |name: &str, result: anyhow::Result<Vec<Figure>>| match result {
        Ok(f) => figures.extend(f),
        Err(e) => {
            progress!("{name}: could not run: {e:#}");
            failures += 1;
            figures.push(Figure::error(name, &format!("{e:#}")));
        }
    };
    if has(Name::Get) {
        record(Name::Get.label(), scenarios::get(settings).await);
    }
    if has(Name::List) || has(Name::ConsistentList) {
        record(
            "list",
            scenarios::list(settings, has(Name::List), has(Name::ConsistentList)).await,
        );
    }
    if has(Name::Create) {
        record(Name::Create.label(), scenarios::create(settings).await);
    }
    if has(Name::Update) {
        record(Name::Update.label(), scenarios::update(settings).await);
    }
    if has(Name::Apply) {
        record(Name::Apply.label(), crate::apply::apply(settings).await);
    }
    if has(Name::Watch) {
        record(Name::Watch.label(), scenarios::watch(settings).await);
    }
    if has(Name::IdleWatches) {
        record(
            Name::IdleWatches.label(),
            scenarios::idle_watches(settings).await,
        );
    }
    if has(Name::Startup) || has(Name::Memory) {
        record(
            "startup/memory",
            scenarios::startup_memory(settings, has(Name::Startup), has(Name::Memory)).await,
        );
    }
    if has(Name::Gc) {
        record(Name::Gc.label(), scenarios::gc(settings).await);
    }
    if has(Name::Crd) {
        record(
            Name::Crd.label(),
            crate::custom_resources::custom_resources(settings).await,
        );
    }
    if has(Name::Admission) {
        record(
            Name::Admission.label(),
            crate::admission::admission(settings).await,
        );
    }
    if has(Name::Aggregator) {
        record(
            Name::Aggregator.label(),
            crate::aggregator::aggregator(settings).await,
        );
    }
    if has(Name::Scale) {
        record(Name::Scale.label(), crate::scaling::scale(settings).await);
    }
    (figures, failures)
}
