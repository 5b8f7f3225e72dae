//! A conformance suite for [`Storage`] backends.
//!
//! Every function takes a fresh, empty store and panics on a deviation from
//! the contract in [`crate`]. A backend's tests call each of them
//! (see `storage::etcd3::tests` for an example); the functions only use keys
//! under [`ROOT`] and assume no other writer touches them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use super::{
    Error, Event, EventType, KeyValue, ListOptions, Revision, Storage, WatchItem, WatchStream,
    WriteOutcome,
};

/// All keys used by the suite live under this prefix.
pub(crate) const ROOT: &str = "/registry/conformance.apiforge.io/";

/// How long a watch may take to deliver an expected item.
const WATCH_TIMEOUT: Duration = Duration::from_secs(10);

fn key(name: &str) -> String {
    format!("{ROOT}{name}")
}

fn val(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn done(outcome: WriteOutcome) -> KeyValue {
    match outcome {
        WriteOutcome::Done(kv) => kv,
        WriteOutcome::Conflict(current) => panic!("unexpected conflict, current state {current:?}"),
    }
}

/// Updates `key`, which must succeed, and returns the new state read back
/// at the update's revision: backends may leave `create_revision` and
/// `version` at 0 in an update's answer (see [`Storage::update`]); the rest
/// of the answer must be exact, and so must those two when set.
async fn update_ok(store: &dyn Storage, key: &str, expected: Revision, value: Bytes) -> KeyValue {
    let kv = done(store.update(key, expected, value.clone()).await.unwrap());
    assert_eq!(kv.key, key);
    assert_eq!(kv.value, value);
    assert!(kv.mod_revision > expected);
    let read = store
        .get(key, kv.mod_revision)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{key} not readable at its update's revision"));
    assert_eq!(read.value, value);
    assert_eq!(read.mod_revision, kv.mod_revision);
    if kv.create_revision != 0 || kv.version != 0 {
        assert_eq!(kv, read);
    }
    read
}

fn conflict(outcome: WriteOutcome) -> Option<KeyValue> {
    match outcome {
        WriteOutcome::Conflict(current) => current,
        WriteOutcome::Done(kv) => panic!("expected a conflict, the write happened: {kv:?}"),
    }
}

/// The next item of a watch, failing the test after [`WATCH_TIMEOUT`].
pub async fn next_item(stream: &mut WatchStream) -> WatchItem {
    match tokio::time::timeout(WATCH_TIMEOUT, stream.next()).await {
        Ok(Some(Ok(item))) => item,
        Ok(Some(Err(e))) => panic!("watch failed: {e}"),
        Ok(None) => panic!("watch ended unexpectedly"),
        Err(_) => panic!("no watch item within {WATCH_TIMEOUT:?}"),
    }
}

/// The next event of a watch, skipping progress notifications.
pub async fn next_event(stream: &mut WatchStream) -> Event {
    loop {
        if let WatchItem::Event(event) = next_item(stream).await {
            return event;
        }
    }
}

/// Asserts that no event arrives within `wait`.
async fn assert_quiet(stream: &mut WatchStream, wait: Duration) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => return,
            Ok(Some(Ok(WatchItem::Progress(_)))) => {}
            Ok(other) => panic!("expected no watch event, got {other:?}"),
        }
    }
}

/// Asserts that an event matches a write.
fn assert_event(event: &Event, kind: EventType, kv: &KeyValue, prev: Option<&KeyValue>) {
    assert_eq!(event.kind, kind, "event kind of {event:?}");
    assert_eq!(&event.kv, kv, "event key-value of {event:?}");
    assert_eq!(event.prev.as_ref(), prev, "event prev of {event:?}");
}

/// A watch must fail with [`Error::Compacted`], at once or as its first item.
async fn assert_watch_compacted(store: &dyn Storage, prefix: &str, start: Revision) {
    match store.watch(prefix, start, false).await {
        Err(Error::Compacted { requested, .. }) => assert_eq!(requested, start),
        Err(e) => panic!("watch from compacted revision {start}: unexpected error {e}"),
        Ok(mut stream) => match tokio::time::timeout(WATCH_TIMEOUT, stream.next()).await {
            Ok(Some(Err(Error::Compacted { requested, .. }))) => assert_eq!(requested, start),
            other => {
                panic!("watch from compacted revision {start}: expected Compacted, got {other:?}")
            }
        },
    }
}

/// create, get, "exists" (get returns `Some`), not found, already exists.
pub async fn create_get_exists(store: Arc<dyn Storage>) {
    let k = key("pods/default/a");
    assert!(store.get(&k, 0).await.unwrap().is_none(), "absent key");
    let created = store.create(&k, val("one")).await.unwrap();
    assert_eq!(created.key, k);
    assert_eq!(created.value, val("one"));
    assert_eq!(created.version, 1);
    assert!(created.create_revision > 0);
    assert_eq!(created.create_revision, created.mod_revision);
    assert_eq!(store.get(&k, 0).await.unwrap(), Some(created.clone()));
    assert_eq!(
        store.current_revision().await.unwrap(),
        created.mod_revision
    );

    match store.create(&k, val("two")).await {
        Err(Error::AlreadyExists(existing)) => assert_eq!(existing, k),
        other => panic!("second create: expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(
        store.get(&k, 0).await.unwrap(),
        Some(created.clone()),
        "failed create changed nothing"
    );
    assert_eq!(
        store.current_revision().await.unwrap(),
        created.mod_revision,
        "a failed create must not use a revision"
    );

    // Keys that only share a prefix with the existing key are distinct.
    assert!(
        store
            .get(&key("pods/default/ab"), 0)
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.get(&key("pods/default/"), 0).await.unwrap().is_none());
    assert_eq!(store.count(ROOT).await.unwrap(), 1);
    assert_eq!(store.count(&key("pods/other/")).await.unwrap(), 0);

    // Empty values are values.
    let empty = store
        .create(&key("pods/default/empty"), Bytes::new())
        .await
        .unwrap();
    assert_eq!(
        store.get(&empty.key, 0).await.unwrap().unwrap().value,
        Bytes::new()
    );
}

/// update with the right mod revision succeeds; stale or missing conflicts.
pub async fn update_cas(store: Arc<dyn Storage>) {
    let k = key("cas");
    let v1 = store.create(&k, val("1")).await.unwrap();
    let v2 = update_ok(&*store, &k, v1.mod_revision, val("2")).await;
    assert_eq!(v2.key, k);
    assert_eq!(v2.value, val("2"));
    assert_eq!(v2.create_revision, v1.create_revision);
    assert!(v2.mod_revision > v1.mod_revision);
    assert_eq!(v2.version, 2);
    assert_eq!(store.get(&k, 0).await.unwrap(), Some(v2.clone()));

    // Stale expectation: conflict with the current state, nothing written.
    let current = conflict(
        store
            .update(&k, v1.mod_revision, val("stale"))
            .await
            .unwrap(),
    );
    assert_eq!(current, Some(v2.clone()));
    assert_eq!(store.get(&k, 0).await.unwrap(), Some(v2.clone()));
    assert_eq!(store.current_revision().await.unwrap(), v2.mod_revision);

    let v3 = update_ok(&*store, &k, v2.mod_revision, val("3")).await;
    assert_eq!(v3.version, 3);
    assert!(v3.mod_revision > v2.mod_revision);

    // A missing key conflicts, even when expecting revision 0, and is not created.
    let missing = key("cas-missing");
    assert_eq!(
        conflict(store.update(&missing, 0, val("x")).await.unwrap()),
        None
    );
    assert_eq!(
        conflict(
            store
                .update(&missing, v3.mod_revision, val("x"))
                .await
                .unwrap()
        ),
        None
    );
    assert!(store.get(&missing, 0).await.unwrap().is_none());

    // After delete and re-create, the old revision no longer matches and the
    // key starts a new life (version 1, new create revision).
    done(store.delete(&k, None).await.unwrap());
    let again = store.create(&k, val("again")).await.unwrap();
    assert_eq!(again.version, 1);
    assert!(again.create_revision > v3.mod_revision);
    assert_eq!(
        conflict(store.update(&k, v3.mod_revision, val("x")).await.unwrap()),
        Some(again.clone())
    );
}

/// delete with and without precondition; not found.
pub async fn delete_preconditions(store: Arc<dyn Storage>) {
    let k = key("del");
    let v1 = store.create(&k, val("1")).await.unwrap();
    let v2 = update_ok(&*store, &k, v1.mod_revision, val("2")).await;

    // Wrong precondition: conflict with the current state, key kept.
    assert_eq!(
        conflict(store.delete(&k, Some(v1.mod_revision)).await.unwrap()),
        Some(v2.clone())
    );
    assert_eq!(store.get(&k, 0).await.unwrap(), Some(v2.clone()));

    // Right precondition: the deleted state with the delete's revision.
    let deleted = done(store.delete(&k, Some(v2.mod_revision)).await.unwrap());
    assert!(deleted.mod_revision > v2.mod_revision);
    assert_eq!(
        deleted,
        KeyValue {
            mod_revision: deleted.mod_revision,
            ..v2.clone()
        }
    );
    assert_eq!(
        store.current_revision().await.unwrap(),
        deleted.mod_revision
    );
    assert!(store.get(&k, 0).await.unwrap().is_none());

    // Missing key: NotFound, with or without precondition.
    match store.delete(&k, None).await {
        Err(Error::NotFound(missing)) => assert_eq!(missing, k),
        other => panic!("delete of a missing key: expected NotFound, got {other:?}"),
    }
    match store.delete(&k, Some(deleted.mod_revision)).await {
        Err(Error::NotFound(_)) => {}
        other => panic!("conditional delete of a missing key: expected NotFound, got {other:?}"),
    }
    assert_eq!(
        store.current_revision().await.unwrap(),
        deleted.mod_revision
    );

    // Unconditional delete.
    let u = store.create(&key("del2"), val("x")).await.unwrap();
    let gone = done(store.delete(&u.key, None).await.unwrap());
    assert_eq!(gone.value, val("x"));
    assert_eq!(gone.create_revision, u.create_revision);
    assert!(gone.mod_revision > u.mod_revision);
    assert!(store.get(&u.key, 0).await.unwrap().is_none());
}

/// Every successful write gets a new, strictly higher revision.
pub async fn revisions_increase(store: Arc<dyn Storage>) {
    let start = store.current_revision().await.unwrap();
    let mut last = start;
    let check = |last: &mut Revision, revision: Revision, what: &str| {
        assert!(
            revision > *last,
            "{what}: revision {revision} not above {last}"
        );
        *last = revision;
    };
    for i in 0..5 {
        let kv = store
            .create(&key(&format!("rev/{i}")), val("x"))
            .await
            .unwrap();
        check(&mut last, kv.mod_revision, "create");
        let kv = update_ok(&*store, &kv.key, kv.mod_revision, val("y")).await;
        check(&mut last, kv.mod_revision, "update");
        if i % 2 == 0 {
            let kv = done(store.delete(&kv.key, Some(kv.mod_revision)).await.unwrap());
            check(&mut last, kv.mod_revision, "delete");
        }
        assert_eq!(store.current_revision().await.unwrap(), last);
    }
    // Failed writes do not use revisions.
    let _ = store.create(&key("rev/1"), val("x")).await.unwrap_err();
    let _ = conflict(store.update(&key("rev/1"), 1, val("x")).await.unwrap());
    let _ = store.delete(&key("rev/0"), None).await.unwrap_err();
    assert_eq!(store.current_revision().await.unwrap(), last);
}

/// list with prefix, limit, start key, more/remaining; count.
pub async fn list_pagination(store: Arc<dyn Storage>) {
    let dir = key("list/a/");
    let mut written = Vec::new();
    for i in 0..5 {
        written.push(
            store
                .create(&format!("{dir}{i}"), val(&format!("v{i}")))
                .await
                .unwrap(),
        );
    }
    // Neighbours that must not show up in a list of `dir`.
    store.create(&key("list/a"), val("parent")).await.unwrap();
    store
        .create(&key("list/ab/0"), val("sibling"))
        .await
        .unwrap();
    store.create(&key("list/b/0"), val("other")).await.unwrap();
    let current = store.current_revision().await.unwrap();

    let all = store.list(&dir, ListOptions::default()).await.unwrap();
    assert_eq!(all.items, written);
    assert_eq!(all.revision, current);
    assert!(!all.more);
    assert_eq!(all.remaining, 0);
    assert_eq!(store.count(&dir).await.unwrap(), 5);
    assert_eq!(store.count(&key("list/")).await.unwrap(), 8);
    assert_eq!(
        store
            .list(&key("list/"), ListOptions::default())
            .await
            .unwrap()
            .items
            .len(),
        8
    );
    assert!(
        store
            .list(&key("list/c/"), ListOptions::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Pages of two, continuing after the last key (as continue tokens do).
    let page1 = store
        .list(
            &dir,
            ListOptions {
                limit: 2,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page1.items, written[..2]);
    assert!(page1.more);
    assert_eq!(page1.remaining, 3);
    assert_eq!(page1.revision, current);

    let next = |after: &KeyValue| Some(format!("{}\0", after.key));
    let page2 = store
        .list(
            &dir,
            ListOptions {
                limit: 2,
                revision: page1.revision,
                start_key: next(&page1.items[1]),
            },
        )
        .await
        .unwrap();
    assert_eq!(page2.items, written[2..4]);
    assert!(page2.more);
    assert_eq!(page2.remaining, 1);
    assert_eq!(page2.revision, page1.revision);

    let page3 = store
        .list(
            &dir,
            ListOptions {
                limit: 2,
                revision: page1.revision,
                start_key: next(&page2.items[1]),
            },
        )
        .await
        .unwrap();
    assert_eq!(page3.items, written[4..]);
    assert!(!page3.more);
    assert_eq!(page3.remaining, 0);

    // The start key is inclusive.
    let from3 = store
        .list(
            &dir,
            ListOptions {
                start_key: Some(written[3].key.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(from3.items, written[3..]);

    // A limit equal to the number of items: no more.
    let exact = store
        .list(
            &dir,
            ListOptions {
                limit: 5,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(exact.items.len(), 5);
    assert!(!exact.more);

    // Pages read at a revision do not see later writes.
    store.create(&format!("{dir}9"), val("late")).await.unwrap();
    let old = store
        .list(
            &dir,
            ListOptions {
                revision: page1.revision,
                start_key: next(&written[3]),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(old.items, written[4..]);
    assert_eq!(store.count(&dir).await.unwrap(), 6);
}

/// get and list at an old revision; a future revision is refused.
pub async fn read_at_old_revision(store: Arc<dyn Storage>) {
    let k = key("history/x");
    let v1 = store.create(&k, val("1")).await.unwrap();
    let other = store.create(&key("history/y"), val("y")).await.unwrap();
    let v2 = update_ok(&*store, &k, v1.mod_revision, val("2")).await;
    let deleted = done(store.delete(&k, None).await.unwrap());

    assert_eq!(
        store.get(&k, v1.mod_revision).await.unwrap(),
        Some(v1.clone())
    );
    assert_eq!(
        store.get(&k, other.mod_revision).await.unwrap(),
        Some(v1.clone())
    );
    assert_eq!(
        store.get(&k, v2.mod_revision).await.unwrap(),
        Some(v2.clone())
    );
    assert_eq!(store.get(&k, deleted.mod_revision).await.unwrap(), None);
    assert_eq!(store.get(&k, 0).await.unwrap(), None);
    assert_eq!(
        store.get(&k, v1.mod_revision - 1).await.unwrap(),
        None,
        "before creation"
    );

    let dir = key("history/");
    let at1 = store
        .list(
            &dir,
            ListOptions {
                revision: v1.mod_revision,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(at1.items, vec![v1.clone()]);
    assert_eq!(at1.revision, v1.mod_revision);
    let at2 = store
        .list(
            &dir,
            ListOptions {
                revision: v2.mod_revision,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(at2.items, vec![v2.clone(), other.clone()]);
    assert_eq!(at2.revision, v2.mod_revision);
    let now = store.list(&dir, ListOptions::default()).await.unwrap();
    assert_eq!(now.items, vec![other.clone()]);
    assert_eq!(now.revision, deleted.mod_revision);

    // The future is not readable.
    let current = store.current_revision().await.unwrap();
    match store.get(&k, current + 100).await {
        Err(Error::FutureRevision {
            requested,
            current: reported,
        }) => {
            assert_eq!(requested, current + 100);
            assert_eq!(reported, current);
        }
        other => panic!("read at a future revision: expected FutureRevision, got {other:?}"),
    }
    match store
        .list(
            &dir,
            ListOptions {
                revision: current + 100,
                ..Default::default()
            },
        )
        .await
    {
        Err(Error::FutureRevision { .. }) => {}
        other => panic!("list at a future revision: expected FutureRevision, got {other:?}"),
    }
}

/// A watch from "now" sees later changes in order, filtered by prefix, with
/// prev filled for modify and delete.
pub async fn watch_from_now(store: Arc<dyn Storage>) {
    let dir = key("watch-now/");
    let before = store
        .create(&format!("{dir}before"), val("b"))
        .await
        .unwrap();
    let mut watch = store.watch(&dir, 0, false).await.unwrap();

    let a1 = store.create(&format!("{dir}a"), val("1")).await.unwrap();
    store
        .create(&key("watch-now-sibling"), val("outside"))
        .await
        .unwrap();
    store
        .create(&key("elsewhere/x"), val("outside"))
        .await
        .unwrap();
    let a2 = update_ok(&*store, &a1.key, a1.mod_revision, val("2")).await;
    let b2 = update_ok(&*store, &before.key, before.mod_revision, val("b2")).await;
    let a3 = done(store.delete(&a1.key, Some(a2.mod_revision)).await.unwrap());

    assert_event(&next_event(&mut watch).await, EventType::Created, &a1, None);
    assert_event(
        &next_event(&mut watch).await,
        EventType::Modified,
        &a2,
        Some(&a1),
    );
    assert_event(
        &next_event(&mut watch).await,
        EventType::Modified,
        &b2,
        Some(&before),
    );
    let deleted = next_event(&mut watch).await;
    assert_event(&deleted, EventType::Deleted, &a3, Some(&a2));
    assert_eq!(deleted.kv.mod_revision, a3.mod_revision);
    assert_quiet(&mut watch, Duration::from_millis(300)).await;

    // Writes elsewhere stay invisible; the next write in the prefix is next.
    store
        .create(&key("elsewhere/y"), val("outside"))
        .await
        .unwrap();
    let c = store.create(&format!("{dir}c"), val("c")).await.unwrap();
    assert_event(&next_event(&mut watch).await, EventType::Created, &c, None);
}

/// `watch_without_prev` delivers the same changes in the same order; a
/// backend may leave out the previous states, and then gives a deleted key
/// only its key, the delete's revision and an empty value.
pub async fn watch_without_prev(store: Arc<dyn Storage>) {
    let dir = key("watch-lean/");
    let mut watch = store.watch_without_prev(&dir, 0, false).await.unwrap();
    let a1 = store.create(&format!("{dir}a"), val("1")).await.unwrap();
    let a2 = update_ok(&*store, &a1.key, a1.mod_revision, val("2")).await;
    let a3 = done(store.delete(&a1.key, Some(a2.mod_revision)).await.unwrap());

    assert_event(&next_event(&mut watch).await, EventType::Created, &a1, None);
    let modified = next_event(&mut watch).await;
    assert_eq!(
        (modified.kind, &modified.kv),
        (EventType::Modified, &a2),
        "{modified:?}"
    );
    assert!(modified.prev.is_none() || modified.prev.as_ref() == Some(&a1));
    let deleted = next_event(&mut watch).await;
    assert_eq!(deleted.kind, EventType::Deleted, "{deleted:?}");
    assert_eq!(deleted.kv.key, a1.key);
    assert_eq!(deleted.kv.mod_revision, a3.mod_revision);
    match &deleted.prev {
        None => assert!(deleted.kv.value.is_empty(), "{deleted:?}"),
        Some(prev) => {
            assert_eq!(prev, &a2);
            assert_eq!(deleted.kv, a3);
        }
    }
    assert_quiet(&mut watch, Duration::from_millis(300)).await;
}

/// A watch from a past revision replays history after it (exclusive), then
/// continues live: ordered, no gaps, no duplicates.
pub async fn watch_from_past_revision(store: Arc<dyn Storage>) {
    let dir = key("watch-past/");
    let start = store.current_revision().await.unwrap();
    // History: (kind, kv, prev) as a watch must report it.
    let mut expected: Vec<(EventType, KeyValue, Option<KeyValue>)> = Vec::new();
    let a1 = store.create(&format!("{dir}a"), val("a1")).await.unwrap();
    expected.push((EventType::Created, a1.clone(), None));
    store
        .create(&key("watch-past-outside"), val("x"))
        .await
        .unwrap();
    let b1 = store.create(&format!("{dir}b"), val("b1")).await.unwrap();
    expected.push((EventType::Created, b1.clone(), None));
    let a2 = update_ok(&*store, &a1.key, a1.mod_revision, val("a2")).await;
    expected.push((EventType::Modified, a2.clone(), Some(a1.clone())));
    let b_del = done(store.delete(&b1.key, None).await.unwrap());
    expected.push((EventType::Deleted, b_del.clone(), Some(b1.clone())));
    for i in 0..20 {
        let kv = store
            .create(&format!("{dir}n{i:02}"), val("n"))
            .await
            .unwrap();
        expected.push((EventType::Created, kv, None));
    }

    // From the start: the whole history.
    let mut watch = store.watch(&dir, start, false).await.unwrap();
    // From the middle: strictly after a1's revision.
    let mut middle = store.watch(&dir, a1.mod_revision, false).await.unwrap();

    // Live writes after the watches started.
    let mut current = a2.clone();
    for i in 0..10 {
        let next = update_ok(
            &*store,
            &current.key,
            current.mod_revision,
            val(&format!("live{i}")),
        )
        .await;
        expected.push((EventType::Modified, next.clone(), Some(current.clone())));
        current = next;
    }

    for (kind, kv, prev) in &expected {
        assert_event(&next_event(&mut watch).await, *kind, kv, prev.as_ref());
    }
    for (kind, kv, prev) in &expected[1..] {
        assert_event(&next_event(&mut middle).await, *kind, kv, prev.as_ref());
    }
    assert_quiet(&mut watch, Duration::from_millis(200)).await;
    assert_quiet(&mut middle, Duration::from_millis(10)).await;

    // A watch from the latest revision sees only what follows.
    let mut latest = store
        .watch(&dir, current.mod_revision, false)
        .await
        .unwrap();
    let z = store.create(&format!("{dir}z"), val("z")).await.unwrap();
    assert_event(&next_event(&mut latest).await, EventType::Created, &z, None);
    assert_event(&next_event(&mut watch).await, EventType::Created, &z, None);
}

/// With `progress`, a quiet watch reports progress up to at least the
/// revision it started from, and later progress never goes backwards or
/// below delivered events.
pub async fn watch_progress(store: Arc<dyn Storage>) {
    let dir = key("progress/");
    store
        .create(&key("progress-outside/0"), val("x"))
        .await
        .unwrap();
    let start = store.current_revision().await.unwrap();
    let mut watch = store.watch(&dir, 0, true).await.unwrap();
    let first = match next_item(&mut watch).await {
        WatchItem::Progress(revision) => revision,
        WatchItem::Event(event) => panic!("unexpected event {event:?}"),
    };
    assert!(
        first >= start,
        "progress {first} below the start revision {start}"
    );

    let outside = store
        .create(&key("progress-outside/1"), val("x"))
        .await
        .unwrap();
    let inside = store.create(&format!("{dir}a"), val("a")).await.unwrap();
    let mut last_event = 0;
    let mut last_progress = first;
    let mut saw_inside = false;
    // Until a progress covering both writes arrives.
    while last_progress < inside.mod_revision.max(outside.mod_revision) || !saw_inside {
        match next_item(&mut watch).await {
            WatchItem::Progress(revision) => {
                assert!(
                    revision >= last_progress,
                    "progress went back: {revision} < {last_progress}"
                );
                assert!(
                    revision >= last_event,
                    "progress {revision} below delivered event {last_event}"
                );
                last_progress = revision;
            }
            WatchItem::Event(event) => {
                assert!(
                    event.kv.mod_revision > last_progress,
                    "event {event:?} after progress {last_progress}"
                );
                assert_event(&event, EventType::Created, &inside, None);
                last_event = event.kv.mod_revision;
                saw_inside = true;
            }
        }
    }
}

/// [`Storage::request_progress`] makes watches opened with `progress` report
/// a progress covering writes made before the request (also writes outside
/// their prefix), well before any periodic notification.
pub async fn watch_request_progress(store: Arc<dyn Storage>) {
    let dir = key("request-progress/");
    let mut watch = store.watch(&dir, 0, true).await.unwrap();
    let outside = store
        .create(&key("request-progress-outside"), val("x"))
        .await
        .unwrap();
    store.request_progress().await.unwrap();
    loop {
        match next_item(&mut watch).await {
            WatchItem::Progress(revision) if revision >= outside.mod_revision => break,
            // An answer to an earlier (periodic) request: ask again.
            WatchItem::Progress(_) => store.request_progress().await.unwrap(),
            WatchItem::Event(event) => panic!("unexpected event {event:?}"),
        }
    }
}

/// Compaction: reads and watches below the compacted revision fail with
/// [`Error::Compacted`]; at and above it they work.
pub async fn compaction(store: Arc<dyn Storage>) {
    let dir = key("compact/");
    let k = format!("{dir}x");
    let v1 = store.create(&k, val("1")).await.unwrap();
    let v2 = update_ok(&*store, &k, v1.mod_revision, val("2")).await;
    let v3 = update_ok(&*store, &k, v2.mod_revision, val("3")).await;
    let v4 = update_ok(&*store, &k, v3.mod_revision, val("4")).await;

    store.compact(v3.mod_revision).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), v3.mod_revision);

    match store.get(&k, v1.mod_revision).await {
        Err(Error::Compacted {
            requested,
            compacted,
        }) => {
            assert_eq!(requested, v1.mod_revision);
            assert_eq!(compacted, v3.mod_revision);
        }
        other => panic!("get below the compaction: expected Compacted, got {other:?}"),
    }
    match store
        .list(
            &dir,
            ListOptions {
                revision: v2.mod_revision,
                ..Default::default()
            },
        )
        .await
    {
        Err(Error::Compacted { requested, .. }) => assert_eq!(requested, v2.mod_revision),
        other => panic!("list below the compaction: expected Compacted, got {other:?}"),
    }
    assert_watch_compacted(&*store, &dir, v1.mod_revision).await;

    // The compacted revision itself and later ones stay readable.
    assert_eq!(
        store.get(&k, v3.mod_revision).await.unwrap(),
        Some(v3.clone())
    );
    assert_eq!(store.get(&k, 0).await.unwrap(), Some(v4.clone()));
    let mut watch = store.watch(&dir, v3.mod_revision, false).await.unwrap();
    assert_event(
        &next_event(&mut watch).await,
        EventType::Modified,
        &v4,
        Some(&v3),
    );

    // Compacting again at the same revision is harmless; a later compaction
    // moves the compacted revision.
    store.compact(v3.mod_revision).await.unwrap();
    let v5 = update_ok(&*store, &k, v4.mod_revision, val("5")).await;
    assert_event(
        &next_event(&mut watch).await,
        EventType::Modified,
        &v5,
        Some(&v4),
    );
    store.compact(v5.mod_revision).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), v5.mod_revision);
    assert_watch_compacted(&*store, &dir, v3.mod_revision).await;
    assert_eq!(store.get(&k, 0).await.unwrap(), Some(v5.clone()));
}

/// 16 tasks increment one counter with read → CAS → retry; no update is lost.
pub async fn concurrent_cas_counter(store: Arc<dyn Storage>) {
    const TASKS: u64 = 16;
    const INCREMENTS: u64 = 5;
    let k = key("counter");
    store.create(&k, val("0")).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let store = store.clone();
        let k = k.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0u64;
            for _ in 0..INCREMENTS {
                loop {
                    let current = store.get(&k, 0).await.unwrap().unwrap();
                    let n: u64 = std::str::from_utf8(&current.value)
                        .unwrap()
                        .parse()
                        .unwrap();
                    match store
                        .update(&k, current.mod_revision, val(&(n + 1).to_string()))
                        .await
                        .unwrap()
                    {
                        WriteOutcome::Done(_) => break,
                        WriteOutcome::Conflict(_) => conflicts += 1,
                    }
                }
            }
            conflicts
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let last = store.get(&k, 0).await.unwrap().unwrap();
    assert_eq!(last.value, val(&(TASKS * INCREMENTS).to_string()));
    assert_eq!(last.version, i64::try_from(TASKS * INCREMENTS).unwrap() + 1);
}

/// [`guaranteed_update`](crate::guaranteed_update) from 16 tasks on
/// one key loses no update; a failing precondition stops it unchanged.
pub async fn guaranteed_update_counter(store: Arc<dyn Storage>) {
    const TASKS: u64 = 16;
    const INCREMENTS: u64 = 5;
    let k = key("guaranteed");
    store.create(&k, val("0")).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let store = store.clone();
        let k = k.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..INCREMENTS {
                crate::guaranteed_update(store.as_ref(), &k, |current| {
                    let n: u64 = std::str::from_utf8(&current.value)
                        .map_err(|e| Error::Internal(e.to_string()))?
                        .parse()
                        .map_err(|e: std::num::ParseIntError| Error::Internal(e.to_string()))?;
                    Ok(val(&(n + 1).to_string()))
                })
                .await
                .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let last = store.get(&k, 0).await.unwrap().unwrap();
    assert_eq!(last.value, val(&(TASKS * INCREMENTS).to_string()));
    let err = crate::guaranteed_update(store.as_ref(), &k, |_| {
        Err(Error::Conflict {
            key: k.clone(),
            message: "precondition failed".into(),
        })
    })
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }));
    assert_eq!(
        store.get(&k, 0).await.unwrap().unwrap().mod_revision,
        last.mod_revision
    );
    let missing =
        crate::guaranteed_update(store.as_ref(), &key("nope"), |c| Ok(c.value.clone())).await;
    assert!(matches!(missing, Err(Error::NotFound(_))));
}

/// A 1 MiB value round-trips through create, get, list, update and watch.
pub async fn large_value(store: Arc<dyn Storage>) {
    let big: Bytes = (0..1024 * 1024)
        .map(|i: u32| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    let k = key("big/one");
    let mut watch = store.watch(&key("big/"), 0, false).await.unwrap();
    let created = store.create(&k, big.clone()).await.unwrap();
    assert_eq!(created.value.len(), big.len());
    let read = store.get(&k, 0).await.unwrap().unwrap();
    assert!(read.value == big, "value changed on the way");
    let listed = store
        .list(&key("big/"), ListOptions::default())
        .await
        .unwrap();
    assert!(listed.items.len() == 1 && listed.items[0].value == big);
    let mut reversed = big.to_vec();
    reversed.reverse();
    let updated = update_ok(
        &*store,
        &k,
        read.mod_revision,
        Bytes::from(reversed.clone()),
    )
    .await;
    assert!(store.get(&k, 0).await.unwrap().unwrap().value == reversed);
    let event = next_event(&mut watch).await;
    assert!(event.kind == EventType::Created && event.kv.value == big);
    let event = next_event(&mut watch).await;
    assert!(event.kind == EventType::Modified && event.kv.value == reversed);
    assert!(event.prev.as_ref().is_some_and(|p| p.value == big));
    assert_eq!(event.kv.mod_revision, updated.mod_revision);
}

/// Every event of many writes across keys arrives exactly once, in revision
/// order, and replaying from the start revision yields the same sequence.
pub async fn watch_many_writes(store: Arc<dyn Storage>) {
    let dir = key("many/");
    let start = store.current_revision().await.unwrap();
    let mut live = store.watch(&dir, 0, false).await.unwrap();
    let mut revisions = Vec::new();
    let mut state: BTreeMap<String, KeyValue> = BTreeMap::new();
    for i in 0..60u32 {
        let name = format!("{dir}k{}", i % 7);
        let kv = match state.get(&name) {
            None => store.create(&name, val(&i.to_string())).await.unwrap(),
            Some(prev) if i % 5 == 0 => {
                done(store.delete(&name, Some(prev.mod_revision)).await.unwrap())
            }
            Some(prev) => update_ok(&*store, &name, prev.mod_revision, val(&i.to_string())).await,
        };
        if i % 5 == 0 && state.contains_key(&name) {
            state.remove(&name);
        } else {
            state.insert(name, kv.clone());
        }
        revisions.push(kv.mod_revision);
        if i % 10 == 0 {
            store
                .create(&key(&format!("many-outside/{i}")), val("x"))
                .await
                .unwrap();
        }
    }
    let mut replay = store.watch(&dir, start, false).await.unwrap();
    for stream in [&mut live, &mut replay] {
        for revision in &revisions {
            assert_eq!(next_event(stream).await.kv.mod_revision, *revision);
        }
        assert_quiet(stream, Duration::from_millis(100)).await;
    }
}
