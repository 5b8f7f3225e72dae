//! Registry and watch-cache tests on the embedded store.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use super::cache::{CacheItem, CacheOptions, Caches};
use super::{ListParams, Store, WatchEvent};
use crate::builtin::core_v1::Namespace;
use crate::scheme::KindBuilder;
use crate::storage::Storage;
use crate::storage::embedded::{EmbeddedOptions, EmbeddedStore};

struct Fixture {
    _dir: tempfile::TempDir,
    storage: Arc<dyn Storage>,
    store: Store,
}

fn fixture(opts: CacheOptions) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
    let kind = Arc::new(
        KindBuilder::<Namespace>::new()
            .version::<Namespace>()
            .build(),
    );
    let caches = Caches::default();
    let store = Store::new(kind, storage.clone(), "/registry", Some((&caches, &opts)));
    Fixture {
        _dir: dir,
        storage,
        store,
    }
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
    let rev = cache.revision();
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let mut stream = cache.watch("/registry/namespaces/", Some(rev)).unwrap();
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
    let mut slow = cache.watch("/registry/namespaces/", Some(rev)).unwrap();
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
            WatchEvent::Object(ty, o) => seen.push((ty, name(&o))),
            WatchEvent::Bookmark(_) => {}
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
        token = page.continue_token;
    }
    let expected: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    assert_eq!(names, expected);
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
