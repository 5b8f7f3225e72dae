//! A watcher that stops reading is dropped by the server once its queue
//! is full, without slowing or breaking the watchers that keep up: the
//! kernel holds little unsent data per connection (`TCP_NOTSENT_LOWAT`),
//! so a stalled client's events back up into its queue in the watch cache,
//! which closes it when full (1,024 events).

mod common;

use std::time::Duration;

use common::raw;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, PostParams, WatchEvent, WatchParams};
use kube::core::GroupVersionKind;
use serde_json::json;
use tokio::io::AsyncReadExt;

const NS: &str = "default";
const WRITES: usize = 2_500;

fn flunders(client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("wardle.example.com", "v1beta1", "Flunder");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "flunders");
    Api::namespaced_with(client, NS, &ar)
}

#[tokio::test]
async fn a_stalled_watcher_is_dropped_and_the_others_get_every_event() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let api = flunders(client.clone());
    let path = format!("/apis/wardle.example.com/v1beta1/namespaces/{NS}/flunders?watch=true");

    // The stalled watcher: a 4 KiB receive buffer, nothing read until the end.
    let mut stalled = raw::connect_with_recv_buffer(&server, Some(4096)).await;
    let auth = format!("Bearer {}", raw::token(&server));
    raw::send(&mut stalled, "GET", &path, &[("Authorization", &auth)], b"").await;

    // A watcher that keeps up, through kube-rs.
    let mut live = api
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .expect("watch")
        .boxed();
    let reader = tokio::spawn(async move {
        let (mut seen, mut last_rv) = (0usize, 0u64);
        while seen < WRITES {
            let event = tokio::time::timeout(Duration::from_secs(60), live.next())
                .await
                .expect("an event within 60 s")
                .expect("the watch goes on")
                .expect("a watch event");
            match event {
                WatchEvent::Added(o) => {
                    let rv: u64 = o
                        .metadata
                        .resource_version
                        .as_deref()
                        .and_then(|rv| rv.parse().ok())
                        .expect("resourceVersion");
                    assert!(rv > last_rv, "events in order: {rv} after {last_rv}");
                    last_rv = rv;
                    seen += 1;
                }
                WatchEvent::Bookmark(_) => {}
                other => panic!("unexpected event {other:?}"),
            }
        }
        seen
    });

    // Objects of ~1 KiB, written by 8 clients.
    let pad = "x".repeat(900);
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let api = api.clone();
            let pad = pad.clone();
            tokio::spawn(async move {
                for i in (w..WRITES).step_by(8) {
                    let object: DynamicObject = serde_json::from_value(json!({
                        "apiVersion": "wardle.example.com/v1beta1",
                        "kind": "Flunder",
                        "metadata": {"name": format!("f-{i}"), "annotations": {"pad": pad}},
                        "spec": {},
                    }))
                    .expect("flunder");
                    api.create(&PostParams::default(), &object)
                        .await
                        .expect("create");
                }
            })
        })
        .collect();
    for w in writers {
        w.await.expect("writer");
    }
    assert_eq!(
        reader.await.expect("reader"),
        WRITES,
        "the live watcher saw every write"
    );

    // The stalled watcher's response ended early: its stream holds fewer
    // events than were written, then the end of the chunked body.
    let mut received = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stalled.read_to_end(&mut received))
        .await
        .expect("the stalled watch ends once read")
        .ok();
    let text = String::from_utf8_lossy(&received);
    let events = text.matches("\"type\":\"ADDED\"").count();
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{}",
        text.chars().take(200).collect::<String>()
    );
    assert!(
        text.ends_with("0\r\n\r\n"),
        "the response ended cleanly after {events} events"
    );
    assert!(
        events < WRITES,
        "the stalled watcher was dropped, yet got all {events} events"
    );
    assert!(
        server.log().contains("watcher fell behind and was closed"),
        "the server logged the drop"
    );
}
