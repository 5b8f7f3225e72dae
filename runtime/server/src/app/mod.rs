//! The command line of an apiforge server, as a library: a few lines give
//! any program the `apiforge` binary's command line — `serve` with every
//! kube-apiserver-style flag and default, `openapi`, `crd` and `snapshot`.
//!
//! ```no_run
//! # fn group() -> apiforge_core::scheme::Group {
//! #     apiforge_core::scheme::Group::new("bookstore.example.com", &["v1"])
//! # }
//! fn main() -> anyhow::Result<()> {
//!     apiforge_server::app::Server::new("bookstore")
//!         .about("A bookstore API server")
//!         .group(group())
//!         .run()
//! }
//! ```
//!
//! The program serves its groups plus the runtime's own (namespaces,
//! RBAC, CRDs, ...). Without a precomputed documents bundle
//! ([`Server::documents`], what the `apiforge` binary's `build.rs` makes)
//! the OpenAPI and discovery documents are generated at start-up.

mod admission;
mod options;
mod snapshot;

use std::ffi::OsString;
use std::sync::Arc;

use anyhow::Context;
use apiforge_core::scheme::{Group, Scheme};
use apiforge_storage::Storage;
use clap::{CommandFactory, FromArgMatches};

use crate::admission::Plugin;
use crate::endpoints::{Documents, VersionInfo};

/// Extra subcommands a program adds (the `apiforge` binary's `init`).
type Extra = (
    fn(clap::Command) -> clap::Command,
    Box<dyn FnOnce(&clap::ArgMatches) -> Option<anyhow::Result<()>>>,
);

/// A program serving API groups with kube-apiserver's command line.
pub struct Server {
    name: String,
    about: Option<String>,
    version: Option<String>,
    version_info: Option<VersionInfo>,
    groups: Vec<Group>,
    installers: Vec<fn(&mut Scheme)>,
    plugins: Vec<admission::ExtraPlugin>,
    documents: Option<&'static str>,
    extra: Option<Extra>,
}

impl Server {
    /// A program called `name` (in `--help`, `--version` and `/version`).
    pub fn new(name: impl Into<String>) -> Self {
        Server {
            name: name.into(),
            about: None,
            version: None,
            version_info: None,
            groups: Vec::new(),
            installers: Vec::new(),
            plugins: Vec::new(),
            documents: None,
            extra: None,
        }
    }

    /// The one-line description `--help` starts with.
    pub fn about(mut self, about: impl Into<String>) -> Self {
        self.about = Some(about.into());
        self
    }

    /// The version `--version` prints (default: the runtime's).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// What `/version` answers (default: Kubernetes 1.33, `gitVersion`
    /// `v1.33.0+<name>-<version>`).
    pub fn version_info(mut self, info: VersionInfo) -> Self {
        self.version_info = Some(info);
        self
    }

    /// Serves `group`.
    pub fn group(mut self, group: Group) -> Self {
        self.groups.push(group);
        self
    }

    /// Serves what `install` adds to a scheme (a crate's `install`
    /// function of several groups).
    pub fn install(mut self, install: fn(&mut Scheme)) -> Self {
        self.installers.push(install);
        self
    }

    /// Adds an admission plugin after the runtime's built-ins (the webhook
    /// and policy plugins stay last); `default_on`: it runs unless
    /// `--disable-admission-plugins` names it, else only when
    /// `--enable-admission-plugins` does.
    pub fn admission_plugin(mut self, plugin: impl Plugin, default_on: bool) -> Self {
        self.plugins.push((Arc::new(plugin), default_on));
        self
    }

    /// The OpenAPI and discovery documents of the program's scheme, as
    /// `apiforge_core::bundle::build` made them at build time (a build
    /// script's output, with `include_str!`): start-up then does no
    /// document work. They must describe exactly the served scheme.
    pub fn documents(mut self, bundle: &'static str) -> Self {
        self.documents = Some(bundle);
        self
    }

    /// Adds the subcommands of `T` to the command line; `run` handles
    /// them.
    pub fn subcommands<T: clap::Subcommand + 'static>(
        mut self,
        run: impl FnOnce(T) -> anyhow::Result<()> + 'static,
    ) -> Self {
        let handle = move |matches: &clap::ArgMatches| {
            let name = matches.subcommand_name()?;
            if !T::has_subcommand(name) {
                return None;
            }
            Some(
                T::from_arg_matches(matches)
                    .map_err(anyhow::Error::from)
                    .and_then(run),
            )
        };
        self.extra = Some((T::augment_subcommands, Box::new(handle)));
        self
    }

    /// Parses the process's arguments and runs the subcommand.
    pub fn run(self) -> anyhow::Result<()> {
        self.run_from(std::env::args_os())
    }

    /// Parses `args` (the first is the program's name) and runs the
    /// subcommand. `--help`, `--version` and usage errors print and exit
    /// the process, as clap does.
    pub fn run_from<I, T>(self, args: I) -> anyhow::Result<()>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let registry = admission::registry(&self.plugins);
        let (enable_help, disable_help) = admission::help(&registry);
        // clap keeps `&'static str`s; the program's name and version live as
        // long as it does.
        let name: &'static str = self.name.clone().leak();
        let mut extra = self.extra;
        let mut command = options::Cli::command();
        // Before the program's about: a derived enum's docs would replace it.
        if let Some((augment, _)) = &extra {
            command = augment(command);
        }
        command = command
            .name(name)
            .bin_name(name)
            .mut_subcommand("serve", |serve| {
                serve
                    .mut_arg("enable_admission_plugins", |a| a.help(enable_help))
                    .mut_arg("disable_admission_plugins", |a| a.help(disable_help))
            });
        if let Some(about) = &self.about {
            command = command.about(about.clone());
        }
        if let Some(version) = &self.version {
            command = command.version(&*version.clone().leak());
        }
        let matches = command.get_matches_from(args);
        if let Some((_, handle)) = extra.take()
            && let Some(result) = handle(&matches)
        {
            return result;
        }
        let cli = options::Cli::from_arg_matches(&matches).map_err(|e| e.exit())?;
        let program = Program {
            version_info: self
                .version_info
                .clone()
                .unwrap_or_else(|| default_version_info(&self.name)),
            groups: self.groups,
            installers: self.installers,
            plugins: self.plugins,
            documents: self.documents,
        };
        match cli.command {
            options::Command::Serve(opts) => {
                crate::server::allocator::tune();
                program.serve(*opts)
            }
            options::Command::Openapi(opts) => program.write_openapi(&opts.out),
            options::Command::Crd(opts) => program.print_definitions(&opts),
            options::Command::Snapshot(command) => snapshot::run(command),
        }
    }
}

/// Kubernetes 1.33's `/version`, with `gitVersion` naming the program.
pub fn default_version_info(name: &str) -> VersionInfo {
    VersionInfo {
        major: "1".into(),
        minor: "33".into(),
        git_version: format!("v1.33.0+{name}-{}", env!("CARGO_PKG_VERSION")),
        git_commit: "unknown".into(),
        git_tree_state: "clean".into(),
        build_date: "unknown".into(),
        go_version: "rustc".into(),
        compiler: "rustc".into(),
        platform: format!("{}/{}", std::env::consts::OS, normalized_arch()),
    }
}

/// The machine as Go names it (`amd64`, `arm64`), as clients expect in
/// `/version`'s `platform`.
pub fn normalized_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// What a parsed command line runs on.
struct Program {
    version_info: VersionInfo,
    groups: Vec<Group>,
    installers: Vec<fn(&mut Scheme)>,
    plugins: Vec<admission::ExtraPlugin>,
    documents: Option<&'static str>,
}

impl Program {
    /// The program's own groups (without the runtime's).
    fn own_scheme(&self) -> Scheme {
        let mut scheme = Scheme::new();
        for group in &self.groups {
            scheme.add_group(group.clone());
        }
        for install in &self.installers {
            install(&mut scheme);
        }
        scheme
    }

    /// Everything served: the program's groups and the runtime's.
    fn scheme(&self) -> Scheme {
        let mut scheme = self.own_scheme();
        apiforge_core::builtin::install(&mut scheme);
        scheme
    }

    /// The documents bundle: the precomputed one, or generated now.
    fn bundle(&self) -> anyhow::Result<serde_json::Value> {
        match self.documents {
            Some(text) => serde_json::from_str(text).context("the documents bundle"),
            None => Ok(apiforge_core::bundle::build(&self.scheme())),
        }
    }

    /// Prints the CustomResourceDefinitions of the program's groups (the
    /// runtime's are kube-apiserver's own), one JSON document each,
    /// separated as a YAML stream.
    fn print_definitions(&self, opts: &options::CrdOptions) -> anyhow::Result<()> {
        let scheme = self.own_scheme();
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
                apiforge_core::scheme::definition::definitions_of(group, opts.as_group.as_deref())
            {
                println!("---\n{}", serde_json::to_string_pretty(&definition)?);
            }
        }
        Ok(())
    }

    fn serve(self, opts: options::ServeOptions) -> anyhow::Result<()> {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(opts.log_filter()));
        let logs = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        // A second subscriber (a test running two servers in one
        // process) keeps the first.
        let _ = if opts.json_logs() {
            logs.json().try_init()
        } else {
            logs.try_init()
        };
        let mut registry = opts.admission.registry(&self.plugins)?;
        if let Some(path) = opts.core_kubeconfig() {
            // An aggregated server checks the main server's namespaces.
            let client = crate::webhook::Client::from_kubeconfig(path).context("--kubeconfig")?;
            registry.register(
                crate::admission::NamespaceLifecycle::with_core_api(client),
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
            let mut scheme = self.scheme();
            // `--runtime-config` turning group versions off: the documents
            // are generated for what is left, at start-up.
            let changed = scheme
                .apply_runtime_config(&config.runtime_config)
                .context("--runtime-config")?;
            let docs = match self.documents {
                Some(bundle) if !changed => Documents::from_bundle(bundle)?,
                _ => Documents::from_scheme(&scheme)?,
            };
            crate::server::run(
                config.server.complete(),
                scheme,
                docs,
                storage,
                self.version_info,
                shutdown_signal(),
            )
            .await?;
            anyhow::Ok(())
        })
    }

    /// Writes the OpenAPI documents (`DIR/swagger.json` and
    /// `DIR/v3/*.json`, as Kubernetes' `api/openapi-spec`).
    fn write_openapi(&self, out: &std::path::Path) -> anyhow::Result<()> {
        let bundle = self.bundle()?;
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
}

async fn open_storage(config: &options::CompletedOptions) -> anyhow::Result<Arc<dyn Storage>> {
    if let Some(etcd) = &config.etcd {
        let endpoints = etcd.endpoints.join(",");
        let store = apiforge_storage::etcd3::Etcd3Store::connect(etcd.clone())
            .await
            .with_context(|| format!("connecting to etcd at {endpoints}"))?;
        tracing::info!(%endpoints, version = store.server_version(), "storing objects in etcd");
        let store: Arc<dyn Storage> = Arc::new(store);
        if !config.compaction_interval.is_zero() {
            tokio::spawn(apiforge_storage::compactor::run(
                Arc::downgrade(&store),
                config.compaction_interval,
            ));
        }
        return Ok(store);
    }
    let dir = config.server.data_dir.join("store");
    let options = apiforge_storage::embedded::EmbeddedOptions {
        compaction_interval: config.compaction_interval,
        ..Default::default()
    };
    let store = apiforge_storage::embedded::EmbeddedStore::open(&dir, options)
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
