//! Reads (get, list, count) at the latest or a past revision, and the log
//! reads behind watch replay. All run on a redb read transaction (a
//! consistent snapshot) and are blocking.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use redb::{AccessGuard, Database};

use super::codec::{decode_event, decode_event_key, decode_kv};
use super::{HISTORY, KV, LOG, Snapshot, db_err, resolve_revision};
use crate::{Error, Event, KeyValue, ListOptions, ListResult, Result, Revision};

/// Log entries scanned by one watch replay step.
const REPLAY_MAX_ENTRIES: usize = 1024;
/// Bytes of events collected by one watch replay step (at least one event).
const REPLAY_MAX_BYTES: usize = 8 << 20;

/// Reads `key` at `revision` (0 = latest).
pub(super) fn get(db: &Database, key: &str, revision: Revision) -> Result<Option<KeyValue>> {
    let snap = Snapshot::new(db)?;
    let rev = resolve_revision(revision, snap.current, snap.compacted)?;
    if rev < snap.current {
        // The first change of the key after `rev` knows its state at `rev`.
        let history = snap.txn.open_table(HISTORY).map_err(db_err)?;
        let next = history
            .range((key, rev + 1)..=(key, i64::MAX))
            .map_err(db_err)?
            .next();
        if let Some(entry) = next {
            let (index_key, _) = entry.map_err(db_err)?;
            let changed_at = index_key.value().1;
            let log = snap.txn.open_table(LOG).map_err(db_err)?;
            let record = log.get(changed_at).map_err(db_err)?.ok_or_else(|| {
                Error::Internal(format!(
                    "log entry {changed_at} is missing from the embedded store"
                ))
            })?;
            return Ok(decode_event(changed_at, record.value())?.prev);
        }
    }
    let kv = snap.txn.open_table(KV).map_err(db_err)?;
    match kv.get(key).map_err(db_err)? {
        Some(guard) => Ok(Some(decode_kv(key, guard.value())?)),
        None => Ok(None),
    }
}

/// Counts the keys under `prefix` at the latest revision.
pub(super) fn count(db: &Database, prefix: &str) -> Result<i64> {
    let snap = Snapshot::new(db)?;
    let kv = snap.txn.open_table(KV).map_err(db_err)?;
    let mut n = 0i64;
    for entry in kv.range(prefix..).map_err(db_err)? {
        let (key, _) = entry.map_err(db_err)?;
        if !key.value().starts_with(prefix) {
            break;
        }
        n += 1;
    }
    Ok(n)
}

/// Lists the keys under `prefix` at `opts.revision` (0 = latest).
pub(super) fn list(db: &Database, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
    let snap = Snapshot::new(db)?;
    let rev = resolve_revision(opts.revision, snap.current, snap.compacted)?;
    let start: &str = match opts.start_key.as_deref() {
        Some(s) if s > prefix => s,
        _ => prefix,
    };
    let limit = if opts.limit == 0 {
        usize::MAX
    } else {
        opts.limit
    };

    // Keys changed after `rev`: their state at `rev` (None = absent).
    let mut undone: BTreeMap<String, Option<KeyValue>> = BTreeMap::new();
    if rev < snap.current {
        let log = snap.txn.open_table(LOG).map_err(db_err)?;
        for entry in log.range((rev + 1)..=snap.current).map_err(db_err)? {
            let (r, record) = entry.map_err(db_err)?;
            let key = decode_event_key(record.value())?;
            if !key.starts_with(prefix) || key < start || undone.contains_key(key) {
                continue;
            }
            let event = decode_event(r.value(), record.value())?;
            undone.insert(event.kv.key, event.prev);
        }
    }

    let kv = snap.txn.open_table(KV).map_err(db_err)?;
    let mut current = kv.range(start..).map_err(db_err)?;
    let mut next_current = || -> Result<Option<KvEntry<'_>>> {
        match current.next() {
            Some(entry) => {
                let (k, v) = entry.map_err(db_err)?;
                Ok(k.value().starts_with(prefix).then_some((k, v)))
            }
            None => Ok(None),
        }
    };
    let mut cur = next_current()?;
    let mut undone = undone.into_iter().peekable();

    let mut result = ListResult {
        items: Vec::new(),
        revision: rev,
        more: false,
        remaining: 0,
    };
    loop {
        let order = match (&cur, undone.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((k, _)), Some((uk, _))) => k.value().cmp(uk.as_str()),
        };
        let item: Option<Item<'_>> = match order {
            Ordering::Less => {
                let item = cur.take().map(|(k, v)| Item::Stored(k, v));
                cur = next_current()?;
                item
            }
            Ordering::Greater => undone.next().and_then(|(_, v)| v).map(Item::Undone),
            Ordering::Equal => {
                cur = next_current()?;
                undone.next().and_then(|(_, v)| v).map(Item::Undone)
            }
        };
        let Some(item) = item else { continue };
        if result.items.len() < limit {
            result.items.push(match item {
                Item::Stored(k, v) => decode_kv(k.value(), v.value())?,
                Item::Undone(kv) => kv,
            });
        } else {
            result.remaining += 1;
        }
    }
    result.more = result.remaining > 0;
    Ok(result)
}

/// A `kv` table entry as read from redb.
type KvEntry<'a> = (
    AccessGuard<'a, &'static str>,
    AccessGuard<'a, &'static [u8]>,
);

/// One list item: a current `kv` entry (decoded only when returned) or a
/// state reconstructed from the log.
enum Item<'a> {
    Stored(
        AccessGuard<'a, &'static str>,
        AccessGuard<'a, &'static [u8]>,
    ),
    Undone(KeyValue),
}

/// One step of watch replay.
pub(super) struct Chunk {
    /// The events under the prefix, in revision order.
    pub(super) events: Vec<Event>,
    /// Every log entry up to this revision has been scanned.
    pub(super) scanned_to: Revision,
    /// Whether the scan reached `upto` (or the current revision).
    pub(super) exhausted: bool,
}

/// Reads the events under `prefix` with revisions in `(after, upto]` (`upto`
/// defaults to the current revision), a bounded amount at a time. Fails with
/// [`Error::Compacted`] when `after` is older than the compacted revision.
pub(super) fn log_chunk(
    db: &Database,
    prefix: &str,
    after: Revision,
    upto: Option<Revision>,
) -> Result<Chunk> {
    let snap = Snapshot::new(db)?;
    if after < snap.compacted {
        return Err(Error::Compacted {
            requested: after,
            compacted: snap.compacted,
        });
    }
    let end = upto.map_or(snap.current, |u| u.min(snap.current));
    let mut chunk = Chunk {
        events: Vec::new(),
        scanned_to: after,
        exhausted: true,
    };
    if after >= end {
        return Ok(chunk);
    }
    let log = snap.txn.open_table(LOG).map_err(db_err)?;
    let mut scanned = 0usize;
    let mut bytes = 0usize;
    let mut stopped_early = false;
    for entry in log.range((after + 1)..=end).map_err(db_err)? {
        let (r, record) = entry.map_err(db_err)?;
        let rev = r.value();
        chunk.scanned_to = rev;
        scanned += 1;
        if decode_event_key(record.value())?.starts_with(prefix) {
            bytes = bytes.saturating_add(record.value().len());
            chunk.events.push(decode_event(rev, record.value())?);
        }
        if scanned >= REPLAY_MAX_ENTRIES || bytes >= REPLAY_MAX_BYTES {
            stopped_early = true;
            break;
        }
    }
    if !stopped_early || chunk.scanned_to >= end {
        chunk.scanned_to = end;
    } else {
        chunk.exhausted = false;
    }
    Ok(chunk)
}
