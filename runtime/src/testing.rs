//! An in-process API server for tests (feature `testing`).
//!
//! [`TestServer::start`] serves a [`Scheme`] inside the calling tokio
//! runtime (a `#[tokio::test]`), on an embedded store in a fresh temporary
//! directory and a free loopback port, with the same `server::run` the
//! binaries use, and returns once `/readyz` answers: an admin
//! [`kube::Client`], the kubeconfig file and the base URL are on the handle.
//! Dropping the handle sends the graceful-shutdown signal and removes the
//! directory.
//!
//! ```no_run
//! # async fn demo(scheme: apiforge_runtime::scheme::Scheme) -> Result<(), apiforge_runtime::testing::Error> {
//! use apiforge_runtime::testing::TestServer;
//! let server = TestServer::start(scheme).await?;
//! let client = server.client();
//! # Ok(()) }
//! ```
//!
//! # Fault injection
//!
//! [`TestServer::faults`] injects the failures a controller must survive,
//! through a wrapper around the storage (so the normal serving path is
//! unchanged; the wrapper exists only in test servers):
//! - [`Faults::fail_writes`]: the next N creates/updates/deletes of keys
//!   matching a filter fail: `409 Conflict`, `500 InternalError`,
//!   `503 ServiceUnavailable` or `429 TooManyRequests` (with
//!   `Retry-After`), as Kubernetes `Status` bodies (a storage conflict of
//!   an update or patch is retried by the server, as upstream's
//!   `GuaranteedUpdate` does, so `Conflict` reaches clients from creates
//!   and deletes; kube-rs's default client retries 429s and 503s);
//! - [`Faults::expire_watches`]: every watch (or list-watch) started from a
//!   resource version seen before the call gets `410 Gone` /
//!   an `ERROR` event with reason `Expired`, as after an etcd compaction;
//! - [`Faults::drop_watches`]: every open watch ends now (clients re-watch
//!   from their last resource version).
//!
//! # The lease clock
//!
//! [`TestServer::clock`] is the wall clock the server's lease controllers
//! read (its identity lease: renewals and the collection of other
//! instances' expired identity leases; the leader election of its
//! singleton controllers on etcd). [`Clock::freeze`] stops it and
//! [`Clock::step`] moves it forward; each step makes those controllers
//! look at their leases at once, so a test sees a lease expire without
//! waiting its duration out.
//!
//! The test server runs without API Priority and Fairness and without the
//! watch cache (reads and watches go to
//! storage) so that watch faults reach clients directly.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use apiforge_core::scheme::Scheme;
use apiforge_server::endpoints::{Documents, VersionInfo};
use apiforge_storage::{
    KeyValue, ListOptions, ListResult, Revision, Storage, WatchStream, WriteOutcome,
};
use bytes::Bytes;
use futures::StreamExt;

pub use apiforge_server::clock::Clock;

/// Why a test server did not start.
#[derive(Debug)]
pub enum Error {
    /// Creating the temporary directory or opening the store failed.
    Io(String),
    /// Building the OpenAPI/discovery documents failed.
    Documents(String),
    /// The server exited or did not become ready.
    Start(String),
    /// The kubeconfig could not be read or the client built.
    Client(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(m) => write!(f, "test server: {m}"),
            Error::Documents(m) => write!(f, "test server documents: {m}"),
            Error::Start(m) => write!(f, "test server did not start: {m}"),
            Error::Client(m) => write!(f, "test server client: {m}"),
        }
    }
}

impl std::error::Error for Error {}

/// How long [`TestServer::start`] waits for `/readyz`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A running in-process API server; stops when dropped (see the module
/// documentation).
pub struct TestServer {
    client: kube::Client,
    config: Option<kube::Config>,
    kubeconfig: PathBuf,
    url: String,
    faults: Faults,
    clock: Clock,
    startup: Duration,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), String>>>,
    // Declared last: removed after the server was told to stop.
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("url", &self.url)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl TestServer {
    /// Starts a server for `scheme` (add `builtin::install` for namespaces
    /// and the runtime's own groups) and waits until it is ready.
    pub async fn start(scheme: Scheme) -> Result<TestServer, Error> {
        let began = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("apiforge-test-")
            .tempdir_in(temp_root())
            .map_err(|e| Error::Io(e.to_string()))?;
        let docs = documents(&scheme)?;
        let store = apiforge_storage::embedded::EmbeddedStore::open(
            &dir.path().join("store"),
            Default::default(),
        )
        .map_err(|e| Error::Io(e.to_string()))?;
        let faults = Faults::new(Arc::new(store));
        let storage: Arc<dyn Storage> = Arc::new(faults.clone());
        let clock = Clock::controllable();
        let config = apiforge_server::server::Config {
            bind_address: std::net::Ipv4Addr::LOCALHOST.into(),
            secure_port: 0,
            data_dir: dir.path().to_path_buf(),
            tls_cert_file: None,
            tls_private_key_file: None,
            tls_sni_cert_keys: Vec::new(),
            advertise_address: None,
            shutdown_delay: Duration::ZERO,
            storage_prefix: "/registry".into(),
            encryption: None,
            watch_cache: None,
            admission: Default::default(),
            // API Priority and Fairness off: its config producer is a
            // post-start hook of its own, and a test server has no load.
            filters: apiforge_server::filters::ChainConfig {
                enable_priority_and_fairness: false,
                ..Default::default()
            },
            authentication: Default::default(),
            authorization: Default::default(),
            identity_lease: Default::default(),
            clock: clock.clone(),
            controllers: Default::default(),
            audit: Default::default(),
            aggregator: Default::default(),
        };
        let version = VersionInfo {
            major: "1".into(),
            minor: "33".into(),
            git_version: "v1.33.0+apiforge-testing".into(),
            platform: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
            ..Default::default()
        };
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = shutdown_rx.await;
            };
            apiforge_server::server::run(
                config.complete(),
                scheme,
                docs,
                storage,
                version,
                shutdown,
            )
            .await
            .map_err(|e| e.to_string())
        });
        let mut server = TestServer {
            client: placeholder_client()?,
            config: None,
            kubeconfig: dir.path().join("admin.kubeconfig"),
            url: String::new(),
            faults,
            clock,
            startup: Duration::ZERO,
            shutdown: Some(shutdown_tx),
            task: Some(task),
            dir,
        };
        server.wait_ready(began).await?;
        server.startup = began.elapsed();
        Ok(server)
    }

    /// Waits for the kubeconfig, then for `/readyz`.
    async fn wait_ready(&mut self, began: Instant) -> Result<(), Error> {
        let mut last = String::from("no kubeconfig yet");
        while began.elapsed() < READY_TIMEOUT {
            if self.task.as_ref().is_some_and(|t| t.is_finished()) {
                let result = match self.task.take() {
                    Some(t) => t.await.map_err(|e| e.to_string()).and_then(|r| r),
                    None => Ok(()),
                };
                return Err(Error::Start(match result {
                    Ok(()) => "the server exited".into(),
                    Err(e) => e,
                }));
            }
            match self.try_ready().await {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(Error::Start(format!(
            "not ready after {READY_TIMEOUT:?}: {last}"
        )))
    }

    async fn try_ready(&mut self) -> Result<(), String> {
        if self.url.is_empty() {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(&self.kubeconfig).map_err(|e| e.to_string())?;
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let url = config.cluster_url.to_string();
            self.client = kube::Client::try_from(config.clone()).map_err(|e| e.to_string())?;
            self.config = Some(config);
            self.url = url.trim_end_matches('/').to_owned();
        }
        let req = http::Request::get("/readyz")
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let body = self
            .client
            .request_text(req)
            .await
            .map_err(|e| e.to_string())?;
        if body.trim() == "ok" {
            Ok(())
        } else {
            Err(body)
        }
    }

    /// An admin client (the server's admin token; trusts its CA).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// An admin client without kube-rs's default retries (of 429, 503 and
    /// 504 responses), to see injected failures as they are.
    pub fn client_without_retries(&self) -> kube::Client {
        match &self.config {
            Some(config) => {
                let mut config = config.clone();
                config.default_retry = false;
                kube::Client::try_from(config).unwrap_or_else(|_| self.client.clone())
            }
            None => self.client.clone(),
        }
    }

    /// The admin kubeconfig file (for kubectl or other clients).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The base URL, `https://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's data directory (store, certificates, credentials).
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// How long [`start`](Self::start) took, until `/readyz` answered.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The fault injection of this server's storage.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The clock of the server's lease controllers (see the module
    /// documentation): freeze it, step it.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Shuts the server down gracefully and waits for it to finish.
    pub async fn stop(mut self) -> Result<(), Error> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|e| Error::Start(e.to_string()))?
                .map_err(Error::Start),
            None => Ok(()),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // The graceful-shutdown signal; the task finishes on its own (or
        // with the test's runtime). The directory goes with `dir`.
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Where test servers keep their data: `APIFORGE_TESTING_TMPDIR`, else
/// `/dev/shm` when it is a writable directory (a tmpfs: the store's
/// commits need not reach a disk), else the system temporary directory.
fn temp_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("APIFORGE_TESTING_TMPDIR") {
        return dir.into();
    }
    let shm = Path::new("/dev/shm");
    let writable =
        shm.is_dir() && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly());
    if writable {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The scheme's OpenAPI and discovery documents, generated once per
/// process for each set of kinds (named by group, versions, kinds and
/// OpenAPI model names): the tests of one binary usually share a scheme,
/// and generating the documents is most of a debug build's start-up.
fn documents(scheme: &Scheme) -> Result<Documents, Error> {
    static CACHE: OnceLock<Mutex<HashMap<String, Documents>>> = OnceLock::new();
    let mut key = String::new();
    for group in scheme.groups() {
        key.push_str(group.name);
        key.push('|');
        key.push_str(&group.versions.join(","));
        for kind in &group.kinds {
            let info = kind.storage_info();
            key.push('|');
            key.push_str(info.kind);
            key.push(':');
            key.push_str(info.openapi_name);
            key.push(':');
            key.push_str(&kind.versions().len().to_string());
        }
        key.push('\n');
    }
    let cache = CACHE.get_or_init(Default::default);
    if let Some(docs) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(docs.clone());
    }
    let docs = Documents::from_scheme(scheme).map_err(|e| Error::Documents(e.to_string()))?;
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, docs.clone());
    Ok(docs)
}

/// A client for a cluster that does not exist yet, replaced once the
/// kubeconfig is written (`kube::Client` has no empty state).
fn placeholder_client() -> Result<kube::Client, Error> {
    let url = "https://127.0.0.1:1"
        .parse()
        .map_err(|e: http::uri::InvalidUri| Error::Client(e.to_string()))?;
    kube::Client::try_from(kube::Config::new(url)).map_err(|e| Error::Client(e.to_string()))
}

/// The HTTP status of an injected write failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteFault {
    /// `409 Conflict` (reason `Conflict`), as for a stale resource version.
    Conflict,
    /// `500 InternalError`.
    Internal,
    /// `503 ServiceUnavailable`, as when etcd is unreachable.
    Unavailable,
    /// `429 TooManyRequests` with `Retry-After: 1` and
    /// `details.retryAfterSeconds: 1`, as API Priority and Fairness rejects
    /// a request when its queues are full.
    TooManyRequests,
}

#[derive(Default)]
struct FaultState {
    /// Pending write failures: (key filter, fault), consumed in order.
    writes: Mutex<VecDeque<(String, WriteFault)>>,
    /// Watches from at or below this revision fail as compacted (0: none).
    expired_through: AtomicI64,
    /// Bumped by `drop_watches`; open watch streams end when it changes.
    generation: Option<tokio::sync::watch::Sender<u64>>,
}

/// Fault injection into a test server's storage (see the module
/// documentation). Cheap to clone; clones share the faults.
#[derive(Clone)]
pub struct Faults {
    inner: Arc<dyn Storage>,
    state: Arc<FaultState>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults").finish_non_exhaustive()
    }
}

impl Faults {
    fn new(inner: Arc<dyn Storage>) -> Faults {
        let (tx, _) = tokio::sync::watch::channel(0);
        Faults {
            inner,
            state: Arc::new(FaultState {
                generation: Some(tx),
                ..Default::default()
            }),
        }
    }

    /// The next `n` writes (create, update, delete) of storage keys
    /// containing `key_filter` fail with `fault`. Keys look like
    /// `/registry/<group>/<resource>/<namespace>/<name>`, e.g. filter
    /// `"bookstore.example.com/books/"`; an empty filter matches every
    /// write, the server's own (leases, bootstrap) included.
    pub fn fail_writes(&self, key_filter: &str, n: usize, fault: WriteFault) {
        let mut writes = self.state.writes.lock().unwrap_or_else(|e| e.into_inner());
        writes.extend(std::iter::repeat_n((key_filter.to_owned(), fault), n));
    }

    /// How many injected write failures are still pending.
    pub fn pending_write_faults(&self) -> usize {
        self.state
            .writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Every watch started from a resource version at or before the
    /// current one fails as expired: `410 Gone` for a watch request, an
    /// `ERROR` event with a `Status` of reason `Expired` for a
    /// list-then-watch, as after a compaction. Watches from newer resource
    /// versions (after a re-list) work. Already-open watches continue;
    /// combine with [`drop_watches`](Self::drop_watches) to make them
    /// re-watch.
    pub async fn expire_watches(&self) -> Result<(), apiforge_storage::Error> {
        let rev = self.inner.current_revision().await?;
        self.state.expired_through.fetch_max(rev, Ordering::SeqCst);
        Ok(())
    }

    /// Ends every open watch now, as when a server closes watches on
    /// restart or timeout; clients re-watch from their last resource
    /// version.
    pub fn drop_watches(&self) {
        if let Some(tx) = &self.state.generation {
            tx.send_modify(|g| *g += 1);
        }
    }

    fn write_fault(&self, key: &str) -> Option<apiforge_storage::Error> {
        let mut writes = self.state.writes.lock().unwrap_or_else(|e| e.into_inner());
        let pos = writes
            .iter()
            .position(|(filter, _)| key.contains(filter.as_str()))?;
        let (_, fault) = writes.remove(pos)?;
        Some(match fault {
            WriteFault::Conflict => apiforge_storage::Error::Conflict {
                key: key.to_owned(),
                message: "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again (injected)".into(),
            },
            WriteFault::Internal => {
                apiforge_storage::Error::Internal("injected internal error".into())
            }
            WriteFault::Unavailable => {
                apiforge_storage::Error::Unavailable("injected: storage unavailable".into())
            }
            WriteFault::TooManyRequests => apiforge_storage::Error::TooManyRequests(
                "Too many requests, please try again later. (injected)".into(),
            ),
        })
    }

    fn guard_watch(&self, start_revision: Revision) -> Result<(), apiforge_storage::Error> {
        let expired = self.state.expired_through.load(Ordering::SeqCst);
        if start_revision != 0 && start_revision <= expired {
            return Err(apiforge_storage::Error::Compacted {
                requested: start_revision,
                compacted: expired + 1,
            });
        }
        Ok(())
    }

    fn droppable(&self, stream: WatchStream) -> WatchStream {
        let Some(tx) = &self.state.generation else {
            return stream;
        };
        let mut rx = tx.subscribe();
        rx.mark_unchanged();
        Box::pin(stream.take_until(async move {
            let _ = rx.changed().await;
        }))
    }
}

#[async_trait::async_trait]
impl Storage for Faults {
    async fn create(&self, key: &str, value: Bytes) -> apiforge_storage::Result<KeyValue> {
        if let Some(e) = self.write_fault(key) {
            return Err(e);
        }
        self.inner.create(key, value).await
    }

    async fn get(
        &self,
        key: &str,
        revision: Revision,
    ) -> apiforge_storage::Result<Option<KeyValue>> {
        self.inner.get(key, revision).await
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> apiforge_storage::Result<ListResult> {
        self.inner.list(prefix, opts).await
    }

    async fn count(&self, prefix: &str) -> apiforge_storage::Result<i64> {
        self.inner.count(prefix).await
    }

    async fn update(
        &self,
        key: &str,
        expected_mod_revision: Revision,
        value: Bytes,
    ) -> apiforge_storage::Result<WriteOutcome> {
        if let Some(e) = self.write_fault(key) {
            return Err(e);
        }
        self.inner.update(key, expected_mod_revision, value).await
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> apiforge_storage::Result<WriteOutcome> {
        if let Some(e) = self.write_fault(key) {
            return Err(e);
        }
        self.inner.delete(key, expected_mod_revision).await
    }

    async fn watch(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> apiforge_storage::Result<WatchStream> {
        self.guard_watch(start_revision)?;
        let stream = self.inner.watch(prefix, start_revision, progress).await?;
        Ok(self.droppable(stream))
    }

    async fn watch_without_prev(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> apiforge_storage::Result<WatchStream> {
        self.guard_watch(start_revision)?;
        let stream = self
            .inner
            .watch_without_prev(prefix, start_revision, progress)
            .await?;
        Ok(self.droppable(stream))
    }

    async fn current_revision(&self) -> apiforge_storage::Result<Revision> {
        self.inner.current_revision().await
    }

    async fn compact(&self, revision: Revision) -> apiforge_storage::Result<()> {
        self.inner.compact(revision).await
    }

    async fn compacted_revision(&self) -> apiforge_storage::Result<Revision> {
        self.inner.compacted_revision().await
    }

    async fn request_progress(&self) -> apiforge_storage::Result<()> {
        self.inner.request_progress().await
    }

    async fn size_bytes(&self) -> apiforge_storage::Result<Option<(String, i64)>> {
        self.inner.size_bytes().await
    }

    async fn request_progress_for(&self, prefix: &str) -> apiforge_storage::Result<()> {
        self.inner.request_progress_for(prefix).await
    }

    fn watch_reconnecting(&self) -> bool {
        self.inner.watch_reconnecting()
    }

    fn snapshot(
        &self,
        dest: &Path,
    ) -> apiforge_storage::Result<apiforge_storage::embedded::snapshot::SnapshotInfo> {
        self.inner.snapshot(dest)
    }

    fn health_check_name(&self) -> &'static str {
        self.inner.health_check_name()
    }
}
