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
        .expect("watch ok")
        .expect("watch still open");
    match event {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("after")),
        other => panic!("unexpected event {other:?}"),
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
