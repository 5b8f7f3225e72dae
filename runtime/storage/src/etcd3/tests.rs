//! Tests of the etcd backend against real, throwaway etcd processes
//! (`/usr/bin/etcd`, installed by `scripts/install-deps.sh`): the storage
//! conformance suite plus etcd-specific behaviour (restarts, start-up).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::{Etcd3Options, Etcd3Store, parse_servers, prefix_end, progress_is_ordered};
use crate::conformance::{self, next_event};
use crate::{Error, EventType, KeyValue, Storage, WatchItem, WriteOutcome};

const ETCD: &str = "/usr/bin/etcd";

/// A free loopback port (bound, then released for etcd to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free loopback port")
}

/// A throwaway single-member etcd; killed on drop.
struct EtcdProcess {
    child: Option<Child>,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
}

impl EtcdProcess {
    /// Starts etcd on fresh ports and a fresh data dir and waits until it
    /// accepts connections.
    async fn start() -> EtcdProcess {
        assert!(
            Path::new(ETCD).exists(),
            "{ETCD} is missing: run scripts/install-deps.sh to install etcd (the etcd3 storage tests need it)"
        );
        let dir = tempfile::tempdir().expect("create a temp dir for etcd");
        let mut etcd = EtcdProcess {
            child: None,
            dir,
            client_port: 0,
            peer_port: 0,
        };
        // A port found free may be taken by a parallel test before etcd binds
        // it: then etcd exits and we try other ports.
        for attempt in 1..=5 {
            etcd.client_port = free_port();
            etcd.peer_port = free_port();
            if etcd.spawn().await {
                return etcd;
            }
            eprintln!(
                "etcd did not start (attempt {attempt}); log:\n{}",
                etcd.log()
            );
        }
        panic!("etcd did not start; last log:\n{}", etcd.log());
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// Spawns etcd on the current ports and data dir; false if it exited
    /// before accepting connections.
    async fn spawn(&mut self) -> bool {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the etcd log");
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new(ETCD)
            .args(["--name", "node"])
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &self.endpoint()])
            .args(["--advertise-client-urls", &self.endpoint()])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("node={peer}")])
            .args(["--initial-cluster-state", "new"])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args([
                "--logger",
                "zap",
                "--log-outputs",
                "stderr",
                "--log-level",
                "warn",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(child) = &mut self.child
                && child.try_wait().expect("poll etcd").is_some()
            {
                self.child = None;
                return false;
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", self.client_port))
                .await
                .is_ok()
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill();
        false
    }

    /// Kills etcd (SIGKILL) and reaps it.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on the same ports and data dir.
    async fn restart(&mut self) {
        self.kill();
        assert!(
            self.spawn().await,
            "etcd did not restart; log:\n{}",
            self.log()
        );
    }

    fn options(&self) -> Etcd3Options {
        Etcd3Options {
            startup_timeout: Duration::from_secs(15),
            request_timeout: Duration::from_secs(10),
            progress_interval: Duration::from_millis(500),
            ..Etcd3Options::from_servers(&self.endpoint())
        }
    }

    async fn store(&self) -> Etcd3Store {
        Etcd3Store::connect(self.options())
            .await
            .unwrap_or_else(|e| panic!("connect to etcd: {e}; log:\n{}", self.log()))
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

macro_rules! conformance_tests {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let etcd = EtcdProcess::start().await;
            let store: Arc<dyn Storage> = Arc::new(etcd.store().await);
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
    watch_many_writes,
    compaction,
    concurrent_cas_counter,
    guaranteed_update_counter,
    large_value,
);

/// `request_progress` works without waiting for the periodic requests (here
/// one a minute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_request_progress() {
    let etcd = EtcdProcess::start().await;
    let store = Etcd3Store::connect(Etcd3Options {
        progress_interval: Duration::from_secs(60),
        ..etcd.options()
    })
    .await
    .unwrap();
    let started = Instant::now();
    conformance::watch_request_progress(Arc::new(store)).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

/// A watch replaying history never reports progress before the replayed
/// events, however often progress is asked for (etcd before 3.4.31 answers
/// progress requests of a replaying watcher prematurely).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_never_precedes_replayed_events() {
    let etcd = EtcdProcess::start().await;
    let store = Etcd3Store::connect(Etcd3Options {
        progress_interval: Duration::from_millis(20),
        ..etcd.options()
    })
    .await
    .unwrap();
    let dir = "/registry/replay-progress/";
    let start = store.current_revision().await.unwrap();
    let mut last = 0;
    for i in 0..200 {
        last = store
            .create(&format!("{dir}{i}"), Bytes::from("x"))
            .await
            .unwrap()
            .mod_revision;
    }
    let mut watch = store.watch(dir, start, true).await.unwrap();
    store.request_progress().await.unwrap();
    let mut seen = start;
    let mut progress = 0;
    while seen < last || progress < last {
        match conformance::next_item(&mut watch).await {
            WatchItem::Event(event) => {
                assert_eq!(event.kv.mod_revision, seen + 1, "gap or repeat");
                assert!(
                    event.kv.mod_revision > progress,
                    "event {} after progress {progress}",
                    event.kv.mod_revision
                );
                seen = event.kv.mod_revision;
            }
            WatchItem::Progress(revision) => {
                assert!(revision >= seen && revision > progress);
                assert_eq!(
                    seen, last,
                    "progress {revision} before replayed events up to {last} (seen {seen})"
                );
                progress = revision;
            }
        }
        store.request_progress().await.unwrap();
    }
}

/// A watch created behind etcd's revision whose prefix did not change in
/// between (only other keys were written: the usual case of a watch
/// resumed after an etcd restart) has nothing to replay and reports
/// progress at once, also on etcd that answers progress requests out of
/// band, instead of only after its first event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_with_nothing_to_replay_reports_progress() {
    let etcd = EtcdProcess::start().await;
    let store = Etcd3Store::connect(Etcd3Options {
        progress_interval: Duration::from_millis(100),
        ..etcd.options()
    })
    .await
    .unwrap();
    let dir = "/registry/quiet-replay/";
    store
        .create(&format!("{dir}kept"), Bytes::from("x"))
        .await
        .unwrap();
    let start = store.current_revision().await.unwrap();
    let mut last = 0;
    for i in 0..5 {
        last = store
            .create(&format!("/registry/elsewhere/{i}"), Bytes::from("x"))
            .await
            .unwrap()
            .mod_revision;
    }
    let mut watch = store.watch(dir, start, true).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "no progress up to {last}");
        let item =
            tokio::time::timeout(Duration::from_secs(1), conformance::next_item(&mut watch)).await;
        match item {
            Ok(WatchItem::Progress(revision)) if revision >= last => break,
            Ok(WatchItem::Progress(_)) | Err(_) => {}
            Ok(WatchItem::Event(event)) => panic!("unexpected event {event:?}"),
        }
    }
}

/// While writes stream in and many progress requests are in flight at once
/// (every consistent read from the watch cache asks), a progress
/// notification never claims a revision whose event is still to come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_never_precedes_live_events_under_request_storms() {
    let etcd = EtcdProcess::start().await;
    let store = Arc::new(
        Etcd3Store::connect(Etcd3Options {
            progress_interval: Duration::from_millis(5),
            ..etcd.options()
        })
        .await
        .unwrap(),
    );
    let dir = "/registry/storm-progress/";
    let mut watch = store.watch(dir, 0, true).await.unwrap();
    let writes = 400;
    let writer = tokio::spawn({
        let store = store.clone();
        async move {
            let mut last = 0;
            for i in 0..writes {
                last = store
                    .create(&format!("{dir}{i}"), Bytes::from("x"))
                    .await
                    .unwrap()
                    .mod_revision;
            }
            last
        }
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut askers = Vec::new();
    for _ in 0..8 {
        let (store, stop) = (store.clone(), stop.clone());
        askers.push(tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = store.request_progress().await;
                tokio::task::yield_now().await;
            }
        }));
    }
    let (mut events, mut progress) = (0, 0);
    while events < writes {
        match conformance::next_item(&mut watch).await {
            WatchItem::Event(event) => {
                assert!(
                    event.kv.mod_revision > progress,
                    "event {} after progress {progress}",
                    event.kv.mod_revision
                );
                events += 1;
            }
            WatchItem::Progress(revision) => progress = progress.max(revision),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.await.unwrap();
    for a in askers {
        a.await.unwrap();
    }
}

/// Retries a write while etcd is coming back.
async fn retry<T, F, Fut>(what: &str, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = crate::Result<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e @ (Error::Unavailable(_) | Error::Timeout(_))) if Instant::now() < deadline => {
                eprintln!("{what}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// A watch survives etcd being killed and restarted on the same data dir:
/// it resumes after the last delivered revision, with neither gaps nor
/// duplicates, and so does the store's client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_survives_etcd_restart() {
    let mut etcd = EtcdProcess::start().await;
    let store = etcd.store().await;
    let dir = "/registry/restart.apiforge.io/things/";
    let start = store.current_revision().await.unwrap();
    let mut watch = store.watch(dir, start, true).await.unwrap();
    let mut quiet = store.watch(dir, 0, false).await.unwrap();

    let mut written: Vec<KeyValue> = Vec::new();
    for i in 0..3 {
        written.push(
            store
                .create(&format!("{dir}before-{i}"), Bytes::from("x"))
                .await
                .unwrap(),
        );
    }
    for kv in &written {
        assert_eq!(&next_event(&mut watch).await.kv, kv);
        assert_eq!(&next_event(&mut quiet).await.kv, kv);
    }

    etcd.kill();
    // Let the watch notice and start retrying; reads fail meanwhile.
    tokio::time::sleep(Duration::from_millis(500)).await;
    match store.get(&written[0].key, 0).await {
        Err(Error::Unavailable(_) | Error::Timeout(_)) => {}
        other => panic!("read while etcd is down: expected Unavailable, got {other:?}"),
    }
    etcd.restart().await;

    let mut after = Vec::new();
    for i in 0..3 {
        let key = format!("{dir}after-{i}");
        after.push(
            retry("create after restart", || {
                store.create(&key, Bytes::from("y"))
            })
            .await,
        );
    }
    let mut previous = written.last().unwrap().mod_revision;
    for kv in &after {
        assert_eq!(
            kv.mod_revision,
            previous + 1,
            "the restarted etcd continues the revisions"
        );
        previous = kv.mod_revision;
        let event = next_event(&mut watch).await;
        assert_eq!(event.kind, EventType::Created);
        assert_eq!(&event.kv, kv);
        assert_eq!(&next_event(&mut quiet).await.kv, kv);
    }
    // Progress resumes too, and covers the writes.
    let last = after.last().unwrap().mod_revision;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            Instant::now() < deadline,
            "no progress notification after the restart"
        );
        match conformance::next_item(&mut watch).await {
            WatchItem::Progress(revision) if revision >= last => break,
            WatchItem::Progress(_) => {}
            WatchItem::Event(event) => panic!("unexpected event {event:?}"),
        }
    }
}

/// While etcd is down a broken watch reports that it is re-establishing
/// itself (the watch cache then does not re-list); once etcd is back it
/// resumes within its short retry interval and the flag clears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reports_reconnecting_while_etcd_is_down() {
    let mut etcd = EtcdProcess::start().await;
    let store = etcd.store().await;
    let dir = "/registry/reconnecting.apiforge.io/things/";
    let mut watch = store.watch(dir, 0, true).await.unwrap();
    assert!(!store.watch_reconnecting());

    etcd.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !store.watch_reconnecting() {
        assert!(
            Instant::now() < deadline,
            "the watch did not notice etcd going away"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    etcd.restart().await;
    let key = format!("{dir}a");
    let kv = retry("create after restart", || {
        store.create(&key, Bytes::from("x"))
    })
    .await;
    let event = next_event(&mut watch).await;
    assert_eq!(event.kv, kv);
    // The flag clears when the watch is back (it is, it delivered).
    assert!(!store.watch_reconnecting());
}

/// Without etcd, connect gives up after the start-up timeout with an error
/// naming the endpoints.
#[tokio::test]
async fn connect_fails_clearly_without_etcd() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let started = Instant::now();
    let err = Etcd3Store::connect(Etcd3Options {
        startup_timeout: Duration::from_secs(1),
        ..Etcd3Options::from_servers(&endpoint)
    })
    .await
    .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "gave up too late: {:?}",
        started.elapsed()
    );
    match err {
        Error::Unavailable(message) => assert!(message.contains(&endpoint), "{message}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// Configuration errors fail at once.
#[tokio::test]
async fn connect_rejects_bad_configuration() {
    let err = Etcd3Store::connect(Etcd3Options {
        endpoints: Vec::new(),
        ..Etcd3Options::default()
    })
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Internal(_)), "{err:?}");

    let err = Etcd3Store::connect(Etcd3Options::from_servers("https://127.0.0.1:1"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Internal(m) if m.contains("--etcd-cafile")),
        "{err:?}"
    );

    let err = Etcd3Store::connect(Etcd3Options {
        ca_file: Some("/nonexistent/ca.pem".into()),
        ..Etcd3Options::from_servers("https://127.0.0.1:1")
    })
    .await
    .unwrap_err();
    assert!(
        matches!(&err, Error::Internal(m) if m.contains("/nonexistent/ca.pem")),
        "{err:?}"
    );
}

#[test]
fn helpers() {
    assert_eq!(prefix_end(b"/registry/"), b"/registry0");
    assert_eq!(prefix_end(b"a\xff"), b"b");
    assert_eq!(prefix_end(b"\xff\xff"), b"\0");
    assert_eq!(
        parse_servers(" http://a:2379, ,http://b:2379,"),
        vec!["http://a:2379".to_owned(), "http://b:2379".to_owned()]
    );
    assert!(!progress_is_ordered("3.4.23"));
    assert!(progress_is_ordered("3.4.31"));
    assert!(!progress_is_ordered("3.5.12"));
    assert!(progress_is_ordered("3.5.13"));
    assert!(progress_is_ordered("3.6.0"));
    assert!(!progress_is_ordered("garbage"));
}

/// A loopback TCP proxy in front of etcd whose connections can be cut, to
/// break a client's connection without stopping etcd, or frozen (nothing
/// passes, connections stay open: a stopped member as its clients see it).
struct Proxy {
    port: u16,
    enabled: Arc<std::sync::atomic::AtomicBool>,
    generation: tokio::sync::watch::Sender<u64>,
    frozen: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// Copies `from` to `to`, holding the bytes while `frozen`.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while *frozen.borrow_and_update() {
            if frozen.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl Proxy {
    async fn start(target_port: u16) -> Proxy {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let enabled = Arc::new(AtomicBool::new(true));
        let (generation, _) = tokio::sync::watch::channel(0u64);
        let (frozen, _) = tokio::sync::watch::channel(false);
        let (accept_enabled, accept_generation, accept_frozen) =
            (enabled.clone(), generation.clone(), frozen.clone());
        let task = tokio::spawn(async move {
            while let Ok((downstream, _)) = listener.accept().await {
                if !accept_enabled.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees the connection close
                }
                let mut cut = accept_generation.subscribe();
                let frozen = accept_frozen.subscribe();
                tokio::spawn(async move {
                    let Ok(upstream) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target_port)).await
                    else {
                        return;
                    };
                    let (down_read, down_write) = downstream.into_split();
                    let (up_read, up_write) = upstream.into_split();
                    tokio::select! {
                        _ = pump(down_read, up_write, frozen.clone()) => {}
                        _ = pump(up_read, down_write, frozen) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Proxy {
            port,
            enabled,
            generation,
            frozen,
            task,
        }
    }

    /// Closes every proxied connection and refuses new ones.
    fn cut(&self) {
        self.enabled
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Accepts connections again.
    fn restore(&self) {
        self.enabled
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Holds every byte in both directions until [`Proxy::thaw`].
    fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    /// Lets the held bytes and new ones pass again.
    fn thaw(&self) {
        self.frozen.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A store that reaches `etcd` through `proxy`.
async fn store_via(etcd: &EtcdProcess, proxy: &Proxy) -> Etcd3Store {
    Etcd3Store::connect(Etcd3Options {
        endpoints: vec![format!("http://127.0.0.1:{}", proxy.port)],
        ..etcd.options()
    })
    .await
    .unwrap()
}

/// When the connection breaks mid-watch, the watch resumes from its last
/// revision and delivers what was written meanwhile, without gaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resumes_after_connection_loss() {
    let etcd = EtcdProcess::start().await;
    let proxy = Proxy::start(etcd.client_port).await;
    let watched = store_via(&etcd, &proxy).await;
    let direct = etcd.store().await;
    let dir = "/registry/connection-loss/";
    let mut watch = watched.watch(dir, 0, false).await.unwrap();
    let a = direct
        .create(&format!("{dir}a"), Bytes::from("1"))
        .await
        .unwrap();
    assert_eq!(next_event(&mut watch).await.kv, a);

    proxy.cut();
    let b = direct
        .create(&format!("{dir}b"), Bytes::from("2"))
        .await
        .unwrap();
    let b2 = match direct
        .update(&b.key, b.mod_revision, Bytes::from("3"))
        .await
        .unwrap()
    {
        // An update's answer has no version or create revision on etcd.
        crate::WriteOutcome::Done(kv) => {
            direct.get(&kv.key, kv.mod_revision).await.unwrap().unwrap()
        }
        other => panic!("{other:?}"),
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.restore();

    let event = next_event(&mut watch).await;
    assert_eq!((event.kind, &event.kv), (EventType::Created, &b));
    let event = next_event(&mut watch).await;
    assert_eq!(
        (event.kind, &event.kv, event.prev.as_ref()),
        (EventType::Modified, &b2, Some(&b))
    );
    let c = direct
        .create(&format!("{dir}c"), Bytes::from("4"))
        .await
        .unwrap();
    assert_eq!(next_event(&mut watch).await.kv, c);
}

/// When the revision a broken watch must resume from was compacted while it
/// was disconnected, the stream ends with `Compacted` instead of skipping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumed_watch_reports_compaction() {
    let etcd = EtcdProcess::start().await;
    let proxy = Proxy::start(etcd.client_port).await;
    let watched = store_via(&etcd, &proxy).await;
    let direct = etcd.store().await;
    let dir = "/registry/resume-compacted/";
    let mut watch = watched.watch(dir, 0, false).await.unwrap();
    let a = direct
        .create(&format!("{dir}a"), Bytes::from("1"))
        .await
        .unwrap();
    assert_eq!(next_event(&mut watch).await.kv, a);

    proxy.cut();
    direct
        .create(&format!("{dir}b"), Bytes::from("2"))
        .await
        .unwrap();
    let c = direct
        .create(&format!("{dir}c"), Bytes::from("3"))
        .await
        .unwrap();
    direct.compact(c.mod_revision).await.unwrap();
    proxy.restore();

    match tokio::time::timeout(
        Duration::from_secs(15),
        futures::StreamExt::next(&mut watch),
    )
    .await
    {
        Ok(Some(Err(Error::Compacted {
            requested,
            compacted,
        }))) => {
            assert_eq!(requested, a.mod_revision);
            assert_eq!(compacted, c.mod_revision);
        }
        other => panic!("expected Compacted, got {other:?}"),
    }
    assert!(
        futures::StreamExt::next(&mut watch).await.is_none(),
        "Compacted is terminal"
    );
    assert_eq!(watched.compacted_revision().await.unwrap(), c.mod_revision);
}

/// Creates and updates whose attempts are cut off (an attempt timeout of
/// 1 ms: the first attempts are cancelled after etcd may have applied
/// them) are sent again and still apply exactly once: each key ends at
/// version 2 with the updated value, and no write reports a conflict or
/// an existing key it made itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_cut_off_and_sent_again_apply_once() {
    let etcd = EtcdProcess::start().await;
    let store = Etcd3Store::connect(Etcd3Options {
        attempt_timeout: Duration::from_millis(1),
        ..etcd.options()
    })
    .await
    .unwrap();
    for i in 0..30 {
        let key = format!("/registry/cut-off/{i}");
        let created = store
            .create(&key, Bytes::from(format!("created {i}")))
            .await
            .unwrap_or_else(|e| panic!("create {key}: {e}"));
        let updated = match store
            .update(
                &key,
                created.mod_revision,
                Bytes::from(format!("updated {i}")),
            )
            .await
            .unwrap_or_else(|e| panic!("update {key}: {e}"))
        {
            WriteOutcome::Done(kv) => kv,
            WriteOutcome::Conflict(kv) => panic!("update {key} conflicted with {kv:?}"),
        };
        assert!(updated.mod_revision > created.mod_revision);
        let stored = store.get(&key, 0).await.unwrap().expect("stored");
        assert_eq!(stored.value, Bytes::from(format!("updated {i}")));
        assert_eq!(stored.version, 2, "{key} written more than twice");
        assert_eq!(stored.mod_revision, updated.mod_revision);
    }
    // Someone else's key is still refused.
    let err = store
        .create("/registry/cut-off/0", Bytes::from("other"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyExists(_)), "{err:?}");
}

/// A member that stops answering (a frozen connection: SIGSTOP or a
/// partition that keeps TCP up) leaves a watch's progress requests
/// unanswered: the watch gives the stream up and re-establishes itself
/// (reported as reconnecting) instead of waiting silently, and delivers
/// what was written meanwhile once the member answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_on_a_silent_member_resumes() {
    let etcd = EtcdProcess::start().await;
    let proxy = Proxy::start(etcd.client_port).await;
    let watched = Etcd3Store::connect(Etcd3Options {
        endpoints: vec![format!("http://127.0.0.1:{}", proxy.port)],
        progress_interval: Duration::from_millis(100),
        attempt_timeout: Duration::from_millis(300),
        ..etcd.options()
    })
    .await
    .unwrap();
    let direct = etcd.store().await;
    let dir = "/registry/silent-member/";
    let mut watch = watched.watch(dir, 0, true).await.unwrap();
    let a = direct
        .create(&format!("{dir}a"), Bytes::from("1"))
        .await
        .unwrap();
    assert_eq!(next_event(&mut watch).await.kv, a);
    assert!(!watched.watch_reconnecting());

    proxy.freeze();
    let b = direct
        .create(&format!("{dir}b"), Bytes::from("2"))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !watched.watch_reconnecting() {
        assert!(
            Instant::now() < deadline,
            "the watch did not notice the silent member"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy.thaw();
    assert_eq!(next_event(&mut watch).await.kv, b);
}

/// With several endpoints, one that stops answering (a frozen proxy in
/// front of the same etcd) is taken out of the balancer, requests keep
/// succeeding meanwhile, and it is put back once it answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_that_do_not_answer_get_no_requests() {
    let etcd = EtcdProcess::start().await;
    let proxy = Proxy::start(etcd.client_port).await;
    let direct = etcd.endpoint();
    let proxied = format!("http://127.0.0.1:{}", proxy.port);
    let store = Etcd3Store::connect(Etcd3Options {
        endpoints: vec![direct.clone(), proxied.clone()],
        attempt_timeout: Duration::from_millis(300),
        health_check_interval: Some(Duration::from_millis(100)),
        ..etcd.options()
    })
    .await
    .unwrap();
    assert_eq!(store.serving_endpoints(), [direct.clone(), proxied.clone()]);
    let until = |want: Vec<String>| {
        let store = store.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            while store.serving_endpoints() != want {
                assert!(
                    Instant::now() < deadline,
                    "serving {:?}, not {want:?}",
                    store.serving_endpoints()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };

    proxy.freeze();
    until(vec![direct.clone()]).await;
    // Requests still sent to the frozen member would each wait out an
    // attempt and be sent again.
    let slow = store.slow_attempts();
    for i in 0..50 {
        let key = format!("/registry/health/{i}");
        store.create(&key, Bytes::from("x")).await.unwrap();
        assert!(store.get(&key, 0).await.unwrap().is_some());
    }
    assert_eq!(
        store.slow_attempts(),
        slow,
        "requests went to the frozen member"
    );
    proxy.thaw();
    until(vec![direct, proxied]).await;
}

/// `request_progress_for` asks only the watches of that prefix: the
/// watch of another prefix hears nothing (its periodic requests are an
/// hour apart), the asked one reports progress past a write elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_requested_for_one_prefix_reaches_only_its_watches() {
    let etcd = EtcdProcess::start().await;
    let store = Etcd3Store::connect(Etcd3Options {
        progress_interval: Duration::from_secs(3600),
        ..etcd.options()
    })
    .await
    .unwrap();
    let mut asked = store.watch("/registry/asked/", 0, true).await.unwrap();
    let mut other = store.watch("/registry/other/", 0, true).await.unwrap();
    let outside = store
        .create("/registry/elsewhere/x", Bytes::from("x"))
        .await
        .unwrap();
    store
        .request_progress_for("/registry/asked/")
        .await
        .unwrap();
    loop {
        match conformance::next_item(&mut asked).await {
            WatchItem::Progress(revision) if revision >= outside.mod_revision => break,
            WatchItem::Progress(_) => store
                .request_progress_for("/registry/asked/")
                .await
                .unwrap(),
            WatchItem::Event(event) => panic!("unexpected event {event:?}"),
        }
    }
    let heard = tokio::time::timeout(
        Duration::from_millis(500),
        conformance::next_item(&mut other),
    )
    .await;
    assert!(heard.is_err(), "the other watch was asked too: {heard:?}");
}
