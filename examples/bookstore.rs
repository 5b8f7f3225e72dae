//! A complete API server for one small group, `bookstore.example.com`,
//! defined with the apiforge macros and served with the runtime: the
//! companion of `docs/defining-a-group.md`.
//!
//! ```sh
//! cargo run --example bookstore -- serve --secure-port 0 --data-dir /tmp/bookstore
//! kubectl --kubeconfig /tmp/bookstore/admin.kubeconfig get books
//! ```
//!
//! Unlike the `apiforge` binary, which generates its documents in
//! `build.rs`, this program builds its OpenAPI and discovery documents at
//! start-up with `Documents::from_scheme`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use apiforge_runtime::endpoints::{Documents, VersionInfo};
use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::resource::Strategy;
use apiforge_runtime::scheme::{Group, KindBuilder, Scheme};
use apiforge_runtime::storage::Storage;
use apiforge_runtime::{Resource, Validate};
use clap::Parser;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A book in the store's catalogue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(
    group = "bookstore.example.com",
    version = "v1",
    namespaced,
    short_names = ["bk"],
    categories = ["all"],
    printcolumn(name = "Author", type = "string", json_path = ".spec.author"),
    printcolumn(name = "Pages", type = "integer", json_path = ".spec.pages"),
    printcolumn(name = "Age", type = "date", json_path = ".metadata.creationTimestamp"),
    selectable_fields = [".spec.author"]
)]
pub struct Book {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the book is.
    #[serde(default)]
    pub spec: BookSpec,
}

/// What the book is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
pub struct BookSpec {
    /// The title.
    #[serde(default)]
    #[validate(required, max_length = 200)]
    pub title: String,
    /// The author's name.
    #[serde(default)]
    #[validate(required)]
    pub author: String,
    /// The number of pages.
    #[serde(default)]
    #[validate(minimum = 1, maximum = 10000, default = 100)]
    pub pages: i32,
    /// The ISBN-13, digits only; fixed once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(pattern = "^[0-9]{13}$", immutable)]
    pub isbn: Option<String>,
}

/// The hand-written strategy: defaults for everything but a warning.
impl Strategy for Book {
    fn warnings_on_create(&self) -> Vec<String> {
        if self.spec.isbn.is_none() {
            vec!["spec.isbn: books without an ISBN cannot be ordered".into()]
        } else {
            Vec::new()
        }
    }
}

/// The `bookstore.example.com` group.
pub fn group() -> Group {
    Group::new("bookstore.example.com", &["v1"])
        .model_prefix("com.example.bookstore")
        .title("Bookstore")
        .kind(KindBuilder::<Book>::new().version::<Book>().build())
}

/// Every kind served: the bookstore group and the runtime's own core
/// group (namespaces).
pub fn scheme() -> Scheme {
    let mut scheme = Scheme::new();
    scheme.add_group(group());
    apiforge_runtime::builtin::install(&mut scheme);
    scheme
}

#[derive(Debug, Parser)]
#[command(
    name = "bookstore",
    about = "A bookstore API server built with apiforge"
)]
enum Cli {
    /// Run the API server.
    Serve {
        /// The IP address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        bind_address: IpAddr,
        /// The HTTPS port (0 picks a free one).
        #[arg(long, default_value_t = 6443)]
        secure_port: u16,
        /// Store, certificates, credentials and admin.kubeconfig.
        #[arg(long, default_value = ".bookstore")]
        data_dir: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    // Allocator settings for less resident memory with a large watch cache.
    apiforge_runtime::server::allocator::tune();
    let Cli::Serve {
        bind_address,
        secure_port,
        data_dir,
    } = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let scheme = scheme();
    let docs = Documents::from_scheme(&scheme)?;
    let config = apiforge_runtime::server::Config {
        bind_address,
        secure_port,
        data_dir: data_dir.clone(),
        tls_cert_file: None,
        tls_private_key_file: None,
        tls_sni_cert_keys: Vec::new(),
        advertise_address: None,
        shutdown_delay: std::time::Duration::ZERO,
        storage_prefix: "/registry".into(),
        watch_cache: Some(Default::default()),
        admission: Default::default(),
        filters: Default::default(),
        authentication: Default::default(),
        authorization: Default::default(),
        identity_lease: Default::default(),
        controllers: Default::default(),
        audit: Default::default(),
        aggregator: Default::default(),
    };
    let version = VersionInfo {
        major: "1".into(),
        minor: "33".into(),
        git_version: "v1.33.0+bookstore".into(),
        platform: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        ..Default::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let dir = data_dir.join("store");
        let store =
            apiforge_runtime::storage::embedded::EmbeddedStore::open(&dir, Default::default())
                .with_context(|| format!("opening the embedded store in {}", dir.display()))?;
        let storage: Arc<dyn Storage> = Arc::new(store);
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        apiforge_runtime::server::run(config.complete(), scheme, docs, storage, version, shutdown)
            .await?;
        anyhow::Ok(())
    })
}
