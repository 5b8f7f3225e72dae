//! Storage-layer benchmark (release build): creates/s through the registry
//! store vs raw writes to the same backend (embedded and etcd), watch-cache
//! get/list throughput, and watch fan-out delivery latency to 1000 cache
//! watchers. Every ratio is measured side by side in one run.
//!
//! Run: `cargo bench -p apiforge-runtime --bench store` (add `-- --quick`
//! for a short run). Needs `/usr/bin/etcd` (scripts/install-deps.sh).

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apiforge_runtime::builtin::core_v1::Namespace;
use apiforge_runtime::registry::{CacheOptions, Caches, ListParams, Store, WatchEvent};
use apiforge_runtime::scheme::KindBuilder;
use apiforge_runtime::storage::embedded::{EmbeddedOptions, EmbeddedStore};
use apiforge_runtime::storage::etcd3::{Etcd3Options, Etcd3Store};
use apiforge_runtime::storage::{Revision, Storage};
use bytes::Bytes;
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde_json::{Value, json};

struct Settings {
    duration: Duration,
    objects: usize,
    fanout_seconds: u64,
}

fn value_1k(i: usize) -> Bytes {
    let pad = "x".repeat(1000);
    Bytes::from(format!("{{\"i\":{i},\"pad\":\"{pad}\"}}"))
}

fn namespace_1k(name: &str) -> Value {
    json!({"metadata": {"name": name, "annotations": {"pad": "x".repeat(900)}}})
}

fn store_on(storage: Arc<dyn Storage>, caches: &Caches) -> Store {
    let kind = Arc::new(
        KindBuilder::<Namespace>::new()
            .version::<Namespace>()
            .build(),
    );
    Store::new(
        kind,
        storage,
        "/registry",
        Some((caches, &CacheOptions::default())),
    )
}

/// Runs `op(task, i)` from `tasks` concurrent tasks for `duration`; ops/s.
async fn throughput<F, Fut>(tasks: usize, duration: Duration, op: F) -> f64
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let op = Arc::new(op);
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let (op, done, stop) = (op.clone(), done.clone(), stop.clone());
            tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    if op(t, i).await {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    i += 1;
                    // Cache hits complete without suspending; let the timer run.
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.await;
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

async fn creates(storage: Arc<dyn Storage>, label: &str, s: &Settings) -> (f64, f64) {
    let caches = Caches::default();
    let store = store_on(storage.clone(), &caches);
    let run = label.to_string();
    let raw = {
        let storage = storage.clone();
        let run = run.clone();
        throughput(64, s.duration, move |t, i| {
            let storage = storage.clone();
            let key = format!("/bench/raw-{run}/{t}/{i}");
            async move { storage.create(&key, value_1k(i)).await.is_ok() }
        })
        .await
    };
    let through_store = {
        let store = store.clone();
        throughput(64, s.duration, move |t, i| {
            let store = store.clone();
            async move {
                let Ok(hub) = store
                    .kind()
                    .decode("v1", namespace_1k(&format!("c-{t}-{i}")))
                else {
                    return false;
                };
                store.create("", hub, false).await.is_ok()
            }
        })
        .await
    };
    (raw, through_store)
}

struct EtcdProcess {
    child: Child,
    _dir: tempfile::TempDir,
    url: String,
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(23790)
}

fn start_etcd() -> Option<EtcdProcess> {
    let dir = tempfile::tempdir().ok()?;
    let (c, p) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{c}");
    let peer = format!("http://127.0.0.1:{p}");
    let child = Command::new("/usr/bin/etcd")
        .arg(format!("--data-dir={}", dir.path().join("d").display()))
        .arg(format!("--listen-client-urls={url}"))
        .arg(format!("--advertise-client-urls={url}"))
        .arg(format!("--listen-peer-urls={peer}"))
        .arg(format!("--initial-advertise-peer-urls={peer}"))
        .arg(format!("--initial-cluster=default={peer}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    Some(EtcdProcess {
        child,
        _dir: dir,
        url,
    })
}

fn row(scenario: &str, figure: &str, value: f64, reference: Option<f64>) {
    match reference {
        Some(r) => println!(
            "{scenario:<44} {figure:<22} {value:>12.0} {r:>12.0} {:>7.2}",
            value / r
        ),
        None => println!(
            "{scenario:<44} {figure:<22} {value:>12.1} {:>12} {:>7}",
            "-", "-"
        ),
    }
}

async fn cache_reads(s: &Settings) {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).expect("open"));
    let caches = Caches::default();
    let store = store_on(storage, &caches);
    let fill: Vec<_> = (0..s.objects)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let hub = store
                    .kind()
                    .decode("v1", namespace_1k(&format!("o{i}")))
                    .expect("decode");
                store.create("", hub, false).await.expect("create");
            })
        })
        .collect();
    for f in fill {
        let _ = f.await;
    }
    eprintln!("  filled {} objects", s.objects);
    let n = s.objects;
    let get_any = {
        let store = store.clone();
        throughput(64, s.duration, move |t, i| {
            let store = store.clone();
            let name = format!("o{}", (t * 7919 + i) % n);
            async move { store.get("", &name, Some(0)).await.is_ok() }
        })
        .await
    };
    let get_consistent = {
        let store = store.clone();
        throughput(64, s.duration, move |t, i| {
            let store = store.clone();
            let name = format!("o{}", (t * 7919 + i) % n);
            async move { store.get("", &name, None).await.is_ok() }
        })
        .await
    };
    let list_any = {
        let store = store.clone();
        throughput(4, s.duration, move |_, _| {
            let store = store.clone();
            async move {
                let p = ListParams {
                    resource_version: Some(0),
                    ..Default::default()
                };
                store.list(None, &p).await.is_ok_and(|l| l.items.len() == n)
            }
        })
        .await
    };
    let list_consistent = {
        let store = store.clone();
        throughput(4, s.duration, move |_, _| {
            let store = store.clone();
            async move {
                store
                    .list(None, &ListParams::default())
                    .await
                    .is_ok_and(|l| l.items.len() == n)
            }
        })
        .await
    };
    row("cache GET, 64 tasks (rv=0)", "gets/s", get_any, None);
    row(
        "cache GET, 64 tasks (consistent vs rv=0)",
        "gets/s",
        get_consistent,
        Some(get_any),
    );
    row(
        &format!("cache LIST {n} objects (rv=0)"),
        "lists/s",
        list_any,
        None,
    );
    row(
        &format!("cache LIST {n} objects (consistent vs rv=0)"),
        "lists/s",
        list_consistent,
        Some(list_any),
    );
}

async fn fanout(s: &Settings) {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).expect("open"));
    let caches = Caches::default();
    let store = store_on(storage, &caches);
    let sent: Arc<Mutex<HashMap<Revision, Instant>>> = Arc::default();
    let cache = store.cache().expect("cache").clone();
    cache.wait_consistent().await.expect("cache ready");
    let start = cache.revision();
    let writes = 200 * s.fanout_seconds as usize;
    let mut watchers = Vec::new();
    for _ in 0..1000 {
        let params = ListParams {
            resource_version: Some(start),
            ..Default::default()
        };
        let mut events = store.watch(None, &params, false).await.expect("watch");
        let sent = sent.clone();
        watchers.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new(3).expect("histogram");
            let mut last = 0;
            let mut count = 0;
            let mut in_order = true;
            while count < writes {
                match tokio::time::timeout(Duration::from_secs(30), events.next()).await {
                    Ok(Some(WatchEvent::Object(_, obj))) => {
                        let now = Instant::now();
                        let rv: Revision = obj.revision;
                        in_order &= rv > last;
                        last = rv;
                        count += 1;
                        let t = sent.lock().ok().and_then(|m| m.get(&rv).copied());
                        if let Some(t) = t {
                            let _ =
                                hist.record(now.saturating_duration_since(t).as_micros() as u64);
                        }
                    }
                    Ok(Some(_)) => {}
                    _ => break,
                }
            }
            (count, in_order, hist)
        }));
    }
    let interval = Duration::from_millis(5);
    let mut ticker = tokio::time::interval(interval);
    for i in 0..writes {
        ticker.tick().await;
        let hub = store
            .kind()
            .decode("v1", namespace_1k(&format!("f{i}")))
            .expect("decode");
        let before = Instant::now();
        let created = store.create("", hub, false).await.expect("create");
        let rv: Revision = created["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        if let Ok(mut m) = sent.lock() {
            // Delivery latency counts from the write's acknowledgement.
            let _ = before;
            m.insert(rv, Instant::now());
        }
    }
    let mut all = Histogram::<u64>::new(3).expect("histogram");
    let mut complete = 0;
    let mut ordered = 0;
    for w in watchers {
        if let Ok((count, in_order, hist)) = w.await {
            complete += usize::from(count == writes);
            ordered += usize::from(in_order);
            let _ = all.add(&hist);
        }
    }
    println!(
        "{:<44} {:<22} {complete}/1000 watchers complete, {ordered}/1000 in order",
        format!("WATCH fan-out 1000 watchers, {writes} writes at 200/s"),
        "delivery"
    );
    row(
        "  delivery latency p50 (µs, after ack)",
        "µs",
        all.value_at_quantile(0.5) as f64,
        None,
    );
    row(
        "  delivery latency p99 (µs, after ack)",
        "µs",
        all.value_at_quantile(0.99) as f64,
        None,
    );
    row(
        "  delivery latency max (µs, after ack)",
        "µs",
        all.max() as f64,
        None,
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let s = if quick {
        Settings {
            duration: Duration::from_secs(2),
            objects: 2_000,
            fanout_seconds: 3,
        }
    } else {
        Settings {
            duration: Duration::from_secs(5),
            objects: 10_000,
            fanout_seconds: 10,
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        println!(
            "{:<44} {:<22} {:>12} {:>12} {:>7}",
            "scenario", "figure", "value", "reference", "ratio"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let embedded: Arc<dyn Storage> =
            Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).expect("open"));
        let (raw, embedded_store) = creates(embedded, "embedded", &s).await;
        row(
            "CREATE 1 KiB, 64 tasks, embedded: raw",
            "creates/s",
            raw,
            None,
        );
        row(
            "CREATE 1 KiB, 64 tasks, embedded: store vs raw",
            "creates/s",
            embedded_store,
            Some(raw),
        );

        match start_etcd() {
            Some(etcd) => {
                let opts = Etcd3Options {
                    endpoints: vec![etcd.url.clone()],
                    ..Default::default()
                };
                match Etcd3Store::connect(opts).await {
                    Ok(store) => {
                        let (raw_e, store_e) = creates(Arc::new(store), "etcd", &s).await;
                        row(
                            "CREATE 1 KiB, 64 tasks, etcd: raw",
                            "creates/s",
                            raw_e,
                            None,
                        );
                        row(
                            "CREATE 1 KiB, 64 tasks, etcd: store vs raw",
                            "creates/s",
                            store_e,
                            Some(raw_e),
                        );
                        row(
                            "CREATE 1 KiB, 64 tasks, store: embedded vs etcd",
                            "creates/s",
                            embedded_store,
                            Some(store_e),
                        );
                    }
                    Err(e) => println!("etcd scenarios skipped: cannot connect: {e}"),
                }
            }
            None => println!(
                "etcd scenarios skipped: /usr/bin/etcd did not start (scripts/install-deps.sh)"
            ),
        }
        eprintln!("cache reads...");
        cache_reads(&s).await;
        eprintln!("fan-out...");
        fanout(&s).await;
    });
}
