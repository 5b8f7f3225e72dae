//! The watch cache (the generic apiserver's cacher) of one resource.
//!
//! A reflector task lists the resource's key prefix from storage, then
//! watches it (with progress notifications), keeping:
//! - the current objects, each kept as its JSON encoding in the storage
//!   version (see [`CachedObject`]), in a persistent ordered map
//!   (`imbl::OrdMap`): a reader takes an O(1) snapshot and never blocks
//!   the reflector, and a paginated list keeps its snapshot for the
//!   continue tokens that follow;
//! - a window of recent events, so that watches can start from any
//!   revision still in the window (older ones get 410 Gone);
//! - the revision the cache has caught up with, which consistent reads wait
//!   for (`resourceVersion` unset: the backend's current revision).
//!
//! Events fan out to watchers through bounded queues holding shared
//! `Arc`s; a watcher whose queue is full is closed (its client re-lists and
//! re-watches), so one slow client never slows the others or grows memory.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use imbl::OrdMap;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::error::{ApiError, ApiResult};
use apiforge_core::meta::Status;
use apiforge_storage::{self as storage, EventType, KeyValue, Revision, Storage, WatchItem};

/// Settings of a watch cache.
#[derive(Clone, Debug)]
pub struct CacheOptions {
    /// How many recent events are kept for watches that resume from a
    /// revision.
    pub window: usize,
    /// How many bytes of objects (their stored encodings) the event window
    /// may hold: beyond it the oldest events go, down to
    /// [`MIN_WINDOW_EVENTS`], even when fewer than `window` are kept. A
    /// resource of large objects written often would otherwise keep
    /// `window` versions of them in memory.
    pub window_bytes: usize,
    /// Per-watcher queue length; a watcher that falls this far behind is
    /// closed.
    pub watcher_buffer: usize,
    /// How long a read waits for the cache to reach the revision it needs
    /// before answering 504 ("Too large resource version").
    pub freshness_timeout: Duration,
    /// How many paginated-list snapshots are kept for continue tokens.
    pub snapshots: usize,
    /// Per-resource event windows (`--watch-cache-sizes`), keyed by
    /// `<resource>.<group>` (just `<resource>` for the core group); 0 turns
    /// the watch cache off for that resource.
    pub sizes: HashMap<String, usize>,
    /// The cached resource as its metrics name it (`<resource>.<group>`,
    /// just `<resource>` for the core group); the registry sets it per
    /// store.
    pub resource: String,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            // 100 s of 200 writes/s.
            window: 20_000,
            window_bytes: 32 << 20,
            watcher_buffer: 1024,
            freshness_timeout: Duration::from_secs(3),
            snapshots: 64,
            sizes: HashMap::new(),
            resource: String::new(),
        }
    }
}

/// The event window keeps at least this many events whatever their size
/// (kube-apiserver's default watch cache capacity), so that watches of a
/// resource of large objects can still resume after a short disconnect.
pub const MIN_WINDOW_EVENTS: usize = 100;

/// Turns a cached object's encoding in a version back into its hub form.
pub type Rehydrate = Arc<dyn Fn(&'static str, &[u8]) -> Result<Value, String> + Send + Sync>;

/// One cached object: its key, revision and content, plus its encodings,
/// made once per served version and shared by every response and watcher
/// that sends it.
///
/// Objects the watch cache reads from storage are kept only as one JSON
/// encoding (the *primary* encoding, served as is for its version), not as
/// a decoded JSON tree as well: a tree takes two to three times the bytes of
/// its encoding, and a cache holding both would keep every object twice.
/// The primary encoding starts in the storage version; the first request
/// for another version whose encoding decodes back to the same hub object
/// (a lossless conversion) makes that encoding the primary one instead of
/// a second copy (once: a later version is memoized next to it). The hub
/// form is decoded from the primary encoding on demand
/// ([`CachedObject::object`]), which only selectors, other output formats
/// and lossy versions need. The primary encodings of the objects a (re-)list
/// loads share slabs (see [`pack`]); an object a watch event brings has its
/// own, exactly sized.
pub struct CachedObject {
    /// Storage key (shared with the cache's index of objects).
    pub key: Arc<str>,
    /// Mod revision (the object's resourceVersion).
    pub revision: Revision,
    state: Mutex<Repr>,
}

struct Repr {
    form: Form,
    /// Encodings in other versions than the primary one.
    encodings: Vec<(&'static str, bytes::Bytes)>,
    /// Whether the primary encoding moved away from the initial version
    /// (it moves at most once, so that clients of two versions end with
    /// both encodings memoized rather than alternating).
    moved: bool,
}

enum Form {
    /// The hub form, `metadata.resourceVersion` set.
    Decoded(Arc<Value>),
    /// The JSON encoding in `version`, and how to decode it.
    Encoded {
        version: &'static str,
        bytes: bytes::Bytes,
        decode: Rehydrate,
    },
}

impl std::fmt::Debug for CachedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedObject")
            .field("key", &self.key)
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

impl CachedObject {
    /// A cached object held in its hub form (`metadata.resourceVersion`
    /// set), without encodings yet.
    pub fn new(key: String, revision: Revision, object: Value) -> Self {
        CachedObject {
            key: key.into(),
            revision,
            state: Mutex::new(Repr {
                form: Form::Decoded(Arc::new(object)),
                encodings: Vec::new(),
                moved: false,
            }),
        }
    }

    /// A cached object held only as its JSON encoding in `version`
    /// (`metadata.resourceVersion` set); `decode` turns an encoding back
    /// into the hub form.
    pub fn from_encoding(
        key: String,
        revision: Revision,
        version: &'static str,
        bytes: bytes::Bytes,
        decode: Rehydrate,
    ) -> Self {
        CachedObject {
            key: key.into(),
            revision,
            state: Mutex::new(Repr {
                form: Form::Encoded {
                    version,
                    bytes,
                    decode,
                },
                encodings: Vec::new(),
                moved: false,
            }),
        }
    }

    fn repr(&self) -> std::sync::MutexGuard<'_, Repr> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The object in its hub form (`metadata.resourceVersion` set),
    /// decoded from its primary encoding when that is all the cache keeps.
    pub fn object(&self) -> Result<Arc<Value>, String> {
        let (version, bytes, decode) = match &self.repr().form {
            Form::Decoded(v) => return Ok(v.clone()),
            Form::Encoded {
                version,
                bytes,
                decode,
            } => (*version, bytes.clone(), decode.clone()),
        };
        decode(version, &bytes).map(Arc::new)
    }

    /// Parses `T` from the object's JSON without decoding the object: from
    /// its primary encoding (whichever version it is in) when the cache
    /// holds one, else from the hub form. For readers of version-independent
    /// parts, like `metadata`.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, String> {
        let bytes = match &self.repr().form {
            Form::Decoded(v) => {
                let v = v.clone();
                return T::deserialize(&*v).map_err(|e| e.to_string());
            }
            Form::Encoded { bytes, .. } => bytes.clone(),
        };
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    }

    /// The length of the primary encoding (0 for an object held decoded).
    fn primary_len(&self) -> usize {
        match &self.repr().form {
            Form::Encoded { bytes, .. } => bytes.len(),
            Form::Decoded(_) => 0,
        }
    }

    /// Calls `f` with the primary encoding (not for objects held decoded).
    fn with_primary(&self, f: impl FnOnce(&[u8])) {
        if let Form::Encoded { bytes, .. } = &self.repr().form {
            f(bytes);
        }
    }

    /// Replaces the primary encoding by the same bytes held elsewhere (a
    /// slice of a slab).
    fn set_primary(&mut self, same: bytes::Bytes) {
        let repr = self
            .state
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Form::Encoded { bytes, .. } = &mut repr.form {
            debug_assert_eq!(*bytes, same);
            *bytes = same;
        }
    }

    /// The object's JSON encoding in `version`, made by `encode` on first
    /// use and shared afterwards.
    pub fn encoded<E: From<String>>(
        &self,
        version: &'static str,
        encode: impl FnOnce(&Value) -> Result<bytes::Bytes, E>,
    ) -> Result<bytes::Bytes, E> {
        {
            let repr = self.repr();
            if let Form::Encoded {
                version: primary,
                bytes,
                ..
            } = &repr.form
                && *primary == version
            {
                return Ok(bytes.clone());
            }
            if let Some((_, bytes)) = repr.encodings.iter().find(|(v, _)| *v == version) {
                return Ok(bytes.clone());
            }
        }
        let object = self.object()?;
        // Exactly sized: the encoding lives as long as the object is cached.
        let bytes = bytes::Bytes::copy_from_slice(&encode(&object)?);
        let mut repr = self.repr();
        if repr.encodings.iter().any(|(v, _)| *v == version) {
            return Ok(bytes);
        }
        if let Form::Encoded { decode, .. } = &repr.form
            && !repr.moved
        {
            let decode = decode.clone();
            // A lossless version replaces the primary encoding (once).
            if decode(version, &bytes).is_ok_and(|back| back == *object) {
                repr.form = Form::Encoded {
                    version,
                    bytes: bytes.clone(),
                    decode,
                };
                repr.moved = true;
                return Ok(bytes);
            }
        }
        repr.encodings.push((version, bytes.clone()));
        Ok(bytes)
    }
}

/// One change seen by the cache.
#[derive(Debug)]
pub struct CachedEvent {
    /// What happened.
    pub kind: EventType,
    /// The revision of the change.
    pub revision: Revision,
    /// The object after the change (for deletes: its last state, with the
    /// delete's revision).
    pub object: Arc<CachedObject>,
    /// The object before the change.
    pub prev: Option<Arc<CachedObject>>,
    /// What the event holds in memory, as the length of the object's
    /// stored encoding (counted against [`CacheOptions::window_bytes`]).
    pub bytes: usize,
}

/// A started cache watch: the replayed or initial items, the revision
/// they bring the watcher to, and the live items after it.
pub struct CacheWatch {
    /// Initial `Created` events (from the current state) or the replayed
    /// window events.
    pub initial: Vec<CacheItem>,
    /// The cache's revision when the watch was registered: after `initial`
    /// the watcher has seen everything up to it.
    pub revision: Revision,
    /// Everything after `revision`.
    pub live: BoxStream<'static, CacheItem>,
}

impl CacheWatch {
    /// The initial items followed by the live ones, as one stream.
    pub fn into_stream(self) -> BoxStream<'static, CacheItem> {
        futures::stream::iter(self.initial).chain(self.live).boxed()
    }
}

/// An item of a cache watch.
#[derive(Debug, Clone)]
pub enum CacheItem {
    /// A change.
    Event(Arc<CachedEvent>),
    /// Everything up to this revision has been delivered.
    Progress(Revision),
}

type Objects = OrdMap<Arc<str>, Arc<CachedObject>>;
/// Turns a stored key-value into a cached object.
type Decoder = Arc<dyn Fn(&KeyValue) -> ApiResult<CachedObject> + Send + Sync>;

struct Slot {
    id: u64,
    prefix: String,
    tx: mpsc::Sender<CacheItem>,
}

/// The sequence the caches' [`State::changes`] take their values from.
static CHANGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_change() -> u64 {
    CHANGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

struct State {
    objects: Objects,
    revision: Revision,
    events: VecDeque<Arc<CachedEvent>>,
    /// The sum of `events`' [`CachedEvent::bytes`].
    window_bytes: usize,
    /// Watches may resume from any revision ≥ this.
    oldest: Revision,
    ready: bool,
    slots: Vec<Slot>,
    next_id: u64,
    /// The revision of the last event applied (several events share one
    /// when a transaction wrote several keys).
    last_event: Revision,
    /// Moves whenever the objects change (an event is applied, the cache
    /// re-lists): the next value of [`CHANGES`], so no two caches share one.
    changes: u64,
}

/// Remaining-item counts kept for continue tokens (see
/// [`WatchCache::remember_remaining`]): a few per concurrent walk.
const REMAINING_HINTS: usize = 256;

/// How many prefix counts [`WatchCache::count`] keeps.
const COUNTS: usize = 16;

/// A consistent view of the cache at one revision.
#[derive(Clone)]
pub struct Snapshot {
    objects: Objects,
    /// The revision the snapshot is at.
    pub revision: Revision,
    /// The cache's [`State::changes`] when the snapshot was taken: two
    /// snapshots with the same value hold the same objects (two at one
    /// revision may not, while the events of one transaction are applied).
    changes: u64,
}

impl Snapshot {
    /// The object at `key`.
    pub fn get(&self, key: &str) -> Option<Arc<CachedObject>> {
        self.objects.get(key).cloned()
    }

    /// Objects with keys under `prefix`, starting at `start` (inclusive).
    pub fn range<'a>(
        &'a self,
        prefix: &'a str,
        start: Option<&str>,
    ) -> impl Iterator<Item = &'a Arc<CachedObject>> + 'a {
        let from = match start {
            Some(s) if s > prefix => s,
            _ => prefix,
        };
        // With an upper bound the map's iterator ends by comparing its two
        // cursors; `take_while` would compare every key with the prefix.
        let end = prefix_end(prefix).filter(|end| end.as_str() > from);
        let bounded = end.is_some();
        let upper = match &end {
            Some(end) => std::ops::Bound::Excluded(end.as_str()),
            None => std::ops::Bound::Unbounded,
        };
        self.objects
            .range::<_, str>((std::ops::Bound::Included(from), upper))
            .take_while(move |(k, _)| bounded || k.starts_with(prefix))
            .map(|(_, v)| v)
    }
}

/// The least key after every key that starts with `prefix`, when the
/// prefix ends in an ASCII character other than DEL (key prefixes end in
/// `/`): the prefix with that character's successor in its place.
fn prefix_end(prefix: &str) -> Option<String> {
    let last = *prefix.as_bytes().last()?;
    (last < 0x7f).then(|| {
        let mut end = prefix[..prefix.len() - 1].to_owned();
        end.push(char::from(last + 1));
        end
    })
}

/// The watch cache of one resource.
pub struct WatchCache {
    storage: Arc<dyn Storage>,
    prefix: String,
    opts: CacheOptions,
    state: RwLock<State>,
    revision_tx: watch::Sender<Revision>,
    snapshots: Mutex<VecDeque<Snapshot>>,
    /// How many objects a continue token's page starts with, from the pages
    /// served so far: (revision, list prefix, start key, objects from the
    /// start key to the end of the prefix). A paginated walk then counts
    /// its remaining items once, not once per page.
    remaining: Mutex<VecDeque<(Revision, String, String, u64)>>,
    /// How many objects a prefix holds in a snapshot, by the snapshot's
    /// `changes`: (changes, prefix, count), the latest [`COUNTS`]. A
    /// paginated walk's first page counts its remaining items from this
    /// while the objects stay unchanged.
    counts: Mutex<VecDeque<(u64, String, u64)>>,
    /// Asks the reflector to re-list (when the backend's watch stopped
    /// reporting progress, e.g. a resumed etcd watch with nothing to send).
    resync: tokio::sync::Notify,
    /// Set by [`WatchCache::stop`]: the reflector ends.
    stopped: std::sync::atomic::AtomicBool,
}

/// Reads a lock even if a panicking thread poisoned it (the state is only
/// mutated in small, panic-free steps).
fn read(lock: &RwLock<State>) -> std::sync::RwLockReadGuard<'_, State> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write(lock: &RwLock<State>) -> std::sync::RwLockWriteGuard<'_, State> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl WatchCache {
    /// Creates the cache of `prefix` and starts its reflector task (needs a
    /// tokio runtime). `decode` turns a stored key-value into a cached
    /// object.
    pub fn start(
        storage: Arc<dyn Storage>,
        prefix: String,
        opts: CacheOptions,
        decode: Decoder,
    ) -> Arc<WatchCache> {
        let cache = Self::unstarted(storage, prefix, opts);
        let weak = Arc::downgrade(&cache);
        tokio::spawn(async move { reflect(weak, decode).await });
        cache
    }

    /// An empty, not yet ready cache without its reflector.
    fn unstarted(storage: Arc<dyn Storage>, prefix: String, opts: CacheOptions) -> Arc<WatchCache> {
        let (revision_tx, _) = watch::channel(0);
        Arc::new(WatchCache {
            storage,
            prefix,
            opts,
            state: RwLock::new(State {
                objects: OrdMap::new(),
                revision: 0,
                events: VecDeque::new(),
                window_bytes: 0,
                oldest: 0,
                ready: false,
                slots: Vec::new(),
                next_id: 0,
                last_event: 0,
                changes: 0,
            }),
            revision_tx,
            snapshots: Mutex::new(VecDeque::new()),
            remaining: Mutex::new(VecDeque::new()),
            counts: Mutex::new(VecDeque::new()),
            resync: tokio::sync::Notify::new(),
            stopped: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Stops the reflector and ends the cache's watches (its kind is no
    /// longer served: a custom resource's definition changed or went). The
    /// cache is freed when its last reader lets go.
    pub fn stop(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.resync.notify_one();
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The revision the cache has caught up with.
    pub fn revision(&self) -> Revision {
        read(&self.state).revision
    }

    /// A number that moves whenever the cached objects change (an event is
    /// applied, the cache re-lists); `None` while the cache is not ready.
    /// The same number means a list answers the same objects.
    pub fn changes(&self) -> Option<u64> {
        let s = read(&self.state);
        s.ready.then_some(s.changes)
    }

    /// Whether the cache is ready and has seen `revision`.
    fn has_seen(&self, revision: Revision) -> bool {
        let s = read(&self.state);
        s.ready && s.revision >= revision
    }

    /// Waits until the cache is ready and has seen `revision`; 504 after the
    /// freshness timeout. While behind, it asks the backend for progress
    /// notifications (the cache may be behind only because the latest
    /// writes went to other keys).
    pub async fn wait_for(&self, revision: Revision) -> ApiResult<()> {
        let mut rx = self.revision_tx.subscribe();
        if self.has_seen(revision) {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + self.opts.freshness_timeout;
        loop {
            let _ = self.storage.request_progress_for(&self.prefix).await;
            let nudge = tokio::time::Instant::now() + Duration::from_millis(20);
            let _ = tokio::time::timeout_at(nudge.min(deadline), rx.changed()).await;
            if self.has_seen(revision) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                let current = self.revision();
                return Err(ApiError::from(storage::Error::FutureRevision {
                    requested: revision,
                    current,
                }));
            }
        }
    }

    /// Waits up to `limit` for the cache to see `revision`, without asking
    /// the backend for progress: for a revision a client just got from a
    /// write, whose event is on its way. Whether the cache saw it.
    pub async fn sees_within(&self, revision: Revision, limit: Duration) -> bool {
        let mut rx = self.revision_tx.subscribe();
        let wait = async {
            while !self.has_seen(revision) {
                if rx.changed().await.is_err() {
                    return false;
                }
            }
            true
        };
        tokio::time::timeout(limit, wait).await.unwrap_or(false)
    }

    /// Waits until the cache has caught up with the backend's current
    /// revision (a consistent read).
    ///
    /// If the cache cannot catch up in time (its backend watch stopped
    /// reporting progress), the reflector re-lists and the read waits once
    /// more: a consistent read is never answered from a stale cache. While
    /// the backend watch is re-establishing itself (etcd restarted) the
    /// cache does not re-list (see `relist_if_stuck`) and the
    /// read fails with the 504.
    pub async fn wait_consistent(&self) -> ApiResult<()> {
        let current = self.storage.current_revision().await?;
        match self.wait_for(current).await {
            Err(e) if e.code() == 504 => {
                if !self.relist_if_stuck(current) {
                    return Err(e);
                }
                self.wait_for(current).await
            }
            other => other,
        }
    }

    /// Waits, as a consistent read must, until the cache has caught up with
    /// the backend's current revision. `false` when it has not within the
    /// freshness timeout: the caller then reads from storage instead (as
    /// kube-apiserver falls back to etcd when its cache is not fresh in
    /// time), and the reflector is asked to re-list in case its backend
    /// watch stopped reporting progress (not while that watch is
    /// re-establishing itself: `relist_if_stuck`).
    pub async fn caught_up(&self) -> ApiResult<bool> {
        let current = self.storage.current_revision().await?;
        match self.wait_for(current).await {
            Ok(()) => Ok(true),
            Err(e) if e.code() == 504 => {
                self.relist_if_stuck(current);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// After a consistent read found the cache behind `current` for the
    /// whole freshness timeout: asks the reflector to re-list, in case its
    /// backend watch stopped reporting progress (etcd before 3.4.31/3.5.13
    /// reports none to a resumed watch with nothing to send), unless the
    /// backend's watch is re-establishing its connection. That watch
    /// resumes from the revision it had delivered and loses nothing; a
    /// re-list, which ends every client watch, would only make clients
    /// re-list too, as kube-apiserver's cacher ends its watchers only when
    /// its reflector has to re-list. Whether a re-list was requested.
    fn relist_if_stuck(&self, current: Revision) -> bool {
        if self.storage.watch_reconnecting() {
            tracing::info!(prefix = %self.prefix, revision = current, "watch cache behind while its storage watch reconnects; not re-listing");
            return false;
        }
        tracing::warn!(prefix = %self.prefix, revision = current, "watch cache behind; re-listing");
        self.resync.notify_one();
        true
    }

    /// A snapshot of the current state (after the needed wait).
    pub fn snapshot(&self) -> Snapshot {
        let s = read(&self.state);
        Snapshot {
            objects: s.objects.clone(),
            revision: s.revision,
            changes: s.changes,
        }
    }

    /// Keeps a snapshot for later continue tokens.
    pub fn remember(&self, snapshot: &Snapshot) {
        let mut snaps = self
            .snapshots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if snaps.iter().any(|s| s.revision == snapshot.revision) {
            return;
        }
        snaps.push_back(snapshot.clone());
        while snaps.len() > self.opts.snapshots {
            snaps.pop_front();
        }
    }

    /// Records that the snapshot at `revision` holds `count` objects under
    /// `prefix` from `start` (inclusive) on: the count of the page a
    /// continue token starting at `start` asks for.
    pub fn remember_remaining(&self, revision: Revision, prefix: &str, start: &str, count: u64) {
        let mut hints = self
            .remaining
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        hints.push_back((revision, prefix.to_owned(), start.to_owned(), count));
        while hints.len() > REMAINING_HINTS {
            hints.pop_front();
        }
    }

    /// How many objects `snapshot` holds under `prefix`: counted once per
    /// state of the objects and prefix (the latest [`COUNTS`] are kept).
    pub fn count(&self, snapshot: &Snapshot, prefix: &str) -> u64 {
        let lock = || {
            self.counts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let known = lock()
            .iter()
            .find(|(changes, p, _)| *changes == snapshot.changes && p == prefix)
            .map(|c| c.2);
        if let Some(count) = known {
            return count;
        }
        let count = snapshot.range(prefix, None).count() as u64;
        let mut counts = lock();
        if !counts
            .iter()
            .any(|(changes, p, _)| *changes == snapshot.changes && p == prefix)
        {
            counts.push_back((snapshot.changes, prefix.to_owned(), count));
            while counts.len() > COUNTS {
                counts.pop_front();
            }
        }
        count
    }

    /// The count [`WatchCache::remember_remaining`] recorded for these.
    pub fn remaining_from(&self, revision: Revision, prefix: &str, start: &str) -> Option<u64> {
        let hints = self
            .remaining
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        hints
            .iter()
            .rev()
            .find(|(r, p, k, _)| *r == revision && p == prefix && k == start)
            .map(|h| h.3)
    }

    /// A remembered snapshot at exactly `revision`, or the current state if
    /// the cache is at that revision.
    pub fn snapshot_at(&self, revision: Revision) -> Option<Snapshot> {
        let snaps = self
            .snapshots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(s) = snaps.iter().find(|s| s.revision == revision) {
            return Some(s.clone());
        }
        drop(snaps);
        let current = self.snapshot();
        (current.revision == revision).then_some(current)
    }

    /// Starts a watch of keys under `prefix`. With `from` = `None` the
    /// current objects come first as `Created` events (at the cache's
    /// revision); with `Some(rev)` every change after `rev` is replayed
    /// from the window (410 Gone when `rev` is older than the window).
    pub fn watch(&self, prefix: &str, from: Option<Revision>) -> ApiResult<CacheWatch> {
        let mut s = write(&self.state);
        if !s.ready {
            return Err(Status::unavailable("the watch cache is not ready yet; retry").into());
        }
        let initial: Vec<CacheItem> = match from {
            None => s
                .objects
                .range::<_, str>((
                    std::ops::Bound::Included(prefix),
                    std::ops::Bound::Unbounded,
                ))
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(_, o)| {
                    CacheItem::Event(Arc::new(CachedEvent {
                        kind: EventType::Created,
                        revision: o.revision,
                        object: o.clone(),
                        prev: None,
                        bytes: 0,
                    }))
                })
                .collect(),
            Some(rev) => {
                if rev < s.oldest {
                    return Err(Status::expired(format!(
                        "too old resource version: {rev} ({})",
                        s.oldest
                    ))
                    .into());
                }
                s.events
                    .iter()
                    .filter(|e| e.revision > rev && e.object.key.starts_with(prefix))
                    .map(|e| CacheItem::Event(e.clone()))
                    .collect()
            }
        };
        let revision = s.revision;
        let (tx, rx) = mpsc::channel(self.opts.watcher_buffer);
        let id = s.next_id;
        s.next_id += 1;
        s.slots.push(Slot {
            id,
            prefix: prefix.to_string(),
            tx,
        });
        drop(s);
        let live = tokio_stream::wrappers::ReceiverStream::new(rx).boxed();
        Ok(CacheWatch {
            initial,
            revision,
            live,
        })
    }

    /// The number of open watchers.
    pub fn watchers(&self) -> usize {
        read(&self.state).slots.len()
    }

    /// Closes every watcher (their streams end).
    fn close_watchers(&self) {
        write(&self.state).slots.clear();
    }

    fn replace(&self, objects: Objects, revision: Revision) {
        let mut s = write(&self.state);
        s.objects = objects;
        s.revision = revision;
        s.events.clear();
        s.window_bytes = 0;
        s.oldest = revision;
        s.last_event = revision;
        s.changes = next_change();
        s.ready = true;
        drop(s);
        let metrics = crate::metrics::global();
        let labels = self.metric_labels();
        metrics
            .watch_cache_initializations
            .with_label_values(&labels)
            .inc();
        self.observe_revision(revision);
        metrics
            .watch_cache_capacity
            .with_label_values(&labels)
            .set(i64::try_from(self.opts.window).unwrap_or(i64::MAX));
        self.revision_tx.send_replace(revision);
    }

    /// The last state of a key deleted at `tombstone.mod_revision`, from
    /// the cache's own copy: the storage watch does not send it (see
    /// [`Storage::watch_without_prev`]). A delete of a key the cache does
    /// not hold means the cache lost track; the error makes it re-list.
    fn deleted_state(&self, tombstone: &storage::KeyValue) -> ApiResult<CachedObject> {
        let Some(last) = read(&self.state)
            .objects
            .get(tombstone.key.as_str())
            .cloned()
        else {
            return Err(Status::internal(format!(
                "the watch cache of {} holds no {} to delete at revision {}",
                self.prefix, tombstone.key, tombstone.mod_revision
            ))
            .into());
        };
        let mut object = Arc::unwrap_or_clone(last.object().map_err(Status::internal)?);
        super::set_resource_version(&mut object, tombstone.mod_revision);
        Ok(CachedObject::new(
            tombstone.key.clone(),
            tombstone.mod_revision,
            object,
        ))
    }

    fn not_ready(&self) {
        write(&self.state).ready = false;
        self.close_watchers();
    }

    fn apply(&self, ev: storage::Event, decode: &Decoder) -> ApiResult<()> {
        let object = Arc::new(if ev.kind == EventType::Deleted && ev.kv.value.is_empty() {
            self.deleted_state(&ev.kv)?
        } else {
            decode(&ev.kv)?
        });
        let revision = ev.kv.mod_revision;
        let mut s = write(&self.state);
        if revision < s.revision || (revision == s.revision && revision != s.last_event) {
            // The storage reported progress past this event before sending
            // it (etcd before 3.4.31/3.5.13 can, etcd-io/etcd#15220). The
            // cache cannot put it in order any more; re-listing is the only
            // way not to lose it.
            return Err(Status::internal(format!(
                "event at revision {revision} arrived after the cache had reached revision {}",
                s.revision
            ))
            .into());
        }
        s.last_event = revision;
        s.changes = next_change();
        let prev = match ev.kind {
            EventType::Deleted => s.objects.remove(ev.kv.key.as_str()),
            _ => s.objects.insert(object.key.clone(), object.clone()),
        };
        let bytes = if ev.kv.value.is_empty() {
            prev.as_ref().map_or(0, |p| p.primary_len())
        } else {
            ev.kv.value.len()
        };
        let event = Arc::new(CachedEvent {
            kind: ev.kind,
            revision,
            object,
            prev,
            bytes,
        });
        s.events.push_back(event.clone());
        s.window_bytes += bytes;
        while s.events.len() > self.opts.window
            || (s.window_bytes > self.opts.window_bytes && s.events.len() > MIN_WINDOW_EVENTS)
        {
            if let Some(old) = s.events.pop_front() {
                s.oldest = old.revision;
                s.window_bytes -= old.bytes;
            }
        }
        s.revision = revision;
        let mut dispatched = 0u64;
        s.slots.retain(|slot| {
            if !event.object.key.starts_with(&slot.prefix) {
                return !slot.tx.is_closed();
            }
            match slot.tx.try_send(CacheItem::Event(event.clone())) {
                Ok(()) => {
                    dispatched += 1;
                    true
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!(watcher = slot.id, prefix = %slot.prefix, "watcher fell behind and was closed");
                    crate::metrics::global()
                        .terminated_watchers
                        .with_label_values(&[self.opts.resource.as_str()])
                        .inc();
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        drop(s);
        let metrics = crate::metrics::global();
        let labels = self.metric_labels();
        metrics
            .watch_cache_events_received
            .with_label_values(&labels)
            .inc();
        metrics
            .watch_cache_events_dispatched
            .with_label_values(&labels)
            .inc_by(dispatched);
        self.observe_revision(revision);
        self.revision_tx.send_replace(revision);
        Ok(())
    }

    /// `apiserver_watch_cache_resource_version`.
    fn observe_revision(&self, revision: Revision) {
        crate::metrics::global()
            .watch_cache_resource_version
            .with_label_values(&self.metric_labels())
            .set(revision);
    }

    /// The `group` and `resource` labels of the cache's metrics.
    pub(crate) fn metric_labels(&self) -> [&str; 2] {
        let (resource, group) = self
            .opts
            .resource
            .split_once('.')
            .unwrap_or((self.opts.resource.as_str(), ""));
        [group, resource]
    }

    fn progress(&self, revision: Revision) {
        let mut s = write(&self.state);
        if revision <= s.revision {
            return;
        }
        s.revision = revision;
        // Progress markers are best effort: a full queue just skips one.
        s.slots.retain(
            |slot| match slot.tx.try_send(CacheItem::Progress(revision)) {
                Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => true,
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            },
        );
        drop(s);
        self.revision_tx.send_replace(revision);
    }
}

/// The reflector: list, then watch; on any failure mark the cache not
/// ready, close its watchers, back off and start over.
async fn reflect(cache: std::sync::Weak<WatchCache>, decode: Decoder) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let Some(c) = cache.upgrade() else { return };
        if c.is_stopped() {
            c.not_ready();
            return;
        }
        let started = Instant::now();
        let result = reflect_once(&c, &decode).await;
        if c.is_stopped() {
            c.not_ready();
            return;
        }
        if let Err(e) = &result {
            tracing::warn!(prefix = %c.prefix, error = %e, "watch cache lost its watch; re-listing");
        }
        c.not_ready();
        drop(c);
        if started.elapsed() > Duration::from_secs(30) {
            backoff = Duration::from_millis(100);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// How many bytes of encodings a slab made by [`pack`] holds (at least,
/// but for the last of a load).
const SLAB_BYTES: usize = 32 * 1024;

/// Moves the primary encodings of freshly loaded objects into one shared
/// buffer (a slab), each object keeping a slice of it.
///
/// A watch cache keeps an encoding per object for as long as the object is
/// cached. Allocated one by one while a list loads, the encodings share the
/// allocator's pages with the load's short-lived buffers of the same size
/// (stored values, JSON trees, encoders' growing vectors), and once those
/// are freed the pages stay resident half empty; each encoding also rounds
/// up to its allocator size class. In slabs they take what they need. A
/// slab is freed when the last object holding a slice of it is (replaced,
/// deleted, or out of the event window): a later write allocates the new
/// encoding on its own, as before. Slabs thus never hold more than the load
/// allocated, however the objects change afterwards (at worst a 32 KiB slab
/// kept for one unchanged object).
fn pack(mut batch: Vec<CachedObject>) -> Vec<CachedObject> {
    let total: usize = batch.iter().map(CachedObject::primary_len).sum();
    if batch.len() < 2 || total == 0 {
        return batch;
    }
    let mut slab = bytes::BytesMut::with_capacity(total);
    for object in &batch {
        object.with_primary(|bytes| slab.extend_from_slice(bytes));
    }
    let slab = slab.freeze();
    let mut at = 0;
    for object in &mut batch {
        let len = object.primary_len();
        object.set_primary(slab.slice(at..at + len));
        at += len;
    }
    batch
}

async fn reflect_once(cache: &Arc<WatchCache>, decode: &Decoder) -> Result<(), String> {
    let list = cache
        .storage
        .list(&cache.prefix, storage::ListOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    // The cached objects hold their own encodings: each stored value is
    // dropped as soon as its object is built rather than the whole list
    // being held until the end of the load. The encodings of consecutive
    // objects are then packed into shared slabs ([`pack`]).
    let revision = list.revision;
    let mut objects = OrdMap::new();
    let mut batch: Vec<CachedObject> = Vec::new();
    let mut batch_len = 0;
    for kv in list.items {
        let object = decode(&kv).map_err(|e| e.to_string())?;
        batch_len += object.primary_len();
        batch.push(object);
        if batch_len >= SLAB_BYTES {
            for object in pack(std::mem::take(&mut batch)) {
                objects.insert(object.key.clone(), Arc::new(object));
            }
            batch_len = 0;
        }
    }
    for object in pack(batch) {
        objects.insert(object.key.clone(), Arc::new(object));
    }
    let mut stream = cache
        .storage
        .watch_without_prev(&cache.prefix, revision, true)
        .await
        .map_err(|e| e.to_string())?;
    cache.replace(objects, revision);
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            () = cache.resync.notified() => return Err("re-list requested".into()),
        };
        let Some(item) = item else {
            return Err("the storage watch ended".into());
        };
        match item.map_err(|e| e.to_string())? {
            WatchItem::Event(ev) => cache.apply(ev, decode).map_err(|e| e.to_string())?,
            WatchItem::Progress(rev) => cache.progress(rev),
        }
    }
}

/// Watch caches by key prefix, shared by the stores of one server.
#[derive(Default)]
pub struct Caches(Mutex<HashMap<String, Arc<WatchCache>>>);

impl Caches {
    /// The cache of `prefix`, started on first use.
    pub fn get_or_start(
        &self,
        storage: &Arc<dyn Storage>,
        prefix: &str,
        opts: &CacheOptions,
        decode: Decoder,
    ) -> Arc<WatchCache> {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(prefix.to_string())
            .or_insert_with(|| {
                WatchCache::start(storage.clone(), prefix.to_string(), opts.clone(), decode)
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiforge_storage::embedded::{EmbeddedOptions, EmbeddedStore};

    fn event(key: &str, revision: Revision) -> storage::Event {
        storage::Event {
            kind: EventType::Created,
            kv: KeyValue {
                key: key.to_string(),
                value: bytes::Bytes::from_static(b"{}"),
                create_revision: revision,
                mod_revision: revision,
                version: 1,
                stale: false,
            },
            prev: None,
        }
    }

    /// Packed objects serve the encodings they had, from one shared slab;
    /// objects held decoded are left as they are.
    #[test]
    fn packed_encodings_are_unchanged_and_shared() {
        let decode: Rehydrate =
            Arc::new(|_, bytes: &[u8]| serde_json::from_slice(bytes).map_err(|e| e.to_string()));
        let mut batch: Vec<CachedObject> = (0..5)
            .map(|i| {
                CachedObject::from_encoding(
                    format!("/k/{i}"),
                    i,
                    "v1",
                    bytes::Bytes::from(format!(
                        "{{\"i\":{i},\"pad\":\"{}\"}}",
                        "x".repeat(i as usize)
                    )),
                    decode.clone(),
                )
            })
            .collect();
        batch.push(CachedObject::new(
            "/k/decoded".into(),
            9,
            serde_json::json!({"d": 1}),
        ));
        let packed = pack(batch);
        let mut starts = Vec::new();
        for (i, object) in packed.iter().take(5).enumerate() {
            let expected = format!("{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat(i));
            let bytes = object
                .encoded::<String>("v1", |_| Err("not encoded again".into()))
                .unwrap();
            assert_eq!(bytes, expected.as_bytes());
            starts.push((bytes.as_ptr() as usize, bytes.len()));
        }
        // One buffer: each encoding starts where the previous one ends.
        for pair in starts.windows(2) {
            assert_eq!(pair[0].0 + pair[0].1, pair[1].0);
        }
        assert_eq!(packed[5].primary_len(), 0);
        assert_eq!(*packed[5].object().unwrap(), serde_json::json!({"d": 1}));
    }

    /// A store always ahead of what its watch reports (a stale cache), whose
    /// watch may be re-establishing its connection.
    struct Behind {
        inner: EmbeddedStore,
        reconnecting: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl Storage for Behind {
        async fn create(&self, key: &str, value: bytes::Bytes) -> storage::Result<KeyValue> {
            self.inner.create(key, value).await
        }
        async fn get(&self, key: &str, revision: Revision) -> storage::Result<Option<KeyValue>> {
            self.inner.get(key, revision).await
        }
        async fn list(
            &self,
            prefix: &str,
            opts: storage::ListOptions,
        ) -> storage::Result<storage::ListResult> {
            self.inner.list(prefix, opts).await
        }
        async fn count(&self, prefix: &str) -> storage::Result<i64> {
            self.inner.count(prefix).await
        }
        async fn update(
            &self,
            key: &str,
            expected: Revision,
            value: bytes::Bytes,
        ) -> storage::Result<storage::WriteOutcome> {
            self.inner.update(key, expected, value).await
        }
        async fn delete(
            &self,
            key: &str,
            expected: Option<Revision>,
        ) -> storage::Result<storage::WriteOutcome> {
            self.inner.delete(key, expected).await
        }
        async fn watch(
            &self,
            prefix: &str,
            start: Revision,
            progress: bool,
        ) -> storage::Result<storage::WatchStream> {
            self.inner.watch(prefix, start, progress).await
        }
        async fn current_revision(&self) -> storage::Result<Revision> {
            Ok(self.inner.current_revision().await? + 1000)
        }
        async fn compact(&self, revision: Revision) -> storage::Result<()> {
            self.inner.compact(revision).await
        }
        async fn compacted_revision(&self) -> storage::Result<Revision> {
            self.inner.compacted_revision().await
        }
        fn watch_reconnecting(&self) -> bool {
            self.reconnecting.load(std::sync::atomic::Ordering::Relaxed)
        }
    }

    /// The objects under a prefix, from a start key on, whether or not the
    /// prefix has a successor to bound the walk with.
    #[test]
    fn range_walks_the_prefix_from_the_start_key() {
        assert_eq!(prefix_end("/r/a/").as_deref(), Some("/r/a0"));
        assert_eq!(prefix_end("/r/a~").as_deref(), Some("/r/a\u{7f}"));
        assert_eq!(prefix_end("/r/a\u{7f}"), None);
        assert_eq!(prefix_end("/r/é"), None);
        assert_eq!(prefix_end(""), None);
        let keys = [
            "/r/a",
            "/r/a/",
            "/r/a/1",
            "/r/a/2",
            "/r/a/3",
            "/r/a0",
            "/r/a~",
            "/r/a~/1",
            "/r/a~/2",
            "/r/a~~",
            "/r/a\u{7f}",
            "/r/a\u{7f}/1",
            "/r/a\u{7f}\u{7f}",
            "/r/b/1",
        ];
        let objects: Objects = keys
            .iter()
            .map(|k| {
                let o = CachedObject::new((*k).into(), 1, serde_json::json!({}));
                (Arc::<str>::from(*k), Arc::new(o))
            })
            .collect();
        let snapshot = Snapshot {
            objects,
            revision: 1,
            changes: 1,
        };
        let walk = |prefix: &str, start: Option<&str>| -> Vec<String> {
            snapshot
                .range(prefix, start)
                .map(|o| o.key.to_string())
                .collect()
        };
        assert_eq!(walk("/r/a/", None), ["/r/a/", "/r/a/1", "/r/a/2", "/r/a/3"]);
        assert_eq!(walk("/r/a/", Some("/r/a/2")), ["/r/a/2", "/r/a/3"]);
        assert_eq!(walk("/r/a/", Some("/r/a/20")), ["/r/a/3"]);
        assert_eq!(walk("/r/a/", Some("/r/a/4")), Vec::<String>::new());
        assert_eq!(walk("/r/a/", Some("/r/b/")), Vec::<String>::new());
        assert_eq!(walk("/r/a/", Some("/r/")), walk("/r/a/", None));
        assert_eq!(walk("/r/c/", None), Vec::<String>::new());
        assert_eq!(walk("/r/a~/", None), ["/r/a~/1", "/r/a~/2"]);
        // No successor: the keys are compared with the prefix instead.
        assert_eq!(
            walk("/r/a\u{7f}", None),
            ["/r/a\u{7f}", "/r/a\u{7f}/1", "/r/a\u{7f}\u{7f}"]
        );
        assert_eq!(
            walk("/r/a~", None),
            ["/r/a~", "/r/a~/1", "/r/a~/2", "/r/a~~"]
        );
        assert_eq!(walk("/r/a~", Some("/r/a~/2")), ["/r/a~/2", "/r/a~~"]);
    }

    /// A prefix's count is taken once per state of the objects.
    #[test]
    fn prefix_counts_are_kept_per_state_of_the_objects() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
        let cache = WatchCache::unstarted(store, "/r/".into(), CacheOptions::default());
        let snapshot = |keys: &[&str], changes: u64| Snapshot {
            objects: keys
                .iter()
                .map(|k| {
                    let o = CachedObject::new((*k).into(), 1, serde_json::json!({}));
                    (Arc::<str>::from(*k), Arc::new(o))
                })
                .collect(),
            revision: 1,
            changes,
        };
        let first = snapshot(&["/r/a/1", "/r/a/2", "/r/b/1"], 7);
        assert_eq!(cache.count(&first, "/r/a/"), 2);
        assert_eq!(cache.count(&first, "/r/"), 3);
        // The same state (what `changes` says): the kept count.
        let same = snapshot(&["/r/a/1"], 7);
        assert_eq!(cache.count(&same, "/r/a/"), 2);
        // Another state: counted again.
        let next = snapshot(&["/r/a/1"], 8);
        assert_eq!(cache.count(&next, "/r/a/"), 1);
        for changes in 9..9 + COUNTS as u64 {
            cache.count(&snapshot(&[], changes), "/r/a/");
        }
        assert_eq!(cache.counts.lock().unwrap().len(), COUNTS);
        assert_eq!(cache.count(&same, "/r/a/"), 1);
    }

    #[test]
    fn remaining_counts_are_kept_per_revision_prefix_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
        let cache = WatchCache::unstarted(store, "/r/".into(), CacheOptions::default());
        cache.remember_remaining(5, "/r/a/", "/r/a/k", 7);
        assert_eq!(cache.remaining_from(5, "/r/a/", "/r/a/k"), Some(7));
        assert_eq!(cache.remaining_from(6, "/r/a/", "/r/a/k"), None);
        assert_eq!(cache.remaining_from(5, "/r/", "/r/a/k"), None);
        assert_eq!(cache.remaining_from(5, "/r/a/", "/r/a/l"), None);
        for i in 0..REMAINING_HINTS {
            cache.remember_remaining(6, "/r/", &format!("/r/{i}"), 1);
        }
        // Bounded: the oldest went.
        assert_eq!(cache.remaining_from(5, "/r/a/", "/r/a/k"), None);
        assert_eq!(cache.remaining_from(6, "/r/", "/r/0"), Some(1));
    }

    /// A consistent read that finds the cache behind asks the reflector to
    /// re-list (which ends the cache's watchers), but not while the storage
    /// watch is re-establishing itself (etcd restarting): that watch
    /// resumes where it stopped, and client watches stay open.
    #[tokio::test]
    async fn no_relist_while_the_storage_watch_reconnects() {
        let dir = tempfile::tempdir().unwrap();
        let behind = Arc::new(Behind {
            inner: EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap(),
            reconnecting: std::sync::atomic::AtomicBool::new(true),
        });
        let opts = CacheOptions {
            freshness_timeout: Duration::from_millis(50),
            ..CacheOptions::default()
        };
        let cache = WatchCache::unstarted(behind.clone(), "/t/".into(), opts);
        cache.replace(OrdMap::new(), 1);
        let relisting = || async {
            tokio::time::timeout(Duration::from_millis(20), cache.resync.notified())
                .await
                .is_ok()
        };

        assert!(!cache.caught_up().await.unwrap(), "read from storage");
        assert_eq!(
            cache.wait_consistent().await.map_err(|e| e.code()),
            Err(504)
        );
        assert!(!relisting().await);

        behind
            .reconnecting
            .store(false, std::sync::atomic::Ordering::Relaxed);
        assert!(!cache.caught_up().await.unwrap());
        assert!(relisting().await);
    }

    /// An event the storage delivers after reporting progress past it
    /// (etcd-io/etcd#15220) is refused, so the reflector re-lists instead
    /// of losing the object; several events of one transaction are not.
    #[tokio::test]
    async fn late_event_after_progress_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> =
            Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
        let decode: Decoder = Arc::new(|kv: &KeyValue| {
            Ok(CachedObject::new(
                kv.key.clone(),
                kv.mod_revision,
                Value::Object(Default::default()),
            ))
        });
        let cache = WatchCache::unstarted(storage, "/t/".into(), CacheOptions::default());
        cache.replace(OrdMap::new(), 10);
        cache.apply(event("/t/a", 11), &decode).unwrap();
        // A second key written by the same transaction.
        cache.apply(event("/t/b", 11), &decode).unwrap();
        cache.progress(20);
        let late = cache.apply(event("/t/c", 15), &decode);
        assert_eq!(late.map_err(|e| e.code()), Err(500));
        let at_progress = cache.apply(event("/t/c", 20), &decode);
        assert_eq!(at_progress.map_err(|e| e.code()), Err(500));
        cache.apply(event("/t/c", 21), &decode).unwrap();
        let snap = cache.snapshot();
        assert_eq!(snap.revision, 21);
        assert!(snap.get("/t/a").is_some() && snap.get("/t/b").is_some());
    }
}
