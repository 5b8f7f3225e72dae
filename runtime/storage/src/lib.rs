//! # apiforge-storage
//!
//! The storage interface: a type-agnostic, etcd-shaped key-value store.
//! This crate knows nothing of the server above it and nothing of the kinds
//! stored in it.
//!
//! Everything above storage (the cacher, the registry) talks to a [`Storage`]
//! trait object. Values are opaque bytes (the encoded object in its storage
//! version); the store adds the revision metadata that etcd adds:
//! `create_revision`, `mod_revision` and the per-key `version`.
//!
//! Semantics follow etcd v3:
//! - one global, strictly increasing revision; every successful write
//!   (create, update, delete) gets its own new revision;
//! - reads can be served at a past revision that has not been compacted;
//! - watches deliver every change after a start revision, in revision order,
//!   without gaps or duplicates, and fail with [`Error::Compacted`] when the
//!   start revision has been compacted away.
//!
//! Backends: [`embedded`] (the default, a durable MVCC store on redb) and
//! [`etcd3`] (an etcd v3 cluster). [`metered`] times every call for an
//! observer; [`encryption`] encrypts values at rest (kube-apiserver's
//! `--encryption-provider-config`); [`compactor`] compacts history on an
//! interval.
//!
//! Features: `conformance` builds [`conformance`], the behaviour suite
//! every backend must pass (the crate's own tests always build it).

pub mod compactor;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod embedded;
pub mod encryption;
pub mod etcd3;
pub mod metered;

use std::fmt;
use std::pin::Pin;

use bytes::Bytes;
use futures::Stream;

/// A revision of the store (etcd's `int64` revision). Revision 0 means
/// "no revision" / "latest" depending on context, as in etcd.
pub type Revision = i64;

/// One key with its value and revision metadata.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The full key, e.g. `/registry/wardle.example.com/flunders/default/my-flunder`.
    pub key: String,
    /// The stored bytes.
    pub value: Bytes,
    /// Revision at which the key was (last) created.
    pub create_revision: Revision,
    /// Revision of the last modification of the key.
    pub mod_revision: Revision,
    /// Number of modifications since the key was created (1 after create).
    pub version: i64,
    /// The value was read with an encryption provider or key other than
    /// the one writes use now ([`encryption`]): an update must write it
    /// even when the object did not change, to re-encrypt it. Always
    /// `false` from a backend itself.
    pub stale: bool,
}

impl fmt::Debug for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyValue")
            .field("key", &self.key)
            .field("value_len", &self.value.len())
            .field("create_revision", &self.create_revision)
            .field("mod_revision", &self.mod_revision)
            .field("version", &self.version)
            .field("stale", &self.stale)
            .finish()
    }
}

/// Options of a range read over a prefix.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// Read at this revision; 0 reads the latest state.
    pub revision: Revision,
    /// At most this many items; 0 means no limit.
    pub limit: usize,
    /// Start at this key (inclusive); keys before it are skipped. Used by
    /// continue tokens. `None` starts at the prefix.
    pub start_key: Option<String>,
}

/// The answer of a range read.
#[derive(Clone, Debug, Default)]
pub struct ListResult {
    /// Matching key-values in key order.
    pub items: Vec<KeyValue>,
    /// The revision the read was served at (the store's current revision for
    /// a latest read, the requested one otherwise).
    pub revision: Revision,
    /// True when `limit` cut the result and more keys follow.
    pub more: bool,
    /// How many matching keys follow the returned ones (when `more`).
    pub remaining: i64,
}

/// The result of a compare-and-swap style write.
#[derive(Clone, Debug)]
pub enum WriteOutcome {
    /// The write happened; this is the key's new state (for delete: the
    /// deleted state, with `mod_revision` set to the delete's revision).
    Done(KeyValue),
    /// The precondition did not hold; this is the key's current state
    /// (`None` when the key does not exist).
    Conflict(Option<KeyValue>),
}

/// What happened to a key in a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The key was created.
    Created,
    /// An existing key was updated.
    Modified,
    /// The key was deleted.
    Deleted,
}

/// One change seen by a watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: EventType,
    /// The key's state after the change; for [`EventType::Deleted`] the
    /// last state before the delete, with `mod_revision` set to the delete's
    /// revision.
    pub kv: KeyValue,
    /// The key's state before the change (`None` for a create). Backends
    /// fill this when they can (etcd's `prev_kv`); the embedded store always does.
    pub prev: Option<KeyValue>,
}

/// An item of a watch stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchItem {
    /// A change, in revision order.
    Event(Event),
    /// Every change up to this revision has been delivered (etcd's progress
    /// notification); used for bookmarks and consistent reads.
    Progress(Revision),
}

/// A watch stream. It ends (returns `None`) when the watch is cancelled or
/// the backend closes it; an `Err` item is terminal.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchItem>> + Send>>;

/// Errors of the storage layer. Each maps onto one Kubernetes API error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key does not exist (404 NotFound).
    #[error("key not found: {0}")]
    NotFound(String),
    /// The key already exists (409 AlreadyExists).
    #[error("key exists: {0}")]
    AlreadyExists(String),
    /// A precondition (resource version, uid) failed (409 Conflict).
    #[error("conflict on {key}: {message}")]
    Conflict {
        /// The key.
        key: String,
        /// What did not match.
        message: String,
    },
    /// The requested revision has been compacted (410 Expired / Gone).
    #[error("required revision {requested} has been compacted (compacted revision {compacted})")]
    Compacted {
        /// The revision that was asked for.
        requested: Revision,
        /// The store's compacted revision.
        compacted: Revision,
    },
    /// The requested revision is newer than the store's current revision
    /// (504 Timeout "Too large resource version").
    #[error("revision {requested} is in the future (current revision {current})")]
    FutureRevision {
        /// The revision that was asked for.
        requested: Revision,
        /// The store's current revision.
        current: Revision,
    },
    /// The backend cannot be reached or failed (503 ServiceUnavailable).
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The backend is overloaded: the client should come back later (429
    /// TooManyRequests with `Retry-After: 1`). Used by test servers'
    /// injected faults.
    #[error("storage too busy: {0}")]
    TooManyRequests(String),
    /// The operation took too long (504 Timeout).
    #[error("storage request timed out: {0}")]
    Timeout(String),
    /// A watcher fell too far behind and was closed; it must re-list.
    #[error("watcher fell behind and was closed")]
    WatcherTooSlow,
    /// Anything else the backend reports (500 InternalError).
    #[error("storage internal error: {0}")]
    Internal(String),
}

/// Result alias of the storage layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The storage interface every backend implements.
#[async_trait::async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Creates `key` with `value` if it does not exist; returns its state.
    /// Fails with [`Error::AlreadyExists`] otherwise.
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue>;

    /// Reads `key` at `revision` (0 = latest). `Ok(None)` when absent.
    async fn get(&self, key: &str, revision: Revision) -> Result<Option<KeyValue>>;

    /// Reads the keys under `prefix` (a plain string prefix) in key order.
    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult>;

    /// Counts the keys under `prefix` at the latest revision.
    async fn count(&self, prefix: &str) -> Result<i64>;

    /// Writes `value` to an existing `key` if its `mod_revision` equals
    /// `expected_mod_revision`. A missing key or another mod revision gives
    /// [`WriteOutcome::Conflict`] with the current state.
    ///
    /// The new state in [`WriteOutcome::Done`] always has the new
    /// `mod_revision` and `value`; its `create_revision` and `version` are 0
    /// when the backend cannot tell them without reading the previous state
    /// (etcd: a `prev_kv` put is one more range read in etcd's serialized
    /// apply loop for every update). Read the key back when they matter.
    async fn update(
        &self,
        key: &str,
        expected_mod_revision: Revision,
        value: Bytes,
    ) -> Result<WriteOutcome>;

    /// Deletes `key`; with `Some(rev)` only if its `mod_revision` equals
    /// `rev`. A missing key gives [`Error::NotFound`]; a failed precondition
    /// gives [`WriteOutcome::Conflict`] with the current state.
    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<WriteOutcome>;

    /// Watches every key under `prefix` for changes after `start_revision`
    /// (exclusive: the first event has a revision > `start_revision`;
    /// 0 = changes after the current revision).
    ///
    /// Fails with [`Error::Compacted`] (immediately, or as the first stream
    /// item) when `start_revision` is older than the compacted revision.
    /// With `progress` set, the backend periodically sends
    /// [`WatchItem::Progress`] when nothing else happens.
    async fn watch(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> Result<WatchStream>;

    /// Like [`watch`](Storage::watch), for a consumer that keeps its own
    /// copy of every object under `prefix` (the watch cache): the backend
    /// may leave [`Event::prev`] unset and give an
    /// [`EventType::Deleted`] event only the key and the delete's revision
    /// (an empty value), so it need not read the previous state for every
    /// event. etcd does read it for a `prev_kv` watch, one range read per
    /// event. By default the same as [`watch`](Storage::watch).
    async fn watch_without_prev(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> Result<WatchStream> {
        self.watch(prefix, start_revision, progress).await
    }

    /// The store's current revision.
    async fn current_revision(&self) -> Result<Revision>;

    /// Discards history older than `revision`; reads and watches before it
    /// then fail with [`Error::Compacted`].
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// The oldest revision still readable (the compacted revision).
    async fn compacted_revision(&self) -> Result<Revision>;

    /// Asks every open watch that was started with `progress` to report
    /// its progress ([`WatchItem::Progress`]) soon, instead of at its next
    /// periodic notification (etcd's `RequestProgress`). Consistent reads
    /// from the watch cache use it to catch up with writes to other keys.
    async fn request_progress(&self) -> Result<()> {
        Ok(())
    }

    /// Like [`Storage::request_progress`], for the watches of exactly
    /// `prefix` only: what a consistent read of one kind's watch cache
    /// needs, without asking every other watch too. By default it asks
    /// every watch.
    async fn request_progress_for(&self, prefix: &str) -> Result<()> {
        let _ = prefix;
        self.request_progress().await
    }

    /// Whether a watch of this store is re-establishing its connection to
    /// the backend (etcd restarted or unreachable, see the etcd3 watch's
    /// resuming). Such a watch resumes on its own from the revision it had
    /// delivered, losing nothing; it just reports no progress meanwhile, so
    /// the watch cache does not take a stale consistent read for a watch
    /// that stopped reporting progress and re-list (which would end every
    /// client watch). `false` by default (a backend whose watches never
    /// reconnect).
    fn watch_reconnecting(&self) -> bool {
        false
    }

    /// Writes a consistent snapshot of the whole store to `dest` (the
    /// embedded store's [`embedded::snapshot`]; etcd has
    /// `etcdctl snapshot save` for this, and other backends answer
    /// [`Error::Internal`]). Blocks: call it from `spawn_blocking`.
    fn snapshot(&self, dest: &std::path::Path) -> Result<embedded::snapshot::SnapshotInfo> {
        let _ = dest;
        Err(Error::Internal(
            "this storage backend takes no snapshots (on etcd, use etcdctl snapshot save)".into(),
        ))
    }

    /// The size of the backend's database, physically allocated, in bytes,
    /// with an id of the database (`apiserver_storage_size_bytes` and its
    /// `storage_cluster_id` label: etcd's cluster id in hex). `None` when
    /// the backend cannot tell (the default).
    async fn size_bytes(&self) -> Result<Option<(String, i64)>> {
        Ok(None)
    }

    /// The name of the backend's health check (`/livez/<name>`,
    /// `/readyz/<name>`): `etcd` as kube-apiserver's.
    fn health_check_name(&self) -> &'static str {
        "etcd"
    }
}

/// Guaranteed update (the generic apiserver's `GuaranteedUpdate`): reads
/// `key`, lets `update` compute the new value from the current state, and
/// writes it with a compare-and-swap on the mod revision; on a conflict it
/// retries with the fresh state. `update` checks preconditions (uid,
/// resourceVersion) on the state it is given and fails with
/// [`Error::Conflict`] (or any error) to stop. A missing key is
/// [`Error::NotFound`].
pub async fn guaranteed_update<F>(
    storage: &dyn Storage,
    key: &str,
    mut update: F,
) -> Result<KeyValue>
where
    F: FnMut(&KeyValue) -> Result<Bytes> + Send,
{
    let mut current = storage
        .get(key, 0)
        .await?
        .ok_or_else(|| Error::NotFound(key.to_string()))?;
    loop {
        let value = update(&current)?;
        match storage.update(key, current.mod_revision, value).await? {
            WriteOutcome::Done(kv) => return Ok(kv),
            WriteOutcome::Conflict(Some(fresh)) => current = fresh,
            WriteOutcome::Conflict(None) => return Err(Error::NotFound(key.to_string())),
        }
    }
}
