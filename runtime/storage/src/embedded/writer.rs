//! The single writer thread: group commit of all pending write requests.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use redb::{Durability, ReadableTable, Table};
use tokio::sync::{mpsc, oneshot};

use super::codec::{decode_event_key, decode_kv, encode_event, encode_kv};
use super::{DbHandle, HISTORY, KV, LOG, META, META_COMPACTED, META_CURRENT, Shared, db_err};
use crate::{Error, Event, EventType, KeyValue, Result, Revision, WriteOutcome};

/// Log entries deleted per batch (piggybacked on writes) by the garbage
/// collection of compacted history.
const GC_PER_BATCH: usize = 256;
/// Log entries deleted per transaction while the writer is otherwise idle.
const GC_PER_IDLE_STEP: usize = 4096;

/// A batch stops taking requests once their keys and values add up to this.
const MAX_BATCH_BYTES: usize = 64 << 20;

/// A write operation.
pub(super) enum Op {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        expected: Revision,
        value: Bytes,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
    Compact {
        revision: Revision,
    },
}

impl Op {
    /// Bytes of key and value the operation writes.
    fn size(&self) -> usize {
        match self {
            Op::Create { key, value } | Op::Update { key, value, .. } => {
                key.len().saturating_add(value.len())
            }
            Op::Delete { key, .. } => key.len(),
            Op::Compact { .. } => 0,
        }
    }
}

/// The writer's answer to one request.
pub(super) enum Reply {
    Outcome(WriteOutcome),
    Compacted,
}

/// A write request and where to send its answer.
pub(super) struct Request {
    pub(super) op: Op,
    pub(super) reply: oneshot::Sender<Result<Reply>>,
}

/// What one committed transaction did.
struct Committed {
    results: Vec<Result<Reply>>,
    events: Vec<Arc<Event>>,
    current: Revision,
    compacted: Revision,
    garbage_left: bool,
}

/// The writer's database: the open handle (none while a reopen failed),
/// the slot readers take it from, and how to open it again.
pub(super) struct Database {
    pub(super) handle: Arc<DbHandle>,
    pub(super) slot: Arc<Mutex<Option<Arc<DbHandle>>>>,
    pub(super) path: PathBuf,
    pub(super) cache_size: usize,
}

/// The room a reopen wants on the store's disk first, in bytes.
const SPACE_PROBE: usize = 4 << 20;

/// How long a reopen waits for reads still using the old database.
const REOPEN_WAIT: Duration = Duration::from_secs(5);

pub(super) struct Writer {
    /// The open database; `None` after a reopen that failed (its directory
    /// lock kept in `lock` until the next attempt).
    handle: Option<Arc<DbHandle>>,
    lock: Option<std::fs::File>,
    /// The first error of the I/O failure the database is in, if any.
    last_io_error: Option<String>,
    slot: Arc<Mutex<Option<Arc<DbHandle>>>>,
    path: PathBuf,
    cache_size: usize,
    rx: mpsc::Receiver<Request>,
    shared: Arc<Shared>,
    current: Revision,
    compacted: Revision,
    /// Whether log entries at or below `compacted` remain to be deleted.
    gc_pending: bool,
    max_batch: usize,
    /// How long the writer must have been idle before a commit records
    /// redb's allocator state (*quick repair*), and how long it waits after
    /// a commit that did not before it records the state in an empty commit
    /// of its own.
    ///
    /// After a crash redb rebuilds its allocator state by walking the whole
    /// database (0.2–0.5 s at 100,000 objects of ~1 KiB, linear in the size)
    /// unless the last commit before the crash recorded it. Recording it
    /// costs a second `fsync` per commit (two-phase commit): 19 % fewer
    /// creates/s for one sequential client when every commit did. So commits
    /// under load (closer together than this) leave it out, and the writer
    /// records it once the load pauses: a server that crashes while idle or
    /// lightly loaded starts again without the walk; one that crashes under
    /// sustained writes pays it once.
    quick_repair_idle: Duration,
    /// When the last commit ended (none yet in this process).
    last_commit: Option<Instant>,
    /// Whether the last commit left out the allocator state (a crash now
    /// would need the full repair; see `quick_repair_idle`).
    checkpoint_owed: bool,
}

impl Writer {
    /// A writer for `db` at `current` / `compacted`; the last argument is
    /// (most requests per commit, `quick_repair_idle`).
    pub(super) fn new(
        db: Database,
        rx: mpsc::Receiver<Request>,
        shared: Arc<Shared>,
        current: Revision,
        compacted: Revision,
        gc_pending: bool,
        (max_batch, quick_repair_idle): (usize, Duration),
    ) -> Self {
        Self {
            handle: Some(db.handle),
            lock: None,
            last_io_error: None,
            slot: db.slot,
            path: db.path,
            cache_size: db.cache_size,
            rx,
            shared,
            current,
            compacted,
            gc_pending,
            max_batch,
            quick_repair_idle,
            last_commit: None,
            checkpoint_owed: false,
        }
    }

    /// The thread's main loop; returns when every sender is gone and the
    /// queue is empty.
    pub(super) fn run(mut self) {
        // Compacted history left over from a previous run is collected too.
        let mut gc_pending = self.gc_pending;
        // Waits with a timeout (for the allocator-state checkpoint) need a
        // timer; the writer is not on the server's runtime.
        let timer = match tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
        {
            Ok(rt) => Some(rt),
            Err(e) => {
                tracing::warn!(error = %e, "no timer for the writer; crash recovery may need a full repair");
                None
            }
        };
        loop {
            let first = if gc_pending {
                match self.rx.try_recv() {
                    Ok(req) => Some(req),
                    Err(mpsc::error::TryRecvError::Empty) => None,
                    Err(mpsc::error::TryRecvError::Disconnected) => break,
                }
            } else if let (true, Some(timer)) = (self.checkpoint_owed, &timer) {
                let next = timer.block_on(async {
                    tokio::time::timeout(self.quick_repair_idle, self.rx.recv()).await
                });
                match next {
                    Ok(Some(req)) => Some(req),
                    Ok(None) => break,
                    Err(_) => {
                        self.checkpoint();
                        continue;
                    }
                }
            } else {
                match self.rx.blocking_recv() {
                    Some(req) => Some(req),
                    None => break,
                }
            };
            let Some(first) = first else {
                gc_pending = match self.commit(&[], GC_PER_IDLE_STEP) {
                    Ok(done) => self.finish(done, Vec::new()),
                    Err(e) => {
                        tracing::warn!(error = %e, "collecting compacted history failed");
                        false
                    }
                };
                continue;
            };
            #[cfg(test)]
            while self.shared.pause.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let mut bytes = first.op.size();
            let mut batch = Vec::with_capacity(64);
            batch.push(first);
            while batch.len() < self.max_batch && bytes < MAX_BATCH_BYTES {
                match self.rx.try_recv() {
                    Ok(req) => {
                        bytes = bytes.saturating_add(req.op.size());
                        batch.push(req);
                    }
                    Err(_) => break,
                }
            }
            gc_pending = self.process(batch);
        }
        tracing::debug!("embedded store writer stopped");
    }

    /// Applies, commits and answers one batch; returns whether compacted
    /// history remains to be collected.
    fn process(&mut self, batch: Vec<Request>) -> bool {
        if self.handle.is_none() {
            self.reopen();
        }
        let ops: Vec<&Op> = batch.iter().map(|r| &r.op).collect();
        let result = self.commit(&ops, GC_PER_BATCH);
        let result = self.explain(result);
        if matches!(result, Err(Error::Unavailable(_))) {
            // An I/O error (a full disk) leaves redb refusing every later
            // transaction until it is opened again: answer this batch, then
            // reopen so that writes resume once the cause is gone.
            let pending = self.answer(batch, result);
            self.reopen();
            return pending;
        }
        self.answer(batch, result)
    }

    /// Answers `batch` from the outcome of its commit.
    fn answer(&mut self, batch: Vec<Request>, result: Result<Committed>) -> bool {
        match result {
            Ok(done) => self.finish(done, batch),
            Err(e) if batch.len() > 1 => {
                // Retry one by one so that one bad request cannot fail the
                // others (an I/O failure fails each of them anyway).
                tracing::warn!(error = %e, size = batch.len(), "batch commit failed, retrying requests one by one");
                let mut pending = false;
                for req in batch {
                    pending = match self.commit(&[&req.op], GC_PER_BATCH) {
                        Ok(done) => self.finish(done, vec![req]),
                        Err(e) => {
                            let _ = req.reply.send(Err(e));
                            false
                        }
                    };
                }
                pending
            }
            Err(e) => {
                tracing::warn!(error = %e, "commit failed");
                for req in batch {
                    let _ = req.reply.send(Err(clone_err(&e)));
                }
                false
            }
        }
    }

    /// After a successful commit: advance the counters, publish the events,
    /// answer the requests.
    fn finish(&mut self, done: Committed, batch: Vec<Request>) -> bool {
        self.current = done.current;
        self.compacted = done.compacted;
        self.shared.committed.store(done.current, Ordering::Release);
        self.shared
            .compacted
            .store(done.compacted, Ordering::Release);
        self.shared.commits.fetch_add(1, Ordering::AcqRel);
        super::lock(&self.shared.registry).publish(&done.events, done.current);
        for (req, result) in batch.into_iter().zip(done.results) {
            // The requester may have gone away; the write stands.
            let _ = req.reply.send(result);
        }
        done.garbage_left
    }

    /// Closes and opens the database again after an I/O error, as redb
    /// asks: readers see the store closed (503) meanwhile. When the failed
    /// commit did reach the disk after all, its events are published now,
    /// so watchers miss nothing that is stored.
    fn reopen(&mut self) {
        // Reopening on a disk that is still full would fail and leave the
        // store closed to readers too; the poisoned database still reads.
        if let Err(e) = self.probe_space() {
            tracing::debug!(error = %e, "no room on the store's disk yet; not reopening");
            return;
        }
        let lock = match self.handle.take() {
            Some(handle) => {
                drop(super::lock(&self.slot).take());
                let deadline = Instant::now() + REOPEN_WAIT;
                while Arc::strong_count(&handle) > 1 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
                match Arc::try_unwrap(handle) {
                    Ok(DbHandle { db, _lock }) => {
                        drop(db);
                        _lock
                    }
                    Err(handle) => {
                        tracing::warn!("reads still hold the embedded store; not reopened");
                        *super::lock(&self.slot) = Some(Arc::clone(&handle));
                        self.handle = Some(handle);
                        return;
                    }
                }
            }
            None => match self.lock.take() {
                Some(lock) => lock,
                None => return,
            },
        };
        let db = match redb::Builder::new()
            .set_cache_size(self.cache_size)
            .create(&self.path)
        {
            Ok(db) => db,
            Err(e) => {
                tracing::error!(error = %e, path = %self.path.display(), "cannot reopen the embedded store; writes fail until it can");
                self.lock = Some(lock);
                return;
            }
        };
        let handle = Arc::new(DbHandle { db, _lock: lock });
        match super::read::log_chunk(&handle.db, "", self.current, None) {
            Ok(chunk) if !chunk.events.is_empty() => {
                // Bounded chunks: a failed commit is one batch at most.
                let events: Vec<Arc<Event>> = chunk.events.into_iter().map(Arc::new).collect();
                self.current = chunk.scanned_to;
                self.shared.committed.store(self.current, Ordering::Release);
                super::lock(&self.shared.registry).publish(&events, self.current);
                tracing::warn!(
                    revision = self.current,
                    "a commit reported as failed was stored; its events are published"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "reading the log after reopening failed"),
        }
        tracing::info!(path = %self.path.display(), revision = self.current, "reopened the embedded store after an I/O error");
        self.last_io_error = None;
        *super::lock(&self.slot) = Some(Arc::clone(&handle));
        self.handle = Some(handle);
    }

    /// Whether [`SPACE_PROBE`] bytes can be written beside the database.
    fn probe_space(&self) -> std::io::Result<()> {
        use std::io::Write;
        let probe = self.path.with_file_name(".space-probe");
        let result = std::fs::File::create(&probe).and_then(|mut file| {
            let chunk = vec![0u8; 64 * 1024];
            for _ in 0..SPACE_PROBE / chunk.len() {
                file.write_all(&chunk)?;
            }
            file.sync_all()
        });
        let _ = std::fs::remove_file(&probe);
        result
    }

    /// The error of a failed commit as the client reads it: redb answers
    /// every transaction after an I/O error with "Previous I/O error
    /// occurred"; the first error (a full disk, say) says more.
    fn explain(&mut self, result: Result<Committed>) -> Result<Committed> {
        match result {
            Err(Error::Unavailable(message)) if message.contains("Previous I/O error") => {
                Err(Error::Unavailable(match &self.last_io_error {
                    Some(first) => format!("{first} (writes resume once the disk has room again)"),
                    None => message,
                }))
            }
            Err(Error::Unavailable(message)) => {
                self.last_io_error = Some(message.clone());
                Err(Error::Unavailable(message))
            }
            other => other,
        }
    }

    /// Records redb's allocator state in an empty commit, so that a crash
    /// from now on needs no full repair (see `quick_repair_idle`).
    fn checkpoint(&mut self) {
        self.checkpoint_owed = false;
        // No compacted history is pending here (the loop collects it
        // first), so the empty commit changes nothing but the state.
        if let Err(e) = self.commit_with(&[], 0, true) {
            tracing::debug!(error = %e, "recording the allocator state failed");
        }
        self.last_commit = Some(Instant::now());
    }

    /// Applies `ops` in one write transaction and commits it durably. The
    /// commit records the allocator state when the writer was idle before
    /// it (see `quick_repair_idle`).
    fn commit(&mut self, ops: &[&Op], gc_limit: usize) -> Result<Committed> {
        let quick = self
            .last_commit
            .is_none_or(|at| at.elapsed() >= self.quick_repair_idle);
        let result = self.commit_with(ops, gc_limit, quick);
        self.last_commit = Some(Instant::now());
        if result.is_ok() {
            self.checkpoint_owed = !quick;
        }
        result
    }

    fn commit_with(&self, ops: &[&Op], gc_limit: usize, quick: bool) -> Result<Committed> {
        let handle = self.handle.as_ref().ok_or_else(|| {
            Error::Unavailable(
                "embedded store: the database could not be reopened after an I/O error".into(),
            )
        })?;
        let mut txn = handle.db.begin_write().map_err(db_err)?;
        txn.set_durability(Durability::Immediate).map_err(db_err)?;
        txn.set_quick_repair(quick);
        let mut state = BatchState {
            current: self.current,
            compacted: self.compacted,
            events: Vec::new(),
        };
        let mut results = Vec::with_capacity(ops.len());
        let garbage_left;
        {
            let mut tables = Tables {
                kv: txn.open_table(KV).map_err(db_err)?,
                log: txn.open_table(LOG).map_err(db_err)?,
                history: txn.open_table(HISTORY).map_err(db_err)?,
            };
            for op in ops {
                results.push(tables.apply(op, &mut state)?);
            }
            let mut meta = txn.open_table(META).map_err(db_err)?;
            if state.current != self.current {
                meta.insert(META_CURRENT, state.current).map_err(db_err)?;
            }
            if state.compacted != self.compacted {
                meta.insert(META_COMPACTED, state.compacted)
                    .map_err(db_err)?;
            }
            garbage_left = tables.collect_garbage(state.compacted, gc_limit)?;
        }
        txn.commit().map_err(db_err)?;
        Ok(Committed {
            results,
            events: state.events,
            current: state.current,
            compacted: state.compacted,
            garbage_left,
        })
    }
}

fn clone_err(e: &Error) -> Error {
    match e {
        Error::Unavailable(m) => Error::Unavailable(m.clone()),
        other => Error::Internal(other.to_string()),
    }
}

/// Revision counters and events of the batch being applied.
struct BatchState {
    current: Revision,
    compacted: Revision,
    events: Vec<Arc<Event>>,
}

struct Tables<'txn> {
    kv: Table<'txn, &'static str, &'static [u8]>,
    log: Table<'txn, i64, &'static [u8]>,
    history: Table<'txn, (&'static str, i64), ()>,
}

impl Tables<'_> {
    fn current(&self, key: &str) -> Result<Option<KeyValue>> {
        match self.kv.get(key).map_err(db_err)? {
            Some(guard) => Ok(Some(decode_kv(key, guard.value())?)),
            None => Ok(None),
        }
    }

    /// Records a successful change at revision `event.kv.mod_revision`.
    fn record(&mut self, event: Event, state: &mut BatchState) -> Result<()> {
        let rev = event.kv.mod_revision;
        let key = event.kv.key.as_str();
        match event.kind {
            EventType::Deleted => {
                self.kv.remove(key).map_err(db_err)?;
            }
            _ => {
                self.kv
                    .insert(key, encode_kv(&event.kv).as_slice())
                    .map_err(db_err)?;
            }
        }
        self.log
            .insert(rev, encode_event(&event)?.as_slice())
            .map_err(db_err)?;
        self.history.insert((key, rev), ()).map_err(db_err)?;
        state.current = rev;
        state.events.push(Arc::new(event));
        Ok(())
    }

    /// Applies one operation. The outer error aborts the transaction; the
    /// inner result is the operation's own answer.
    fn apply(&mut self, op: &Op, state: &mut BatchState) -> Result<Result<Reply>> {
        match op {
            Op::Create { key, value } => {
                if let Some(existing) = self.current(key)? {
                    return Ok(Ok(Reply::Outcome(WriteOutcome::Conflict(Some(existing)))));
                }
                let rev = state.current + 1;
                let kv = KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                    create_revision: rev,
                    mod_revision: rev,
                    version: 1,
                    stale: false,
                };
                self.record(
                    Event {
                        kind: EventType::Created,
                        kv: kv.clone(),
                        prev: None,
                    },
                    state,
                )?;
                Ok(Ok(Reply::Outcome(WriteOutcome::Done(kv))))
            }
            Op::Update {
                key,
                expected,
                value,
            } => {
                let prev = match self.current(key)? {
                    Some(prev) if prev.mod_revision == *expected => prev,
                    other => return Ok(Ok(Reply::Outcome(WriteOutcome::Conflict(other)))),
                };
                let rev = state.current + 1;
                let kv = KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                    create_revision: prev.create_revision,
                    mod_revision: rev,
                    version: prev.version + 1,
                    stale: false,
                };
                self.record(
                    Event {
                        kind: EventType::Modified,
                        kv: kv.clone(),
                        prev: Some(prev),
                    },
                    state,
                )?;
                Ok(Ok(Reply::Outcome(WriteOutcome::Done(kv))))
            }
            Op::Delete { key, expected } => {
                let Some(prev) = self.current(key)? else {
                    return Ok(Err(Error::NotFound(key.clone())));
                };
                if let Some(expected) = expected
                    && prev.mod_revision != *expected
                {
                    return Ok(Ok(Reply::Outcome(WriteOutcome::Conflict(Some(prev)))));
                }
                let rev = state.current + 1;
                let kv = KeyValue {
                    mod_revision: rev,
                    ..prev.clone()
                };
                self.record(
                    Event {
                        kind: EventType::Deleted,
                        kv: kv.clone(),
                        prev: Some(prev),
                    },
                    state,
                )?;
                Ok(Ok(Reply::Outcome(WriteOutcome::Done(kv))))
            }
            Op::Compact { revision } => {
                if *revision > state.current {
                    return Ok(Err(Error::FutureRevision {
                        requested: *revision,
                        current: state.current,
                    }));
                }
                if *revision > state.compacted {
                    state.compacted = *revision;
                }
                Ok(Ok(Reply::Compacted))
            }
        }
    }

    /// Deletes up to `limit` log entries at or below `compacted` (and their
    /// index entries); returns whether more remain.
    fn collect_garbage(&mut self, compacted: Revision, limit: usize) -> Result<bool> {
        for _ in 0..limit {
            let first = match self.log.first().map_err(db_err)? {
                Some((rev, value)) if rev.value() <= compacted => {
                    let key = decode_event_key(value.value()).ok().map(str::to_owned);
                    Some((rev.value(), key))
                }
                _ => None,
            };
            let Some((rev, key)) = first else {
                return Ok(false);
            };
            self.log.remove(rev).map_err(db_err)?;
            match key {
                Some(key) => {
                    self.history.remove((key.as_str(), rev)).map_err(db_err)?;
                }
                None => tracing::warn!(revision = rev, "dropping an unreadable log record"),
            }
        }
        Ok(matches!(
            self.log.first().map_err(db_err)?,
            Some((rev, _)) if rev.value() <= compacted
        ))
    }
}
