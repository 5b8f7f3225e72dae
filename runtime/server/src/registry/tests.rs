//! Registry and watch-cache tests on the embedded store.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use super::cache::{CacheItem, CacheOptions, Caches};
use super::{ListParams, Store, WatchEvent};
use apiforge_core::builtin::core_v1::Namespace;
use apiforge_core::scheme::KindBuilder;
use apiforge_storage::Storage;
use apiforge_storage::embedded::{EmbeddedOptions, EmbeddedStore};

struct Fixture {
    _dir: tempfile::TempDir,
    storage: Arc<dyn Storage>,
    store: Store,
}

fn fixture(opts: CacheOptions) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
    let store = namespace_store(storage.clone(), &opts);
    Fixture {
        _dir: dir,
        storage,
        store,
    }
}

/// A Namespace store on `storage` under `/registry`, with a watch cache.
fn namespace_store(storage: Arc<dyn Storage>, opts: &CacheOptions) -> Store {
    let kind = Arc::new(
        KindBuilder::<Namespace>::new()
            .version::<Namespace>()
            .build(),
    );
    Store::new(kind, storage, "/registry", Some((&Caches::default(), opts)))
}

fn ns(name: &str, labels: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels}})
}

fn hub(store: &Store, body: Value) -> Value {
    store.kind().decode("v1", body).unwrap()
}

fn name(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn consistent_read_after_write_sees_the_write() {
    let f = fixture(CacheOptions::default());
    for i in 0..20 {
        let created = f
            .store
            .create("", hub(&f.store, ns(&format!("n{i}"), json!({}))), false)
            .await
            .unwrap();
        let got = f.store.get("", &format!("n{i}"), None).await.unwrap();
        assert_eq!(
            got["metadata"]["resourceVersion"],
            created["metadata"]["resourceVersion"]
        );
        let list = f.store.list(None, &ListParams::default()).await.unwrap();
        assert_eq!(list.items.len(), i + 1);
    }
    // A write to another resource moves the store's revision; a consistent
    // read must still answer quickly (progress notifications).
    f.storage
        .create("/registry/other/x", bytes::Bytes::from_static(b"{}"))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let list = f.store.list(None, &ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 20);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        list.resource_version,
        f.storage.current_revision().await.unwrap()
    );
}

#[tokio::test]
async fn slow_watcher_is_dropped_while_1000_others_keep_up() {
    let f = fixture(CacheOptions {
        watcher_buffer: 32,
        ..Default::default()
    });
    let cache = f.store.cache().unwrap().clone();
    cache.wait_consistent().await.unwrap();
    let terminated = || {
        crate::metrics::global()
            .terminated_watchers
            .with_label_values(&["namespaces"])
            .get()
    };
    let terminated_before = terminated();
    let rev = cache.revision();
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let mut stream = cache
            .watch("/registry/namespaces/", Some(rev))
            .unwrap()
            .into_stream();
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while seen.len() < 100 {
                match tokio::time::timeout(Duration::from_secs(20), stream.next()).await {
                    Ok(Some(CacheItem::Event(ev))) => seen.push(ev.revision),
                    Ok(Some(CacheItem::Progress(_))) => {}
                    Ok(None) | Err(_) => break,
                }
            }
            seen
        }));
    }
    let mut slow = cache
        .watch("/registry/namespaces/", Some(rev))
        .unwrap()
        .into_stream();
    // Writes one after the other (each fsync'd): fast watchers drain as
    // they come, the slow one never does.
    for i in 0..100 {
        f.store
            .create("", hub(&f.store, ns(&format!("w{i}"), json!({}))), false)
            .await
            .unwrap();
    }
    for t in tasks {
        let seen = t.await.unwrap();
        assert_eq!(seen.len(), 100, "a fast watcher missed events");
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "events out of order");
    }
    // The slow watcher got its buffer's worth, then its stream ended.
    let mut got = 0;
    while let Some(item) = tokio::time::timeout(Duration::from_secs(5), slow.next())
        .await
        .unwrap()
    {
        if matches!(item, CacheItem::Event(_)) {
            got += 1;
        }
    }
    assert!(got <= 32, "slow watcher received {got}");
    // ... and kube-apiserver's metric counts it.
    assert!(
        terminated() > terminated_before,
        "apiserver_terminated_watchers_total did not count the dropped watcher"
    );
}

#[tokio::test]
async fn selectors_filter_lists_and_watches() {
    let f = fixture(CacheOptions::default());
    f.store
        .create("", hub(&f.store, ns("a", json!({"tier": "web"}))), false)
        .await
        .unwrap();
    f.store
        .create("", hub(&f.store, ns("b", json!({"tier": "db"}))), false)
        .await
        .unwrap();
    let params = ListParams {
        labels: super::LabelSelector::parse("tier=web").unwrap(),
        ..Default::default()
    };
    let list = f.store.list(None, &params).await.unwrap();
    assert_eq!(list.items.iter().map(name).collect::<Vec<_>>(), ["a"]);

    let mut events = f
        .store
        .watch(
            None,
            &ListParams {
                resource_version: Some(list.resource_version),
                ..params.clone()
            },
            false,
        )
        .await
        .unwrap();
    // b joins the selection (ADDED), a leaves it (DELETED).
    let mut b = f.store.get("", "b", None).await.unwrap();
    b["metadata"]["labels"]["tier"] = json!("web");
    f.store.update("", "b", b, false).await.unwrap();
    let mut a = f.store.get("", "a", None).await.unwrap();
    a["metadata"]["labels"]["tier"] = json!("db");
    f.store.update("", "a", a, false).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .unwrap()
            .unwrap()
        {
            WatchEvent::Object(ty, o) => seen.push((ty, name(&o.object().unwrap()))),
            WatchEvent::Bookmark(_) | WatchEvent::InitialEventsEnd(_) => {}
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(
        seen,
        [("ADDED", "b".to_string()), ("DELETED", "a".to_string())]
    );
}

#[tokio::test]
async fn pagination_serves_a_stable_snapshot() {
    let f = fixture(CacheOptions::default());
    for i in 0..10 {
        f.store
            .create("", hub(&f.store, ns(&format!("p{i}"), json!({}))), false)
            .await
            .unwrap();
    }
    let first = f
        .store
        .list(
            None,
            &ListParams {
                limit: 4,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(first.items.len(), 4);
    assert_eq!(first.remaining, Some(6));
    // Changes after the first page do not show in later pages.
    f.store
        .delete("", "p7", &Default::default(), false)
        .await
        .unwrap();
    f.store
        .create("", hub(&f.store, ns("p99", json!({}))), false)
        .await
        .unwrap();
    let mut names: Vec<String> = first.items.iter().map(name).collect();
    let mut remaining = Vec::new();
    let mut token = first.continue_token.clone();
    while let Some(t) = token {
        let page = f
            .store
            .list(
                None,
                &ListParams {
                    limit: 4,
                    continue_token: Some(t),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(page.resource_version, first.resource_version);
        names.extend(page.items.iter().map(name));
        remaining.push(page.remaining);
        token = page.continue_token;
    }
    let expected: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    assert_eq!(names, expected);
    // Counted in the snapshot of the first page, page by page.
    assert_eq!(remaining, [Some(2), None]);
    // A new walk's first page counts the objects as they are now (p7 is
    // still there, terminating), again after every change.
    let first_page = || async {
        let params = ListParams {
            limit: 4,
            ..Default::default()
        };
        f.store.list(None, &params).await.unwrap().remaining
    };
    assert_eq!(first_page().await, Some(7));
    assert_eq!(first_page().await, Some(7));
    for (i, more) in ["p100", "p101"].into_iter().enumerate() {
        f.store
            .create("", hub(&f.store, ns(more, json!({}))), false)
            .await
            .unwrap();
        assert_eq!(first_page().await, Some(8 + i as i64));
    }
}

#[tokio::test]
async fn watch_from_before_the_window_is_gone() {
    let f = fixture(CacheOptions {
        window: 5,
        ..Default::default()
    });
    let start = f
        .store
        .create("", hub(&f.store, ns("g0", json!({}))), false)
        .await
        .unwrap();
    let rv: i64 = start["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    for i in 1..10 {
        f.store
            .create("", hub(&f.store, ns(&format!("g{i}"), json!({}))), false)
            .await
            .unwrap();
    }
    let mut events = f
        .store
        .watch(
            None,
            &ListParams {
                resource_version: Some(rv),
                ..Default::default()
            },
            false,
        )
        .await
        .unwrap();
    match events.next().await.unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected 410, got {other:?}"),
    }
    assert!(events.next().await.is_none());
}

/// The event window is bounded by bytes as well as events: with 1 KiB
/// objects and a 20 KiB byte bound it keeps the last `MIN_WINDOW_EVENTS`
/// events (not the 20,000 of `window`): a watch from before them gets 410,
/// one from inside them resumes.
#[tokio::test]
async fn the_event_window_is_bounded_by_bytes() {
    let f = fixture(CacheOptions {
        window_bytes: 20 << 10,
        ..Default::default()
    });
    // ~1 KiB of labels (values are at most 63 characters).
    let pad: serde_json::Map<String, Value> = (0..16)
        .map(|i| (format!("l{i}"), Value::from("x".repeat(60))))
        .collect();
    let mut revisions = Vec::new();
    for i in 0..150 {
        let created = f
            .store
            .create(
                "",
                hub(&f.store, ns(&format!("b{i}"), Value::Object(pad.clone()))),
                false,
            )
            .await
            .unwrap();
        revisions.push(
            created["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<i64>()
                .unwrap(),
        );
    }
    // Let the cache apply the last write.
    f.store.list(None, &ListParams::default()).await.unwrap();
    let watch_from = |rv: i64| {
        let params = ListParams {
            resource_version: Some(rv),
            ..Default::default()
        };
        let store = &f.store;
        async move { store.watch(None, &params, false).await.unwrap() }
    };
    let mut old = watch_from(revisions[10]).await;
    match old.next().await.unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected 410, got {other:?}"),
    }
    // 90 events back is inside the kept minimum: the next event is b61.
    let mut recent = watch_from(revisions[60]).await;
    match tokio::time::timeout(Duration::from_secs(5), recent.next())
        .await
        .unwrap()
        .unwrap()
    {
        WatchEvent::Object(ty, obj) => {
            assert_eq!(
                (ty, name(&obj.object().unwrap()).as_str()),
                ("ADDED", "b61")
            )
        }
        other => panic!("expected b61 added, got {other:?}"),
    }
}

#[tokio::test]
async fn send_initial_events_ends_with_a_bookmark() {
    let f = fixture(CacheOptions::default());
    for i in 0..3 {
        f.store
            .create("", hub(&f.store, ns(&format!("s{i}"), json!({}))), false)
            .await
            .unwrap();
    }
    let params = ListParams {
        send_initial_events: Some(true),
        ..Default::default()
    };
    let mut events = f.store.watch(None, &params, true).await.unwrap();
    let mut added = Vec::new();
    let end = loop {
        match tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .unwrap()
            .unwrap()
        {
            WatchEvent::Object("ADDED", o) => added.push(name(&o.object().unwrap())),
            WatchEvent::InitialEventsEnd(rev) => break rev,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(added, ["s0", "s1", "s2"]);
    assert_eq!(end, f.storage.current_revision().await.unwrap());
    f.store
        .create("", hub(&f.store, ns("s3", json!({}))), false)
        .await
        .unwrap();
    match tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .unwrap()
        .unwrap()
    {
        WatchEvent::Object("ADDED", o) => assert_eq!(name(&o.object().unwrap()), "s3"),
        other => panic!("unexpected {other:?}"),
    }

    // sendInitialEvents=false: only what happens next.
    let params = ListParams {
        send_initial_events: Some(false),
        ..Default::default()
    };
    let mut events = f.store.watch(None, &params, true).await.unwrap();
    f.store
        .create("", hub(&f.store, ns("s4", json!({}))), false)
        .await
        .unwrap();
    match tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .unwrap()
        .unwrap()
    {
        WatchEvent::Object("ADDED", o) => assert_eq!(name(&o.object().unwrap()), "s4"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn continue_tokens_across_compaction() {
    // Without a remembered snapshot the continuation is read from storage
    // at the first page's revision; once compacted that is 410 Expired.
    let f = fixture(CacheOptions {
        snapshots: 0,
        ..Default::default()
    });
    for i in 0..6 {
        f.store
            .create("", hub(&f.store, ns(&format!("c{i}"), json!({}))), false)
            .await
            .unwrap();
    }
    let first = f
        .store
        .list(
            None,
            &ListParams {
                limit: 2,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let token = first.continue_token.clone().unwrap();
    // Still readable: the storage serves the old revision.
    let second = f
        .store
        .list(
            None,
            &ListParams {
                limit: 2,
                continue_token: Some(token.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        second.items.iter().map(name).collect::<Vec<_>>(),
        ["c2", "c3"]
    );
    f.store
        .create("", hub(&f.store, ns("later", json!({}))), false)
        .await
        .unwrap();
    let current = f.storage.current_revision().await.unwrap();
    f.storage.compact(current).await.unwrap();
    let err = f
        .store
        .list(
            None,
            &ListParams {
                limit: 2,
                continue_token: Some(token),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!((err.0.code, err.0.reason.as_str()), (410, "Expired"));
    assert!(
        err.0
            .message
            .starts_with("The provided continue parameter is too old"),
        "{}",
        err.0.message
    );
    // The 410 carries an inconsistent continuation: the same start key,
    // read at the latest revision.
    assert!(
        err.0
            .message
            .contains("use the continue token in this response")
    );
    let resumed = f
        .store
        .list(
            None,
            &ListParams {
                limit: 2,
                continue_token: Some(err.0.metadata.continue_.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        resumed.items.iter().map(name).collect::<Vec<_>>(),
        ["c2", "c3"]
    );
    assert_eq!(resumed.resource_version, current);
    // An invalid token is a 400.
    let err = f
        .store
        .list(
            None,
            &ListParams {
                limit: 2,
                continue_token: Some("garbage".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.0.code, 400);
}

#[tokio::test]
async fn watch_cache_sizes_can_turn_the_cache_off() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
    let kind = Arc::new(
        KindBuilder::<Namespace>::new()
            .version::<Namespace>()
            .build(),
    );
    let caches = Caches::default();
    let mut opts = CacheOptions::default();
    opts.sizes.insert("namespaces".into(), 0);
    let store = Store::new(
        kind.clone(),
        storage.clone(),
        "/registry",
        Some((&caches, &opts)),
    );
    assert!(store.cache().is_none());
    opts.sizes.insert("namespaces".into(), 7);
    let store = Store::new(kind, storage, "/registry", Some((&caches, &opts)));
    assert!(store.cache().is_some());
}

#[test]
fn encoded_cached_objects_serve_their_primary_encoding_and_decode_on_demand() {
    let decodes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = decodes.clone();
    // v1 and v2 are lossless; v3 is lossy (decodes to something else).
    let rehydrate: super::cache::Rehydrate = Arc::new(move |version, b: &[u8]| {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match version {
            "v3" => Ok(json!({"lost": true})),
            _ => serde_json::from_slice(b).map_err(|e| e.to_string()),
        }
    });
    let object = super::cache::CachedObject::from_encoding(
        "k".into(),
        1,
        "v1",
        bytes::Bytes::from_static(br#"{"a":1}"#),
        rehydrate,
    );
    // The primary version is served as is, without decoding or encoding.
    let bytes = object
        .encoded::<String>("v1", |_| Err("must not encode".into()))
        .unwrap();
    assert_eq!(&bytes[..], br#"{"a":1}"#);
    assert_eq!(decodes.load(std::sync::atomic::Ordering::Relaxed), 0);
    // The hub form is decoded on demand.
    assert_eq!(*object.object().unwrap(), json!({"a": 1}));
    assert_eq!(decodes.load(std::sync::atomic::Ordering::Relaxed), 1);
    // A lossless version becomes the primary encoding (made once).
    for _ in 0..2 {
        let v2 = object
            .encoded::<String>("v2", |v| Ok(bytes::Bytes::from(v.to_string())))
            .unwrap();
        assert_eq!(&v2[..], br#"{"a":1}"#);
    }
    // decode of v1, round-trip check of v2.
    assert_eq!(decodes.load(std::sync::atomic::Ordering::Relaxed), 3);
    assert_eq!(*object.object().unwrap(), json!({"a": 1}));
    // A lossy version is memoized next to the primary one.
    for _ in 0..2 {
        let v3 = object
            .encoded::<String>("v3", |v| Ok(bytes::Bytes::from(format!("[{v}]"))))
            .unwrap();
        assert_eq!(&v3[..], br#"[{"a":1}]"#);
    }
    assert_eq!(*object.object().unwrap(), json!({"a": 1}));
    // The primary encoding moves only once: v1 is now memoized beside v2.
    for _ in 0..2 {
        let v1 = object
            .encoded::<String>("v1", |v| Ok(bytes::Bytes::from(v.to_string())))
            .unwrap();
        assert_eq!(&v1[..], br#"{"a":1}"#);
    }
}

#[test]
fn cached_objects_are_encoded_once_per_version() {
    let object = super::cache::CachedObject::new("k".into(), 1, json!({"a": 1}));
    let mut calls = 0;
    for _ in 0..3 {
        let bytes = object
            .encoded::<String>("v1", |v| {
                calls += 1;
                Ok(bytes::Bytes::from(v.to_string()))
            })
            .unwrap();
        assert_eq!(&bytes[..], br#"{"a":1}"#);
    }
    object
        .encoded::<String>("v2", |_| {
            calls += 1;
            Ok(bytes::Bytes::new())
        })
        .unwrap();
    assert_eq!(calls, 2);
}

#[tokio::test]
async fn update_without_change_writes_nothing() {
    let f = fixture(CacheOptions::default());
    let created = f
        .store
        .create("", hub(&f.store, ns("same", json!({"a": "1"}))), false)
        .await
        .unwrap();
    let rv = created["metadata"]["resourceVersion"].clone();
    let (out, was_created) = f
        .store
        .update("", "same", created.clone(), false)
        .await
        .unwrap();
    assert!(!was_created);
    assert_eq!(out["metadata"]["resourceVersion"], rv);
    assert_eq!(out, created);
    let current = f
        .storage
        .get(&f.store.key("", "same"), 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(current.version, 1, "no second write");

    let mut changed = created.clone();
    changed["metadata"]["labels"]["a"] = json!("2");
    let (out, _) = f.store.update("", "same", changed, false).await.unwrap();
    assert_ne!(out["metadata"]["resourceVersion"], rv);
}

/// A value read with an encryption key that no longer writes is written by
/// an update even when nothing changed (so that re-writing every object
/// re-encrypts it with the new key); once re-written, an unchanged update
/// writes nothing again.
#[tokio::test]
async fn an_unchanged_update_of_a_stale_value_rewrites_it() {
    use apiforge_storage::encryption::{Encrypted, Transformers};
    let dir = tempfile::tempdir().unwrap();
    let raw: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
    let config = |keys: &str| {
        let text = format!(
            r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",
                "resources":[{{"resources":["namespaces"],"providers":[{{"aescbc":{{"keys":[{keys}]}}}}]}}]}}"#
        );
        Arc::new(Transformers::parse(&text).unwrap())
    };
    let key1 = r#"{"name":"key1","secret":"c2VjcmV0IGlzIHNlY3VyZQ=="}"#;
    let key2 = r#"{"name":"key2","secret":"e0/+tts8FS254BZimFZWtUsOCOUDSkvzB72PyimMlkY="}"#;
    let store = |transformers| {
        let storage: Arc<dyn Storage> =
            Arc::new(Encrypted::new(raw.clone(), "/registry", transformers, []));
        namespace_store(storage, &CacheOptions::default())
    };
    let old = store(config(key1));
    let created = old
        .create("", hub(&old, ns("rotated", json!({}))), false)
        .await
        .unwrap();
    let key = old.key("", "rotated");
    let stored = raw.get(&key, 0).await.unwrap().unwrap();
    assert!(stored.value.starts_with(b"k8s:enc:aescbc:v1:key1:"));

    let new = store(config(&format!("{key2},{key1}")));
    let (out, _) = new
        .update("", "rotated", created.clone(), false)
        .await
        .unwrap();
    assert_ne!(
        out["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let stored = raw.get(&key, 0).await.unwrap().unwrap();
    assert!(stored.value.starts_with(b"k8s:enc:aescbc:v1:key2:"));
    assert_eq!(stored.version, 2);
    let (again, _) = new.update("", "rotated", out.clone(), false).await.unwrap();
    assert_eq!(
        again["metadata"]["resourceVersion"],
        out["metadata"]["resourceVersion"]
    );
    assert_eq!(raw.get(&key, 0).await.unwrap().unwrap().version, 2);
}

/// An update that changes only managedFields times (what a re-apply of
/// `labels: {}` a second later produces) writes nothing and keeps the
/// stored times; one that changes the object too takes the new times.
#[tokio::test]
async fn update_changing_only_managed_times_writes_nothing() {
    let f = fixture(CacheOptions::default());
    let entry = |time: &str| {
        json!([{"manager": "a", "operation": "Apply", "apiVersion": "v1",
            "time": time, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {}}}}])
    };
    let mut body = ns("times", json!({}));
    body["metadata"]["managedFields"] = entry("2026-01-01T00:00:00Z");
    let created = f
        .store
        .create("", hub(&f.store, body), false)
        .await
        .unwrap();
    let rv = created["metadata"]["resourceVersion"].clone();
    let mut again = created.clone();
    again["metadata"]["labels"] = json!({});
    again["metadata"]["managedFields"] = entry("2026-01-01T00:00:07Z");
    let (out, _) = f.store.update("", "times", again, false).await.unwrap();
    assert_eq!(out["metadata"]["resourceVersion"], rv);
    assert_eq!(
        out["metadata"]["managedFields"][0]["time"],
        "2026-01-01T00:00:00Z"
    );

    let mut changed = created.clone();
    changed["metadata"]["labels"] = json!({"l": "1"});
    changed["metadata"]["managedFields"] = entry("2026-01-01T00:00:07Z");
    let (out, _) = f.store.update("", "times", changed, false).await.unwrap();
    assert_ne!(out["metadata"]["resourceVersion"], rv);
    assert_eq!(
        out["metadata"]["managedFields"][0]["time"],
        "2026-01-01T00:00:07Z"
    );
}

/// Updates start from the watch cache's copy when it is the version the
/// request names; a cache that has not seen the latest write yet must never
/// turn a valid update into a conflict, nor let a stale one through.
#[tokio::test]
async fn updates_are_right_whether_or_not_the_cache_has_caught_up() {
    let f = fixture(CacheOptions::default());
    let created = f
        .store
        .create("", hub(&f.store, ns("busy", json!({"n": "0"}))), false)
        .await
        .unwrap();
    let key = f.store.key("", "busy");
    let mut seen = created;
    for i in 1..=30 {
        // A write the cache learns of only through its watch.
        let stored = f.storage.get(&key, 0).await.unwrap().unwrap();
        let mut behind: Value = serde_json::from_slice(&stored.value).unwrap();
        behind["metadata"]["labels"]["n"] = json!(format!("direct-{i}"));
        let direct = match f
            .storage
            .update(
                &key,
                stored.mod_revision,
                serde_json::to_vec(&behind).unwrap().into(),
            )
            .await
            .unwrap()
        {
            apiforge_storage::WriteOutcome::Done(kv) => kv,
            apiforge_storage::WriteOutcome::Conflict(_) => panic!("nobody else writes"),
        };

        // The version read before the direct write is stale now: 409.
        let mut stale = seen.clone();
        stale["metadata"]["labels"]["n"] = json!(format!("stale-{i}"));
        let err = f.store.update("", "busy", stale, false).await.unwrap_err();
        assert_eq!(err.code(), 409, "round {i}: {err}");

        // The direct write's version is current: accepted at once.
        let mut fresh = seen.clone();
        fresh["metadata"]["labels"]["n"] = json!(format!("update-{i}"));
        fresh["metadata"]["resourceVersion"] = json!(direct.mod_revision.to_string());
        let (out, _) = f.store.update("", "busy", fresh, false).await.unwrap();
        assert_eq!(out["metadata"]["labels"]["n"], format!("update-{i}"));

        // An unconditional update applies on top of whatever is current.
        let mut any = out.clone();
        any["metadata"]["labels"]["n"] = json!(format!("any-{i}"));
        any["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        let (out, _) = f.store.update("", "busy", any, false).await.unwrap();
        assert_eq!(out["metadata"]["labels"]["n"], format!("any-{i}"));
        let latest = f.storage.get(&key, 0).await.unwrap().unwrap();
        assert_eq!(
            out["metadata"]["resourceVersion"],
            latest.mod_revision.to_string()
        );
        seen = out;
    }
}

#[test]
fn same_object_ignores_only_the_resource_version() {
    use super::same_object;
    let old = json!({"metadata": {"name": "a", "resourceVersion": "5"}, "spec": {"x": 1}});
    assert!(same_object(
        &json!({"metadata": {"name": "a"}, "spec": {"x": 1}}),
        &old
    ));
    assert!(same_object(
        &json!({"spec": {"x": 1}, "metadata": {"resourceVersion": "4", "name": "a"}}),
        &old
    ));
    assert!(!same_object(
        &json!({"metadata": {"name": "a"}, "spec": {"x": 2}}),
        &old
    ));
    assert!(!same_object(
        &json!({"metadata": {"name": "a", "labels": {}}, "spec": {"x": 1}}),
        &old
    ));
    assert!(!same_object(&json!({"metadata": {"name": "a"}}), &old));
}

/// A consistent read whose cache does not catch up within the freshness
/// timeout is answered from storage (kube-apiserver's fallback to etcd),
/// not with 504.
#[tokio::test]
async fn consistent_reads_fall_back_to_storage_when_the_cache_is_behind() {
    let f = fixture(CacheOptions {
        freshness_timeout: Duration::from_millis(100),
        ..Default::default()
    });
    f.store
        .create("", hub(&f.store, ns("n0", json!({}))), false)
        .await
        .unwrap();
    assert_eq!(
        f.store
            .list(None, &ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    // The cache stops following storage; the next write is not in it.
    let cache = f.store.cache().unwrap().clone();
    cache.stop();
    tokio::time::sleep(Duration::from_millis(50)).await;
    f.store
        .create("", hub(&f.store, ns("n1", json!({}))), false)
        .await
        .unwrap();
    let list = f.store.list(None, &ListParams::default()).await.unwrap();
    let names: Vec<String> = list.items.iter().map(name).collect();
    assert_eq!(names, ["n0", "n1"]);
    assert_eq!(
        list.resource_version,
        f.storage.current_revision().await.unwrap()
    );
    let got = f.store.get("", "n1", None).await.unwrap();
    assert_eq!(name(&got), "n1");
    // Reads that accept any state still come from the cache.
    assert!(f.store.get("", "n1", Some(0)).await.is_err());
}
