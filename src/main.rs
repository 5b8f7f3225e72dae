//! The `apiforge` binary: serves the compiled-in API groups (`apis/`) with
//! the runtime's command line (`apiforge_runtime::app`):
//!
//! `apiforge serve` runs the API server (flags follow kube-apiserver's);
//! `apiforge openapi --out DIR` writes the generated OpenAPI documents
//! (`DIR/swagger.json` and `DIR/v3/*.json`, as Kubernetes' `api/openapi-spec`);
//! `apiforge crd [GROUP] [--as-group NAME]` prints the CustomResourceDefinitions
//! of the groups declared with the macros; `apiforge snapshot` saves and
//! restores the embedded store; `apiforge init` creates a new project.

mod init;

use apiforge_runtime::app::{Server, default_version_info};

/// The server allocates and frees many small, short-lived values per
/// request on every worker thread; mimalloc's per-thread heaps serve that
/// far more cheaply than glibc's shared arenas (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The generated documents (OpenAPI, discovery) of the compiled-in groups.
const DOCUMENTS: &str = include_str!(concat!(env!("OUT_DIR"), "/documents.json"));

/// `apiforge init`.
#[derive(Debug, clap::Subcommand)]
enum Init {
    /// Create a new cargo project serving one kind: the kind, a `main`
    /// with this command line, a test using the in-process server and
    /// kube-rs with the same type, an example object and a README.
    Init(init::InitOptions),
}

fn main() -> anyhow::Result<()> {
    let mut version = default_version_info("apiforge");
    version.git_commit = option_env!("APIFORGE_GIT_COMMIT")
        .unwrap_or("unknown")
        .into();
    version.build_date = option_env!("APIFORGE_BUILD_DATE")
        .unwrap_or("unknown")
        .into();
    Server::new("apiforge")
        .about("apiforge: a Kubernetes-style API server generated from Rust types.")
        .version(env!("CARGO_PKG_VERSION"))
        .version_info(version)
        .install(apiforge_apis::install)
        .admission_plugin(apiforge_apis::wardle::admission::ban_flunder(), true)
        .documents(DOCUMENTS)
        .subcommands(|Init::Init(opts)| init::run(&opts))
        .run()
}
