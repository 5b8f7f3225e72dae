//! The `apiforge` binary: serves the compiled-in API groups.
//!
//! `apiforge serve` runs the API server (flags follow kube-apiserver's);
//! `apiforge openapi --out DIR` writes the generated OpenAPI documents
//! (`DIR/swagger.json` and `DIR/v3/*.json`, as Kubernetes' `api/openapi-spec`);
//! `apiforge crd [GROUP] [--as-group NAME]` prints the CustomResourceDefinitions
//! of the groups declared with the macros.

mod admission;
mod options;
mod snapshot;

use std::sync::Arc;

use anyhow::Context;
use apiforge_runtime::endpoints::{Documents, VersionInfo};
use apiforge_runtime::storage::Storage;
use clap::Parser;

/// The server allocates and frees many small, short-lived values per
/// request on every worker thread; mimalloc's per-thread heaps serve that
/// far more cheaply than glibc's shared arenas (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The generated documents (OpenAPI, discovery) of the compiled-in groups.
const DOCUMENTS: &str = include_str!(concat!(env!("OUT_DIR"), "/documents.json"));

fn version_info() -> VersionInfo {
    VersionInfo {
        major: "1".into(),
        minor: "33".into(),
        git_version: format!("v1.33.0+apiforge-{}", env!("CARGO_PKG_VERSION")),
        git_commit: option_env!("APIFORGE_GIT_COMMIT")
            .unwrap_or("unknown")
            .into(),
        git_tree_state: "clean".into(),
        build_date: option_env!("APIFORGE_BUILD_DATE")
            .unwrap_or("unknown")
            .into(),
        go_version: "rustc".into(),
        compiler: "rustc".into(),
        platform: format!("{}/{}", std::env::consts::OS, normalized_arch()),
    }
}

fn normalized_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

fn main() -> anyhow::Result<()> {
    let cli = options::Cli::parse();
    match cli.command {
        options::Command::Serve(opts) => {
            apiforge_runtime::server::allocator::tune();
            serve(*opts)
        }
        options::Command::Openapi(opts) => write_openapi(&opts.out),
        options::Command::Crd(opts) => print_definitions(&opts),
        options::Command::Snapshot(command) => snapshot::run(command),
    }
}

/// Prints the CustomResourceDefinitions of the groups declared with the
/// macros (the built-in groups are kube-apiserver's own), one JSON
/// document each, separated as a YAML stream.
fn print_definitions(opts: &options::CrdOptions) -> anyhow::Result<()> {
    let scheme = apiforge_apis::scheme();
    let groups: Vec<_> = scheme
        .groups()
        .iter()
        .filter(|g| opts.group.as_deref().is_none_or(|name| g.name == name))
        .collect();
    if groups.is_empty() {
        anyhow::bail!(
            "no group {:?}; the groups are: {}",
            opts.group.as_deref().unwrap_or_default(),
            scheme
                .groups()
                .iter()
                .map(|g| g.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for group in groups {
        for definition in
            apiforge_runtime::scheme::definition::definitions_of(group, opts.as_group.as_deref())
        {
            println!("---\n{}", serde_json::to_string_pretty(&definition)?);
        }
    }
    Ok(())
}

fn serve(opts: options::ServeOptions) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(opts.log_filter()));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if opts.json_logs() {
        logs.json().init();
    } else {
        logs.init();
    }
    let mut registry = opts.admission.registry()?;
    if let Some(path) = opts.core_kubeconfig() {
        // An aggregated server checks the main server's namespaces.
        let client =
            apiforge_runtime::webhook::Client::from_kubeconfig(path).context("--kubeconfig")?;
        registry.register(
            apiforge_runtime::admission::NamespaceLifecycle::with_core_api(client),
            true,
        );
    }
    let plugins = opts.admission.resolve(&registry)?;
    let mut config = opts.complete()?;
    config.server.admission = plugins;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let storage: Arc<dyn Storage> = open_storage(&config).await?;
        let mut scheme = apiforge_apis::scheme();
        apiforge_runtime::builtin::install(&mut scheme);
        // `--runtime-config` turning group versions off: the documents are
        // generated for what is left, at start-up.
        let docs = if scheme
            .apply_runtime_config(&config.runtime_config)
            .context("--runtime-config")?
        {
            Documents::from_scheme(&scheme)?
        } else {
            Documents::from_bundle(DOCUMENTS)?
        };
        apiforge_runtime::server::run(
            config.server.complete(),
            scheme,
            docs,
            storage,
            version_info(),
            shutdown_signal(),
        )
        .await?;
        anyhow::Ok(())
    })
}

async fn open_storage(config: &options::CompletedOptions) -> anyhow::Result<Arc<dyn Storage>> {
    if let Some(etcd) = &config.etcd {
        let endpoints = etcd.endpoints.join(",");
        let store = apiforge_runtime::storage::etcd3::Etcd3Store::connect(etcd.clone())
            .await
            .with_context(|| format!("connecting to etcd at {endpoints}"))?;
        tracing::info!(%endpoints, version = store.server_version(), "storing objects in etcd");
        let store: Arc<dyn Storage> = Arc::new(store);
        if !config.compaction_interval.is_zero() {
            tokio::spawn(apiforge_runtime::storage::compactor::run(
                Arc::downgrade(&store),
                config.compaction_interval,
            ));
        }
        return Ok(store);
    }
    let dir = config.server.data_dir.join("store");
    let options = apiforge_runtime::storage::embedded::EmbeddedOptions {
        compaction_interval: config.compaction_interval,
        ..Default::default()
    };
    let store = apiforge_runtime::storage::embedded::EmbeddedStore::open(&dir, options)
        .with_context(|| format!("opening the embedded store in {}", dir.display()))?;
    Ok(Arc::new(store))
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            std::future::pending::<()>().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

fn write_openapi(out: &std::path::Path) -> anyhow::Result<()> {
    let bundle: serde_json::Value = serde_json::from_str(DOCUMENTS)?;
    let v2 = bundle
        .get("openapi_v2")
        .context("bundle has no openapi_v2")?;
    std::fs::create_dir_all(out)?;
    let file = out.join("swagger.json");
    let mut text = serde_json::to_string_pretty(v2)?;
    text.push('\n');
    std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    let docs = bundle["openapi_v3"]
        .as_object()
        .context("bundle has no openapi_v3")?;
    for (path, doc) in docs {
        let file = out
            .join("v3")
            .join(format!("{}_openapi.json", path.replace('/', "__")));
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut text = serde_json::to_string_pretty(doc)?;
        text.push('\n');
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(())
}
