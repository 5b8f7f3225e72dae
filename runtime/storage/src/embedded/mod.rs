//! The embedded storage backend: a durable, etcd-like MVCC key-value store on
//! [redb](https://docs.rs/redb).
//!
//! # Why redb
//!
//! redb is a pure-Rust embedded database (no C library, no C toolchain in
//! the build), it is ACID with copy-on-write B-trees and fsync'd commits, its
//! MVCC read transactions see a consistent snapshot and never block the
//! single writer (nor are they blocked by it), and it is actively maintained
//! with a stable file format. That is the shape bbolt gives etcd, so etcd's
//! design carries over almost one to one.
//!
//! # On-disk layout
//!
//! The data directory holds two files:
//!
//! - `LOCK`: an empty-ish file (it contains the owner's pid, for humans)
//!   that the store holds an exclusive advisory lock on
//!   ([`std::fs::File::try_lock`]) for as long as it is open. A second
//!   [`EmbeddedStore::open`] of the same directory, in this process or
//!   another, fails with [`Error::Unavailable`].
//! - `store.redb`: the redb database, with four tables:
//!
//! | table     | key                | value                                                        |
//! |-----------|--------------------|--------------------------------------------------------------|
//! | `kv`      | key (`&str`)       | the current state: `create_revision`, `mod_revision`, `version`, value |
//! | `log`     | revision (`i64`)   | the event of that revision: kind, key, new state, previous state |
//! | `history` | `(key, revision)`  | `()`: an index of `log` by key, for reads of one key at a past revision |
//! | `meta`    | name (`&str`)      | `i64`: `current_revision`, `compacted_revision`, `format_version` |
//!
//! Every successful write (create, update, delete) takes the next global
//! revision and, in one redb transaction, updates `kv`, appends its event to
//! `log` (with the previous state of the key, etcd's `prev_kv`) and indexes it
//! in `history`. Record encodings are described in the private `codec`
//! module.
//!
//! # Reads at a past revision
//!
//! The state at revision `R` is the current state with every `log` entry
//! after `R` undone: the first event of a key after `R` carries the key's
//! state at `R` as its previous state (or none, for a create). A `get` at `R`
//! finds that event through the `history` index; a `list` at `R` scans the
//! log entries in `(R, current]` under the prefix and merges the undone keys
//! with the current `kv` range. Reads are served from redb read transactions
//! (consistent snapshots) on Tokio's blocking pool.
//!
//! # Writes and group commit
//!
//! All writes go through one dedicated writer thread. It drains every pending
//! request (up to [`EmbeddedOptions::max_batch`]), applies them in order in
//! one redb write transaction (each still gets its own revision and its own
//! success or conflict answer), commits once with
//! [`redb::Durability::Immediate`] (fsync), then publishes the events to the
//! live watchers and answers the requests. A write is acknowledged only after
//! its commit is durable; N concurrent writers share one fsync.
//!
//! # Watches
//!
//! A watch first replays the `log` from its start revision in bounded
//! chunks, then registers with the in-memory fan-out, replays the few events
//! committed in between, and switches to live events, skipping any revision
//! it already delivered. Each watcher has a bounded queue
//! ([`EmbeddedOptions::watch_buffer`]); a watcher that lets it fill up is
//! dropped from the fan-out and ends with [`Error::WatcherTooSlow`].
//!
//! # Durability and shutdown
//!
//! An acknowledged write has been fsync'd and survives a crash (SIGKILL,
//! power loss); an unacknowledged one is, after a restart, either entirely
//! there or absent, since it lives in exactly one redb transaction. The
//! revision counters are stored in the same transactions, so a reopened
//! store continues where it stopped. Dropping the last clone of the store (or
//! [`EmbeddedStore::close`]) lets the writer thread finish the queued
//! requests, joins it, ends all watch streams and closes the database, which
//! releases the directory lock.
//!
//! # Compaction
//!
//! [`Storage::compact`] records the compacted revision (reads and watches
//! before it then fail with [`Error::Compacted`]); the writer thread deletes
//! the `log`/`history` entries at or below it in small steps, piggybacked on
//! write batches and whenever it is idle, so a large compaction never stalls
//! writes. An automatic compactor (see [`EmbeddedStore::start_compactor`])
//! keeps the history of the last [`EmbeddedOptions::compaction_interval`]
//! and at least [`EmbeddedOptions::min_retained_revisions`] revisions.

mod codec;
mod read;
pub mod snapshot;
mod watch;
mod writer;

#[cfg(test)]
mod tests;

use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::{mpsc, oneshot};

use super::{
    Error, KeyValue, ListOptions, ListResult, Result, Revision, Storage, WatchStream, WriteOutcome,
};
use watch::Registry;
use writer::{Op, Reply, Request};

/// Current state: key → encoded (create_revision, mod_revision, version, value).
const KV: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");
/// Change log: revision → encoded event (with the previous state).
const LOG: TableDefinition<i64, &[u8]> = TableDefinition::new("log");
/// Index of the log by key: (key, revision) → ().
const HISTORY: TableDefinition<(&str, i64), ()> = TableDefinition::new("history");
/// Counters: name → value.
const META: TableDefinition<&str, i64> = TableDefinition::new("meta");

const META_CURRENT: &str = "current_revision";
const META_COMPACTED: &str = "compacted_revision";
const META_FORMAT: &str = "format_version";
const FORMAT_VERSION: i64 = 1;

const DB_FILE: &str = "store.redb";
const LOCK_FILE: &str = "LOCK";

/// Tuning knobs of an [`EmbeddedStore`].
#[derive(Clone, Debug)]
pub struct EmbeddedOptions {
    /// How often the automatic compactor runs, and how much history (in
    /// time) it keeps: each run compacts to the revision that was current one
    /// interval earlier. `Duration::ZERO` disables the automatic compactor.
    /// Default: 5 minutes.
    pub compaction_interval: Duration,
    /// The automatic compactor always keeps at least this many of the latest
    /// revisions. Default: 1000.
    pub min_retained_revisions: i64,
    /// How long a watch with `progress` set must be idle before it sends a
    /// [`WatchItem::Progress`](super::WatchItem::Progress). Default: 1 second.
    pub progress_interval: Duration,
    /// How many events a watcher may have queued before it is closed with
    /// [`Error::WatcherTooSlow`]. Default: 4096.
    pub watch_buffer: usize,
    /// At most this many write requests share one commit. Default: 1024.
    pub max_batch: usize,
    /// The largest accepted key plus value, in bytes; larger writes fail with
    /// [`Error::Internal`]. Default: 16 MiB.
    pub max_value_bytes: usize,
    /// Memory redb may use for its page cache (read cache and write
    /// buffer), in bytes. Default: 32 MiB: hot objects are served from the
    /// watch cache, so the store is read mostly at start-up (one scan), for
    /// watch replays and for the current state of a guaranteed update; a
    /// large page cache would only duplicate the watch cache (redb keeps
    /// every page a write touched until the cache is full).
    pub cache_size: usize,
    /// A commit records redb's allocator state (*quick repair*, one more
    /// `fsync`) when the writer was idle at least this long before it, and
    /// an idle writer records it this long after a commit that did not. A
    /// crash then needs no walk of the whole database on the next start
    /// (redb's full repair, linear in its size) unless it came under
    /// sustained writes. Default: 10 ms.
    pub quick_repair_idle: Duration,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            compaction_interval: Duration::from_secs(5 * 60),
            min_retained_revisions: 1000,
            progress_interval: Duration::from_secs(1),
            watch_buffer: 4096,
            max_batch: 1024,
            max_value_bytes: 16 << 20,
            cache_size: 32 << 20,
            quick_repair_idle: Duration::from_millis(10),
        }
    }
}

/// Maps any redb error onto the storage errors: I/O trouble is
/// [`Error::Unavailable`], anything else [`Error::Internal`].
fn db_err(e: impl Into<redb::Error>) -> Error {
    let e: redb::Error = e.into();
    match e {
        redb::Error::Io(_)
        | redb::Error::PreviousIo
        | redb::Error::DatabaseClosed
        | redb::Error::DatabaseAlreadyOpen => Error::Unavailable(format!("embedded store: {e}")),
        other => Error::Internal(format!("embedded store: {other}")),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn closed() -> Error {
    Error::Unavailable("the embedded store is closed".into())
}

/// The open database together with the directory lock. The database is
/// closed (dropped) before the lock file is released: fields drop in order.
struct DbHandle {
    db: Database,
    _lock: File,
}

/// State shared by the store, the writer thread and the watch streams.
struct Shared {
    /// The latest committed (durable) revision.
    committed: AtomicI64,
    /// The compacted revision (as of the latest commit).
    compacted: AtomicI64,
    /// Number of write transactions committed (for tests and metrics).
    commits: AtomicU64,
    /// The live watchers and the revision published to them.
    registry: Mutex<Registry>,
    /// Wakes idle progress-enabled watchers so that they report progress
    /// now (see [`Storage::request_progress`]).
    progress_requested: tokio::sync::Notify,
    /// Test hook: while set, the writer waits before draining a batch.
    #[cfg(test)]
    pause: std::sync::atomic::AtomicBool,
    /// Test hook: a replaying watch waits this long (ms) before it joins the
    /// live fan-out, to widen the handover window.
    #[cfg(test)]
    register_delay_ms: AtomicU64,
}

struct Inner {
    dir: PathBuf,
    opts: EmbeddedOptions,
    /// The open database; the writer replaces it when it reopens the
    /// database after an I/O error.
    db: Arc<Mutex<Option<Arc<DbHandle>>>>,
    tx: Mutex<Option<mpsc::Sender<Request>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    compactor: Mutex<Option<tokio::task::JoinHandle<()>>>,
    shared: Arc<Shared>,
}

/// The embedded, durable MVCC store (see the [module docs](self)).
///
/// Cheap to clone: clones share one store. The store closes when the last
/// clone is dropped or on [`EmbeddedStore::close`].
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("dir", &self.inner.dir)
            .field(
                "current_revision",
                &self.inner.shared.committed.load(Ordering::Acquire),
            )
            .finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// Opens (creating it if needed) the store in the data directory `dir`.
    ///
    /// This is a synchronous call (it does file I/O and may run redb's crash
    /// recovery); call it at startup or from `spawn_blocking`. It creates
    /// `dir`, takes the exclusive directory lock (failing with
    /// [`Error::Unavailable`] when another store holds it), opens or creates
    /// the database, and starts the writer thread. When called inside a Tokio
    /// runtime it also starts the automatic compactor (see
    /// [`EmbeddedStore::start_compactor`]); outside one, call that method
    /// later from within a runtime.
    pub fn open(dir: &Path, opts: EmbeddedOptions) -> Result<EmbeddedStore> {
        private_dir(dir)?;
        let lock_path = dir.join(LOCK_FILE);
        let mut lock_file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| {
                Error::Unavailable(format!(
                    "cannot open lock file {}: {e}",
                    lock_path.display()
                ))
            })?;
        match lock_file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Unavailable(format!(
                    "data directory {} is locked by another process (or another store in this process)",
                    dir.display()
                )));
            }
            Err(TryLockError::Error(e)) => {
                return Err(Error::Unavailable(format!(
                    "cannot lock data directory {}: {e}",
                    dir.display()
                )));
            }
        }
        // Best effort: the pid helps a human find the owner.
        if lock_file.set_len(0).is_ok() {
            let _ = writeln!(lock_file, "{}", std::process::id());
            let _ = lock_file.flush();
        }

        let db_path = dir.join(DB_FILE);
        private_file(&db_path)?;
        let opened = std::time::Instant::now();
        let repaired = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let db = redb::Builder::new()
            .set_cache_size(opts.cache_size)
            .set_repair_callback({
                let repaired = Arc::clone(&repaired);
                move |_| repaired.store(true, Ordering::Relaxed)
            })
            .create(&db_path)
            .map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => Error::Unavailable(format!(
                    "database {} is already open in another process",
                    db_path.display()
                )),
                other => Error::Unavailable(format!(
                    "cannot open database {}: {other}",
                    db_path.display()
                )),
            })?;
        if repaired.load(Ordering::Relaxed) {
            tracing::warn!(
                path = %db_path.display(),
                took = ?opened.elapsed(),
                "the embedded store was not shut down cleanly and its last commit did not record \
                 the allocator state (a crash under sustained writes): redb rebuilt it by reading \
                 the whole database"
            );
        }
        let (current, compacted, garbage) = init_tables(&db)?;
        let handle = Arc::new(DbHandle {
            db,
            _lock: lock_file,
        });

        let shared = Arc::new(Shared {
            committed: AtomicI64::new(current),
            compacted: AtomicI64::new(compacted),
            commits: AtomicU64::new(0),
            registry: Mutex::new(Registry::new(current)),
            progress_requested: tokio::sync::Notify::new(),
            #[cfg(test)]
            pause: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            register_delay_ms: AtomicU64::new(0),
        });
        let max_batch = opts.max_batch.max(1);
        let (tx, rx) = mpsc::channel(max_batch.saturating_mul(4));
        let slot = Arc::new(Mutex::new(Some(Arc::clone(&handle))));
        let writer = writer::Writer::new(
            writer::Database {
                handle,
                slot: Arc::clone(&slot),
                path: db_path.clone(),
                cache_size: opts.cache_size,
            },
            rx,
            Arc::clone(&shared),
            current,
            compacted,
            garbage,
            (max_batch, opts.quick_repair_idle),
        );
        let thread = std::thread::Builder::new()
            .name("apiforge-store-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| Error::Internal(format!("cannot start the writer thread: {e}")))?;

        let store = EmbeddedStore {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                opts,
                db: slot,
                tx: Mutex::new(Some(tx)),
                writer: Mutex::new(Some(thread)),
                compactor: Mutex::new(None),
                shared,
            }),
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            store.start_compactor()?;
        }
        tracing::info!(
            dir = %dir.display(),
            revision = current,
            compacted_revision = compacted,
            "embedded store opened"
        );
        Ok(store)
    }

    /// Starts the automatic compactor as a task on the current Tokio runtime
    /// (a no-op when it already runs or when
    /// [`EmbeddedOptions::compaction_interval`] is zero). [`open`](Self::open)
    /// calls this itself when it runs inside a runtime.
    ///
    /// Every interval the compactor compacts to
    /// `min(revision one interval ago, current - min_retained_revisions)`.
    /// It stops when the store closes. Fails with [`Error::Internal`] outside
    /// a Tokio runtime.
    pub fn start_compactor(&self) -> Result<()> {
        let interval = self.inner.opts.compaction_interval;
        if interval.is_zero() {
            return Ok(());
        }
        let rt = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::Internal("the compactor must be started inside a Tokio runtime".into())
        })?;
        let mut slot = lock(&self.inner.compactor);
        if slot.is_some() {
            return Ok(());
        }
        if lock(&self.inner.tx).is_none() {
            return Err(closed());
        }
        let weak = Arc::downgrade(&self.inner);
        let keep = self.inner.opts.min_retained_revisions.max(0);
        let start = self.inner.shared.committed.load(Ordering::Acquire);
        *slot = Some(rt.spawn(compactor_loop(weak, interval, keep, start)));
        Ok(())
    }

    /// Closes the store: stops the compactor, lets the writer thread finish
    /// the requests already queued, waits for it, ends every watch stream and
    /// closes the database. The directory lock is released as soon as reads
    /// still in flight have finished. Later calls on any clone fail with
    /// [`Error::Unavailable`]. Idempotent.
    pub async fn close(&self) -> Result<()> {
        let thread = self.inner.shutdown_begin();
        if let Some(thread) = thread {
            tokio::task::spawn_blocking(move || thread.join())
                .await
                .map_err(|e| Error::Internal(format!("joining the writer thread: {e}")))?
                .map_err(|_| Error::Internal("the writer thread panicked".into()))?;
        }
        self.inner.shutdown_end();
        Ok(())
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Number of write transactions committed since open (group commit makes
    /// this smaller than the number of writes). For tests and metrics.
    #[doc(hidden)]
    pub fn commit_count(&self) -> u64 {
        self.inner.shared.commits.load(Ordering::Acquire)
    }

    fn db(&self) -> Result<Arc<DbHandle>> {
        lock(&self.inner.db).clone().ok_or_else(closed)
    }

    fn check_size(&self, key: &str, value: &Bytes) -> Result<()> {
        let size = key.len().saturating_add(value.len());
        if size > self.inner.opts.max_value_bytes {
            return Err(Error::Internal(format!(
                "write of {size} bytes to {key} exceeds the limit of {} bytes",
                self.inner.opts.max_value_bytes
            )));
        }
        Ok(())
    }

    /// Runs a read on the blocking pool with the database handle.
    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> Result<T> + Send + 'static,
    {
        let handle = self.db()?;
        tokio::task::spawn_blocking(move || f(&handle.db))
            .await
            .map_err(|e| Error::Internal(format!("read task failed: {e}")))?
    }

    async fn write(&self, op: Op) -> Result<WriteOutcome> {
        match self.inner.submit(op).await? {
            Reply::Outcome(outcome) => Ok(outcome),
            Reply::Compacted => Err(Error::Internal("unexpected reply of the writer".into())),
        }
    }
}

impl Inner {
    async fn submit(&self, op: Op) -> Result<Reply> {
        let tx = lock(&self.tx).clone().ok_or_else(closed)?;
        let (reply, answer) = oneshot::channel();
        tx.send(Request { op, reply }).await.map_err(|_| closed())?;
        drop(tx);
        answer
            .await
            .map_err(|_| Error::Unavailable("the embedded store's writer stopped".into()))?
    }

    /// First half of shutdown: stop accepting work; returns the writer thread
    /// to join.
    fn shutdown_begin(&self) -> Option<std::thread::JoinHandle<()>> {
        if let Some(task) = lock(&self.compactor).take() {
            task.abort();
        }
        // Dropping the last sender lets the writer drain the queue and exit.
        drop(lock(&self.tx).take());
        lock(&self.writer).take()
    }

    /// Second half of shutdown: close the watchers and drop the database.
    fn shutdown_end(&self) {
        lock(&self.shared.registry).close();
        drop(lock(&self.db).take());
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(thread) = self.shutdown_begin() {
            // The writer finishes at most the batch it is committing.
            if thread.join().is_err() {
                tracing::error!("the embedded store's writer thread panicked");
            }
        }
        self.shutdown_end();
    }
}

/// Creates the tables on first open and reads the revision counters; also
/// tells whether compacted history is left to collect.
fn init_tables(db: &Database) -> Result<(Revision, Revision, bool)> {
    let mut txn = db.begin_write().map_err(db_err)?;
    // This commit records redb's allocator state: a crash before the
    // writer's first commit then needs no full repair on the next start,
    // even right after one (redb's own commit after a repair does not
    // record it). See `EmbeddedOptions::quick_repair_idle`.
    txn.set_quick_repair(true);
    let (current, compacted, garbage) = {
        txn.open_table(KV).map_err(db_err)?;
        let log = txn.open_table(LOG).map_err(db_err)?;
        txn.open_table(HISTORY).map_err(db_err)?;
        let mut meta = txn.open_table(META).map_err(db_err)?;
        let format = meta.get(META_FORMAT).map_err(db_err)?.map(|g| g.value());
        match format {
            None => {
                meta.insert(META_FORMAT, FORMAT_VERSION).map_err(db_err)?;
                // Like etcd, an empty store is at revision 1: the first
                // write gets 2, and "watch from the current revision" of a
                // fresh store is not confused with "watch from now" (0).
                if meta.get(META_CURRENT).map_err(db_err)?.is_none() {
                    meta.insert(META_CURRENT, 1).map_err(db_err)?;
                }
            }
            Some(FORMAT_VERSION) => {}
            Some(other) => {
                return Err(Error::Internal(format!(
                    "the embedded store has format version {other}; this build reads version {FORMAT_VERSION}"
                )));
            }
        }
        let current = meta
            .get(META_CURRENT)
            .map_err(db_err)?
            .map_or(0, |g| g.value());
        let compacted = meta
            .get(META_COMPACTED)
            .map_err(db_err)?
            .map_or(0, |g| g.value());
        let garbage = match log.first().map_err(db_err)? {
            Some((rev, _)) => rev.value() <= compacted,
            None => false,
        };
        (current, compacted, garbage)
    };
    txn.commit().map_err(db_err)?;
    Ok((current, compacted, garbage))
}

/// The automatic compactor: every `interval`, compact to the revision that
/// was current one interval ago, keeping at least `keep` revisions.
async fn compactor_loop(weak: Weak<Inner>, interval: Duration, keep: i64, start: Revision) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut previous = start;
    loop {
        ticker.tick().await;
        let Some(inner) = weak.upgrade() else { return };
        let current = inner.shared.committed.load(Ordering::Acquire);
        let compacted = inner.shared.compacted.load(Ordering::Acquire);
        let target = previous.min(current.saturating_sub(keep));
        if target > compacted {
            match inner.submit(Op::Compact { revision: target }).await {
                Ok(_) => tracing::debug!(revision = target, "embedded store compacted"),
                Err(e) => {
                    tracing::warn!(revision = target, error = %e, "automatic compaction failed")
                }
            }
        }
        previous = current;
    }
}

#[async_trait::async_trait]
impl Storage for EmbeddedStore {
    fn health_check_name(&self) -> &'static str {
        "embedded-store"
    }

    /// The database file's allocated size; the id is `embedded`.
    async fn size_bytes(&self) -> Result<Option<(String, i64)>> {
        let path = self.inner.dir.join(DB_FILE);
        let meta = tokio::fs::metadata(&path)
            .await
            .map_err(|e| Error::Internal(format!("{}: {e}", path.display())))?;
        Ok(Some((
            "embedded".into(),
            i64::try_from(meta.len()).unwrap_or(i64::MAX),
        )))
    }

    fn snapshot(&self, dest: &Path) -> Result<snapshot::SnapshotInfo> {
        self.snapshot_to(dest)
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        self.check_size(key, &value)?;
        match self
            .write(Op::Create {
                key: key.to_owned(),
                value,
            })
            .await?
        {
            WriteOutcome::Done(kv) => Ok(kv),
            WriteOutcome::Conflict(_) => Err(Error::AlreadyExists(key.to_owned())),
        }
    }

    async fn get(&self, key: &str, revision: Revision) -> Result<Option<KeyValue>> {
        let key = key.to_owned();
        self.read(move |db| read::get(db, &key, revision)).await
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        let prefix = prefix.to_owned();
        self.read(move |db| read::list(db, &prefix, &opts)).await
    }

    async fn count(&self, prefix: &str) -> Result<i64> {
        let prefix = prefix.to_owned();
        self.read(move |db| read::count(db, &prefix)).await
    }

    async fn update(
        &self,
        key: &str,
        expected_mod_revision: Revision,
        value: Bytes,
    ) -> Result<WriteOutcome> {
        self.check_size(key, &value)?;
        self.write(Op::Update {
            key: key.to_owned(),
            expected: expected_mod_revision,
            value,
        })
        .await
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<WriteOutcome> {
        self.write(Op::Delete {
            key: key.to_owned(),
            expected: expected_mod_revision,
        })
        .await
    }

    /// Watches `prefix` (see [`Storage::watch`]). A start revision in the
    /// future is accepted: the watch delivers the events after it once they
    /// happen, as etcd does.
    async fn watch(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> Result<WatchStream> {
        let handle = self.db()?;
        let opts = &self.inner.opts;
        watch::start(
            Arc::downgrade(&handle),
            Arc::clone(&self.inner.shared),
            prefix.to_owned(),
            start_revision,
            progress.then_some(opts.progress_interval),
            opts.watch_buffer.max(1),
        )
    }

    async fn current_revision(&self) -> Result<Revision> {
        if lock(&self.inner.db).is_none() {
            return Err(closed());
        }
        Ok(self.inner.shared.committed.load(Ordering::Acquire))
    }

    /// Compacts to `revision`. Compacting to a revision at or below the
    /// compacted one is a no-op; to a future revision fails with
    /// [`Error::FutureRevision`].
    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner
            .submit(Op::Compact { revision })
            .await
            .map(|_| ())
    }

    async fn request_progress(&self) -> Result<()> {
        self.inner.shared.progress_requested.notify_waiters();
        Ok(())
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        if lock(&self.inner.db).is_none() {
            return Err(closed());
        }
        Ok(self.inner.shared.compacted.load(Ordering::Acquire))
    }
}

/// Checks a requested read revision against a snapshot's counters and
/// resolves 0 to the current revision.
fn resolve_revision(
    requested: Revision,
    current: Revision,
    compacted: Revision,
) -> Result<Revision> {
    if requested == 0 {
        return Ok(current);
    }
    if requested < compacted || requested < 0 {
        return Err(Error::Compacted {
            requested,
            compacted,
        });
    }
    if requested > current {
        return Err(Error::FutureRevision { requested, current });
    }
    Ok(requested)
}

/// A read snapshot with its revision counters.
struct Snapshot {
    txn: redb::ReadTransaction,
    current: Revision,
    compacted: Revision,
}

impl Snapshot {
    fn new(db: &Database) -> Result<Self> {
        let txn = db.begin_read().map_err(db_err)?;
        let (current, compacted) = {
            let meta = txn.open_table(META).map_err(db_err)?;
            let current = meta
                .get(META_CURRENT)
                .map_err(db_err)?
                .map_or(0, |g| g.value());
            let compacted = meta
                .get(META_COMPACTED)
                .map_err(db_err)?
                .map_or(0, |g| g.value());
            (current, compacted)
        };
        Ok(Self {
            txn,
            current,
            compacted,
        })
    }
}

/// Creates the store's directory readable by its owner only (0700, as
/// etcd's data directory), and tightens an existing one to that: it holds
/// every object, Secrets included.
fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let cannot = |e: std::io::Error| {
        Error::Unavailable(format!(
            "cannot create data directory {}: {e}",
            dir.display()
        ))
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(cannot)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(cannot)
}

/// Creates the database file readable by its owner only (0600; redb would
/// create it with the umask's mode), and tightens an existing one.
fn private_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let cannot = |e: std::io::Error| {
        Error::Unavailable(format!("cannot open database {}: {e}", path.display()))
    };
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(cannot)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(cannot)
}
