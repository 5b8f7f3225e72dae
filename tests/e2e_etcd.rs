//! The same slice on the etcd3 backend: CRUD and watch through kube-rs,
//! objects kept across an apiforge restart, and etcd killed and restarted
//! under a running server (the watch cache recovers, the API keeps
//! answering, watchers are told to re-list or keep receiving).

mod common;

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::GroupVersionKind;
use serde_json::json;

fn flunders(client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("wardle.example.com", "v1beta1", "Flunder");
    Api::namespaced_with(
        client,
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "flunders"),
    )
}

fn flunder(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": {"name": name}, "spec": {},
    }))
    .expect("flunder")
}

async fn start_on(etcd: &common::Etcd, dir: &std::path::Path, port: u16) -> common::Server {
    common::Server::start_in(dir, port, &["--etcd-servers", &etcd.url]).await
}

#[tokio::test]
async fn crud_on_etcd_survives_apiforge_restart() {
    let etcd = common::Etcd::start().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let port = common::free_port();
    let mut server = start_on(&etcd, &dir, port).await;
    let api = flunders(server.client().await);
    // On etcd the storage checks are kube-apiserver's `etcd` and, for
    // readiness, `etcd-readiness`.
    let readyz = common::raw::anonymous(&server, "GET", "/readyz?verbose").await;
    assert_eq!(readyz.status, 200);
    assert!(
        readyz
            .text()
            .starts_with("[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\n"),
        "{}",
        readyz.text()
    );
    // Single checks are not public: ask as the admin.
    let livez = common::raw::request(&server, "GET", "/livez/etcd", &[], b"").await;
    assert_eq!((livez.status, livez.text().as_str()), (200, "ok"));
    for i in 0..5 {
        api.create(&PostParams::default(), &flunder(&format!("e{i}")))
            .await
            .expect("create");
    }
    let got = api.get("e3").await.expect("get");
    assert_eq!(got.metadata.name.as_deref(), Some("e3"));
    server.kill();
    assert!(
        !dir.join("store").exists(),
        "the etcd backend must not open the embedded store"
    );

    let server = start_on(&etcd, &dir, port).await;
    let api = flunders(server.client().await);
    let list = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 5);
}

#[tokio::test]
async fn api_recovers_after_etcd_restart() {
    let mut etcd = common::Etcd::start().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = start_on(&etcd, &tmp.path().join("data"), common::free_port()).await;
    let api = flunders(server.client().await);
    let created = api
        .create(&PostParams::default(), &flunder("before"))
        .await
        .expect("create");
    let rv = created.metadata.resource_version.clone().expect("rv");
    let mut events = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();

    etcd.restart().await;

    // Writes and consistent reads work again once etcd is back.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.create(&PostParams::default(), &flunder("after")).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 409 => break,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "API did not recover: {e}; log:\n{}",
                    server.log()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    // The open watch saw the write made after etcd came back.
    let event = tokio::time::timeout(Duration::from_secs(30), events.try_next())
        .await
        .expect("watch event in time")
        .expect("watch ok");
    match event {
        Some(WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("after")),
        Some(other) => panic!("unexpected event {other:?}"),
        None => panic!(
            "the watch ended without the event; server warnings:\n{}",
            server.warnings()
        ),
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                let mut names: Vec<_> = list
                    .items
                    .iter()
                    .filter_map(|o| o.metadata.name.clone())
                    .collect();
                names.sort();
                assert_eq!(names, ["after", "before"]);
                break;
            }
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "list did not recover: {e}; log:\n{}",
                    server.log()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// The watch cache learns of deletes from etcd without the previous value
/// (it keeps its own copy): a DELETED event still carries the object's last
/// state, with the delete's resourceVersion, for a live watcher and for one
/// that replays from before the delete.
#[tokio::test]
async fn watch_on_etcd_sends_deleted_objects_last_state() {
    let etcd = common::Etcd::start().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = start_on(&etcd, &tmp.path().join("data"), common::free_port()).await;
    let api = flunders(server.client().await);
    let created = api
        .create(&PostParams::default(), &flunder("gone"))
        .await
        .expect("create");
    let from = created.metadata.resource_version.clone().expect("rv");
    let mut live = api
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch")
        .boxed();
    let mut changed = created.clone();
    changed
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("last".into(), "state".into());
    let changed = api
        .replace("gone", &PostParams::default(), &changed)
        .await
        .expect("update");
    api.delete("gone", &Default::default())
        .await
        .expect("delete");

    let modified = match next_event(&mut live, Duration::from_secs(10)).await {
        WatchEvent::Modified(o) => o,
        other => panic!("expected MODIFIED, got {other:?}"),
    };
    assert_eq!(
        modified.metadata.resource_version,
        changed.metadata.resource_version
    );
    let deleted = match next_event(&mut live, Duration::from_secs(10)).await {
        WatchEvent::Deleted(o) => o,
        other => panic!("expected DELETED, got {other:?}"),
    };
    assert_eq!(deleted.metadata.name.as_deref(), Some("gone"));
    assert_eq!(deleted.metadata.uid, created.metadata.uid);
    assert_eq!(
        deleted
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("last"))
            .map(String::as_str),
        Some("state")
    );
    let (delete_rv, changed_rv) = (numeric_rv(&deleted), numeric_rv(&changed));
    assert!(delete_rv > changed_rv, "{delete_rv} after {changed_rv}");

    // Replayed from the cache's history: the same DELETED event.
    let mut replay = api
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch")
        .boxed();
    assert!(matches!(
        next_event(&mut replay, Duration::from_secs(10)).await,
        WatchEvent::Modified(_)
    ));
    match next_event(&mut replay, Duration::from_secs(10)).await {
        WatchEvent::Deleted(o) => assert_eq!(o, deleted),
        other => panic!("expected DELETED, got {other:?}"),
    }
    assert!(api.get_opt("gone").await.expect("get").is_none());
}

/// The next event of a watch, within `limit`.
async fn next_event<S>(stream: &mut S, limit: Duration) -> WatchEvent<DynamicObject>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin,
{
    tokio::time::timeout(limit, stream.try_next())
        .await
        .expect("watch event in time")
        .expect("watch ok")
        .expect("watch still open")
}

fn numeric_rv(obj: &DynamicObject) -> u64 {
    obj.metadata
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .expect("numeric resourceVersion")
}
