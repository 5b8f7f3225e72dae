//! The etcd v3 storage backend: [`Etcd3Store`] implements [`Storage`] on an
//! etcd cluster through the gRPC v3 API (crate `etcd-client`).
//!
//! # Keys and the `--etcd-prefix`
//!
//! The store uses the keys it is given **as-is**: the keys passed to the
//! [`Storage`] methods are already full keys such as
//! `/registry/wardle.example.com/flunders/default/x`, so the caller applies the
//! `--etcd-prefix` (kept in [`Etcd3Options::prefix`] and readable through
//! [`Etcd3Store::prefix`]) when it builds keys. The store never prepends or
//! strips anything, so what `etcdctl get --prefix /registry` shows is exactly
//! what the trait saw.
//!
//! # Operations
//!
//! - `create` is a transaction `create_revision(key) == 0 → put, else get`;
//! - `update` is `mod_revision(key) == expected ∧ version(key) > 0 → put (with
//!   prev_kv), else get`, so a missing key is a conflict even for
//!   `expected == 0`;
//! - `delete` with a precondition is `mod_revision == expected ∧ version > 0 →
//!   delete (with prev_kv), else get`; without one it is a plain delete with
//!   prev_kv;
//! - `get`/`list` are range reads at a revision, `list` over
//!   `[max(start_key, prefix), prefix_end)` with `more`/`remaining` from the
//!   range's `more`/`count`;
//! - `current_revision` is the header revision of a cheap, linearizable
//!   count-only read of one (absent) key;
//! - `compact` is a logical (non-physical) etcd compaction;
//! - `compacted_revision` is exact: etcd has no API returning it, so the store
//!   finds the smallest readable revision by binary search with count-only
//!   reads of one key (a read below the compaction fails with
//!   `ErrCompacted`), starting from the highest compaction it has seen itself
//!   (its own `compact` calls, `ErrCompacted` answers, watch
//!   `compact_revision`s). It costs one request when nothing was compacted
//!   since the last look, `O(log(current - last seen))` requests otherwise,
//!   and returns `0` when the cluster was never compacted.
//!
//! # Watches
//!
//! Every watch is one gRPC watch stream (with `prev_kv`, from
//! `start_revision + 1`) driven by a background task. It survives etcd
//! restarts and connection losses by re-creating itself from the last
//! delivered revision with backoff, so the consumer sees no gap and no
//! duplicate, and fails with [`Error::Compacted`] only when that revision was
//! compacted in the meantime. With `progress` it asks etcd for progress
//! notifications every [`Etcd3Options::progress_interval`] and on
//! [`Storage::request_progress`]; against etcd before 3.4.31 / 3.5.13, which
//! answers those prematurely for watchers still catching up
//! (etcd-io/etcd#15220), it only asks once the watcher has caught up and
//! confirms each answer with a second request (the `watch` submodule has the
//! details).
//!
//! # Several members
//!
//! Creates and updates are compare-and-swap transactions, so sending one
//! again cannot apply it twice: an attempt that fails for connection
//! reasons or takes longer than [`Etcd3Options::attempt_timeout`] (a leader
//! change holds it for etcd's own request timeout, 5 s + 2 election
//! timeouts) is sent again, and a failed compare that finds exactly the
//! bytes it was writing is the earlier attempt's success. Single-key reads
//! are sent again the same way. Deletes are sent again only when the
//! connection could not be opened (their second try could not tell its own
//! success from someone else's). With several endpoints a health task
//! takes members that do not answer out of the balancer (the `health`
//! submodule), and a watch whose progress requests go unanswered resumes
//! on another member.
//!
//! # Errors
//!
//! Connection failures (gRPC `Unavailable`, transport errors) map to
//! [`Error::Unavailable`], deadlines (the store's own
//! [`Etcd3Options::request_timeout`] and gRPC `DeadlineExceeded`) to
//! [`Error::Timeout`], `ErrCompacted`/`ErrFutureRev` to
//! [`Error::Compacted`]/[`Error::FutureRevision`], everything else to
//! [`Error::Internal`].

mod health;
mod watch;

#[cfg(test)]
mod tests;

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use etcd_client as etcd;
use tokio::time::Instant;

use super::{
    Error, KeyValue, ListOptions, ListResult, Result, Revision, Storage, WatchStream, WriteOutcome,
};

/// The default of `--etcd-prefix`.
pub const DEFAULT_PREFIX: &str = "/registry";

/// The largest gRPC message the store accepts from etcd (etcd itself sends up
/// to `math.MaxInt32`; tonic's default of 4 MiB is too small for big lists).
const MAX_DECODING_MESSAGE_SIZE: usize = i32::MAX as usize;

/// A key that is never written; reads of it are the cheapest way to learn the
/// current revision or whether a revision has been compacted.
const PROBE_KEY: &[u8] = b"\0apiforge-probe";

/// How to reach etcd: the `--etcd-*` flags of the server.
#[derive(Clone, Debug)]
pub struct Etcd3Options {
    /// Client URLs of the etcd members (`--etcd-servers`), e.g.
    /// `http://127.0.0.1:2379`. A URL without scheme gets `http://`, or
    /// `https://` when TLS files are given.
    pub endpoints: Vec<String>,
    /// The key prefix (`--etcd-prefix`, default [`DEFAULT_PREFIX`]). The store
    /// does **not** apply it: the keys given to [`Storage`] are full keys and
    /// the caller builds them with this prefix. It is kept here so that the
    /// server has one place for all etcd settings.
    pub prefix: String,
    /// CA bundle to verify the etcd server certificates (`--etcd-cafile`).
    /// Required for `https://` endpoints: the system trust store is not used.
    pub ca_file: Option<PathBuf>,
    /// Client certificate for mutual TLS (`--etcd-certfile`); needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// Private key of `cert_file` (`--etcd-keyfile`).
    pub key_file: Option<PathBuf>,
    /// How long [`Etcd3Store::connect`] keeps retrying (with backoff) until
    /// etcd answers before it gives up.
    pub startup_timeout: Duration,
    /// Timeout of establishing one TCP/TLS connection to a member.
    pub dial_timeout: Duration,
    /// Deadline of every single request (reads, writes, creating a watch);
    /// exceeding it gives [`Error::Timeout`].
    pub request_timeout: Duration,
    /// How long one attempt of a compare-and-swap write (create, update)
    /// or a single-key read may take before it is sent again, within
    /// `request_timeout` (from the fourth attempt on, twice as long as the
    /// one before, so that a merely slow request still completes). A write
    /// caught by an etcd leader change otherwise waits for etcd's own
    /// request timeout (5 s + 2 election timeouts); sent again, it either
    /// applies or finds its first attempt applied (see the module
    /// documentation). Lists and deletes are not sent again this way.
    pub attempt_timeout: Duration,
    /// How often each member is asked for its status when there are several
    /// (`None`: never). A member that does not answer within
    /// `attempt_timeout` gets no requests until it answers again, as
    /// etcd's own client balances only over members that are up.
    pub health_check_interval: Option<Duration>,
    /// How often a watch opened with `progress = true` asks etcd for a
    /// progress notification (`RequestProgress`). etcd's own
    /// `progress_notify` is also requested but only fires every ~10 minutes.
    pub progress_interval: Duration,
    /// How long a watch keeps trying to re-establish itself after losing its
    /// connection before it ends with [`Error::Unavailable`]; `None` retries
    /// until etcd is back or the stream is dropped.
    pub watch_retry_timeout: Option<Duration>,
}

impl Default for Etcd3Options {
    fn default() -> Self {
        Self {
            endpoints: vec!["http://127.0.0.1:2379".to_owned()],
            prefix: DEFAULT_PREFIX.to_owned(),
            ca_file: None,
            cert_file: None,
            key_file: None,
            startup_timeout: Duration::from_secs(60),
            dial_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            attempt_timeout: Duration::from_secs(1),
            health_check_interval: Some(Duration::from_millis(500)),
            progress_interval: Duration::from_secs(1),
            watch_retry_timeout: None,
        }
    }
}

impl Etcd3Options {
    /// Options for the endpoints of a `--etcd-servers` value (comma-separated
    /// URLs; blanks around the commas and empty entries are ignored), all other
    /// fields at their defaults.
    pub fn from_servers(servers: &str) -> Self {
        Self {
            endpoints: parse_servers(servers),
            ..Self::default()
        }
    }
}

/// Splits a `--etcd-servers` value into its URLs.
pub fn parse_servers(servers: &str) -> Vec<String> {
    servers
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The etcd v3 implementation of [`Storage`]. Cheap to clone (all clones share
/// one connection pool).
#[derive(Clone)]
pub struct Etcd3Store {
    inner: Arc<Inner>,
}

impl fmt::Debug for Etcd3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Etcd3Store")
            .field("endpoints", &self.inner.opts.endpoints)
            .field("prefix", &self.inner.opts.prefix)
            .field("server_version", &self.inner.server_version)
            .finish_non_exhaustive()
    }
}

/// State shared by the store and its watch tasks.
struct Inner {
    opts: Etcd3Options,
    client: etcd::Client,
    /// The etcd version reported at connect time.
    server_version: String,
    /// Whether that version sends requested progress notifications only for
    /// caught-up watchers (etcd ≥ 3.4.31 / 3.5.13); see the `watch` module.
    progress_is_ordered: bool,
    /// Highest compaction revision this store has seen (0: none).
    compacted: AtomicI64,
    /// Bumped by [`Storage::request_progress`]; every watch with `progress`
    /// asks etcd for a progress notification when it changes.
    progress_requests: tokio::sync::watch::Sender<u64>,
    /// The watches by prefix, for [`Storage::request_progress_for`]: each
    /// asks etcd for a progress notification when its `Notify` fires.
    progress_by_prefix: std::sync::Mutex<Vec<(String, std::sync::Weak<tokio::sync::Notify>)>>,
    /// How many watch tasks are re-establishing a broken watch
    /// ([`Storage::watch_reconnecting`]).
    reconnecting: AtomicUsize,
    /// The members the client sends requests to (all but those the health
    /// task took out).
    serving: std::sync::Mutex<Vec<String>>,
    /// Request attempts that took longer than the attempt timeout and were
    /// sent again ([`Etcd3Store::slow_attempts`]).
    slow_attempts: std::sync::atomic::AtomicU64,
}

impl Etcd3Store {
    /// Connects to etcd and waits until it answers a linearizable read.
    ///
    /// Retries with exponential backoff (100 ms doubling up to 2 s) until
    /// [`Etcd3Options::startup_timeout`], like kube-apiserver waiting for its
    /// storage at start-up, then fails with [`Error::Unavailable`] naming the
    /// endpoints and the last error. Configuration errors (no endpoints, bad
    /// URLs, unreadable or invalid TLS files, `https://` without a CA file)
    /// fail at once with [`Error::Internal`].
    pub async fn connect(opts: Etcd3Options) -> Result<Etcd3Store> {
        if opts.endpoints.is_empty() {
            return Err(Error::Internal(
                "no etcd endpoints given (--etcd-servers is empty)".to_owned(),
            ));
        }
        let connect_options = connect_options(&opts).await?;
        let endpoints = opts.endpoints.join(",");
        let deadline = Instant::now() + opts.startup_timeout;
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            // Building the client does not touch the network: an error here is
            // a configuration error and retrying cannot help.
            let client = etcd::Client::connect(&opts.endpoints, Some(connect_options.clone()))
                .await
                .map_err(|e| {
                    Error::Internal(format!(
                        "invalid etcd client configuration for {endpoints}: {}",
                        describe(&e)
                    ))
                })?;
            let budget = deadline
                .saturating_duration_since(Instant::now())
                .min(opts.request_timeout)
                .max(Duration::from_millis(100));
            let last_error = match tokio::time::timeout(budget, probe(client.clone())).await {
                Ok(Ok(version)) => {
                    tracing::info!(endpoints = %endpoints, version = %version, "connected to etcd");
                    let progress_is_ordered = progress_is_ordered(&version);
                    let health = opts
                        .health_check_interval
                        .filter(|_| opts.endpoints.len() > 1);
                    let probe_timeout = opts.attempt_timeout;
                    let opts_endpoints = opts.endpoints.clone();
                    let store = Etcd3Store {
                        inner: Arc::new(Inner {
                            opts,
                            client: client.clone(),
                            server_version: version,
                            progress_is_ordered,
                            compacted: AtomicI64::new(0),
                            progress_requests: tokio::sync::watch::Sender::new(0),
                            progress_by_prefix: std::sync::Mutex::new(Vec::new()),
                            reconnecting: AtomicUsize::new(0),
                            serving: std::sync::Mutex::new(opts_endpoints),
                            slow_attempts: std::sync::atomic::AtomicU64::new(0),
                        }),
                    };
                    if let Some(interval) = health {
                        health::spawn(
                            Arc::downgrade(&store.inner),
                            client,
                            &store.inner.opts.endpoints,
                            connect_options,
                            uses_tls(&store.inner.opts),
                            interval,
                            probe_timeout,
                        )
                        .await?;
                    }
                    return Ok(store);
                }
                Ok(Err(e)) => {
                    let text = describe(&e);
                    if let Some(refused) = tls_refusal(&opts, &text) {
                        // Waiting cannot fix a certificate.
                        return Err(Error::Internal(refused));
                    }
                    text
                }
                Err(_) => format!("no answer within {budget:?}"),
            };
            let wait = backoff.next_delay();
            if Instant::now() + wait >= deadline {
                return Err(Error::Unavailable(format!(
                    "cannot reach etcd at {endpoints} within {:?} ({attempts} attempts); last error: {last_error}",
                    opts.startup_timeout
                )));
            }
            tracing::warn!(endpoints = %endpoints, error = %last_error, retry_in = ?wait, "etcd is not reachable yet");
            tokio::time::sleep(wait).await;
        }
    }

    /// The `--etcd-prefix` this store was configured with. The store does not
    /// apply it; see the [module documentation](self).
    pub fn prefix(&self) -> &str {
        &self.inner.opts.prefix
    }

    /// The etcd server version reported when the store connected.
    pub fn server_version(&self) -> &str {
        &self.inner.server_version
    }

    /// How many request attempts took longer than
    /// [`Etcd3Options::attempt_timeout`] and were sent again since the
    /// store connected.
    pub fn slow_attempts(&self) -> u64 {
        self.inner.slow_attempts.load(Ordering::Relaxed)
    }

    /// The endpoints requests go to: every one given, except members the
    /// health checks found not answering (never all of them).
    pub fn serving_endpoints(&self) -> Vec<String> {
        self.inner
            .serving
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }
}

/// The start-up error for a TLS handshake with etcd that failed on a
/// certificate (which retrying cannot fix), naming the flag to check.
fn tls_refusal(opts: &Etcd3Options, error: &str) -> Option<String> {
    let path = |p: &Option<PathBuf>| {
        p.as_ref()
            .map_or_else(|| "(none)".to_owned(), |p| p.display().to_string())
    };
    if error.contains("invalid peer certificate") {
        Some(format!(
            "etcd's serving certificate is not trusted by --etcd-cafile {}: {error}",
            path(&opts.ca_file)
        ))
    } else if error.contains("received fatal alert") {
        Some(format!(
            "etcd refused the TLS handshake (check the client certificate, --etcd-certfile {} \
             and --etcd-keyfile {}): {error}",
            path(&opts.cert_file),
            path(&opts.key_file)
        ))
    } else {
        None
    }
}

/// Asks a member for its status (for the version) and makes a linearizable
/// read (proving the cluster has a leader and quorum); returns the version.
async fn probe(client: etcd::Client) -> std::result::Result<String, etcd::Error> {
    let mut maintenance = client.maintenance_client();
    let status = maintenance.status().await?;
    let mut kv = client.kv_client();
    kv.get(PROBE_KEY, Some(etcd::GetOptions::new().with_count_only()))
        .await?;
    Ok(status.version().to_owned())
}

/// Whether an etcd version answers `RequestProgress` only once the watchers
/// of the stream have caught up (etcd-io/etcd#15220, fixed together with
/// #17557 in 3.4.31 and 3.5.13, the versions Kubernetes requires for
/// consistent reads from its watch cache).
fn progress_is_ordered(version: &str) -> bool {
    let mut parts = version
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u64>().ok());
    let (Some(Some(major)), Some(Some(minor)), Some(Some(patch))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, m) => m >= 6,
        (m, _) => m > 3,
    }
}

/// Whether the store talks TLS to etcd (`https://` endpoints or TLS files).
fn uses_tls(opts: &Etcd3Options) -> bool {
    opts.endpoints.iter().any(|e| e.starts_with("https://"))
        || opts.ca_file.is_some()
        || opts.cert_file.is_some()
        || opts.key_file.is_some()
}

/// Builds the etcd client options (TLS, keep-alive, dial timeout).
async fn connect_options(opts: &Etcd3Options) -> Result<etcd::ConnectOptions> {
    let mut options = etcd::ConnectOptions::new()
        .with_connect_timeout(opts.dial_timeout)
        .with_keep_alive(Duration::from_secs(30), Duration::from_secs(10))
        .with_keep_alive_while_idle(true);
    if !uses_tls(opts) {
        return Ok(options);
    }
    let Some(ca_file) = &opts.ca_file else {
        return Err(Error::Internal(
            "TLS to etcd (https:// endpoints or --etcd-certfile/--etcd-keyfile) needs --etcd-cafile"
                .to_owned(),
        ));
    };
    let mut tls = etcd::TlsOptions::new().ca_certificate(etcd::Certificate::from_pem(
        read_file(ca_file, "--etcd-cafile").await?,
    ));
    match (&opts.cert_file, &opts.key_file) {
        (Some(cert), Some(key)) => {
            tls = tls.identity(etcd::Identity::from_pem(
                read_file(cert, "--etcd-certfile").await?,
                read_file(key, "--etcd-keyfile").await?,
            ));
        }
        (None, None) => {}
        _ => {
            return Err(Error::Internal(
                "--etcd-certfile and --etcd-keyfile must be given together".to_owned(),
            ));
        }
    }
    options = options.with_tls(tls);
    Ok(options)
}

async fn read_file(path: &PathBuf, flag: &str) -> Result<Vec<u8>> {
    tokio::fs::read(path)
        .await
        .map_err(|e| Error::Internal(format!("cannot read {flag} {}: {e}", path.display())))
}

/// Exponential backoff with a cap.
#[derive(Debug)]
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    fn new(first: Duration, max: Duration) -> Self {
        Self { next: first, max }
    }

    fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }
}

// ---------------------------------------------------------------------------
// Error mapping

/// `ErrCompacted` as etcd words it (gRPC code OutOfRange).
const MSG_COMPACTED: &str = "required revision has been compacted";
/// `ErrFutureRev` as etcd words it (gRPC code OutOfRange).
const MSG_FUTURE: &str = "required revision is a future revision";

/// gRPC status codes (numeric, so that the crate needs no direct tonic dependency).
mod code {
    pub(super) const CANCELLED: i32 = 1;
    pub(super) const UNKNOWN: i32 = 2;
    pub(super) const DEADLINE_EXCEEDED: i32 = 4;
    pub(super) const UNAVAILABLE: i32 = 14;
}

/// The text of an etcd client error with its sources (tonic's transport
/// errors keep the interesting part, e.g. "connection refused", in the source).
fn describe(e: &etcd::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    if let etcd::Error::TransportError(t) = e {
        source = std::error::Error::source(t);
    }
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

fn status_message(e: &etcd::Error) -> Option<&str> {
    match e {
        etcd::Error::GRpcStatus(s) => Some(s.message()),
        _ => None,
    }
}

fn is_compacted(e: &etcd::Error) -> bool {
    status_message(e).is_some_and(|m| m.contains(MSG_COMPACTED))
}

fn is_future(e: &etcd::Error) -> bool {
    status_message(e).is_some_and(|m| m.contains(MSG_FUTURE))
}

/// Maps an etcd client error onto the storage errors (without revision
/// context; see [`Inner::read_error`] for reads).
fn map_err(e: etcd::Error) -> Error {
    map_err_ref(&e)
}

fn map_err_ref(e: &etcd::Error) -> Error {
    let text = describe(e);
    match e {
        etcd::Error::GRpcStatus(s) => match i32::from(s.code()) {
            code::UNAVAILABLE | code::CANCELLED => Error::Unavailable(format!("etcd: {text}")),
            // tonic reports broken HTTP/2 connections (reset, closed, protocol
            // errors) as Unknown with the transport error as source; etcd's
            // own errors carry proper codes and no source.
            code::UNKNOWN if std::error::Error::source(s).is_some() => {
                Error::Unavailable(format!("etcd: {text}"))
            }
            code::DEADLINE_EXCEEDED => Error::Timeout(format!("etcd: {text}")),
            _ => Error::Internal(format!("etcd: {text}")),
        },
        etcd::Error::TransportError(_) | etcd::Error::IoError(_) => {
            Error::Unavailable(format!("etcd: {text}"))
        }
        // The watch request channel closed: the stream is gone.
        etcd::Error::WatchError(_) => Error::Unavailable(format!("etcd: {text}")),
        _ => Error::Internal(format!("etcd: {text}")),
    }
}

/// Whether an error is worth retrying (the connection, not the request, failed).
fn is_transient(e: &Error) -> bool {
    matches!(e, Error::Unavailable(_) | Error::Timeout(_))
}

/// The time the next attempt of a request gets after `slow` attempts (this
/// one included) took too long: the same three times, then twice as long
/// each time, so that a request that is merely slow still completes.
fn next_attempt(attempt: Duration, slow: &mut u32) -> Duration {
    *slow += 1;
    if *slow >= 3 { attempt * 2 } else { attempt }
}

/// Which failed requests may be sent again.
#[derive(Clone, Copy, Debug)]
enum Retry {
    /// Small reads (one key, a count): whenever the failure was the
    /// connection's, and when an attempt takes longer than
    /// [`Etcd3Options::attempt_timeout`] (a stopped member).
    Read,
    /// Lists, which may take long: whenever the failure was the
    /// connection's.
    List,
    /// Writes: only when the request cannot have reached etcd.
    Write,
}

impl Retry {
    fn allows(self, e: &etcd::Error) -> bool {
        match self {
            Retry::Read | Retry::List => is_transient(&map_err_ref(e)),
            // tonic's wording for a failed TCP connect (the request was never sent).
            Retry::Write => describe(e).contains("tcp connect error"),
        }
    }
}

// ---------------------------------------------------------------------------
// Conversions

fn convert_kv(kv: etcd::KeyValue) -> Result<KeyValue> {
    let create_revision = kv.create_revision();
    let mod_revision = kv.mod_revision();
    let version = kv.version();
    let (key, value) = kv.into_key_value();
    let key = String::from_utf8(key).map_err(|e| {
        Error::Internal(format!(
            "etcd returned a key that is not UTF-8: {:?}",
            String::from_utf8_lossy(e.as_bytes())
        ))
    })?;
    Ok(KeyValue {
        key,
        value: Bytes::from(value),
        create_revision,
        mod_revision,
        version,
        stale: false,
    })
}

fn header_revision(header: Option<&etcd::ResponseHeader>, what: &str) -> Result<Revision> {
    header
        .map(etcd::ResponseHeader::revision)
        .ok_or_else(|| Error::Internal(format!("etcd {what} response without header")))
}

/// The end of the range of all keys starting with `prefix` (etcd's
/// `GetPrefix`): the prefix with its last byte below 0xff incremented and the
/// rest cut; `"\0"` (no end) when there is none.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// The `[key, range_end)` of a prefix; the empty prefix means every key.
fn prefix_range(prefix: &str) -> (Vec<u8>, Vec<u8>) {
    if prefix.is_empty() {
        (vec![0], vec![0])
    } else {
        (prefix.as_bytes().to_vec(), prefix_end(prefix.as_bytes()))
    }
}

/// The state of the single key read by the `else` branch of a transaction.
fn txn_get_result(resp: &etcd::TxnResponse) -> Result<Option<KeyValue>> {
    for op in resp.op_responses() {
        if let etcd::TxnOpResponse::Get(mut get) = op {
            return get
                .take_kvs()
                .into_iter()
                .next()
                .map(convert_kv)
                .transpose();
        }
    }
    Err(Error::Internal(
        "etcd transaction response lacks its range result".to_owned(),
    ))
}

/// The previous key-value of the single put or delete of a transaction.
fn txn_prev_kv(resp: &etcd::TxnResponse) -> Result<Option<KeyValue>> {
    for op in resp.op_responses() {
        match op {
            etcd::TxnOpResponse::Put(mut put) => {
                return put.take_prev_key().map(convert_kv).transpose();
            }
            etcd::TxnOpResponse::Delete(mut del) => {
                return del
                    .take_prev_kvs()
                    .into_iter()
                    .next()
                    .map(convert_kv)
                    .transpose();
            }
            _ => {}
        }
    }
    Err(Error::Internal(
        "etcd transaction response lacks its write result".to_owned(),
    ))
}

// ---------------------------------------------------------------------------
// Requests

impl Inner {
    fn kv(&self) -> etcd::KvClient {
        self.client
            .kv_client()
            .max_decoding_message_size(MAX_DECODING_MESSAGE_SIZE)
    }

    /// Runs one KV request within the request timeout; errors stay etcd
    /// errors so that callers can look for `ErrCompacted`/`ErrFutureRev`.
    ///
    /// With several endpoints a request that failed for connection reasons is
    /// tried again (each try may pick another member), up to once per
    /// endpoint: reads whenever etcd was unavailable, writes only when the
    /// connection could not even be opened (so they cannot have been applied).
    async fn call<T, Fut>(
        &self,
        what: &str,
        retry: Retry,
        mut op: impl FnMut(etcd::KvClient) -> Fut,
    ) -> Result<std::result::Result<T, etcd::Error>>
    where
        Fut: Future<Output = std::result::Result<T, etcd::Error>>,
    {
        let deadline = Instant::now() + self.opts.request_timeout;
        let tries = match self.opts.endpoints.len() {
            0 | 1 => 1,
            n => n + 1,
        };
        let mut tried = 0;
        let mut attempt = self.opts.attempt_timeout;
        let mut slow = 0;
        loop {
            tried += 1;
            let attempt_deadline = match retry {
                Retry::Read => (Instant::now() + attempt).min(deadline),
                Retry::List | Retry::Write => deadline,
            };
            let Ok(result) = tokio::time::timeout_at(attempt_deadline, op(self.kv())).await else {
                if attempt_deadline < deadline {
                    tracing::debug!("etcd {what} did not answer within {attempt:?}; trying again");
                    tried -= 1;
                    self.slow_attempts.fetch_add(1, Ordering::Relaxed);
                    attempt = next_attempt(attempt, &mut slow);
                    continue;
                }
                return Err(Error::Timeout(format!(
                    "etcd {what} did not answer within {:?}",
                    self.opts.request_timeout
                )));
            };
            match result {
                Err(e) if tried < tries && retry.allows(&e) => {
                    tracing::debug!(error = %describe(&e), "etcd {what} failed; trying again");
                }
                other => return Ok(other),
            }
        }
    }

    /// Runs a compare-and-swap transaction (a create or an update: applying
    /// it twice is the same as once, because the second compare fails),
    /// sending it again when an attempt fails for connection reasons or
    /// takes longer than [`Etcd3Options::attempt_timeout`] — a leader
    /// change otherwise holds it for etcd's own request timeout — up to
    /// once per endpoint plus one, within the request timeout.
    ///
    /// Returns the response and whether an earlier attempt may have been
    /// applied without its answer arriving: then a failed compare may be
    /// that attempt's doing, which the caller recognises by the value.
    async fn cas(&self, what: &str, txn: &etcd::Txn) -> Result<(etcd::TxnResponse, bool)> {
        let deadline = Instant::now() + self.opts.request_timeout;
        let tries = self.opts.endpoints.len() + 1;
        let mut failed = 0;
        let mut ambiguous = false;
        let mut attempt = self.opts.attempt_timeout;
        let mut slow = 0;
        let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_millis(500));
        loop {
            let attempt_deadline = (Instant::now() + attempt).min(deadline);
            let wait = match tokio::time::timeout_at(attempt_deadline, self.kv().txn(txn.clone()))
                .await
            {
                Ok(Ok(resp)) => return Ok((resp, ambiguous)),
                Ok(Err(e)) => {
                    let error = map_err_ref(&e);
                    failed += 1;
                    if !is_transient(&error) || failed >= tries {
                        return Err(error);
                    }
                    // Unless the connection could not even be opened, the
                    // request may have reached etcd.
                    ambiguous |= !Retry::Write.allows(&e);
                    let wait = backoff.next_delay();
                    if Instant::now() + wait >= deadline {
                        return Err(error);
                    }
                    tracing::debug!(error = %error, "etcd {what} failed; trying again");
                    wait
                }
                Err(_) if attempt_deadline < deadline => {
                    ambiguous = true;
                    tracing::debug!("etcd {what} did not answer within {attempt:?}; trying again");
                    self.slow_attempts.fetch_add(1, Ordering::Relaxed);
                    attempt = next_attempt(attempt, &mut slow);
                    Duration::ZERO
                }
                Err(_) => {
                    return Err(Error::Timeout(format!(
                        "etcd {what} did not answer within {:?}",
                        self.opts.request_timeout
                    )));
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Like [`Inner::call`], mapping errors without revision context.
    async fn request<T, Fut>(
        &self,
        what: &str,
        retry: Retry,
        op: impl FnMut(etcd::KvClient) -> Fut,
    ) -> Result<T>
    where
        Fut: Future<Output = std::result::Result<T, etcd::Error>>,
    {
        self.call(what, retry, op).await?.map_err(map_err)
    }

    fn note_compacted(&self, revision: Revision) {
        self.compacted.fetch_max(revision, Ordering::Relaxed);
    }

    /// The error of a read at `requested` that etcd refused.
    async fn read_error(&self, e: etcd::Error, requested: Revision) -> Error {
        if is_compacted(&e) {
            // `requested` is below the compaction, so the compaction is at
            // least `requested + 1`.
            self.note_compacted(requested + 1);
            let compacted = self
                .find_compacted()
                .await
                .unwrap_or_else(|_| self.compacted.load(Ordering::Relaxed));
            Error::Compacted {
                requested,
                compacted,
            }
        } else if is_future(&e) {
            let current = self.current_revision().await.unwrap_or(0);
            Error::FutureRevision { requested, current }
        } else {
            map_err(e)
        }
    }

    async fn current_revision(&self) -> Result<Revision> {
        let opts = etcd::GetOptions::new().with_count_only();
        let resp = self
            .request("read", Retry::Read, |mut kv| {
                let opts = opts.clone();
                async move { kv.get(PROBE_KEY, Some(opts)).await }
            })
            .await?;
        header_revision(resp.header(), "range")
    }

    /// Whether `revision` is still readable (not compacted).
    async fn readable(&self, revision: Revision) -> Result<bool> {
        let opts = etcd::GetOptions::new()
            .with_count_only()
            .with_revision(revision);
        let result = self
            .call("read", Retry::Read, |mut kv| {
                let opts = opts.clone();
                async move { kv.get(PROBE_KEY, Some(opts)).await }
            })
            .await?;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_compacted(&e) => Ok(false),
            Err(e) => Err(map_err(e)),
        }
    }

    /// The exact compaction revision: the smallest readable revision, found by
    /// binary search above the highest compaction seen so far (0 when the
    /// cluster was never compacted).
    async fn find_compacted(&self) -> Result<Revision> {
        let known = self.compacted.load(Ordering::Relaxed);
        let floor = known.max(1);
        if self.readable(floor).await? {
            // Nothing (more) was compacted since the last look.
            return Ok(known);
        }
        // `floor` is compacted; the current revision is always readable.
        let (mut lo, mut hi) = (floor, self.current_revision().await?);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.readable(mid).await? {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        self.note_compacted(hi);
        Ok(self.compacted.load(Ordering::Relaxed))
    }
}

#[async_trait::async_trait]
impl Storage for Etcd3Store {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let inner = &self.inner;
        let txn = etcd::Txn::new()
            .when([etcd::Compare::create_revision(
                key,
                etcd::CompareOp::Equal,
                0,
            )])
            .and_then([etcd::TxnOp::put(key, value.to_vec(), None)])
            .or_else([etcd::TxnOp::get(key, None)]);
        let (resp, ambiguous) = inner.cas("create", &txn).await?;
        if !resp.succeeded() {
            // An earlier attempt may have created it: the same bytes (an
            // object's uid makes them unique) are this create's own.
            return match txn_get_result(&resp)? {
                Some(current) if ambiguous && current.value == value => Ok(current),
                _ => Err(Error::AlreadyExists(key.to_owned())),
            };
        }
        let revision = header_revision(resp.header(), "txn")?;
        Ok(KeyValue {
            key: key.to_owned(),
            value,
            create_revision: revision,
            mod_revision: revision,
            version: 1,
            stale: false,
        })
    }

    async fn get(&self, key: &str, revision: Revision) -> Result<Option<KeyValue>> {
        let inner = &self.inner;
        let opts = etcd::GetOptions::new().with_revision(revision.max(0));
        let result = inner
            .call("get", Retry::Read, |mut kv| {
                let opts = opts.clone();
                async move { kv.get(key, Some(opts)).await }
            })
            .await?;
        match result {
            Ok(mut resp) => resp
                .take_kvs()
                .into_iter()
                .next()
                .map(convert_kv)
                .transpose(),
            Err(e) => Err(inner.read_error(e, revision).await),
        }
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        let inner = &self.inner;
        let (prefix_key, range_end) = prefix_range(prefix);
        let start = match opts.start_key {
            Some(start) if start.as_bytes() > prefix_key.as_slice() => start.into_bytes(),
            _ => prefix_key,
        };
        let limit = i64::try_from(opts.limit).unwrap_or(i64::MAX);
        let get_opts = etcd::GetOptions::new()
            .with_range(range_end)
            .with_revision(opts.revision.max(0))
            .with_limit(limit);
        let result = inner
            .call("list", Retry::List, |mut kv| {
                let (start, get_opts) = (start.clone(), get_opts.clone());
                async move { kv.get(start, Some(get_opts)).await }
            })
            .await?;
        let mut resp = match result {
            Ok(resp) => resp,
            Err(e) => return Err(inner.read_error(e, opts.revision).await),
        };
        let revision = if opts.revision > 0 {
            opts.revision
        } else {
            header_revision(resp.header(), "range")?
        };
        let more = resp.more();
        let count = resp.count();
        let items = resp
            .take_kvs()
            .into_iter()
            .map(convert_kv)
            .collect::<Result<Vec<_>>>()?;
        let returned = i64::try_from(items.len()).unwrap_or(i64::MAX);
        let remaining = if more {
            count.saturating_sub(returned).max(0)
        } else {
            0
        };
        Ok(ListResult {
            items,
            revision,
            more,
            remaining,
        })
    }

    async fn count(&self, prefix: &str) -> Result<i64> {
        let inner = &self.inner;
        let (key, range_end) = prefix_range(prefix);
        let opts = etcd::GetOptions::new()
            .with_range(range_end)
            .with_count_only();
        let resp = inner
            .request("count", Retry::Read, |mut kv| {
                let (key, opts) = (key.clone(), opts.clone());
                async move { kv.get(key, Some(opts)).await }
            })
            .await?;
        Ok(resp.count())
    }

    async fn update(
        &self,
        key: &str,
        expected_mod_revision: Revision,
        value: Bytes,
    ) -> Result<WriteOutcome> {
        let inner = &self.inner;
        // Like kube-apiserver's guaranteed update: one compare of the mod
        // revision (a key that does not exist has mod revision 0, so a
        // positive one also says it exists) and a plain put. Every compare
        // and a `prev_kv` put cost etcd a range read in its serialized
        // apply loop.
        let mut when = vec![etcd::Compare::mod_revision(
            key,
            etcd::CompareOp::Equal,
            expected_mod_revision,
        )];
        if expected_mod_revision <= 0 {
            when.push(etcd::Compare::version(key, etcd::CompareOp::Greater, 0));
        }
        let txn = etcd::Txn::new()
            .when(when)
            .and_then([etcd::TxnOp::put(key, value.to_vec(), None)])
            .or_else([etcd::TxnOp::get(key, None)]);
        let (resp, ambiguous) = inner.cas("update", &txn).await?;
        if !resp.succeeded() {
            // An earlier attempt may have written it: the key holding
            // exactly these bytes at a later revision is this update done.
            return Ok(match txn_get_result(&resp)? {
                Some(current)
                    if ambiguous
                        && current.mod_revision > expected_mod_revision
                        && current.value == value =>
                {
                    WriteOutcome::Done(current)
                }
                current => WriteOutcome::Conflict(current),
            });
        }
        let revision = header_revision(resp.header(), "txn")?;
        Ok(WriteOutcome::Done(KeyValue {
            key: key.to_owned(),
            value,
            create_revision: 0,
            mod_revision: revision,
            version: 0,
            stale: false,
        }))
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<WriteOutcome> {
        let inner = &self.inner;
        let delete = etcd::TxnOp::delete(key, Some(etcd::DeleteOptions::new().with_prev_key()));
        let txn = match expected_mod_revision {
            Some(expected) => etcd::Txn::new().when([
                etcd::Compare::mod_revision(key, etcd::CompareOp::Equal, expected),
                etcd::Compare::version(key, etcd::CompareOp::Greater, 0),
            ]),
            None => {
                etcd::Txn::new().when([etcd::Compare::version(key, etcd::CompareOp::Greater, 0)])
            }
        }
        .and_then([delete])
        .or_else([etcd::TxnOp::get(key, None)]);
        let resp = inner
            .request("delete", Retry::Write, |mut kv| {
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            })
            .await?;
        if !resp.succeeded() {
            return match txn_get_result(&resp)? {
                None => Err(Error::NotFound(key.to_owned())),
                Some(current) => Ok(WriteOutcome::Conflict(Some(current))),
            };
        }
        let revision = header_revision(resp.header(), "txn")?;
        let mut prev = txn_prev_kv(&resp)?.ok_or_else(|| {
            Error::Internal(format!("etcd delete of {key} returned no previous value"))
        })?;
        prev.mod_revision = revision;
        Ok(WriteOutcome::Done(prev))
    }

    async fn watch(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> Result<WatchStream> {
        watch::start(self.inner.clone(), prefix, start_revision, progress, true).await
    }

    async fn watch_without_prev(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> Result<WatchStream> {
        watch::start(self.inner.clone(), prefix, start_revision, progress, false).await
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let inner = &self.inner;
        let result = inner
            .call("compact", Retry::Write, |mut kv| async move {
                kv.compact(revision, None).await
            })
            .await?;
        match result {
            Ok(_) => {
                inner.note_compacted(revision);
                Ok(())
            }
            // Already compacted at or beyond `revision`: nothing to do.
            Err(e) if is_compacted(&e) => Ok(()),
            Err(e) => Err(inner.read_error(e, revision).await),
        }
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        self.inner.find_compacted().await
    }

    async fn request_progress(&self) -> Result<()> {
        self.inner
            .progress_requests
            .send_modify(|n| *n = n.wrapping_add(1));
        Ok(())
    }

    /// etcd's `dbSize` and cluster id, from a member's status.
    async fn size_bytes(&self) -> Result<Option<(String, i64)>> {
        let mut maintenance = self.inner.client.maintenance_client();
        let status = maintenance
            .status()
            .await
            .map_err(|e| Error::Unavailable(e.to_string()))?;
        let id = status
            .header()
            .map(|h| format!("{:x}", h.cluster_id()))
            .unwrap_or_default();
        Ok(Some((id, status.db_size())))
    }

    async fn request_progress_for(&self, prefix: &str) -> Result<()> {
        let asked = match self.inner.progress_by_prefix.lock() {
            Ok(mut watches) => {
                watches.retain(|(_, w)| w.strong_count() > 0);
                let mut asked = false;
                for (_, notify) in watches.iter().filter(|(p, _)| p == prefix) {
                    if let Some(notify) = notify.upgrade() {
                        notify.notify_one();
                        asked = true;
                    }
                }
                asked
            }
            Err(_) => false,
        };
        if !asked {
            self.request_progress().await?;
        }
        Ok(())
    }

    fn watch_reconnecting(&self) -> bool {
        self.inner.reconnecting.load(Ordering::Relaxed) > 0
    }
}
