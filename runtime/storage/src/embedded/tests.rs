//! Tests of the embedded store.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use redb::{ReadableDatabase, ReadableTableMetadata};

use super::*;
use crate::{Event, EventType, WatchItem};

type TestResult = std::result::Result<(), Error>;

const WAIT: Duration = Duration::from_secs(10);

fn test_opts() -> EmbeddedOptions {
    EmbeddedOptions {
        compaction_interval: Duration::ZERO,
        ..EmbeddedOptions::default()
    }
}

fn open(dir: &Path) -> Result<EmbeddedStore> {
    EmbeddedStore::open(dir, test_opts())
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn done(outcome: WriteOutcome) -> KeyValue {
    match outcome {
        WriteOutcome::Done(kv) => kv,
        WriteOutcome::Conflict(current) => panic!("unexpected conflict, current: {current:?}"),
    }
}

async fn next_item(stream: &mut WatchStream) -> Option<Result<WatchItem>> {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("timed out waiting for a watch item")
}

async fn next_event(stream: &mut WatchStream) -> Event {
    loop {
        match next_item(stream).await {
            Some(Ok(WatchItem::Event(event))) => return event,
            Some(Ok(WatchItem::Progress(_))) => continue,
            other => panic!("expected an event, got {other:?}"),
        }
    }
}

/// Number of log entries and of history index entries on disk.
fn log_sizes(store: &EmbeddedStore) -> Result<(u64, u64)> {
    let handle = store.db()?;
    let txn = handle.db.begin_read().map_err(db_err)?;
    let log = txn.open_table(LOG).map_err(db_err)?.len().map_err(db_err)?;
    let history = txn
        .open_table(HISTORY)
        .map_err(db_err)?
        .len()
        .map_err(db_err)?;
    Ok((log, history))
}

#[tokio::test]
async fn create_get_update_delete() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    let base = store.current_revision().await?;

    let kv = store.create("/r/a", b("one")).await?;
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.version),
        (base + 1, base + 1, 1)
    );
    assert_eq!(kv.value, b("one"));
    assert!(matches!(
        store.create("/r/a", b("again")).await,
        Err(Error::AlreadyExists(k)) if k == "/r/a"
    ));
    assert_eq!(store.get("/r/a", 0).await?, Some(kv.clone()));
    assert_eq!(store.get("/r/missing", 0).await?, None);

    // CAS update.
    match store.update("/r/a", base + 7, b("two")).await? {
        WriteOutcome::Conflict(Some(current)) => assert_eq!(current, kv),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(matches!(
        store.update("/r/missing", 1, b("x")).await?,
        WriteOutcome::Conflict(None)
    ));
    let kv2 = done(store.update("/r/a", kv.mod_revision, b("two")).await?);
    assert_eq!(
        (kv2.create_revision, kv2.mod_revision, kv2.version),
        (base + 1, base + 2, 2)
    );
    assert_eq!(store.get("/r/a", 0).await?, Some(kv2.clone()));

    // Delete with and without precondition.
    match store.delete("/r/a", Some(kv.mod_revision)).await? {
        WriteOutcome::Conflict(Some(current)) => assert_eq!(current, kv2),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(matches!(
        store.delete("/r/missing", None).await,
        Err(Error::NotFound(k)) if k == "/r/missing"
    ));
    let deleted = done(store.delete("/r/a", Some(kv2.mod_revision)).await?);
    assert_eq!(deleted.mod_revision, base + 3);
    assert_eq!(deleted.value, b("two"));
    assert_eq!(deleted.create_revision, base + 1);
    assert_eq!(store.get("/r/a", 0).await?, None);
    assert!(matches!(
        store.delete("/r/a", None).await,
        Err(Error::NotFound(_))
    ));

    // Re-create starts a new life.
    let kv3 = store.create("/r/a", b("three")).await?;
    assert_eq!(
        (kv3.create_revision, kv3.mod_revision, kv3.version),
        (base + 4, base + 4, 1)
    );
    let kv4 = done(store.delete("/r/a", None).await?);
    assert_eq!(kv4.mod_revision, base + 5);
    assert_eq!(store.current_revision().await?, base + 5);

    // Size limit.
    let small = EmbeddedStore::open(
        &dir.path().join("small"),
        EmbeddedOptions {
            max_value_bytes: 16,
            ..test_opts()
        },
    )?;
    let small_base = small.current_revision().await?;
    assert!(matches!(
        small.create("/k", Bytes::from(vec![0u8; 64])).await,
        Err(Error::Internal(_))
    ));
    assert_eq!(small.current_revision().await?, small_base);
    Ok(())
}

#[tokio::test]
async fn revisions_strictly_increase() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    // Like etcd, a fresh store is at revision 1; its first write gets 2.
    assert_eq!(store.current_revision().await?, 1);
    let mut last = store.create("/always", b("x")).await?.mod_revision;
    assert_eq!(last, 2);
    for i in 0..20 {
        let key = format!("/k/{}", i % 4);
        let rev = match store.get(&key, 0).await? {
            None => store.create(&key, b("v")).await?.mod_revision,
            Some(kv) if i % 3 == 0 => {
                done(store.delete(&key, Some(kv.mod_revision)).await?).mod_revision
            }
            Some(kv) => done(store.update(&key, kv.mod_revision, b("w")).await?).mod_revision,
        };
        assert_eq!(rev, last + 1, "each write takes the next revision");
        // Failed writes take no revision.
        assert!(store.create("/always", b("dup")).await.is_err());
        assert!(matches!(
            store.update(&key, 0, b("x")).await?,
            WriteOutcome::Conflict(_)
        ));
        assert!(store.delete("/never", None).await.is_err());
        assert!(matches!(
            store.delete("/always", Some(0)).await?,
            WriteOutcome::Conflict(_)
        ));
        last = rev;
        assert_eq!(store.current_revision().await?, last);
    }
    Ok(())
}

/// Like etcd, a fresh store is at revision 1 (not 0, which means "latest" /
/// "now"): it can be read at, and watched from, that revision.
#[tokio::test]
async fn fresh_store_is_at_revision_one() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    assert_eq!(store.current_revision().await?, 1);
    assert_eq!(store.compacted_revision().await?, 0);
    let empty = store
        .list(
            "/",
            ListOptions {
                revision: 1,
                ..Default::default()
            },
        )
        .await?;
    assert!(empty.items.is_empty());
    assert_eq!(empty.revision, 1);
    assert_eq!(store.get("/f", 1).await?, None);

    // A watch from the revision of the empty list (1) replays the first
    // write, live watches from there see the next ones.
    let kv = store.create("/f", b("x")).await?;
    assert_eq!(kv.mod_revision, 2);
    let mut watch = store.watch("/f", empty.revision, false).await?;
    let e = next_event(&mut watch).await;
    assert_eq!(
        (e.kind, e.kv, e.prev),
        (EventType::Created, kv.clone(), None)
    );
    let kv2 = done(store.update("/f", kv.mod_revision, b("y")).await?);
    assert_eq!(next_event(&mut watch).await.kv, kv2);
    assert_eq!(store.get("/f", 1).await?, None);
    assert_eq!(store.get("/f", 2).await?, Some(kv));
    drop(watch);
    drop(store);

    // An untouched store stays at revision 1 when reopened.
    let untouched = dir.path().join("untouched");
    drop(open(&untouched)?);
    let store = open(&untouched)?;
    assert_eq!(store.current_revision().await?, 1);
    assert_eq!(store.create("/f", b("x")).await?.mod_revision, 2);
    Ok(())
}

#[tokio::test]
async fn list_limit_start_key_remaining_count() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    let base = store.current_revision().await?;
    for i in 1..=9 {
        store.create(&format!("/a/{i}"), b(&i.to_string())).await?;
    }
    store.create("/b/1", b("b")).await?;
    store.create("/a", b("not under /a/")).await?;
    assert_eq!(store.count("/a/").await?, 9);
    assert_eq!(store.count("/").await?, 11);
    assert_eq!(store.count("/c/").await?, 0);

    let all = store.list("/a/", ListOptions::default()).await?;
    assert_eq!(all.items.len(), 9);
    assert_eq!(all.revision, base + 11);
    assert!(!all.more);
    assert_eq!(all.remaining, 0);

    let page1 = store
        .list(
            "/a/",
            ListOptions {
                limit: 4,
                ..Default::default()
            },
        )
        .await?;
    let keys: Vec<_> = page1.items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/a/1", "/a/2", "/a/3", "/a/4"]);
    assert!(page1.more);
    assert_eq!(page1.remaining, 5);

    let page2 = store
        .list(
            "/a/",
            ListOptions {
                limit: 4,
                start_key: Some("/a/4\0".into()),
                revision: page1.revision,
            },
        )
        .await?;
    let keys: Vec<_> = page2.items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/a/5", "/a/6", "/a/7", "/a/8"]);
    assert_eq!(page2.remaining, 1);
    assert_eq!(page2.revision, page1.revision);

    let page3 = store
        .list(
            "/a/",
            ListOptions {
                limit: 4,
                start_key: Some("/a/9".into()),
                revision: 0,
            },
        )
        .await?;
    assert_eq!(page3.items.len(), 1);
    assert!(!page3.more);
    assert_eq!(page3.remaining, 0);

    // A start key before the prefix starts at the prefix; after it, nothing.
    let before = store
        .list(
            "/a/",
            ListOptions {
                start_key: Some("/".into()),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(before.items.len(), 9);
    let after = store
        .list(
            "/a/",
            ListOptions {
                start_key: Some("/z".into()),
                ..Default::default()
            },
        )
        .await?;
    assert!(after.items.is_empty());

    // Paging at a past revision sees the old key set.
    let cut = store.current_revision().await?;
    store.create("/a/0", b("new")).await?;
    done(store.delete("/a/5", None).await?);
    let old = store
        .list(
            "/a/",
            ListOptions {
                limit: 5,
                revision: cut,
                ..Default::default()
            },
        )
        .await?;
    let keys: Vec<_> = old.items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/a/1", "/a/2", "/a/3", "/a/4", "/a/5"]);
    assert_eq!(old.remaining, 4);
    assert_eq!(old.revision, cut);
    Ok(())
}

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random operations against a model: every read at every past revision,
/// every replayed watch, and compaction agree with it.
#[tokio::test]
async fn history_matches_model() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    // `snapshots[i]` is the state at revision `base + i`.
    let base = store.current_revision().await?;
    let keys: Vec<String> = (0..6)
        .flat_map(|i| [format!("/m/a/{i}"), format!("/m/b/{i}")])
        .collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut model: BTreeMap<String, KeyValue> = BTreeMap::new();
    let mut snapshots: Vec<BTreeMap<String, KeyValue>> = vec![model.clone()];
    let mut events: Vec<Event> = Vec::new();

    for step in 0..240 {
        let key = &keys[rng.below(keys.len() as u64) as usize];
        let value = b(&format!("v{step}"));
        let event = match model.get(key).cloned() {
            None => {
                let kv = store.create(key, value).await?;
                Event {
                    kind: EventType::Created,
                    kv,
                    prev: None,
                }
            }
            Some(prev) if rng.below(3) == 0 => {
                let kv = done(store.delete(key, None).await?);
                Event {
                    kind: EventType::Deleted,
                    kv,
                    prev: Some(prev),
                }
            }
            Some(prev) => {
                let kv = done(store.update(key, prev.mod_revision, value).await?);
                Event {
                    kind: EventType::Modified,
                    kv,
                    prev: Some(prev),
                }
            }
        };
        assert_eq!(event.kv.mod_revision, base + snapshots.len() as i64);
        match event.kind {
            EventType::Deleted => model.remove(key),
            _ => model.insert(key.clone(), event.kv.clone()),
        };
        snapshots.push(model.clone());
        events.push(event);
    }
    let current = store.current_revision().await?;
    assert_eq!(current, base + 240);

    let check = |from: i64| {
        let store = store.clone();
        let snapshots = snapshots.clone();
        let keys = keys.clone();
        async move {
            for rev in from..=current {
                let want = &snapshots[(rev - base) as usize];
                for prefix in ["/m/", "/m/a/"] {
                    let got = store
                        .list(
                            prefix,
                            ListOptions {
                                revision: rev,
                                ..Default::default()
                            },
                        )
                        .await?;
                    let want: Vec<KeyValue> = want
                        .values()
                        .filter(|kv| kv.key.starts_with(prefix))
                        .cloned()
                        .collect();
                    assert_eq!(got.items, want, "list {prefix} at {rev}");
                    assert_eq!(got.revision, rev);
                    let paged = store
                        .list(
                            prefix,
                            ListOptions {
                                revision: rev,
                                limit: 2,
                                start_key: want.get(1).map(|kv| kv.key.clone()),
                            },
                        )
                        .await?;
                    let skip = usize::from(want.len() >= 2);
                    let want_page: Vec<KeyValue> =
                        want.iter().skip(skip).take(2).cloned().collect();
                    assert_eq!(paged.items, want_page, "page of {prefix} at {rev}");
                    let rest = want.len().saturating_sub(skip + 2) as i64;
                    assert_eq!((paged.more, paged.remaining), (rest > 0, rest));
                }
                if (rev - base) % 7 == 0 {
                    for key in &keys {
                        let got = store.get(key, rev).await?;
                        assert_eq!(got.as_ref(), want.get(key), "get {key} at {rev}");
                    }
                }
            }
            Ok::<_, Error>(())
        }
    };
    // Every revision from the (empty) initial one on (0 would mean "latest").
    check(base.max(1)).await?;

    // A replayed watch reproduces the model's events under its prefix.
    let from = base + 17;
    let mut watch = store.watch("/m/a/", from, false).await?;
    let expected: Vec<&Event> = events
        .iter()
        .filter(|e| e.kv.mod_revision > from && e.kv.key.starts_with("/m/a/"))
        .collect();
    for want in expected {
        assert_eq!(&next_event(&mut watch).await, want);
    }

    // Compaction keeps every read at or after the compacted revision.
    store.compact(base + 150).await?;
    assert_eq!(store.compacted_revision().await?, base + 150);
    check(base + 150).await?;
    Ok(())
}

#[tokio::test]
async fn get_and_list_at_old_revision() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    let base = store.current_revision().await?;
    let v1 = store.create("/x/k", b("1")).await?; // base + 1
    let v2 = done(store.update("/x/k", v1.mod_revision, b("2")).await?); // base + 2
    store.create("/x/other", b("o")).await?; // base + 3
    done(store.delete("/x/k", None).await?); // base + 4
    assert_eq!((v1.mod_revision, v2.mod_revision), (base + 1, base + 2));

    assert_eq!(store.get("/x/k", base).await?, None);
    assert_eq!(store.get("/x/k", base + 1).await?, Some(v1.clone()));
    assert_eq!(store.get("/x/k", base + 2).await?, Some(v2.clone()));
    assert_eq!(store.get("/x/k", base + 3).await?, Some(v2.clone()));
    assert_eq!(store.get("/x/k", base + 4).await?, None);
    assert_eq!(store.get("/x/other", base + 2).await?, None);

    let at2 = store
        .list(
            "/x/",
            ListOptions {
                revision: base + 2,
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(at2.items, vec![v2]);
    assert_eq!(at2.revision, base + 2);

    assert!(matches!(
        store.get("/x/k", base + 5).await,
        Err(Error::FutureRevision {
            requested,
            current
        }) if (requested, current) == (base + 5, base + 4)
    ));
    assert!(matches!(
        store
            .list(
                "/x/",
                ListOptions {
                    revision: base + 9,
                    ..Default::default()
                }
            )
            .await,
        Err(Error::FutureRevision { .. })
    ));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_now_and_from_the_past() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    let base = store.current_revision().await?;
    let a1 = store.create("/w/a/1", b("a1")).await?; // base + 1
    store.create("/w/b/1", b("b1")).await?; // base + 2
    let a1b = done(store.update("/w/a/1", a1.mod_revision, b("a1'")).await?); // base + 3
    assert_eq!(a1b.mod_revision, base + 3);

    // From now: only later events.
    let mut now = store.watch("/w/a/", 0, false).await?;
    // From the past: replay of base + 3 (after base + 1), then live.
    let mut past = store.watch("/w/a/", a1.mod_revision, false).await?;
    let mut everything = store.watch("/w/", 0, false).await?;

    let a2 = store.create("/w/a/2", b("a2")).await?; // base + 4
    store.create("/w/b/2", b("b2")).await?; // base + 5
    let del = done(store.delete("/w/a/1", None).await?); // base + 6

    let e = next_event(&mut past).await;
    assert_eq!(e.kind, EventType::Modified);
    assert_eq!(e.kv, a1b);
    assert_eq!(e.prev, Some(a1.clone()));
    let e = next_event(&mut past).await;
    assert_eq!((e.kind, &e.kv), (EventType::Created, &a2));
    assert_eq!(e.prev, None);
    let e = next_event(&mut past).await;
    assert_eq!(e.kind, EventType::Deleted);
    assert_eq!(e.kv, del);
    assert_eq!(e.kv.mod_revision, base + 6);
    assert_eq!(e.kv.value, b("a1'"));
    assert_eq!(e.prev, Some(a1b.clone()));

    let e = next_event(&mut now).await;
    assert_eq!(e.kv, a2);
    let e = next_event(&mut now).await;
    assert_eq!(e.kv.mod_revision, base + 6);

    let revs: Vec<i64> = [
        next_event(&mut everything).await,
        next_event(&mut everything).await,
        next_event(&mut everything).await,
    ]
    .iter()
    .map(|e| e.kv.mod_revision)
    .collect();
    assert_eq!(revs, [base + 4, base + 5, base + 6]);

    // Nothing more is pending.
    for s in [&mut now, &mut past, &mut everything] {
        assert!(
            tokio::time::timeout(Duration::from_millis(100), s.next())
                .await
                .is_err()
        );
    }

    // A long replay (several chunks) racing with live writes: no gap, no
    // duplicate, in order.
    let writers: Vec<_> = (0..16)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..80 {
                    store.create(&format!("/w/c/{t}/{i}"), b("c")).await?;
                    store.create(&format!("/w/d/{t}/{i}"), b("d")).await?;
                }
                Ok::<_, Error>(())
            })
        })
        .collect();
    // Start once the log holds more than one replay chunk of matches.
    while store.current_revision().await? < base + 1500 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut replay = store.watch("/w/c/", del.mod_revision, false).await?;
    let mut last = del.mod_revision;
    for _ in 0..1280 {
        let e = next_event(&mut replay).await;
        assert!(e.kv.mod_revision > last, "in order, no duplicate");
        assert!(e.kv.key.starts_with("/w/c/"));
        assert_eq!(e.kind, EventType::Created);
        last = e.kv.mod_revision;
    }
    for w in writers {
        w.await.map_err(|e| Error::Internal(e.to_string()))??;
    }
    // No gap: the 1280 events are exactly the /w/c/ revisions.
    let all = store.list("/w/c/", ListOptions::default()).await?;
    assert_eq!(all.items.len(), 1280);
    assert_eq!(all.items.iter().map(|kv| kv.mod_revision).max(), Some(last));
    assert!(
        tokio::time::timeout(Duration::from_millis(100), replay.next())
            .await
            .is_err()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_handover_catches_up_from_the_log() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    let base = store.current_revision().await?;
    for i in 0..5 {
        store.create(&format!("/h/{i}"), b("x")).await?;
    }
    // Writes land between the end of the replay and joining the fan-out;
    // they must come from the log, the later ones from the fan-out.
    store
        .inner
        .shared
        .register_delay_ms
        .store(300, Ordering::Release);
    let mut watch = store.watch("/h/", base + 2, false).await?;
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            for i in 5..15 {
                store.create(&format!("/h/{i}"), b("x")).await?;
                store.create(&format!("/other/{i}"), b("x")).await?;
            }
            tokio::time::sleep(Duration::from_millis(400)).await;
            for i in 15..25 {
                store.create(&format!("/h/{i}"), b("x")).await?;
            }
            Ok::<_, Error>(())
        })
    };
    let mut revs = Vec::new();
    while revs.len() < 3 + 10 + 10 {
        revs.push(next_event(&mut watch).await.kv.mod_revision);
    }
    writer.await.map_err(|e| Error::Internal(e.to_string()))??;
    // Relative to `base`: the replayed 3..=5, every other one of 6..=25
    // (the /other/ writes interleave), then 26..=35.
    let expected: Vec<i64> = (3..=5)
        .chain((6..=24).step_by(2))
        .chain(26..=35)
        .map(|r| base + r)
        .collect();
    assert_eq!(revs, expected);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), watch.next())
            .await
            .is_err()
    );
    Ok(())
}

#[tokio::test]
async fn progress_notifications() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = EmbeddedStore::open(
        dir.path(),
        EmbeddedOptions {
            progress_interval: Duration::from_millis(50),
            ..test_opts()
        },
    )?;
    let p1 = store.create("/p/1", b("1")).await?;
    let mut watch = store.watch("/p/", 0, true).await?;
    assert!(matches!(
        next_item(&mut watch).await,
        Some(Ok(WatchItem::Progress(r))) if r == p1.mod_revision
    ));
    store.create("/other", b("x")).await?;
    let p2 = store.create("/p/2", b("2")).await?;
    assert_eq!(p2.mod_revision, p1.mod_revision + 2);
    assert_eq!(
        next_event(&mut watch).await.kv.mod_revision,
        p2.mod_revision
    );
    let other2 = store.create("/other2", b("x")).await?;
    assert!(matches!(
        next_item(&mut watch).await,
        Some(Ok(WatchItem::Progress(r))) if r == other2.mod_revision
    ));

    // Without `progress`, silence.
    let mut quiet = store.watch("/p/", 0, false).await?;
    assert!(
        tokio::time::timeout(Duration::from_millis(200), quiet.next())
            .await
            .is_err()
    );
    Ok(())
}

#[tokio::test]
async fn compacted_revisions_fail() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    // Value `i` is written at revision `r0 + i`.
    let mut kv = store.create("/c/k", b("0")).await?;
    let r0 = kv.mod_revision;
    for i in 1..10 {
        kv = done(
            store
                .update("/c/k", kv.mod_revision, b(&i.to_string()))
                .await?,
        );
    }
    assert_eq!(store.current_revision().await?, r0 + 9);
    assert!(matches!(
        store.compact(r0 + 10).await,
        Err(Error::FutureRevision { .. })
    ));
    store.compact(r0 + 4).await?;
    assert_eq!(store.compacted_revision().await?, r0 + 4);
    // Compacting to an older revision is a no-op.
    store.compact(r0 + 2).await?;
    assert_eq!(store.compacted_revision().await?, r0 + 4);

    assert!(matches!(
        store.get("/c/k", r0 + 3).await,
        Err(Error::Compacted {
            requested,
            compacted
        }) if (requested, compacted) == (r0 + 3, r0 + 4)
    ));
    assert_eq!(
        store.get("/c/k", r0 + 4).await?.map(|kv| kv.value),
        Some(b("4"))
    );
    assert!(matches!(
        store
            .list(
                "/c/",
                ListOptions {
                    revision: r0 + 1,
                    ..Default::default()
                }
            )
            .await,
        Err(Error::Compacted { .. })
    ));
    assert_eq!(
        store
            .list(
                "/c/",
                ListOptions {
                    revision: r0 + 5,
                    ..Default::default()
                }
            )
            .await?
            .items[0]
            .value,
        b("5")
    );
    assert!(matches!(
        store.watch("/c/", r0 + 3, false).await.map(|_| ()),
        Err(Error::Compacted { .. })
    ));
    let mut watch = store.watch("/c/", r0 + 4, false).await?;
    for rev in r0 + 5..=r0 + 9 {
        assert_eq!(next_event(&mut watch).await.kv.mod_revision, rev);
    }

    // A watch created before a compaction that overtakes it fails on its
    // first replay step.
    let mut stale = store.watch("/c/", r0 + 5, false).await?;
    store.compact(r0 + 7).await?;
    assert!(matches!(
        next_item(&mut stale).await,
        Some(Err(Error::Compacted {
            requested,
            compacted
        })) if (requested, compacted) == (r0 + 5, r0 + 7)
    ));
    assert!(next_item(&mut stale).await.is_none());

    // The compacted log entries are collected: only r0 + 8 and r0 + 9 are
    // left.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (log, history) = log_sizes(&store)?;
        if log == 2 && history == 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "log not collected: {log}, {history}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_compactor() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = EmbeddedStore::open(
        dir.path(),
        EmbeddedOptions {
            compaction_interval: Duration::from_millis(200),
            min_retained_revisions: 5,
            ..test_opts()
        },
    )?;
    let base = store.current_revision().await?;
    for i in 0..20 {
        store.create(&format!("/auto/{i}"), b("x")).await?;
    }
    // The first run (at 200ms) keeps everything newer than the revision at
    // open (base); the second (at 400ms) compacts to min(base + 20, base +
    // 20 - 5).
    let deadline = tokio::time::Instant::now() + WAIT;
    while store.compacted_revision().await? != base + 15 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no automatic compaction"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(matches!(
        store.get("/auto/1", base + 14).await,
        Err(Error::Compacted { .. })
    ));
    assert!(store.get("/auto/1", base + 15).await?.is_some());
    Ok(())
}

#[tokio::test]
async fn reopen_keeps_data_and_revision() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let base = {
        let store = open(dir.path())?;
        let base = store.current_revision().await?;
        store.create("/d/1", b("one")).await?; // base + 1
        let kv = store.create("/d/2", b("two")).await?; // base + 2
        done(store.update("/d/2", kv.mod_revision, b("two'")).await?); // base + 3
        store.compact(base + 1).await?;
        base
    };
    let store = open(dir.path())?;
    assert_eq!(store.current_revision().await?, base + 3);
    assert_eq!(store.compacted_revision().await?, base + 1);
    assert_eq!(
        store.get("/d/2", 0).await?.map(|kv| kv.value),
        Some(b("two'"))
    );
    assert_eq!(
        store.get("/d/2", base + 2).await?.map(|kv| kv.value),
        Some(b("two"))
    );
    assert_eq!(
        store.create("/d/3", b("three")).await?.mod_revision,
        base + 4
    );
    // History is replayable across the restart.
    let mut watch = store.watch("/d/", base + 1, false).await?;
    let revs = [
        next_event(&mut watch).await.kv.mod_revision,
        next_event(&mut watch).await.kv.mod_revision,
        next_event(&mut watch).await.kv.mod_revision,
    ];
    assert_eq!(revs, [base + 2, base + 3, base + 4]);

    // close() ends watches, refuses calls and releases the directory.
    store.close().await?;
    assert!(next_item(&mut watch).await.is_none());
    assert!(matches!(
        store.create("/d/4", b("x")).await,
        Err(Error::Unavailable(_))
    ));
    assert!(matches!(
        store.get("/d/1", 0).await,
        Err(Error::Unavailable(_))
    ));
    store.close().await?;
    let again = open(dir.path())?;
    assert_eq!(again.current_revision().await?, base + 4);
    Ok(())
}

/// Copies the database file of the open store in `from` into a new data
/// directory under `to`, as a crash leaves it (every acknowledged commit is
/// on disk; no clean close), and opens the copy with redb alone: whether
/// redb had to walk the whole database to rebuild its allocator state.
fn copy_as_crashed(from: &Path, to: &Path) -> Result<bool> {
    let io = |e: std::io::Error| Error::Internal(e.to_string());
    std::fs::create_dir_all(to).map_err(io)?;
    std::fs::copy(from.join(DB_FILE), to.join(DB_FILE)).map_err(io)?;
    let probe = to.join("probe.redb");
    std::fs::copy(to.join(DB_FILE), &probe).map_err(io)?;
    let repaired = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let db = redb::Builder::new()
        .set_repair_callback({
            let repaired = Arc::clone(&repaired);
            move |_| repaired.store(true, Ordering::Relaxed)
        })
        .create(&probe)
        .map_err(db_err)?;
    drop(db);
    std::fs::remove_file(&probe).map_err(io)?;
    Ok(repaired.load(Ordering::Relaxed))
}

async fn write_keys(store: &EmbeddedStore, n: usize) -> Result<()> {
    let keys: Vec<String> = (0..n).map(|i| format!("/c/{i:03}")).collect();
    let writes = keys.iter().map(|key| store.create(key, b("v")));
    for result in futures::future::join_all(writes).await {
        result?;
    }
    Ok(())
}

async fn keys_in(dir: &Path) -> Result<i64> {
    let store = open(dir)?;
    let n = store.count("/c/").await?;
    store.close().await?;
    Ok(n)
}

#[tokio::test]
async fn a_crash_once_writes_paused_needs_no_full_repair() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(&dir.path().join("a"))?;
    write_keys(&store, 50).await?;
    // Later commits of the burst left the allocator state out; the idle
    // writer records it after `quick_repair_idle` (10 ms).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let crashed = dir.path().join("b");
    assert!(!copy_as_crashed(&dir.path().join("a"), &crashed)?);
    assert_eq!(keys_in(&crashed).await?, 50);
    Ok(())
}

#[tokio::test]
async fn a_crash_under_sustained_writes_is_repaired_in_full_and_loses_nothing() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    // Every commit after the first counts as "under load" and no pause is
    // long enough for the writer to record the allocator state.
    let opts = EmbeddedOptions {
        quick_repair_idle: Duration::from_secs(3600),
        ..test_opts()
    };
    let store = EmbeddedStore::open(&dir.path().join("a"), opts)?;
    for i in 0..5 {
        store.create(&format!("/c/x{i}"), b("v")).await?;
    }
    write_keys(&store, 50).await?;
    let crashed = dir.path().join("b");
    assert!(copy_as_crashed(&dir.path().join("a"), &crashed)?);
    // The full repair finds every acknowledged write.
    assert_eq!(keys_in(&crashed).await?, 55);
    // Opening records the allocator state in its own commit: a crash right
    // after a start, before any write, needs no full repair (this fails
    // when `init_tables` leaves the state out).
    let store = open(&crashed)?;
    let again = dir.path().join("c");
    assert!(!copy_as_crashed(&crashed, &again)?);
    store.close().await?;
    assert_eq!(keys_in(&again).await?, 55);
    Ok(())
}

#[tokio::test]
async fn second_open_fails_while_locked() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    match open(dir.path()) {
        Err(Error::Unavailable(msg)) => assert!(msg.contains("locked"), "{msg}"),
        other => panic!("expected a lock error, got {other:?}"),
    }
    // Still fine, and the lock goes with the store.
    let kv = store.create("/l", b("x")).await?;
    drop(store);
    let store = open(dir.path())?;
    assert_eq!(store.current_revision().await?, kv.mod_revision);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_guaranteed_updates_lose_nothing() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    let created = store.create("/counter", b("0")).await?;
    const TASKS: usize = 16;
    const PER_TASK: usize = 10;
    let mut handles = Vec::new();
    for _ in 0..TASKS {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let mut conflicts = 0usize;
            for _ in 0..PER_TASK {
                loop {
                    let kv = store.get("/counter", 0).await?.expect("counter exists");
                    let n: usize = std::str::from_utf8(&kv.value)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .expect("a number");
                    match store
                        .update("/counter", kv.mod_revision, b(&(n + 1).to_string()))
                        .await?
                    {
                        WriteOutcome::Done(_) => break,
                        WriteOutcome::Conflict(_) => conflicts += 1,
                    }
                }
            }
            Ok::<_, Error>(conflicts)
        }));
    }
    for h in handles {
        h.await.map_err(|e| Error::Internal(e.to_string()))??;
    }
    let kv = store.get("/counter", 0).await?.expect("counter exists");
    assert_eq!(kv.value, b(&(TASKS * PER_TASK).to_string()));
    assert_eq!(kv.version, (TASKS * PER_TASK + 1) as i64);
    assert_eq!(
        kv.mod_revision,
        created.mod_revision + (TASKS * PER_TASK) as i64
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_batches_writes() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    let base = store.current_revision().await?;

    // Unpaused: 200 concurrent creates all complete with distinct revisions.
    let spawn_creates = |tag: &'static str| {
        (0..200)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move { store.create(&format!("/g/{tag}/{i}"), b("x")).await })
            })
            .collect::<Vec<_>>()
    };
    let before = store.commit_count();
    let mut revs = Vec::new();
    for h in spawn_creates("free") {
        revs.push(
            h.await
                .map_err(|e| Error::Internal(e.to_string()))??
                .mod_revision,
        );
    }
    revs.sort_unstable();
    assert_eq!(revs, (base + 1..=base + 200).collect::<Vec<i64>>());
    assert!(store.commit_count() - before <= 200);

    // With the writer held back, the queued writes share one commit.
    store.inner.shared.pause.store(true, Ordering::Release);
    let handles = spawn_creates("paused");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = store.commit_count();
    store.inner.shared.pause.store(false, Ordering::Release);
    let mut revs = Vec::new();
    for h in handles {
        revs.push(
            h.await
                .map_err(|e| Error::Internal(e.to_string()))??
                .mod_revision,
        );
    }
    revs.sort_unstable();
    assert_eq!(revs, (base + 201..=base + 400).collect::<Vec<i64>>());
    let commits = store.commit_count() - before;
    assert!(commits <= 2, "200 writes took {commits} commits");
    assert_eq!(store.count("/g/").await?, 400);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_watcher_is_closed_others_see_everything() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = EmbeddedStore::open(
        dir.path(),
        EmbeddedOptions {
            watch_buffer: 8,
            ..test_opts()
        },
    )?;
    let base = store.current_revision().await?;
    let mut slow = store.watch("/s/", 0, false).await?;
    let mut fast = store.watch("/s/", 0, false).await?;
    let reader = tokio::spawn(async move {
        let mut revs = Vec::new();
        while revs.len() < 50 {
            revs.push(next_event(&mut fast).await.kv.mod_revision);
        }
        revs
    });
    for i in 0..50 {
        store.create(&format!("/s/{i}"), b("x")).await?;
    }
    let revs = reader.await.map_err(|e| Error::Internal(e.to_string()))?;
    assert_eq!(revs, (base + 1..=base + 50).collect::<Vec<i64>>());

    // The slow one gets what fit in its buffer, in order, then the error.
    let mut seen = Vec::new();
    loop {
        match next_item(&mut slow).await {
            Some(Ok(WatchItem::Event(e))) => seen.push(e.kv.mod_revision),
            Some(Err(Error::WatcherTooSlow)) => break,
            other => panic!("expected WatcherTooSlow, got {other:?}"),
        }
    }
    assert_eq!(seen, (base + 1..=base + 8).collect::<Vec<i64>>());
    assert!(next_item(&mut slow).await.is_none());
    Ok(())
}

#[tokio::test]
async fn large_value_round_trips() -> TestResult {
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(dir.path())?;
    let big: Bytes = (0..(1usize << 20)).map(|i| (i % 251) as u8).collect();
    let mut watch = store.watch("/big", 0, false).await?;
    let kv = store.create("/big", big.clone()).await?;
    let other: Bytes = big.iter().rev().copied().collect();
    done(store.update("/big", kv.mod_revision, other.clone()).await?);
    assert_eq!(
        store.get("/big", 0).await?.map(|kv| kv.value),
        Some(other.clone())
    );
    assert_eq!(
        store.get("/big", kv.mod_revision).await?.map(|kv| kv.value),
        Some(big.clone())
    );
    assert_eq!(next_event(&mut watch).await.kv.value, big);
    let modified = next_event(&mut watch).await;
    assert_eq!(modified.kv.value, other);
    assert_eq!(modified.prev.map(|p| p.value), Some(big));
    drop(store);
    let store = open(dir.path())?;
    assert_eq!(store.get("/big", 0).await?.map(|kv| kv.value), Some(other));
    Ok(())
}

/// Child half of [`acknowledged_writes_survive_sigkill`] (the same test
/// binary re-run with `APIFORGE_CRASH_DIR` set): writes until killed,
/// printing each acknowledged write.
fn crash_child(dir: &Path) -> TestResult {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(e.to_string()))?;
    rt.block_on(async {
        let store = open(dir)?;
        let tasks: Vec<_> = (0..4)
            .map(|t| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in 0.. {
                        let kv = store
                            .create(&format!("/crash/{t}/{i}"), b(&format!("{t}/{i}")))
                            .await?;
                        println!("ACK {} {}", kv.key, kv.mod_revision);
                    }
                    Ok::<_, Error>(())
                })
            })
            .collect();
        for t in tasks {
            t.await.map_err(|e| Error::Internal(e.to_string()))??;
        }
        Ok(())
    })
}

#[test]
fn acknowledged_writes_survive_sigkill() -> TestResult {
    use std::io::BufRead as _;
    if let Some(dir) = std::env::var_os("APIFORGE_CRASH_DIR") {
        return crash_child(Path::new(&dir));
    }
    let err = |e: std::io::Error| Error::Internal(e.to_string());
    let dir = tempfile::tempdir().map_err(err)?;
    let rt = tokio::runtime::Runtime::new().map_err(err)?;
    // Create the store here to learn the revision the child starts from,
    // then release the directory for the child.
    let base = rt.block_on(async {
        let store = open(dir.path())?;
        let base = store.current_revision().await?;
        store.close().await?;
        Ok::<_, Error>(base)
    })?;
    let exe = std::env::current_exe().map_err(err)?;
    let mut child = std::process::Command::new(exe)
        .args([
            "--exact",
            "embedded::tests::acknowledged_writes_survive_sigkill",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("APIFORGE_CRASH_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(err)?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut acked: Vec<(String, i64)> = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.map_err(err)?;
        if let Some(rest) = line.strip_prefix("ACK ") {
            let (key, rev) = rest.split_once(' ').expect("ACK key rev");
            acked.push((key.to_owned(), rev.parse().expect("a revision")));
            if acked.len() >= 300 {
                break;
            }
        }
    }
    // Another process holds the directory.
    match open(dir.path()) {
        Err(Error::Unavailable(msg)) => assert!(msg.contains("locked"), "{msg}"),
        other => panic!("expected a lock error, got {other:?}"),
    }
    child.kill().map_err(err)?; // SIGKILL
    child.wait().map_err(err)?;
    assert_eq!(acked.len(), 300, "the child stopped early");

    rt.block_on(async {
        let store = open(dir.path())?;
        let current = store.current_revision().await?;
        let max_acked = acked.iter().map(|(_, r)| *r).max().unwrap_or(0);
        assert!(current >= max_acked, "{current} < {max_acked}");
        for (key, rev) in &acked {
            let kv = store
                .get(key, 0)
                .await?
                .expect("an acknowledged write survives");
            assert_eq!(kv.mod_revision, *rev);
        }
        // Whatever else is there is complete: one key per revision after
        // `base`, and the log replays every one of them.
        assert_eq!(store.count("/crash/").await?, current - base);
        let mut watch = store.watch("/crash/", base, false).await?;
        for rev in base + 1..=current {
            assert_eq!(next_event(&mut watch).await.kv.mod_revision, rev);
        }
        // And the store goes on from there.
        assert_eq!(
            store.create("/after", b("x")).await?.mod_revision,
            current + 1
        );
        Ok(())
    })
}

/// The shared storage conformance suite, run against the embedded store.
mod conformance_suite {
    use std::sync::Arc;
    use std::time::Duration;

    use super::super::{EmbeddedOptions, EmbeddedStore};
    use crate::{Storage, conformance};

    macro_rules! conformance_tests {
        ($($name:ident),* $(,)?) => {$(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let dir = tempfile::tempdir().unwrap();
                let opts = EmbeddedOptions {
                    progress_interval: Duration::from_millis(200),
                    ..EmbeddedOptions::default()
                };
                let store: Arc<dyn Storage> = Arc::new(EmbeddedStore::open(dir.path(), opts).unwrap());
                conformance::$name(store).await;
            }
        )*};
    }

    conformance_tests!(
        create_get_exists,
        update_cas,
        delete_preconditions,
        revisions_increase,
        list_pagination,
        read_at_old_revision,
        watch_from_now,
        watch_without_prev,
        watch_from_past_revision,
        watch_progress,
        watch_request_progress,
        watch_many_writes,
        compaction,
        concurrent_cas_counter,
        guaranteed_update_counter,
        large_value,
    );
}

/// A snapshot taken while the store serves holds exactly the state at its
/// revision; restored into an empty directory, a store opened there serves
/// it and goes on from that revision.
#[tokio::test]
async fn snapshots_are_consistent_and_restore_into_an_empty_directory() -> TestResult {
    let tmp = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store = open(&tmp.path().join("a"))?;
    for i in 0..50 {
        store.create(&format!("/r/{i:02}"), b("v1")).await?;
    }
    let kv = store.get("/r/07", 0).await?.expect("present");
    done(store.update("/r/07", kv.mod_revision, b("v2")).await?);
    done(store.delete("/r/08", None).await?);
    let at = store.current_revision().await?;
    let file = tmp.path().join("snap.db");
    let snapshot = {
        let store = store.clone();
        let file = file.clone();
        tokio::task::spawn_blocking(move || store.snapshot_to(&file))
            .await
            .map_err(|e| Error::Internal(e.to_string()))??
    };
    assert_eq!((snapshot.revision, snapshot.keys), (at, 49));
    assert!(snapshot.bytes > 0);
    // Writes after the snapshot are not in it.
    store.create("/r/late", b("x")).await?;

    let restored_dir = tmp.path().join("b");
    let info = snapshot::restore(&file, &restored_dir)?;
    assert_eq!((info.revision, info.keys), (at, 49));
    let restored = open(&restored_dir)?;
    assert_eq!(restored.current_revision().await?, at);
    assert_eq!(
        restored.get("/r/07", 0).await?.map(|kv| kv.value),
        Some(b("v2"))
    );
    assert_eq!(restored.get("/r/08", 0).await?, None);
    assert_eq!(restored.get("/r/late", 0).await?, None);
    assert_eq!(restored.count("/r/").await?, 49);
    // History came along: the value before the update is still readable.
    assert_eq!(
        restored
            .get("/r/07", kv.mod_revision)
            .await?
            .map(|kv| kv.value),
        Some(b("v1"))
    );
    let next = restored.create("/r/new", b("y")).await?;
    assert_eq!(next.mod_revision, at + 1);

    // A directory that has a store is refused; so is a file that is not a
    // snapshot.
    let err = snapshot::restore(&file, &restored_dir).expect_err("has a store");
    assert!(err.to_string().contains("already holds a store"), "{err}");
    let junk = tmp.path().join("junk");
    std::fs::write(&junk, b"not a database").map_err(|e| Error::Internal(e.to_string()))?;
    let err = snapshot::restore(&junk, &tmp.path().join("c")).expect_err("junk");
    assert!(err.to_string().contains("is not a snapshot"), "{err}");
    assert!(!tmp.path().join("c").join(DB_FILE).exists());
    Ok(())
}

#[tokio::test]
async fn the_store_is_private_to_its_owner() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
    let store_dir = dir.path().join("store");
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode() & 0o777)
            .map_err(|e| Error::Internal(e.to_string()))
    };
    {
        let _store = open(&store_dir)?;
        assert_eq!(mode(&store_dir)?, 0o700);
        assert_eq!(mode(&store_dir.join(DB_FILE))?, 0o600);
        assert_eq!(mode(&store_dir.join(LOCK_FILE))?, 0o600);
    }
    // A store made before modes were set (or by hand) is tightened.
    let loose = |p: &Path, m| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m))
            .map_err(|e| Error::Internal(e.to_string()))
    };
    loose(&store_dir, 0o755)?;
    loose(&store_dir.join(DB_FILE), 0o644)?;
    let _store = open(&store_dir)?;
    assert_eq!(mode(&store_dir)?, 0o700);
    assert_eq!(mode(&store_dir.join(DB_FILE))?, 0o600);
    Ok(())
}
