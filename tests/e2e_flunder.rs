//! The thin end-to-end slice: a Flunder created, read, listed, watched,
//! updated and deleted through the kube client over HTTPS; objects survive
//! SIGKILL and restart; discovery finds the kind.

mod common;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::GroupVersionKind;
use kube::discovery::Discovery;
use serde_json::json;

fn flunders(client: kube::Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("wardle.example.com", "v1beta1", "Flunder");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "flunders");
    Api::namespaced_with(client, ns, &ar)
}

fn flunder(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "wardle.example.com/v1beta1",
        "kind": "Flunder",
        "metadata": {"name": name, "labels": {"sample-label": "true"}},
        "spec": spec,
    }))
    .expect("flunder")
}

#[tokio::test]
async fn discovery_finds_flunders() {
    let server = common::Server::start().await;
    let discovery = Discovery::new(server.client().await)
        .run()
        .await
        .expect("discovery");
    let group = discovery
        .groups()
        .find(|g| g.name() == "wardle.example.com")
        .expect("wardle group");
    assert_eq!(group.preferred_version_or_latest(), "v1beta1");
    let (ar, caps) = group.recommended_kind("Flunder").expect("Flunder kind");
    assert_eq!(ar.plural, "flunders");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
}

#[tokio::test]
async fn crud_and_watch() {
    crud_and_watch_on(&[]).await;
}

#[tokio::test]
async fn crud_and_watch_without_watch_cache() {
    crud_and_watch_on(&["--watch-cache=false"]).await;
}

async fn crud_and_watch_on(flags: &[&str]) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server =
        common::Server::start_in(&tmp.path().join("data"), common::free_port(), flags).await;
    let api = flunders(server.client().await, "default");

    let created = api
        .create(&PostParams::default(), &flunder("first", json!({})))
        .await
        .expect("create");
    let meta = &created.metadata;
    assert_eq!(meta.name.as_deref(), Some("first"));
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    let rv: i64 = meta
        .resource_version
        .as_deref()
        .expect("rv")
        .parse()
        .expect("numeric rv");

    let got = api.get("first").await.expect("get");
    assert_eq!(got.metadata.uid, meta.uid);
    assert_eq!(got.data["spec"], json!({}));
    assert_eq!(got.data["status"], json!({}));

    // A watch from the create's revision sees what happens next, in order.
    let mut events = api
        .watch(&WatchParams::default(), &rv.to_string())
        .await
        .expect("watch")
        .boxed();
    api.create(
        &PostParams::default(),
        &flunder(
            "second",
            json!({"flunderReference": "first", "referenceType": "Flunder"}),
        ),
    )
    .await
    .expect("create second");
    let mut second = api.get("second").await.expect("get second");
    second.data["spec"]["flunderReference"] = json!("other");
    let updated = api
        .replace("second", &PostParams::default(), &second)
        .await
        .expect("update");
    assert_ne!(
        updated.metadata.resource_version,
        second.metadata.resource_version
    );
    api.delete("second", &DeleteParams::default())
        .await
        .expect("delete");

    let mut seen = Vec::new();
    while seen.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .expect("event in time");
        match ev.expect("watch ok").expect("stream open") {
            WatchEvent::Added(o) => seen.push(("ADDED", o.metadata.name.unwrap_or_default())),
            WatchEvent::Modified(o) => seen.push(("MODIFIED", o.metadata.name.unwrap_or_default())),
            WatchEvent::Deleted(o) => seen.push(("DELETED", o.metadata.name.unwrap_or_default())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        }
    }
    assert_eq!(
        seen,
        vec![
            ("ADDED", "second".to_string()),
            ("MODIFIED", "second".to_string()),
            ("DELETED", "second".to_string())
        ]
    );

    let list = api.list(&ListParams::default()).await.expect("list");
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, vec!["first"]);

    let err = api.get("second").await.expect_err("deleted");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.reason, "NotFound");
            assert_eq!(
                s.message,
                "flunders.wardle.example.com \"second\" not found"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn errors_are_kubernetes_statuses() {
    let server = common::Server::start().await;
    let api = flunders(server.client().await, "default");
    api.create(&PostParams::default(), &flunder("dup", json!({})))
        .await
        .expect("create");

    let kube::Error::Api(s) = api
        .create(&PostParams::default(), &flunder("dup", json!({})))
        .await
        .expect_err("exists")
    else {
        panic!("not an API error")
    };
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(
        s.message,
        "flunders.wardle.example.com \"dup\" already exists"
    );

    let bad = flunder("bad", json!({"referenceType": "Flunder"}));
    let kube::Error::Api(s) = api
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("invalid")
    else {
        panic!("not an API error")
    };
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "Flunder.wardle.example.com \"bad\" is invalid: spec.flunderReference: Invalid value: \"\": cannot be empty if referenceType is Flunder"
    );

    // Stale resourceVersion on update → 409 Conflict.
    let stale = api.get("dup").await.expect("get");
    let mut fresh = stale.clone();
    fresh.data["spec"]["fischerReference"] = json!("x");
    fresh.data["spec"]["referenceType"] = json!("Fischer");
    api.replace("dup", &PostParams::default(), &fresh)
        .await
        .expect("update");
    let obj = stale;
    let kube::Error::Api(s) = api
        .replace("dup", &PostParams::default(), &obj)
        .await
        .expect_err("conflict")
    else {
        panic!("not an API error")
    };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on flunders.wardle.example.com \"dup\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert!(api.get_opt("bad").await.expect("get").is_none());
}

#[tokio::test]
async fn objects_survive_sigkill_and_restart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let port = common::free_port();
    let mut server = common::Server::start_in(&dir, port, &[]).await;
    let api = flunders(server.client().await, "default");
    for i in 0..20 {
        api.create(
            &PostParams::default(),
            &flunder(&format!("f{i}"), json!({})),
        )
        .await
        .expect("create");
    }
    let before = api.list(&ListParams::default()).await.expect("list");
    server.kill();

    let server = common::Server::start_in(&dir, port, &[]).await;
    let api = flunders(server.client().await, "default");
    let after = api
        .list(&ListParams::default())
        .await
        .expect("list after restart");
    assert_eq!(after.items.len(), 20);
    let uids = |l: &kube::core::ObjectList<DynamicObject>| {
        l.items
            .iter()
            .map(|o| o.metadata.uid.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(uids(&before), uids(&after));
    // Revisions keep increasing after the restart.
    let created = api
        .create(&PostParams::default(), &flunder("after", json!({})))
        .await
        .expect("create");
    let rv_after: i64 = created
        .metadata
        .resource_version
        .expect("rv")
        .parse()
        .expect("rv");
    let rv_before: i64 = before
        .metadata
        .resource_version
        .expect("rv")
        .parse()
        .expect("rv");
    assert!(rv_after > rv_before);
}

#[tokio::test]
async fn unauthenticated_requests_get_401() {
    let server = common::Server::start().await;
    let kc = kube::config::Kubeconfig::read_from(server.kubeconfig()).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    config.auth_info.token = Some("wrong".to_string().into());
    let client = kube::Client::try_from(config).expect("client");
    let err = flunders(client, "default")
        .list(&ListParams::default())
        .await
        .expect_err("401");
    match err {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (401, "Unauthorized")),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn streaming_list_watch_and_list_option_validation() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let api = flunders(client.clone(), "default");
    for i in 0..3 {
        api.create(
            &PostParams::default(),
            &flunder(&format!("s{i}"), json!({})),
        )
        .await
        .expect("create");
    }
    // resourceVersion "0" serves the initial events from whatever the watch
    // cache holds (as upstream's "any"): a consistent list first makes the
    // cache catch up with the three creates, which may still be on their
    // way to it on a loaded machine.
    api.list(&Default::default())
        .await
        .expect("consistent list");
    // sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true
    let wp = WatchParams::streaming_lists();
    let mut events = api.watch(&wp, "0").await.expect("watch").boxed();
    let mut added = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .expect("event in time")
            .expect("watch ok")
            .expect("stream open");
        match ev {
            WatchEvent::Added(o) => added.push(o.metadata.name.unwrap_or_default()),
            WatchEvent::Bookmark(b) => {
                assert_eq!(
                    b.metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str),
                    Some("true")
                );
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    added.sort();
    assert_eq!(added, ["s0", "s1", "s2"]);

    // Invalid list options are 422 on ListOptions.meta.k8s.io.
    let path = "/apis/wardle.example.com/v1beta1/namespaces/default/flunders";
    for (query, message) in [
        (
            "watch=true&sendInitialEvents=true",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "sendInitialEvents=true",
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        ),
        (
            "resourceVersionMatch=Exact",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
    ] {
        let req = http::Request::get(format!("{path}?{query}"))
            .body(Vec::new())
            .expect("request");
        match client.request_text(req).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{query}");
                assert_eq!(s.message, message, "{query}");
            }
            other => panic!("{query}: expected 422, got {other:?}"),
        }
    }
}
