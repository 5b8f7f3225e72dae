//! Watches: replay from the log, race-free handover to the live fan-out,
//! bounded per-watcher queues and progress notifications.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::mpsc;

use super::read::{Chunk, log_chunk};
use super::{DbHandle, Shared, closed, lock};
use crate::{Error, Event, Result, Revision, WatchItem, WatchStream};

/// One live watcher in the fan-out.
struct Slot {
    id: u64,
    prefix: String,
    tx: mpsc::Sender<Arc<Event>>,
    too_slow: Arc<AtomicBool>,
}

/// The live watchers. The writer publishes every committed batch under this
/// lock and advances `published` in the same critical section, so a watcher
/// registered when `published` is `P` receives exactly the events after `P`.
pub(super) struct Registry {
    next_id: u64,
    published: Revision,
    closed: bool,
    slots: Vec<Slot>,
}

impl Registry {
    pub(super) fn new(published: Revision) -> Self {
        Self {
            next_id: 0,
            published,
            closed: false,
            slots: Vec::new(),
        }
    }

    /// Hands the events of one commit (in revision order) to the watchers
    /// and records `upto` as published. A watcher whose queue is full is
    /// removed and marked too slow; one whose stream is gone is removed.
    pub(super) fn publish(&mut self, events: &[Arc<Event>], upto: Revision) {
        if !events.is_empty() {
            self.slots.retain(|slot| {
                for event in events {
                    if !event.kv.key.starts_with(&slot.prefix) {
                        continue;
                    }
                    match slot.tx.try_send(Arc::clone(event)) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            tracing::warn!(
                                prefix = %slot.prefix,
                                revision = event.kv.mod_revision,
                                "watcher fell behind and was closed"
                            );
                            slot.too_slow.store(true, Ordering::Release);
                            return false;
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => return false,
                    }
                }
                true
            });
        }
        self.published = self.published.max(upto);
    }

    /// Ends every live watcher (their streams end) and refuses new ones.
    pub(super) fn close(&mut self) {
        self.closed = true;
        self.slots.clear();
    }
}

/// A watcher's membership in the fan-out; leaves it when dropped.
struct Registration {
    shared: Arc<Shared>,
    id: u64,
    too_slow: Arc<AtomicBool>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.shared.registry)
            .slots
            .retain(|s| s.id != self.id);
    }
}

struct Live {
    rx: mpsc::Receiver<Arc<Event>>,
    reg: Registration,
}

/// Joins the fan-out; returns the receiver and the revision after which it
/// receives every event (`None` once the store is closed).
fn register(shared: &Arc<Shared>, prefix: &str, buffer: usize) -> Option<(Live, Revision)> {
    let mut registry = lock(&shared.registry);
    if registry.closed {
        return None;
    }
    let (tx, rx) = mpsc::channel(buffer);
    let id = registry.next_id;
    registry.next_id += 1;
    let too_slow = Arc::new(AtomicBool::new(false));
    registry.slots.push(Slot {
        id,
        prefix: prefix.to_owned(),
        tx,
        too_slow: Arc::clone(&too_slow),
    });
    let published = registry.published;
    drop(registry);
    Some((
        Live {
            rx,
            reg: Registration {
                shared: Arc::clone(shared),
                id,
                too_slow,
            },
        },
        published,
    ))
}

enum Phase {
    /// Replaying the log, not yet registered.
    Replay,
    /// Registered; replaying the log up to `upto`, where live events start.
    CatchUp { live: Live, upto: Revision },
    /// Delivering live events.
    Live(Live),
    /// Finished.
    Done,
}

struct WatchState {
    db: Weak<DbHandle>,
    shared: Arc<Shared>,
    prefix: String,
    progress: Option<Duration>,
    buffer: usize,
    /// Every event up to this revision has been delivered or is in `pending`.
    delivered: Revision,
    pending: VecDeque<Event>,
    phase: Phase,
}

enum Next {
    Recv(Option<Arc<Event>>),
    Tick,
}

/// Starts a watch (see [`Storage::watch`](crate::Storage::watch)).
/// A watch from revision 0 joins the live fan-out before this returns, so
/// it sees every write acknowledged after the call.
pub(super) fn start(
    db: Weak<DbHandle>,
    shared: Arc<Shared>,
    prefix: String,
    start_revision: Revision,
    progress: Option<Duration>,
    buffer: usize,
) -> Result<WatchStream> {
    let mut state = WatchState {
        db,
        shared,
        prefix,
        progress,
        buffer,
        delivered: start_revision,
        pending: VecDeque::new(),
        phase: Phase::Replay,
    };
    if start_revision == 0 {
        let (live, published) =
            register(&state.shared, &state.prefix, state.buffer).ok_or_else(closed)?;
        state.delivered = published;
        state.phase = Phase::Live(live);
    } else {
        let compacted = state.shared.compacted.load(Ordering::Acquire);
        if start_revision < compacted || start_revision < 0 {
            return Err(Error::Compacted {
                requested: start_revision,
                compacted,
            });
        }
    }
    Ok(Box::pin(futures::stream::unfold(state, step)))
}

impl WatchState {
    /// Reads the next replay chunk after `delivered`; `None` once the store
    /// is gone.
    async fn read_chunk(&self, upto: Option<Revision>) -> Result<Option<Chunk>> {
        let Some(handle) = self.db.upgrade() else {
            return Ok(None);
        };
        let prefix = self.prefix.clone();
        let after = self.delivered;
        tokio::task::spawn_blocking(move || log_chunk(&handle.db, &prefix, after, upto))
            .await
            .map_err(|e| Error::Internal(format!("watch replay task failed: {e}")))?
            .map(Some)
    }

    fn absorb(&mut self, chunk: Chunk) {
        self.pending.extend(chunk.events);
        self.delivered = self.delivered.max(chunk.scanned_to);
    }
}

async fn step(mut st: WatchState) -> Option<(Result<WatchItem>, WatchState)> {
    loop {
        if let Some(event) = st.pending.pop_front() {
            return Some((Ok(WatchItem::Event(event)), st));
        }
        match std::mem::replace(&mut st.phase, Phase::Done) {
            Phase::Done => return None,
            Phase::Replay => match st.read_chunk(None).await {
                Err(e) => return Some((Err(e), st)),
                Ok(None) => return None,
                Ok(Some(chunk)) => {
                    let exhausted = chunk.exhausted;
                    st.absorb(chunk);
                    if exhausted {
                        #[cfg(test)]
                        {
                            let ms = st.shared.register_delay_ms.load(Ordering::Acquire);
                            if ms > 0 {
                                tokio::time::sleep(Duration::from_millis(ms)).await;
                            }
                        }
                        let (live, upto) = register(&st.shared, &st.prefix, st.buffer)?;
                        st.phase = Phase::CatchUp { live, upto };
                    } else {
                        st.phase = Phase::Replay;
                    }
                }
            },
            Phase::CatchUp { live, upto } => {
                if st.delivered >= upto {
                    st.phase = Phase::Live(live);
                    continue;
                }
                match st.read_chunk(Some(upto)).await {
                    Err(e) => return Some((Err(e), st)),
                    Ok(None) => return None,
                    Ok(Some(chunk)) => {
                        st.absorb(chunk);
                        st.phase = Phase::CatchUp { live, upto };
                    }
                }
            }
            Phase::Live(mut live) => {
                let next = match st.progress {
                    Some(interval) => {
                        let shared = Arc::clone(&st.shared);
                        tokio::select! {
                            biased;
                            event = live.rx.recv() => Next::Recv(event),
                            () = shared.progress_requested.notified() => Next::Tick,
                            () = tokio::time::sleep(interval) => Next::Tick,
                        }
                    }
                    None => Next::Recv(live.rx.recv().await),
                };
                let next = match next {
                    Next::Tick => {
                        // Everything published up to here is already queued.
                        let published = lock(&st.shared.registry).published;
                        match live.rx.try_recv() {
                            Ok(event) => Some(event),
                            Err(mpsc::error::TryRecvError::Disconnected) => None,
                            Err(mpsc::error::TryRecvError::Empty) => {
                                st.phase = Phase::Live(live);
                                if published >= st.delivered {
                                    st.delivered = published;
                                    return Some((Ok(WatchItem::Progress(published)), st));
                                }
                                continue;
                            }
                        }
                    }
                    Next::Recv(event) => event,
                };
                match next {
                    Some(event) => {
                        st.phase = Phase::Live(live);
                        let rev = event.kv.mod_revision;
                        if rev <= st.delivered {
                            continue;
                        }
                        st.delivered = rev;
                        return Some((Ok(WatchItem::Event(Arc::unwrap_or_clone(event))), st));
                    }
                    None => {
                        if live.reg.too_slow.load(Ordering::Acquire) {
                            return Some((Err(Error::WatcherTooSlow), st));
                        }
                        return None;
                    }
                }
            }
        }
    }
}
