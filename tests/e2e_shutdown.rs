//! Graceful shutdown of the real binary: SIGTERM during a write burst with
//! open watches. `/readyz` fails first while requests are still served
//! (`--shutdown-delay-duration`), watches end with a clean end of stream,
//! the process exits 0, and every acknowledged write is there after a
//! restart.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::raw;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta, PostParams, WatchParams};

#[tokio::test]
async fn sigterm_drains_and_loses_no_acknowledged_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let port = common::free_port();
    let mut server =
        common::Server::start_in(&dir, port, &["--shutdown-delay-duration", "3s"]).await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    // Open watches: each reports whether its stream ended without an error.
    let mut watches = Vec::new();
    for _ in 0..3 {
        let mut events = cms
            .watch(&WatchParams::default(), "0")
            .await
            .expect("watch")
            .boxed();
        watches.push(tokio::spawn(async move {
            let mut seen = 0usize;
            while let Some(event) = events.next().await {
                match event {
                    Ok(_) => seen += 1,
                    Err(e) => return Err(format!("watch stream failed after {seen} events: {e}")),
                }
            }
            Ok(seen)
        }));
    }

    // A write burst from several writers; each records what was acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let cms = cms.clone();
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("burst-{w}-{i}");
                i += 1;
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        ..Default::default()
                    },
                    data: Some([("i".to_string(), i.to_string())].into()),
                    ..Default::default()
                };
                match cms.create(&PostParams::default(), &cm).await {
                    Ok(_) => acked.push(name),
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
            acked
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;

    server.send_sigterm();
    let signalled = Instant::now();
    // Readiness fails at once...
    let mut readyz = None;
    while signalled.elapsed() < Duration::from_secs(3) {
        let resp = raw::anonymous(&server, "GET", "/readyz?verbose").await;
        if resp.status == 500 {
            readyz = Some(resp);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let readyz = readyz.expect("/readyz fails during the shutdown delay");
    assert!(
        readyz
            .text()
            .ends_with("[-]shutdown failed: reason withheld\nreadyz check failed\n"),
        "{}",
        readyz.text()
    );
    assert!(
        readyz.text().starts_with("[+]ping ok\n"),
        "{}",
        readyz.text()
    );
    // ...while everything else is still served.
    assert_eq!(raw::anonymous(&server, "GET", "/livez").await.status, 200);
    let resp = raw::request(
        &server,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[],
        b"",
    )
    .await;
    assert_eq!(resp.status, 200);
    assert!(
        signalled.elapsed() < Duration::from_secs(3),
        "the checks above ran within the delay"
    );

    let status = server.wait_exit(Duration::from_secs(30)).await;
    assert!(
        status.success(),
        "exit status {status:?}; log:\n{}",
        server.log()
    );
    assert!(
        signalled.elapsed() >= Duration::from_secs(3),
        "the listener stayed open for the shutdown delay"
    );
    stop.store(true, Ordering::SeqCst);

    let mut acknowledged = BTreeSet::new();
    for w in writers {
        acknowledged.extend(w.await.expect("writer"));
    }
    assert!(
        acknowledged.len() > 10,
        "a real burst: {}",
        acknowledged.len()
    );
    for w in watches {
        let seen = tokio::time::timeout(Duration::from_secs(5), w)
            .await
            .expect("watch ended with the server")
            .expect("join")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(seen > 0, "the watch saw the burst");
    }
    assert!(
        server.log().contains("shutdown complete"),
        "{}",
        server.log()
    );

    // Every acknowledged write survived.
    let server = common::Server::start_in(&dir, port, &[]).await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let stored: BTreeSet<String> = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .collect();
    let lost: Vec<_> = acknowledged.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
}
