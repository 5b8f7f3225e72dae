//! Watches on etcd: one gRPC watch stream per [`Storage::watch`] call, driven
//! by a background task that feeds a bounded channel.
//!
//! # Resuming
//!
//! The task remembers the last revision it has fully delivered (`last`). When
//! the gRPC stream breaks (etcd restarted, connection lost, leader lost), it
//! re-creates the watch from `last + 1` with exponential backoff (100 ms up to
//! 500 ms, until [`Etcd3Options::watch_retry_timeout`](super::Etcd3Options) if
//! one is set), so the consumer sees one gap-free, duplicate-free stream
//! (etcd's Go client resumes its watches the same way, retrying at most every
//! 100 ms). The retries stay short so that a watch is back soon after etcd
//! is: until then its consumer hears of no progress, and the watch cache's
//! consistent reads wait. While it is re-establishing the watch,
//! [`Storage::watch_reconnecting`](crate::Storage::watch_reconnecting) is
//! true, so that the watch cache does not re-list meanwhile. If
//! `last + 1` has been compacted meanwhile etcd answers with a
//! `compact_revision` and the stream ends with [`Error::Compacted`]. Events at
//! or below the revision a session started after would be repeats and are
//! dropped (defensive: etcd does not send them); within a session nothing is
//! dropped.
//!
//! # Progress notifications
//!
//! With `progress = true` the watch is created with `progress_notify` (etcd
//! sends those only every ~10 minutes) and the task also sends a
//! `RequestProgress` every [`Etcd3Options::progress_interval`](super::Etcd3Options)
//! and whenever [`Storage::request_progress`](crate::Storage::request_progress)
//! is called.
//! An event-less answer with header revision `R` becomes
//! [`WatchItem::Progress`]`(R)`, never lower than an earlier progress or
//! event.
//!
//! etcd before 3.4.31 / 3.5.13 (checked against the version reported at
//! connect time) answers `RequestProgress` out of band (etcd-io/etcd#15220):
//! at once, with its current revision, even while the watcher is still
//! replaying history, and unordered with events already queued for the
//! watcher. Passing that on would claim events as delivered that are still
//! to come (etcd 3.4.23 really answers a watch replaying 3000 revisions with
//! a progress at the last one before sending any event). Against such
//! versions the task therefore
//!
//! - requests progress only once it knows the watcher has caught up: the
//!   watch started at or after the revision etcd had when it created the
//!   watcher, or two reads show that nothing under the prefix changed
//!   between the two (so there is nothing to replay: the usual case of a
//!   watch resumed after an etcd restart, see `nothing_to_replay`), or a
//!   response arrived that ends a catch-up (etcd sends at most
//!   1000 revisions per catch-up response, so one with fewer is the last),
//!   or etcd sent its own periodic progress notification (it sends those
//!   only to caught-up watchers, in order with their events);
//! - passes an answer on only once the answer to a second request, sent when
//!   the first answer arrived, is back without an event at or below the
//!   first answer having arrived in between, so events queued behind it come
//!   first (etcd's send loop drains the queued events meanwhile), and once
//!   reads at the two revisions show that nothing under the prefix changed
//!   after the last event delivered (the events of a watcher etcd still
//!   keeps unsynced come from a 100 ms loop, which a loaded machine delays
//!   past both answers).
//!
//! So on such versions a progress notification costs three round trips, and a
//! watch replaying history in which a key under its prefix was created and
//! deleted again, and nothing else matches, gets progress only after its
//! first event (or etcd's periodic notification). A watcher
//! that falls behind later (a slow consumer) can in principle still see a
//! premature progress on such versions; an event at or below an already
//! reported progress is then logged and still delivered, never dropped (the
//! watch cache, which cannot put it in order any more, re-lists).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_stream::wrappers::ReceiverStream;

use super::{
    Backoff, Inner, convert_kv, etcd, header_revision, is_transient, map_err, prefix_range,
};
use crate::{Error, Event, EventType, KeyValue, Result, Revision, WatchItem, WatchStream};

/// Items buffered between the watch task and the consumer.
const CHANNEL_CAPACITY: usize = 256;

/// etcd's `watchBatchMaxRevs`: the most revisions one catch-up response holds.
const CATCH_UP_BATCH_MAX_REVS: usize = 1000;

/// What a watch is about.
struct Spec {
    key: Vec<u8>,
    range_end: Vec<u8>,
    progress: bool,
    /// Whether events carry the previous state (`prev_kv`).
    prev: bool,
    /// Fired by [`Storage::request_progress_for`](crate::Storage) for this
    /// watch's prefix.
    targeted: Arc<tokio::sync::Notify>,
}

/// One gRPC watch stream with its created watcher.
struct Session {
    sender: etcd::WatchRequestSender,
    responses: etcd::WatchResponseStream,
    /// etcd's revision when it created the watcher.
    created_revision: Revision,
}

/// Where the consumer stands.
struct State {
    /// Every event with a revision `<= last` has been delivered (as far as
    /// etcd's answers tell): the next session starts after it.
    last: Revision,
    /// The revision the current session started after; events at or below
    /// it are repeats (defensive: etcd does not send them).
    floor: Revision,
    /// The last progress revision sent to the consumer.
    last_progress: Revision,
    /// An unconfirmed RequestProgress answer (older etcd only), with the
    /// number of answers that must have arrived for it to be confirmed.
    pending_progress: Option<(Revision, u64)>,
    /// RequestProgress requests sent in this session.
    progress_requests: u64,
    /// RequestProgress answers received in this session (etcd answers
    /// each request once, all with watch id -1).
    progress_answers: u64,
    /// A confirming RequestProgress is to be sent (older etcd only).
    confirm: bool,
    /// Whether the current etcd watcher is known to have caught up with the
    /// store (see the module docs).
    synced: bool,
    /// Until when RequestProgress answers are not trusted (older etcd,
    /// a watcher created behind the store's revision): etcd keeps such a
    /// watcher among its unsynced ones, whose events a background loop
    /// sends every 100 ms, while it answers progress requests at once, so
    /// an answer may pass an event of the same revision.
    settle_until: Option<Instant>,
    /// When to send a RequestProgress that an untrusted answer put off.
    confirm_at: Option<Instant>,
}

/// How long an older etcd's answers are not trusted after a watcher was
/// created behind the store's revision (a few of etcd's 100 ms
/// unsynced-watcher rounds).
const SETTLE: Duration = Duration::from_millis(300);

/// When a new session's progress answers can be trusted (see
/// [`State::settle_until`]).
fn settle_until(inner: &Inner, last: Revision, session: &Session) -> Option<Instant> {
    (!inner.progress_is_ordered && last < session.created_revision).then(|| Instant::now() + SETTLE)
}

/// Why a session ended.
enum End {
    /// The consumer dropped the stream.
    Closed,
    /// A terminal error to hand to the consumer.
    Fatal(Error),
    /// The connection broke; resume.
    Broken(String),
}

/// Starts a watch of `prefix` for changes after `start_revision` (0: after
/// the current revision); with `prev`, events carry the previous state.
pub(super) async fn start(
    inner: Arc<Inner>,
    prefix: &str,
    start_revision: Revision,
    progress: bool,
    prev: bool,
) -> Result<WatchStream> {
    if start_revision < 0 {
        return Err(Error::Internal(format!(
            "invalid watch start revision {start_revision}"
        )));
    }
    let (key, range_end) = prefix_range(prefix);
    let spec = Spec {
        key,
        range_end,
        progress,
        prev,
        targeted: Arc::new(tokio::sync::Notify::new()),
    };
    if progress && let Ok(mut watches) = inner.progress_by_prefix.lock() {
        watches.push((prefix.to_owned(), Arc::downgrade(&spec.targeted)));
    }
    // A concrete start makes "after the current revision" exact and gives
    // resuming a revision to start from.
    let last = if start_revision == 0 {
        inner.current_revision().await?
    } else {
        start_revision
    };
    let session = open(&inner, &spec, last).await.map_err(|e| match e {
        Error::Compacted { compacted, .. } => Error::Compacted {
            requested: start_revision,
            compacted,
        },
        other => other,
    })?;
    let state = State {
        last,
        floor: last,
        last_progress: 0,
        pending_progress: None,
        progress_requests: 0,
        progress_answers: 0,
        confirm: false,
        synced: last >= session.created_revision
            || nothing_to_replay(&inner, &spec, last, session.created_revision).await,
        settle_until: settle_until(&inner, last, &session),
        confirm_at: None,
    };
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    let requests = inner.progress_requests.subscribe();
    tokio::spawn(run(inner, spec, session, state, requests, tx));
    Ok(Box::pin(ReceiverStream::new(rx)))
}

/// Creates an etcd watcher for the changes after `last` and waits until etcd
/// confirms it.
async fn open(inner: &Inner, spec: &Spec, last: Revision) -> Result<Session> {
    let mut client = inner
        .client
        .watch_client()
        .max_decoding_message_size(super::MAX_DECODING_MESSAGE_SIZE);
    let mut options = etcd::WatchOptions::new()
        .with_range(spec.range_end.clone())
        .with_start_revision(last + 1);
    if spec.prev {
        options = options.with_prev_key();
    }
    if spec.progress {
        options = options.with_progress_notify();
    }
    let timeout = inner.opts.request_timeout;
    let created = async {
        let stream = client
            .watch(spec.key.clone(), Some(options))
            .await
            .map_err(map_err)?;
        let (sender, mut responses) = stream.split();
        let first = match responses.next().await {
            Some(Ok(first)) => first,
            Some(Err(e)) => return Err(map_err(e)),
            None => {
                return Err(Error::Unavailable(
                    "etcd closed the watch stream before creating the watcher".to_owned(),
                ));
            }
        };
        if first.compact_revision() != 0 {
            inner.note_compacted(first.compact_revision());
            return Err(Error::Compacted {
                requested: last,
                compacted: first.compact_revision(),
            });
        }
        if first.canceled() || !first.created() {
            return Err(Error::Internal(format!(
                "etcd refused the watch: {}",
                if first.cancel_reason().is_empty() {
                    "no reason given"
                } else {
                    first.cancel_reason()
                }
            )));
        }
        let created_revision = header_revision(first.header(), "watch")?;
        Ok(Session {
            sender,
            responses,
            created_revision,
        })
    };
    tokio::time::timeout(timeout, created)
        .await
        .map_err(|_| Error::Timeout(format!("etcd did not create the watch within {timeout:?}")))?
}

/// Whether nothing under the watch's prefix changed after revision `after`
/// up to `upto`: a watcher created at `upto` to start after `after` has
/// nothing to replay, so that it is caught up at once (`State::synced`),
/// and a progress answer at `upto` passes no event still to come.
///
/// Only asked where it matters, of etcd that answers `RequestProgress` out
/// of band (see the module docs): for a watch with `progress` created
/// behind etcd's revision, which would otherwise get no progress until its
/// first event, so that the watch cache's consistent reads could not catch
/// up (the usual case of a watch resumed after an etcd restart: other
/// keys, such as leases, were written before the watch was back); and
/// before a confirmed progress answer is passed on. A put in the range leaves a key with a newer mod revision at
/// `upto`; a delete leaves fewer keys than at `after`, unless offset by a
/// put, which shows. A key both created and deleted in the range shows
/// neither way: its replayed events may then come after a progress
/// notification, which the watch cache notices (and re-lists). Any read
/// error (e.g. `after` compacted): not known to be caught up.
async fn nothing_to_replay(inner: &Inner, spec: &Spec, after: Revision, upto: Revision) -> bool {
    if inner.progress_is_ordered || !spec.progress || after >= upto {
        return false;
    }
    let range = etcd::GetOptions::new().with_range(spec.range_end.clone());
    let newer = range
        .clone()
        .with_revision(upto)
        .with_min_mod_revision(after + 1)
        .with_keys_only()
        .with_limit(1);
    let count_at = |revision: Revision| range.clone().with_revision(revision).with_count_only();
    let read = |opts: etcd::GetOptions| {
        inner.request("read", super::Retry::Read, move |mut kv| {
            let (key, opts) = (spec.key.clone(), opts.clone());
            async move { kv.get(key, Some(opts)).await }
        })
    };
    let (Ok(newer), Ok(before), Ok(now)) =
        tokio::join!(read(newer), read(count_at(after)), read(count_at(upto)))
    else {
        return false;
    };
    newer.kvs().is_empty() && before.count() == now.count()
}

/// The watch task: drives sessions and resumes broken ones.
async fn run(
    inner: Arc<Inner>,
    spec: Spec,
    mut session: Session,
    mut state: State,
    mut requests: tokio::sync::watch::Receiver<u64>,
    tx: mpsc::Sender<Result<WatchItem>>,
) {
    loop {
        match drive(&inner, &spec, &mut session, &mut state, &mut requests, &tx).await {
            End::Closed => return,
            End::Fatal(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
            End::Broken(reason) => {
                tracing::warn!(
                    reason = %reason,
                    last_revision = state.last,
                    "etcd watch stream broke; resuming"
                );
                let reconnecting = Reconnecting::new(&inner);
                let resumed = resume(&inner, &spec, &mut state, &tx, reason).await;
                drop(reconnecting);
                match resumed {
                    Ok(next) => session = next,
                    Err(End::Fatal(e)) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                    Err(_) => return,
                }
            }
        }
    }
}

/// Counts a watch task as re-establishing its watch while it lives.
struct Reconnecting<'a>(&'a Inner);

impl<'a> Reconnecting<'a> {
    fn new(inner: &'a Inner) -> Self {
        inner.reconnecting.fetch_add(1, Ordering::Relaxed);
        Reconnecting(inner)
    }
}

impl Drop for Reconnecting<'_> {
    fn drop(&mut self) {
        self.0.reconnecting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Re-creates the watcher from `state.last + 1` with backoff.
async fn resume(
    inner: &Inner,
    spec: &Spec,
    state: &mut State,
    tx: &mpsc::Sender<Result<WatchItem>>,
    mut last_error: String,
) -> std::result::Result<Session, End> {
    let started = Instant::now();
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
    loop {
        let wait = backoff.next_delay();
        if let Some(limit) = inner.opts.watch_retry_timeout
            && started.elapsed() + wait > limit
        {
            return Err(End::Fatal(Error::Unavailable(format!(
                "etcd watch could not be re-established within {limit:?}: {last_error}"
            ))));
        }
        tokio::select! {
            _ = tx.closed() => return Err(End::Closed),
            _ = tokio::time::sleep(wait) => {}
        }
        match open(inner, spec, state.last).await {
            Ok(session) => {
                tracing::info!(last_revision = state.last, "etcd watch resumed");
                state.synced = state.last >= session.created_revision
                    || nothing_to_replay(inner, spec, state.last, session.created_revision).await;
                state.pending_progress = None;
                state.progress_requests = 0;
                state.progress_answers = 0;
                state.confirm = false;
                state.floor = state.last;
                state.settle_until = settle_until(inner, state.last, &session);
                state.confirm_at = None;
                return Ok(session);
            }
            Err(e) if is_transient(&e) => last_error = e.to_string(),
            Err(e) => return Err(End::Fatal(e)),
        }
    }
}

/// Forwards one session's responses until it ends.
async fn drive(
    inner: &Inner,
    spec: &Spec,
    session: &mut Session,
    state: &mut State,
    requests: &mut tokio::sync::watch::Receiver<u64>,
    tx: &mpsc::Sender<Result<WatchItem>>,
) -> End {
    let mut ticker = tokio::time::interval_at(
        Instant::now() + inner.opts.progress_interval,
        inner.opts.progress_interval,
    );
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut requests_open = true;
    // Since when a progress request is waiting for its answer with nothing
    // heard from etcd: a member that stopped (SIGSTOP, a partition keeping
    // TCP up) answers nothing, and the stream is then resumed elsewhere.
    let mut silent_since: Option<Instant> = None;
    let stall = inner.opts.attempt_timeout * 2;
    // Requests sent before the last response (any response proves the
    // member alive; a newer etcd answers several deferred requests once).
    let mut requests_before_response = state.progress_requests;
    loop {
        let may_request_progress = spec.progress && (state.synced || inner.progress_is_ordered);
        if std::mem::take(&mut state.confirm) {
            state.progress_requests += 1;
            if let Err(e) = session.sender.request_progress().await {
                return End::Broken(super::describe(&e));
            }
        }
        // Only a caught-up watcher: etcd defers its answers to one still
        // replaying history, which can take long.
        if state.synced && state.progress_requests > requests_before_response {
            silent_since.get_or_insert_with(Instant::now);
        }
        tokio::select! {
            _ = tx.closed() => return End::Closed,
            message = session.responses.next() => match message {
                Some(Ok(resp)) => {
                    silent_since = None;
                    requests_before_response = state.progress_requests;
                    if let Some(end) = handle(inner, spec, state, tx, resp).await {
                        return end;
                    }
                }
                Some(Err(e)) => return End::Broken(super::describe(&e)),
                None => return End::Broken("etcd ended the watch stream".to_owned()),
            },
            () = tokio::time::sleep_until(silent_since.unwrap_or_else(Instant::now) + stall),
                if silent_since.is_some() =>
            {
                return End::Broken(format!(
                    "etcd answered no progress request within {stall:?}"
                ));
            }
            () = tokio::time::sleep_until(state.confirm_at.unwrap_or_else(Instant::now)),
                if state.confirm_at.is_some() =>
            {
                state.confirm_at = None;
                state.progress_requests += 1;
                if let Err(e) = session.sender.request_progress().await {
                    return End::Broken(super::describe(&e));
                }
            }
            _ = ticker.tick(), if may_request_progress => {
                state.progress_requests += 1;
                if let Err(e) = session.sender.request_progress().await {
                    return End::Broken(super::describe(&e));
                }
            }
            () = spec.targeted.notified(), if may_request_progress => {
                state.progress_requests += 1;
                if let Err(e) = session.sender.request_progress().await {
                    return End::Broken(super::describe(&e));
                }
            }
            changed = requests.changed(), if may_request_progress && requests_open => {
                requests_open = changed.is_ok();
                if requests_open {
                    state.progress_requests += 1;
                    if let Err(e) = session.sender.request_progress().await {
                        return End::Broken(super::describe(&e));
                    }
                }
            }
        }
    }
}

/// Handles one watch response; `Some` ends the session.
async fn handle(
    inner: &Inner,
    spec: &Spec,
    state: &mut State,
    tx: &mpsc::Sender<Result<WatchItem>>,
    resp: etcd::WatchResponse,
) -> Option<End> {
    if resp.compact_revision() != 0 {
        inner.note_compacted(resp.compact_revision());
        return Some(End::Fatal(Error::Compacted {
            requested: state.last,
            compacted: resp.compact_revision(),
        }));
    }
    if resp.canceled() {
        return Some(End::Broken(format!(
            "etcd cancelled the watch: {}",
            resp.cancel_reason()
        )));
    }
    if resp.created() {
        return None;
    }
    let events = resp.events();
    if events.is_empty() {
        // A progress notification: etcd's periodic ones carry the watcher's
        // id and are only sent to caught-up watchers, in order with its
        // events; answers to RequestProgress carry id -1.
        let periodic = resp.watch_id() != -1;
        if periodic {
            state.synced = true;
        } else {
            state.progress_answers += 1;
            // A newer etcd answers only caught-up watchers.
            state.synced |= inner.progress_is_ordered;
        }
        let revision = resp.header().map(etcd::ResponseHeader::revision)?;
        if !spec.progress {
            return None;
        }
        if periodic || inner.progress_is_ordered {
            return emit_progress(state, tx, revision).await;
        }
        if !state.synced {
            return None;
        }
        if let Some(until) = state.settle_until {
            if Instant::now() < until {
                // Too early to trust (see `State::settle_until`): ask again
                // once the watcher has had time to catch up.
                state.pending_progress = None;
                state.confirm_at = Some(until);
                return None;
            }
            state.settle_until = None;
        }
        // An older etcd answers RequestProgress out of band: events at or
        // below the answer's revision may still be queued behind it. Trust
        // an answer once the answer to a second request, sent after it
        // arrived, is back. Answers all carry id -1, so with several
        // requests in flight only the count tells which one is back: the
        // confirming request is the next one sent, and answers come in
        // request order.
        return match state.pending_progress {
            Some((confirmed, needed)) if state.progress_answers >= needed => {
                state.pending_progress = None;
                // Events at or below the answer can still be on their way
                // even so: those of a watcher etcd keeps unsynced come from
                // its 100 ms sync loop, which falls behind on a loaded
                // machine. Trust the answer only when the store shows that
                // nothing under the prefix changed after the last event
                // delivered, up to the answer; otherwise the next answer
                // will do, after the events.
                if confirmed > state.last
                    && !nothing_to_replay(inner, spec, state.last, confirmed).await
                {
                    return None;
                }
                emit_progress(state, tx, confirmed).await
            }
            // The answer to a request sent before the pending one arrived.
            Some(_) => None,
            None => {
                state.pending_progress = Some((revision, state.progress_requests + 1));
                state.confirm = true;
                None
            }
        };
    }
    let floor = state.floor;
    let mut revisions = 0usize;
    let mut previous_revision = 0;
    for event in events {
        let item = match convert_event(event) {
            Ok(item) => item,
            Err(e) => return Some(End::Fatal(e)),
        };
        let revision = item.kv.mod_revision;
        if revision != previous_revision {
            revisions += 1;
            previous_revision = revision;
        }
        if revision <= floor {
            // Already delivered by an earlier session.
            continue;
        }
        if state.pending_progress.is_some_and(|(p, _)| revision <= p) {
            // That progress answer was premature.
            state.pending_progress = None;
        }
        if revision <= state.last_progress {
            tracing::warn!(
                revision,
                progress = state.last_progress,
                "etcd delivered an event at or below an earlier progress notification"
            );
        }
        if tx.send(Ok(WatchItem::Event(item))).await.is_err() {
            return Some(End::Closed);
        }
        state.last = state.last.max(revision);
    }
    if revisions < CATCH_UP_BATCH_MAX_REVS {
        state.synced = true;
    }
    None
}

/// Sends `Progress(revision)` unless it would not move the consumer forward.
async fn emit_progress(
    state: &mut State,
    tx: &mpsc::Sender<Result<WatchItem>>,
    revision: Revision,
) -> Option<End> {
    if revision <= state.last_progress || revision < state.last {
        return None;
    }
    state.last = revision;
    state.last_progress = revision;
    tx.send(Ok(WatchItem::Progress(revision)))
        .await
        .err()
        .map(|_| End::Closed)
}

/// Converts an etcd watch event.
fn convert_event(event: &etcd::Event) -> Result<Event> {
    let kv = event
        .kv()
        .cloned()
        .ok_or_else(|| Error::Internal("etcd watch event without key-value".to_owned()))?;
    let prev = event.prev_kv().cloned().map(convert_kv).transpose()?;
    match event.event_type() {
        etcd::EventType::Put => {
            let kv = convert_kv(kv)?;
            let kind = if kv.version == 1 {
                EventType::Created
            } else {
                EventType::Modified
            };
            Ok(Event { kind, kv, prev })
        }
        etcd::EventType::Delete => {
            let tombstone = convert_kv(kv)?;
            // The deleted state: the last value with the delete's revision;
            // without prev_kv (compacted) only the key and revision are known.
            let kv = match &prev {
                Some(prev) => KeyValue {
                    mod_revision: tombstone.mod_revision,
                    ..prev.clone()
                },
                None => tombstone,
            };
            Ok(Event {
                kind: EventType::Deleted,
                kv,
                prev,
            })
        }
    }
}
