//! The scaling scenario: how cost grows as work grows. One embedded-store
//! server is filled in steps (1,000, 10,000, 100,000 and — in the full run
//! — 1,000,000 objects of ~1 KiB); at each step it measures GET, LIST (one
//! page and pages of 500), watch fan-out, RSS, and start-up after a
//! restart. A fresh server then measures creates/s at 1, 16, 64 and 256
//! clients. With `--plots DIR` every curve is also drawn as an SVG.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use http::Method;

use crate::client::{Conn, Target, find_str};
use crate::fixtures::{collection, flunder, fresh, pad_for_1kib};
use crate::plot::{self, Chart, Series};
use crate::procs::{Apiforge, Backend};
use crate::report::{Figure, Target as Goal};
use crate::scenarios::{
    CreateOp, GetOp, MIB, PagedListOp, Runs, WatcherReport, check, measured_run, now_nanos,
    open_watches, populate, read_watch,
};
use crate::{Settings, progress};

const S: &str = "scale";
/// Namespace of the scaled collection.
const NS: &str = "default";
/// Watchers of the fan-out measurement at each step.
const WATCHERS: usize = 100;
/// Writes the watchers receive at each step.
const WATCH_WRITES: u64 = 50;
/// Client counts of the creates curve.
const CREATE_CLIENTS: [usize; 4] = [1, 16, 64, 256];

/// What one step (object count) measured.
struct Step {
    objects: usize,
    json_mib: f64,
    get: Runs,
    list: Runs,
    list_ms: f64,
    paged: Runs,
    pages: f64,
    watch_p50: f64,
    watch_p99: f64,
    watch_complete: usize,
    rss_written: f64,
    rss_restarted: f64,
    startup_ms: f64,
    /// Spawn to the first list the watch cache answered.
    cache_ready_ms: f64,
    /// The first LIST after the writes (converts and memoizes).
    first_list_ms: f64,
}

/// The steps of a run: 1,000 to 100,000 objects (quick: to 10,000), and
/// 1,000,000 in the full run.
pub(crate) fn steps(quick: bool) -> Vec<usize> {
    if quick {
        vec![1_000, 10_000]
    } else {
        vec![1_000, 10_000, 100_000, 1_000_000]
    }
}

/// Runs the scaling scenario.
pub(crate) async fn scale(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("data");
    let mut server = Apiforge::start(&settings.binary, &dir, &Backend::Embedded).await?;
    let pad = pad_for_1kib(&server.target, NS).await?;
    let mut steps = Vec::new();
    let (mut have, mut json_bytes) = (0usize, 0u64);
    for &n in &settings.scale_steps {
        progress!("{S}: filling to {n} objects");
        let (bytes, rate) = populate(
            &server.target,
            NS,
            &format!("s{n}-"),
            n.saturating_sub(have),
            pad,
        )
        .await?;
        progress!("  +{} objects at {rate:.0} creates/s", n - have);
        have = n;
        json_bytes += bytes;
        let first = format!("s{}-0", settings.scale_steps[0]);
        let step = measure_step(
            settings,
            &mut server,
            (&dir, &first),
            n,
            json_bytes as f64 / MIB,
        )
        .await?;
        steps.push(step);
    }
    drop(server);
    let creates = creates_curve(settings).await?;
    if let Some(dir) = &settings.plots {
        draw(dir, &steps, &creates)?;
        progress!("{S}: charts written to {}", dir.display());
    }
    Ok(figures(&steps, &creates))
}

/// Measures `server` (data in `dir`) holding `n` objects; GETs the object
/// named `get`.
async fn measure_step(
    settings: &Settings,
    server: &mut Apiforge,
    (dir, get_name): (&Path, &str),
    n: usize,
    json_mib: f64,
) -> anyhow::Result<Step> {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_written = server.rss()? as f64 / MIB;
    let target = server.target.clone();
    let pid = Some(server.pid()?);
    let base = collection(NS);
    // Half the usual run: four steps of five measurements each.
    let run = settings.run / 2;

    // Each measurement announces itself (a marker for scripts/profile.sh).
    progress!("  {n}: GET");
    let mut get = Runs::default();
    let op = Arc::new(GetOp {
        path: format!("{base}/{get_name}"),
    });
    crate::load::run(&target, 64, settings.warmup, op.clone()).await?;
    let r = measured_run(&target, pid, 64, run, op, &mut get).await?;
    check("scale get", &r)?;
    get.add(&r);

    // The first LIST after the writes converts every new object to the
    // served version and keeps that encoding: timed on its own, so that
    // the measured runs show the steady cost.
    progress!("  {n}: first LIST");
    let started = Instant::now();
    let mut conn = Conn::connect(&target).await?;
    conn.get(&base).await?.ok()?;
    let first_list_ms = started.elapsed().as_secs_f64() * 1000.0;

    // One connection: a list of a million objects is a GiB.
    progress!("  {n}: LIST in one page");
    let mut list = Runs::default();
    let op = Arc::new(GetOp { path: base.clone() });
    let r = measured_run(&target, pid, 1, run, op, &mut list).await?;
    check("scale list", &r)?;
    list.add(&r);
    let list_ms = r.elapsed.as_secs_f64() * 1000.0 / r.requests.max(1) as f64;

    progress!("  {n}: LIST in pages of 500");
    let mut paged = Runs::default();
    let op = Arc::new(PagedListOp {
        base: base.clone(),
        limit: 500,
    });
    let r = measured_run(&target, pid, 1, run, op, &mut paged).await?;
    check("scale paged list", &r)?;
    paged.add(&r);
    let pages = n.div_ceil(500) as f64;

    progress!("  {n}: watch fan-out");
    let (watch_p50, watch_p99, watch_complete) = watch_fan_out(&target, n).await?;

    // Restart on the same data: start-up to ready, then RSS.
    server.kill();
    let spawned = Instant::now();
    *server = Apiforge::start(&settings.binary, dir, &Backend::Embedded).await?;
    let startup_ms = server.startup.as_secs_f64() * 1000.0;
    // A list at resourceVersion=0 waits until the watch cache holds every
    // object: the cache then holds what it will hold.
    // kube-apiserver's answer while its cache fills is a 504 after 3 s
    // ("Too large resource version"): asked again until it answers.
    let mut conn = Conn::connect(&server.target).await?;
    let filled = format!("{base}?resourceVersion=0&limit=1");
    loop {
        let reply = conn.get(&filled).await?;
        if reply.status != http::StatusCode::GATEWAY_TIMEOUT {
            reply.ok()?;
            break;
        }
        anyhow::ensure!(
            spawned.elapsed() < Duration::from_secs(300),
            "the watch cache did not fill within 5 minutes of a restart"
        );
    }
    let cache_ready_ms = spawned.elapsed().as_secs_f64() * 1000.0;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_restarted = server.rss()? as f64 / MIB;
    progress!(
        "  {n}: GET {:.0}/s ({:.1} µs CPU); LIST {:.0} MiB/s ({list_ms:.1} ms); pages {:.0} MiB/s; watch p99 {watch_p99:.1} ms ({watch_complete}/{WATCHERS}); RSS {rss_written:.0} MiB; first LIST {first_list_ms:.0} ms; restart: ready {startup_ms:.0} ms, cache {cache_ready_ms:.0} ms, {rss_restarted:.0} MiB",
        get.rate(),
        get.cpu_us(),
        list.mbps(),
        paged.mbps()
    );
    Ok(Step {
        objects: n,
        json_mib,
        get,
        list,
        list_ms,
        paged,
        pages,
        watch_p50,
        watch_p99,
        watch_complete,
        rss_written,
        rss_restarted,
        startup_ms,
        cache_ready_ms,
        first_list_ms,
    })
}

/// Opens [`WATCHERS`] watches from the collection's current revision,
/// writes [`WATCH_WRITES`] objects at 100/s, and returns the delivery
/// latency p50 and p99 (ms) over all watchers and how many received every
/// write in order.
async fn watch_fan_out(target: &Target, n: usize) -> anyhow::Result<(f64, f64, usize)> {
    let path = collection(NS);
    let mut conn = Conn::connect(target).await?;
    let head = conn.get(&format!("{path}?limit=1")).await?.ok()?;
    let rv = find_str(&head, "resourceVersion")
        .context("list has no resourceVersion")?
        .to_string();
    let watch_path = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=600");
    let streams = open_watches(target, &watch_path, WATCHERS, 16).await?;
    let (total_tx, total_rx) = tokio::sync::watch::channel(None::<u64>);
    let readers: Vec<_> = streams
        .into_iter()
        .map(|(conn, resp)| {
            let rx = total_rx.clone();
            tokio::spawn(async move {
                let _conn = conn;
                read_watch(resp, rx).await
            })
        })
        .collect();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    for i in 0..WATCH_WRITES {
        tick.tick().await;
        let body = flunder(
            &format!("watched-{n}-{i}"),
            0,
            &[("bench/sent", now_nanos().to_string())],
        );
        conn.send(Method::POST, &path, Some(body)).await?.ok()?;
    }
    let _ = total_tx.send(Some(WATCH_WRITES));
    let mut hist = crate::load::histogram();
    let mut complete = 0;
    for r in readers {
        let rep: WatcherReport = r.await?;
        if rep.error.is_none() && rep.in_order && rep.events == WATCH_WRITES {
            complete += 1;
        }
        hist.add(&rep.hist).context("merging histograms")?;
    }
    Ok((
        hist.value_at_quantile(0.5) as f64 / 1000.0,
        hist.value_at_quantile(0.99) as f64 / 1000.0,
        complete,
    ))
}

/// Creates/s and server CPU per create at each of [`CREATE_CLIENTS`], on a
/// fresh embedded server.
async fn creates_curve(settings: &Settings) -> anyhow::Result<Vec<(usize, Runs)>> {
    let f = fresh(settings, &Backend::Embedded).await?;
    let target = &f.server.target;
    let pad = pad_for_1kib(target, NS).await?;
    let pid = Some(f.server.pid()?);
    let mut out = Vec::new();
    for clients in CREATE_CLIENTS {
        let op = Arc::new(CreateOp {
            path: collection(NS),
            pad,
            next: AtomicU64::new(0),
            prefix: format!("k{clients}-"),
        });
        crate::load::run(target, clients, settings.warmup, op.clone()).await?;
        let mut runs = Runs::default();
        let started = Instant::now();
        let r = measured_run(target, pid, clients, settings.run, op.clone(), &mut runs).await?;
        check(&format!("scale creates {clients} clients"), &r)?;
        runs.add(&r);
        progress!(
            "  creates, {clients} clients: {:.0}/s, {:.0} µs CPU each, p99 {:.1} ms ({:.1} s; {} written)",
            runs.rate(),
            runs.cpu_us(),
            runs.p99(),
            started.elapsed().as_secs_f64(),
            op.next.load(Ordering::Relaxed)
        );
        out.push((clients, runs));
    }
    Ok(out)
}

fn figures(steps: &[Step], creates: &[(usize, Runs)]) -> Vec<Figure> {
    let mut out = Vec::new();
    let info = |out: &mut Vec<Figure>, what: String, v: f64| {
        out.push(Figure::new(S, &what, v, Goal::Info));
    };
    for s in steps {
        let n = s.objects;
        info(&mut out, format!("{n} objects: JSON MiB"), s.json_mib);
        info(&mut out, format!("{n} objects: GET req/s"), s.get.rate());
        info(
            &mut out,
            format!("{n} objects: CPU µs per GET"),
            s.get.cpu_us(),
        );
        info(
            &mut out,
            format!("{n} objects: LIST one page MiB/s"),
            s.list.mbps(),
        );
        info(
            &mut out,
            format!("{n} objects: LIST one page ms"),
            s.list_ms,
        );
        info(
            &mut out,
            format!("{n} objects: CPU ms per one-page LIST"),
            s.list.cpu_us() / 1000.0,
        );
        info(
            &mut out,
            format!("{n} objects: LIST pages of 500 MiB/s"),
            s.paged.mbps(),
        );
        info(
            &mut out,
            format!("{n} objects: CPU µs per page of 500"),
            s.paged.cpu_us() / s.pages,
        );
        info(
            &mut out,
            format!("{n} objects: watch delivery p50 ms ({WATCHERS} watchers)"),
            s.watch_p50,
        );
        info(
            &mut out,
            format!("{n} objects: watch delivery p99 ms ({WATCHERS} watchers)"),
            s.watch_p99,
        );
        out.push(Figure::new(
            S,
            &format!("{n} objects: watchers with every event in order"),
            s.watch_complete as f64,
            Goal::Equals(WATCHERS as f64),
        ));
        info(
            &mut out,
            format!("{n} objects: RSS after writes MiB"),
            s.rss_written,
        );
        info(
            &mut out,
            format!("{n} objects: first LIST after the writes ms"),
            s.first_list_ms,
        );
        info(
            &mut out,
            format!("{n} objects: start-up to ready ms"),
            s.startup_ms,
        );
        info(
            &mut out,
            format!("{n} objects: start-up to the cache's first list ms"),
            s.cache_ready_ms,
        );
        info(
            &mut out,
            format!("{n} objects: RSS after restart, cache filled MiB"),
            s.rss_restarted,
        );
    }
    for (clients, runs) in creates {
        info(
            &mut out,
            format!("creates/s, {clients} clients"),
            runs.rate(),
        );
        info(
            &mut out,
            format!("CPU µs per create, {clients} clients"),
            runs.cpu_us(),
        );
        info(
            &mut out,
            format!("create p99 ms, {clients} clients"),
            runs.p99(),
        );
    }
    out
}

fn series(name: &str, steps: &[Step], y: impl Fn(&Step) -> f64) -> Series {
    Series {
        name: name.into(),
        points: steps.iter().map(|s| (s.objects as f64, y(s))).collect(),
    }
}

/// Writes the charts of the curves into `dir`.
fn draw(dir: &Path, steps: &[Step], creates: &[(usize, Runs)]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let objects = "objects in the collection (log)";
    let charts = [
        (
            "scale-get.svg",
            Chart {
                title: "GET one object: throughput (64 connections)",
                x_desc: objects,
                y_desc: "requests/s",
                series: vec![series("GET req/s", steps, |s| s.get.rate())],
            },
        ),
        (
            "scale-cpu.svg",
            Chart {
                title: "Server CPU per request",
                x_desc: objects,
                y_desc: "µs of CPU",
                series: vec![
                    series("per GET", steps, |s| s.get.cpu_us()),
                    series("per page of 500", steps, |s| s.paged.cpu_us() / s.pages),
                    series("per object in a one-page LIST", steps, |s| {
                        s.list.cpu_us() / s.objects as f64
                    }),
                ],
            },
        ),
        (
            "scale-list.svg",
            Chart {
                title: "LIST throughput (1 connection)",
                x_desc: objects,
                y_desc: "MiB/s",
                series: vec![
                    series("one page", steps, |s| s.list.mbps()),
                    series("pages of 500", steps, |s| s.paged.mbps()),
                ],
            },
        ),
        (
            "scale-list-time.svg",
            Chart {
                title: "Time for one LIST of everything",
                x_desc: objects,
                y_desc: "ms",
                series: vec![
                    series("first LIST after the writes", steps, |s| s.first_list_ms),
                    series("one page", steps, |s| s.list_ms),
                    series("walk in pages of 500", steps, |s| s.paged.p50()),
                ],
            },
        ),
        (
            "scale-watch.svg",
            Chart {
                title: "Watch fan-out: 100 watchers, write to delivery",
                x_desc: objects,
                y_desc: "ms",
                series: vec![
                    series("p50", steps, |s| s.watch_p50),
                    series("p99", steps, |s| s.watch_p99),
                ],
            },
        ),
        (
            "scale-startup.svg",
            Chart {
                title: "Start-up to ready (restart on the same data)",
                x_desc: objects,
                y_desc: "ms",
                series: vec![
                    series("to /readyz", steps, |s| s.startup_ms),
                    series("to the watch cache's first list", steps, |s| {
                        s.cache_ready_ms
                    }),
                ],
            },
        ),
        (
            "scale-rss.svg",
            Chart {
                title: "Server memory (RSS)",
                x_desc: objects,
                y_desc: "MiB",
                series: vec![
                    series("after the writes", steps, |s| s.rss_written),
                    series("after a restart (cache filled)", steps, |s| s.rss_restarted),
                    series("the objects' JSON", steps, |s| s.json_mib),
                ],
            },
        ),
        (
            "scale-creates.svg",
            Chart {
                title: "CREATE on the embedded store",
                x_desc: "concurrent clients (log)",
                y_desc: "creates/s",
                series: vec![Series {
                    name: "creates/s".into(),
                    points: creates.iter().map(|(c, r)| (*c as f64, r.rate())).collect(),
                }],
            },
        ),
        (
            "scale-creates-cpu.svg",
            Chart {
                title: "CREATE: server CPU per create",
                x_desc: "concurrent clients (log)",
                y_desc: "µs of CPU",
                series: vec![Series {
                    name: "CPU per create".into(),
                    points: creates
                        .iter()
                        .map(|(c, r)| (*c as f64, r.cpu_us()))
                        .collect(),
                }],
            },
        ),
    ];
    for (file, chart) in &charts {
        plot::write_svg(&dir.join(file), chart).with_context(|| format!("drawing {file}"))?;
    }
    Ok(())
}
