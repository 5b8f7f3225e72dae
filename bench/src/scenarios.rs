//! The scenarios. Each returns its figures; a scenario that cannot run
//! reports one failed `ERROR` figure and the others still run.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use bytes::Bytes;
use futures::FutureExt;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::client::{Conn, Target, find_str};
use crate::etcd_raw;
use crate::fixtures::{collection, flunder, fresh, pad_for_1kib};
use crate::load::{self, LoadResult, Op, median};
use crate::procs::{Apiforge, Backend, Etcd};
use crate::ref_process::RefProcess;
use crate::report::{Figure, Target as Goal};
use crate::{Settings, progress};

/// Bytes in a MiB.
pub(crate) const MIB: f64 = 1024.0 * 1024.0;

// ---------------------------------------------------------------------------
// helpers

/// Nanoseconds since the Unix epoch.
pub(crate) fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// Creates `count` objects named `{prefix}{i}` with 64 concurrent
/// connections; returns the total size of the created objects as served
/// (JSON bytes) and the creates per second.
pub(crate) async fn populate(
    target: &Target,
    ns: &str,
    prefix: &str,
    count: usize,
    pad: usize,
) -> anyhow::Result<(u64, f64)> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..64.min(count.max(1)) {
        let target = target.clone();
        let next = next.clone();
        let path = collection(ns);
        let prefix = prefix.to_string();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(&target).await?;
            let mut bytes = 0u64;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return anyhow::Ok(bytes);
                }
                if i > 0 && i.is_multiple_of(10_000) {
                    progress!("  populated {i}/{count}");
                }
                let body = flunder(&format!("{prefix}{i}"), pad, &[]);
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    if conn.is_closed() {
                        conn = Conn::connect(&target).await?;
                    }
                    match conn.send(Method::POST, &path, Some(body.clone())).await {
                        Ok(r) if r.status == StatusCode::CREATED || r.status == StatusCode::OK => {
                            bytes += r.body.len() as u64;
                            break;
                        }
                        Ok(r) if attempt >= 3 => {
                            r.ok().with_context(|| format!("creating {prefix}{i}"))?;
                            bail!("creating {prefix}{i} failed");
                        }
                        Err(e) if attempt >= 3 => {
                            return Err(e.context(format!("creating {prefix}{i}")));
                        }
                        _ => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
            }
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok((total, count as f64 / started.elapsed().as_secs_f64()))
}

/// Fails a run with errors (server errors are failed measurements).
pub(crate) fn check(name: &str, r: &LoadResult) -> anyhow::Result<()> {
    if r.requests == 0 {
        bail!(
            "{name}: no request succeeded ({} errors; first: {})",
            r.errors,
            r.first_error.as_deref().unwrap_or("none")
        );
    }
    if r.errors > 0 {
        progress!(
            "  {name}: {} errors (first: {})",
            r.errors,
            r.first_error.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

/// Figures of repeated runs: rate, bytes/s, p50, p99, max, errors.
#[derive(Default)]
pub(crate) struct Runs {
    rate: Vec<f64>,
    byte_rate: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    max: Vec<f64>,
    errors: u64,
    /// CPU time of the server process per successful request (µs), when
    /// the server's pid was known.
    cpu_us: Vec<f64>,
}

impl Runs {
    pub(crate) fn add(&mut self, r: &LoadResult) {
        self.rate.push(r.rate());
        self.byte_rate.push(r.byte_rate());
        self.p50.push(r.quantile_ms(0.5));
        self.p99.push(r.quantile_ms(0.99));
        self.max.push(r.max_ms());
        self.errors += r.errors;
    }
    pub(crate) fn rate(&self) -> f64 {
        median(&self.rate)
    }
    /// Median server CPU per request (µs); NaN when not measured.
    pub(crate) fn cpu_us(&self) -> f64 {
        if self.cpu_us.is_empty() {
            f64::NAN
        } else {
            median(&self.cpu_us)
        }
    }
    pub(crate) fn mbps(&self) -> f64 {
        median(&self.byte_rate) / MIB
    }
    pub(crate) fn p50(&self) -> f64 {
        median(&self.p50)
    }
    pub(crate) fn p99(&self) -> f64 {
        median(&self.p99)
    }
    fn max(&self) -> f64 {
        median(&self.max)
    }
}

/// Warms up, then runs `op` against `a` and `b` alternately
/// `settings.repeats` times.
async fn compare<O: Op>(
    settings: &Settings,
    label: &str,
    conns: usize,
    a: &Target,
    b: Option<&Target>,
    op: Arc<O>,
) -> anyhow::Result<(Runs, Runs)> {
    compare_measured(settings, label, conns, (a, None), b.map(|b| (b, None)), op).await
}

/// Runs `op` against `target` for `duration`; with `pid`, adds the CPU time
/// of that process per request to `runs.cpu_us`.
pub(crate) async fn measured_run<O: Op>(
    target: &Target,
    pid: Option<u32>,
    conns: usize,
    duration: Duration,
    op: Arc<O>,
    runs: &mut Runs,
) -> anyhow::Result<LoadResult> {
    let pid = pid.map(|p| p.to_string());
    let before = match &pid {
        Some(pid) => Some(crate::procs::cpu_seconds(pid)?),
        None => None,
    };
    let r = load::run(target, conns, duration, op).await?;
    if let (Some(pid), Some(before)) = (&pid, before)
        && r.requests > 0
    {
        let used = crate::procs::cpu_seconds(pid)? - before;
        runs.cpu_us.push(used * 1e6 / r.requests as f64);
    }
    Ok(r)
}

/// [`compare`], also reading the CPU time of the processes serving `a` and
/// `b` (their pids, when given) around each of their measured runs.
async fn compare_measured<O: Op>(
    settings: &Settings,
    label: &str,
    conns: usize,
    (a, server_pid): (&Target, Option<u32>),
    b: Option<(&Target, Option<u32>)>,
    op: Arc<O>,
) -> anyhow::Result<(Runs, Runs)> {
    let (mut ra, mut rb) = (Runs::default(), Runs::default());
    load::run(a, conns, settings.warmup, op.clone()).await?;
    if let Some((b, _)) = b {
        load::run(b, conns, settings.warmup, op.clone()).await?;
    }
    for i in 0..settings.repeats {
        let r = measured_run(a, server_pid, conns, settings.run, op.clone(), &mut ra).await?;
        check(label, &r)?;
        progress!(
            "  {label} run {}/{}: apiforge {:.0} req/s, {:.1} MiB/s, p99 {:.2} ms",
            i + 1,
            settings.repeats,
            r.rate(),
            r.byte_rate() / MIB,
            r.quantile_ms(0.99)
        );
        ra.add(&r);
        if let Some((b, pid)) = b {
            let r = measured_run(b, pid, conns, settings.run, op.clone(), &mut rb).await?;
            check(&format!("{label} (reference)"), &r)?;
            progress!(
                "  {label} run {}/{}: reference {:.0} req/s, {:.1} MiB/s, p99 {:.2} ms",
                i + 1,
                settings.repeats,
                r.rate(),
                r.byte_rate() / MIB,
                r.quantile_ms(0.99)
            );
            rb.add(&r);
        }
    }
    Ok((ra, rb))
}

/// GET of a fixed path; the response must be 2xx.
pub(crate) struct GetOp {
    pub(crate) path: String,
}

impl Op for GetOp {
    async fn call(&self, _worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        Ok(conn.get(&self.path).await?.ok()?.len() as u64)
    }
}

// ---------------------------------------------------------------------------
// 1. GET

pub(crate) async fn get(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    const S: &str = "get";
    progress!("{S}: GET one 1 KiB object, 64 connections");
    let f = fresh(settings, &Backend::Embedded).await?;
    let target = &f.server.target;
    let pad = pad_for_1kib(target, "default").await?;
    let path = format!("{}/bench-get", collection("default"));
    let mut conn = Conn::connect(target).await?;
    conn.send(
        Method::POST,
        &collection("default"),
        Some(flunder("bench-get", pad, &[])),
    )
    .await?
    .ok()?;
    let body = conn.get(&path).await?.ok()?;
    progress!("  object is {} bytes", body.len());
    let reference = RefProcess::fixed(&f.server.data_dir, target, HashMap::new(), body).await?;
    let op = Arc::new(GetOp { path });
    let pid = Some(f.server.pid()?);
    let refs = Some((&reference.target, Some(reference.pid)));
    let (a, r) = compare_measured(settings, S, 64, (target, pid), refs, op).await?;
    Ok(vec![
        Figure::vs(S, "req/s", a.rate(), r.rate(), Goal::RatioAtLeast(0.8)),
        Figure::vs(
            S,
            "server CPU µs per GET",
            a.cpu_us(),
            r.cpu_us(),
            Goal::Info,
        ),
        Figure::vs(S, "p50 ms", a.p50(), r.p50(), Goal::Info),
        Figure::vs(S, "p99 ms", a.p99(), r.p99(), Goal::RatioAtMost(2.0)),
        Figure::vs(S, "max ms", a.max(), r.max(), Goal::Info),
        Figure::new(S, "errors", a.errors as f64, Goal::Equals(0.0)),
    ])
}

// ---------------------------------------------------------------------------
// 2. LIST and 8. consistent LIST

/// Percent-encodes a continue token for a query string.
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The continue token of a list page (metadata comes before the items).
fn continue_of(body: &[u8]) -> Option<String> {
    let head = &body[..body.len().min(4096)];
    let items = memchr::memmem::find(head, b"\"items\"").unwrap_or(head.len());
    find_str(&head[..items], "continue")
        .filter(|c| !c.is_empty())
        .map(str::to_string)
}

/// Walks a paginated list: first page `base?limit=N`, then the continue
/// tokens.
pub(crate) struct PagedListOp {
    pub(crate) base: String,
    pub(crate) limit: usize,
}

impl PagedListOp {
    fn page_path(&self, token: Option<&str>) -> String {
        match token {
            None => format!("{}?limit={}", self.base, self.limit),
            Some(t) => format!(
                "{}?limit={}&continue={}",
                self.base,
                self.limit,
                query_escape(t)
            ),
        }
    }
}

impl Op for PagedListOp {
    async fn call(&self, _worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        let mut total = 0u64;
        let mut token: Option<String> = None;
        loop {
            let body = conn.get(&self.page_path(token.as_deref())).await?.ok()?;
            total += body.len() as u64;
            match continue_of(&body) {
                Some(t) => token = Some(t),
                None => return Ok(total),
            }
        }
    }
}

pub(crate) async fn list(
    settings: &Settings,
    plain: bool,
    consistent: bool,
) -> anyhow::Result<Vec<Figure>> {
    let n = settings.list_objects;
    progress!("list: populating {n} objects of ~1 KiB");
    let f = fresh(settings, &Backend::Embedded).await?;
    let target = &f.server.target;
    let ns = "kube-public";
    let pad = pad_for_1kib(target, ns).await?;
    populate(target, ns, "l-", n, pad).await?;
    let base = collection(ns);
    let mut conn = Conn::connect(target).await?;
    let full = conn.get(&base).await?.ok()?;
    let mut bodies = HashMap::new();
    bodies.insert(base.clone(), full.clone());
    let rv0 = format!("{base}?resourceVersion=0");
    bodies.insert(rv0.clone(), conn.get(&rv0).await?.ok()?);
    // Capture the pages so that the reference serves the same bytes.
    let paged = Arc::new(PagedListOp {
        base: base.clone(),
        limit: 500,
    });
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = paged.page_path(token.as_deref());
        let body = conn.get(&path).await?.ok()?;
        token = continue_of(&body);
        bodies.insert(path, body);
        pages += 1;
        if token.is_none() {
            break;
        }
        if pages > n / 500 + 5 {
            bail!("pagination does not end after {pages} pages");
        }
    }
    progress!("  full list is {} bytes; {pages} pages of 500", full.len());
    let reference = RefProcess::fixed(&f.server.data_dir, target, bodies, Bytes::new()).await?;
    let refs = Some((&reference.target, Some(reference.pid)));
    let mut out = Vec::new();
    let conns = 4;
    if plain {
        const S: &str = "list";
        let op = Arc::new(GetOp { path: base.clone() });
        let label = format!("{S} {n} in one page");
        let pid = Some(f.server.pid()?);
        let (a, r) = compare_measured(settings, &label, conns, (target, pid), refs, op).await?;
        out.push(Figure::vs(
            S,
            &format!("{n} objects, one page: MiB/s"),
            a.mbps(),
            r.mbps(),
            Goal::RatioAtLeast(0.7),
        ));
        out.push(Figure::vs(
            S,
            "server CPU µs per one-page LIST",
            a.cpu_us(),
            r.cpu_us(),
            Goal::Info,
        ));
        out.push(Figure::vs(
            S,
            "one page: p50 ms",
            a.p50(),
            r.p50(),
            Goal::Info,
        ));
        let label = format!("{S} {n} in pages of 500");
        let (a, r) =
            compare_measured(settings, &label, conns, (target, pid), refs, paged.clone()).await?;
        out.push(Figure::vs(
            S,
            &format!("{n} objects, limit=500 pages: MiB/s"),
            a.mbps(),
            r.mbps(),
            Goal::RatioAtLeast(0.75),
        ));
        out.push(Figure::vs(
            S,
            "server CPU µs per page of 500",
            a.cpu_us(),
            r.cpu_us(),
            Goal::Info,
        ));
        out.push(Figure::vs(
            S,
            "limit=500 walk: p50 ms",
            a.p50(),
            r.p50(),
            Goal::Info,
        ));
        out.push(Figure::new(
            S,
            "errors",
            (a.errors) as f64,
            Goal::Equals(0.0),
        ));
    }
    if consistent {
        const S: &str = "consistent-list";
        progress!("{S}: resourceVersion unset vs resourceVersion=0, {n} objects");
        let op_c = Arc::new(GetOp { path: base.clone() });
        let op_0 = Arc::new(GetOp { path: rv0 });
        let (c, _) = compare(settings, "consistent list", conns, target, None, op_c).await?;
        let (z, _) = compare(settings, "rv=0 list", conns, target, None, op_0).await?;
        out.push(Figure::vs(
            S,
            "consistent lists/s (vs rv=0)",
            c.rate(),
            z.rate(),
            Goal::RatioAtLeast(0.8),
        ));
        out.push(Figure::vs(
            S,
            "consistent p50 ms (vs rv=0)",
            c.p50(),
            z.p50(),
            Goal::Info,
        ));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// 3. CREATE

/// Creates 1 KiB Flunders named `{prefix}{n}` under `path`.
pub(crate) struct CreateOp {
    pub(crate) path: String,
    pub(crate) pad: usize,
    pub(crate) next: AtomicU64,
    pub(crate) prefix: String,
}

impl Op for CreateOp {
    async fn call(&self, _worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let body = flunder(&format!("{}{i}", self.prefix), self.pad, &[]);
        Ok(conn
            .send(Method::POST, &self.path, Some(body))
            .await?
            .ok()?
            .len() as u64)
    }
}

/// Client counts of the CREATE scenario.
const CREATE_CLIENTS: [usize; 2] = [16, 64];

/// One call of a raw etcd reference from worker `n`.
type RawCall =
    Arc<dyn Fn(usize) -> futures::future::BoxFuture<'static, anyhow::Result<u64>> + Send + Sync>;

/// The etcd references an etcd scenario takes turns with.
struct EtcdRefs<O> {
    /// The raw etcd client call.
    raw: RawCall,
    /// The bare etcd proxy ([`etcd_raw::EtcdProxy`], in a process of its
    /// own) and the operation that drives it.
    proxy: (Target, Arc<O>),
    /// The proxy's process id.
    proxy_pid: u32,
}

/// What the etcd references measured.
#[derive(Default)]
struct RefRuns {
    raw: Runs,
    proxy: Runs,
}

/// Warms up, then runs `op` against apiforge at `target` (process `pid`)
/// `settings.repeats` times; with `refs` (the etcd references), alternates
/// with them run by run (apiforge, the bare proxy, raw etcd), so that drift
/// in etcd's speed during the scenario weighs on all sides alike.
async fn compare_with_raw<O: Op>(
    settings: &Settings,
    label: &str,
    workers: usize,
    (target, pid): (&Target, u32),
    op: Arc<O>,
    refs: Option<EtcdRefs<O>>,
) -> anyhow::Result<(Runs, Option<RefRuns>)> {
    let (mut ours, mut reference) = (Runs::default(), RefRuns::default());
    load::run(target, workers, settings.warmup, op.clone()).await?;
    if let Some(refs) = &refs {
        load::run(
            &refs.proxy.0,
            workers,
            settings.warmup,
            refs.proxy.1.clone(),
        )
        .await?;
        load::run_fn(workers, settings.warmup, refs.raw.clone()).await?;
    }
    for i in 0..settings.repeats {
        let r = measured_run(
            target,
            Some(pid),
            workers,
            settings.run,
            op.clone(),
            &mut ours,
        )
        .await?;
        check(label, &r)?;
        progress!(
            "  {label} run {}/{}: apiforge {:.0} ops/s, p99 {:.2} ms",
            i + 1,
            settings.repeats,
            r.rate(),
            r.quantile_ms(0.99)
        );
        ours.add(&r);
        let Some(refs) = &refs else { continue };
        let r = measured_run(
            &refs.proxy.0,
            Some(refs.proxy_pid),
            workers,
            settings.run,
            refs.proxy.1.clone(),
            &mut reference.proxy,
        )
        .await?;
        check(&format!("{label} (bare etcd proxy)"), &r)?;
        progress!(
            "  {label} run {}/{}: bare proxy {:.0} ops/s, p99 {:.2} ms",
            i + 1,
            settings.repeats,
            r.rate(),
            r.quantile_ms(0.99)
        );
        reference.proxy.add(&r);
        let r = load::run_fn(workers, settings.run, refs.raw.clone()).await?;
        check(&format!("{label} (raw etcd)"), &r)?;
        progress!(
            "  {label} run {}/{}: raw etcd {:.0} ops/s, p99 {:.2} ms",
            i + 1,
            settings.repeats,
            r.rate(),
            r.quantile_ms(0.99)
        );
        reference.raw.add(&r);
    }
    Ok((ours, refs.map(|_| reference)))
}

/// The informational figures of the bare etcd proxy: its `what` against raw
/// etcd (`raw_name`), and apiforge's (`ours`) against the proxy's.
fn floor_figures(
    scenario: &str,
    what: &str,
    ours: &Runs,
    refs: &RefRuns,
    raw_name: &str,
    goal: Goal,
) -> [Figure; 2] {
    let mut proxy = Figure::new(
        scenario,
        &format!("bare etcd proxy {what} (ref: {raw_name})"),
        refs.proxy.rate(),
        Goal::Info,
    );
    proxy.reference = Some(refs.raw.rate());
    let mut vs_proxy = Figure::new(
        scenario,
        &format!("etcd backend {what} (ref: bare etcd proxy)"),
        ours.rate(),
        goal,
    );
    vs_proxy.reference = Some(refs.proxy.rate());
    [proxy, vs_proxy]
}

/// CREATE runs on a fresh apiforge with `backend`, one per client count.
async fn create_on(settings: &Settings, backend: &Backend) -> anyhow::Result<Vec<Runs>> {
    let f = fresh(settings, backend).await?;
    let target = &f.server.target;
    let pad = pad_for_1kib(target, "default").await?;
    let mut out = Vec::new();
    for conns in CREATE_CLIENTS {
        let op = Arc::new(CreateOp {
            path: collection("default"),
            pad,
            next: AtomicU64::new(0),
            prefix: format!("c{conns}-"),
        });
        let label = format!("create {} {conns} clients", backend.name());
        let pid = Some(f.server.pid()?);
        let (a, _) = compare_measured(settings, &label, conns, (target, pid), None, op).await?;
        out.push(a);
    }
    Ok(out)
}

async fn etcd_client(etcd: &Etcd) -> anyhow::Result<etcd_client::Client> {
    etcd_client::Client::connect([etcd.url.as_str()], None)
        .await
        .context("connecting to etcd")
}

pub(crate) async fn create(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    const S: &str = "create";
    progress!("{S}: CREATE 1 KiB objects, 16 and 64 clients");
    let embedded = create_on(settings, &Backend::Embedded).await?;
    let mut etcd_runs = None;
    let mut raw_runs = None;
    if settings.etcd {
        // apiforge on etcd, the bare etcd proxy and the raw etcd reference
        // share one etcd and take turns, run by run.
        let etcd = Etcd::start().await?;
        progress!("  etcd is up");
        let f = fresh(settings, &Backend::Etcd(etcd.url.clone())).await?;
        progress!("  apiforge on etcd is ready");
        let target = &f.server.target;
        let pad = pad_for_1kib(target, "default").await?;
        let client = etcd_client(&etcd).await?;
        let value = flunder("raw-create-object", pad, &[]).to_vec();
        let proxy_server =
            RefProcess::etcd_proxy(&f.server.data_dir, target, &etcd.url, "/proxy/c/").await?;
        let pid = f.server.pid()?;
        let (mut ours, mut raw) = (Vec::new(), Vec::new());
        for conns in CREATE_CLIENTS {
            let create_op = |prefix: String| {
                Arc::new(CreateOp {
                    path: collection("default"),
                    pad,
                    next: AtomicU64::new(0),
                    prefix,
                })
            };
            let op = create_op(format!("c{conns}-"));
            let raw_op =
                etcd_raw::RawCreate::new(client.clone(), format!("/raw/c{conns}/"), value.clone());
            let refs = EtcdRefs {
                raw: Arc::new(move |_worker: usize| raw_op.clone().call().boxed()),
                proxy: (proxy_server.target.clone(), create_op(format!("p{conns}-"))),
                proxy_pid: proxy_server.pid,
            };
            let label = format!("create etcd {conns} clients");
            let (a, b) =
                compare_with_raw(settings, &label, conns, (target, pid), op, Some(refs)).await?;
            ours.push(a);
            raw.extend(b);
        }
        etcd_runs = Some(ours);
        raw_runs = Some(raw);
    }
    let mut out = Vec::new();
    for (i, conns) in CREATE_CLIENTS.into_iter().enumerate() {
        let on_etcd = etcd_runs.as_ref().and_then(|e| e.get(i));
        let refs: Option<&RefRuns> = raw_runs.as_ref().and_then(|e| e.get(i));
        let raw = refs.map(|r| &r.raw);
        if let Some(e) = on_etcd {
            let mut fig = Figure::new(
                S,
                &format!("etcd backend creates/s, {conns} clients (ref: raw etcd txn)"),
                e.rate(),
                Goal::Info,
            );
            fig.reference = raw.map(Runs::rate);
            out.push(fig);
            let mut fig = Figure::new(
                S,
                &format!("etcd backend p99 ms, {conns} clients (ref: raw etcd txn)"),
                e.p99(),
                Goal::Info,
            );
            fig.reference = raw.map(Runs::p99);
            out.push(fig);
            if let Some(refs) = refs {
                out.extend(floor_figures(
                    S,
                    &format!("creates/s, {conns} clients"),
                    e,
                    refs,
                    "raw etcd txn",
                    Goal::RatioAtLeast(0.9),
                ));
                out.push(Figure::vs(
                    S,
                    &format!(
                        "etcd backend server CPU µs per create, {conns} clients (ref: bare etcd proxy)"
                    ),
                    e.cpu_us(),
                    refs.proxy.cpu_us(),
                    Goal::Info,
                ));
            }
        }
        let runs = &embedded[i];
        let mut fig = Figure::new(
            S,
            &format!("embedded creates/s, {conns} clients (ref: etcd backend)"),
            runs.rate(),
            Goal::Info,
        );
        fig.reference = on_etcd.map(Runs::rate);
        out.push(fig);
        let mut fig = Figure::new(
            S,
            &format!("embedded creates/s, {conns} clients (ref: raw etcd txn)"),
            runs.rate(),
            if raw.is_some() {
                Goal::RatioAtLeast(2.0)
            } else {
                Goal::Info
            },
        );
        fig.reference = raw.map(Runs::rate);
        out.push(fig);
        let mut fig = Figure::new(
            S,
            &format!("embedded p99 ms, {conns} clients (ref: etcd backend)"),
            runs.p99(),
            Goal::Info,
        );
        fig.reference = on_etcd.map(Runs::p99);
        out.push(fig);
        out.push(Figure::new(
            S,
            &format!("embedded server CPU µs per create, {conns} clients"),
            runs.cpu_us(),
            Goal::Info,
        ));
        let errors = runs.errors + on_etcd.map_or(0, |e| e.errors);
        out.push(Figure::new(
            S,
            &format!("errors, {conns} clients"),
            errors as f64,
            Goal::Equals(0.0),
        ));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// 4. UPDATE

const COUNTER: &str = "bench/counter";
/// Clients (and objects) of the UPDATE scenario.
const UPDATE_CLIENTS: usize = 64;

/// PUT with the resourceVersion of the object the client last saw (its own
/// previous PUT's response), counter annotation + 1; on 409 re-read and
/// retry. Like a controller's update loop and like a raw etcd CAS.
struct UpdateOp {
    ns: String,
    /// The last object each worker saw.
    last: Vec<std::sync::Mutex<Option<Value>>>,
    successes: Vec<AtomicU64>,
    conflicts: AtomicU64,
}

impl UpdateOp {
    fn path(&self, worker: usize) -> String {
        format!("{}/u-{worker}", collection(&self.ns))
    }
}

fn counter_of(obj: &Value) -> anyhow::Result<u64> {
    obj["metadata"]["annotations"][COUNTER]
        .as_str()
        .context("object has no counter annotation")?
        .parse()
        .context("counter is not a number")
}

impl Op for UpdateOp {
    async fn call(&self, worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        let path = self.path(worker);
        let slot = self.last.get(worker).context("no object for worker")?;
        let mut obj = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let mut bytes = 0u64;
        loop {
            let mut current = match obj.take() {
                Some(o) => o,
                None => {
                    let body = conn.get(&path).await?.ok()?;
                    bytes += body.len() as u64;
                    serde_json::from_slice(&body)?
                }
            };
            let next = counter_of(&current)? + 1;
            current["metadata"]["annotations"][COUNTER] = json!(next.to_string());
            let reply = conn
                .send(
                    Method::PUT,
                    &path,
                    Some(Bytes::from(serde_json::to_vec(&current)?)),
                )
                .await?;
            if reply.status == StatusCode::CONFLICT {
                self.conflicts.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let body = reply.ok()?;
            if let Some(s) = self.successes.get(worker) {
                s.fetch_add(1, Ordering::Relaxed);
            }
            bytes += body.len() as u64;
            *slot
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                serde_json::from_slice(&body).ok();
            return Ok(bytes);
        }
    }
}

/// What an UPDATE run on one backend measured.
struct UpdateResult {
    runs: Runs,
    lost: u64,
    extra: u64,
    conflicts: u64,
}

/// A new UPDATE operation on the objects `u-{i}` of `ns`.
fn update_op(ns: &str) -> Arc<UpdateOp> {
    Arc::new(UpdateOp {
        ns: ns.to_string(),
        last: (0..UPDATE_CLIENTS)
            .map(|_| std::sync::Mutex::new(None))
            .collect(),
        successes: (0..UPDATE_CLIENTS).map(|_| AtomicU64::new(0)).collect(),
        conflicts: AtomicU64::new(0),
    })
}

/// UPDATE runs on a fresh apiforge with `backend`, alternating with the
/// etcd references when `etcd` has the raw call and the client for the
/// bare proxy (their runs are also returned); also returns the padding
/// that makes an object 1 KiB (to size the raw values).
async fn update_on(
    settings: &Settings,
    backend: &Backend,
    etcd: Option<(RawCall, String)>,
) -> anyhow::Result<(UpdateResult, Option<RefRuns>, usize)> {
    let f = fresh(settings, backend).await?;
    let target = &f.server.target;
    let ns = "default";
    let pad = pad_for_1kib(target, ns).await?;
    let mut conn = Conn::connect(target).await?;
    for i in 0..UPDATE_CLIENTS {
        conn.send(
            Method::POST,
            &collection(ns),
            Some(flunder(
                &format!("u-{i}"),
                pad,
                &[(COUNTER, "0".to_string())],
            )),
        )
        .await?
        .ok()?;
    }
    let op = update_op(ns);
    // The bare proxy and its server live as long as the runs.
    let mut proxy = None;
    let mut refs = None;
    if let Some((raw, url)) = etcd {
        let server = RefProcess::etcd_proxy(&f.server.data_dir, target, &url, "/proxy/u").await?;
        let mut conn = Conn::connect(&server.target).await?;
        let proxy_op = update_op(ns);
        for i in 0..UPDATE_CLIENTS {
            let object = flunder(&format!("u-{i}"), pad, &[(COUNTER, "0".to_string())]);
            conn.send(Method::PUT, &proxy_op.path(i), Some(object))
                .await?
                .ok()?;
        }
        refs = Some(EtcdRefs {
            raw,
            proxy: (server.target.clone(), proxy_op),
            proxy_pid: server.pid,
        });
        proxy = Some(server);
    }
    let label = format!("update {}", backend.name());
    progress!("  {label}: {UPDATE_CLIENTS} objects written, measuring");
    let pid = f.server.pid()?;
    let (runs, raw_runs) = compare_with_raw(
        settings,
        &label,
        UPDATE_CLIENTS,
        (target, pid),
        op.clone(),
        refs,
    )
    .await?;
    drop(proxy);
    // The setup connection sat idle through the runs, longer than the
    // server keeps an idle connection open (30 s): a fresh one.
    let mut conn = Conn::connect(target).await?;
    let (mut lost, mut extra) = (0u64, 0u64);
    for i in 0..UPDATE_CLIENTS {
        let reply = conn.get(&op.path(i)).await?.ok().with_context(|| {
            format!(
                "reading back u-{i} after the runs; server log:\n{}",
                f.server.log_tail()
            )
        })?;
        let obj: Value = serde_json::from_slice(&reply)?;
        let stored = counter_of(&obj)?;
        let acked = op.successes[i].load(Ordering::Relaxed);
        lost += acked.saturating_sub(stored);
        extra += stored.saturating_sub(acked);
    }
    let result = UpdateResult {
        runs,
        lost,
        extra,
        conflicts: op.conflicts.load(Ordering::Relaxed),
    };
    Ok((result, raw_runs, pad))
}

pub(crate) async fn update(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    const S: &str = "update";
    progress!(
        "{S}: PUT with resourceVersion preconditions, {UPDATE_CLIENTS} clients on {UPDATE_CLIENTS} objects"
    );
    let (embedded, _, pad) = update_on(settings, &Backend::Embedded, None).await?;
    let mut on_etcd = None;
    let mut raw = None;
    if settings.etcd {
        // apiforge on etcd, the bare etcd proxy and the raw compare-and-swap
        // share one etcd and take turns, run by run.
        let etcd = Etcd::start().await?;
        let client = etcd_client(&etcd).await?;
        let value = flunder("raw-update-object", pad, &[(COUNTER, "0".into())]).to_vec();
        let op =
            etcd_raw::RawUpdate::setup(client.clone(), "/raw/u/", UPDATE_CLIENTS, value).await?;
        let call: RawCall = {
            let op = op.clone();
            Arc::new(move |worker: usize| op.clone().call(worker).boxed())
        };
        let backend = Backend::Etcd(etcd.url.clone());
        let (r, raw_runs, _) =
            update_on(settings, &backend, Some((call, etcd.url.clone()))).await?;
        on_etcd = Some(r);
        raw = raw_runs.map(|runs| (runs, op.conflicts.load(Ordering::Relaxed)));
    }
    let raw_rate = raw.as_ref().map(|(r, _)| r.raw.rate());
    let raw_p99 = raw.as_ref().map(|(r, _)| r.raw.p99());
    let mut out = Vec::new();
    for (name, result) in [
        ("embedded", Some(&embedded)),
        ("etcd backend", on_etcd.as_ref()),
    ] {
        let Some(r) = result else { continue };
        let mut fig = Figure::new(
            S,
            &format!("{name} updates/s (ref: raw etcd CAS)"),
            r.runs.rate(),
            Goal::Info,
        );
        fig.reference = raw_rate;
        out.push(fig);
        let mut fig = Figure::new(
            S,
            &format!("{name} p99 ms (ref: raw etcd CAS)"),
            r.runs.p99(),
            Goal::Info,
        );
        fig.reference = raw_p99;
        out.push(fig);
        out.push(Figure::new(
            S,
            &format!("{name} server CPU µs per update"),
            r.runs.cpu_us(),
            Goal::Info,
        ));
        out.push(Figure::new(
            S,
            &format!("{name} lost updates"),
            r.lost as f64,
            Goal::Equals(0.0),
        ));
        out.push(Figure::new(
            S,
            &format!("{name} unacknowledged updates applied"),
            r.extra as f64,
            Goal::Info,
        ));
        out.push(Figure::new(
            S,
            &format!("{name} 409 conflicts"),
            r.conflicts as f64,
            Goal::Info,
        ));
        out.push(Figure::new(
            S,
            &format!("{name} errors"),
            r.runs.errors as f64,
            Goal::Equals(0.0),
        ));
    }
    if let (Some((refs, _)), Some(r)) = (&raw, &on_etcd) {
        out.extend(floor_figures(
            S,
            "updates/s",
            &r.runs,
            refs,
            "raw etcd CAS",
            Goal::RatioAtLeast(0.85),
        ));
        out.push(Figure::new(
            S,
            "bare etcd proxy CPU µs per update",
            refs.proxy.cpu_us(),
            Goal::Info,
        ));
    }
    if let Some((_, conflicts)) = raw {
        out.push(Figure::new(
            S,
            "raw etcd CAS failed compares",
            conflicts as f64,
            Goal::Info,
        ));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// 5. WATCH

/// What one watcher saw.
pub(crate) struct WatcherReport {
    pub(crate) events: u64,
    pub(crate) in_order: bool,
    pub(crate) hist: hdrhistogram::Histogram<u64>,
    pub(crate) error: Option<String>,
}

/// Reads a watch stream until it has the number of events published on
/// `total` once the writer is done, giving up 30 s after that.
pub(crate) async fn read_watch(
    resp: http::Response<hyper::body::Incoming>,
    mut total: tokio::sync::watch::Receiver<Option<u64>>,
) -> WatcherReport {
    let grace = Duration::from_secs(30);
    let mut deadline = tokio::time::Instant::now() + Duration::from_secs(24 * 3600);
    let mut rep = WatcherReport {
        events: 0,
        in_order: true,
        hist: load::histogram(),
        error: None,
    };
    let mut body = resp.into_body();
    let mut buf: Vec<u8> = Vec::new();
    let mut last_rv = 0u64;
    let mut expected: Option<u64> = *total.borrow();
    loop {
        if let Some(e) = expected
            && rep.events >= e
        {
            return rep;
        }
        let frame = tokio::select! {
            f = body.frame() => f,
            changed = total.changed(), if expected.is_none() => {
                if changed.is_ok() {
                    expected = *total.borrow();
                    deadline = tokio::time::Instant::now() + grace;
                }
                continue;
            }
            () = tokio::time::sleep_until(deadline) => {
                rep.error = Some("timed out".into());
                return rep;
            }
        };
        let data = match frame {
            Some(Ok(f)) => match f.into_data() {
                Ok(d) => d,
                Err(_) => continue,
            },
            Some(Err(e)) => {
                rep.error = Some(e.to_string());
                return rep;
            }
            None => {
                rep.error = Some("stream ended".into());
                return rep;
            }
        };
        let now = now_nanos();
        buf.extend_from_slice(&data);
        let mut start = 0;
        while let Some(nl) = memchr::memchr(b'\n', &buf[start..]) {
            let line = &buf[start..start + nl];
            start += nl + 1;
            if find_str(line, "type") == Some("BOOKMARK") {
                continue;
            }
            let rv: u64 = find_str(line, "resourceVersion")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if rv <= last_rv {
                rep.in_order = false;
            }
            last_rv = rv;
            rep.events += 1;
            if let Some(sent) = find_str(line, "bench/sent").and_then(|s| s.parse::<u128>().ok()) {
                let micros = (now.saturating_sub(sent) / 1000) as u64;
                let _ = rep.hist.record(micros.max(1));
            }
        }
        buf.drain(..start);
    }
}

/// The figures of one watch run.
struct WatchRun {
    writes: u64,
    write_rate: f64,
    complete: u64,
    out_of_order: u64,
    hist: hdrhistogram::Histogram<u64>,
    rss_growth_mib: f64,
    stalled_dropped: bool,
    server_cpu: f64,
    bench_cpu: f64,
    first_error: Option<String>,
}

async fn watch_once(settings: &Settings) -> anyhow::Result<WatchRun> {
    let f = fresh(settings, &Backend::Embedded).await?;
    let target = &f.server.target;
    let ns = "kube-public";
    let path = collection(ns);
    let mut conn = Conn::connect(target).await?;
    let list = conn.get(&format!("{path}?limit=1")).await?.ok()?;
    let rv = find_str(&list, "resourceVersion")
        .context("list has no resourceVersion")?
        .to_string();
    let watch_path = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=3600");
    let rss_before = f.server.rss()?;
    let terminated_before = terminated_watchers(&mut conn).await?;

    let (total_tx, total_rx) = tokio::sync::watch::channel(None::<u64>);
    let streams = open_watches(target, &watch_path, settings.watchers, 32).await?;
    // The stalled watcher: a tiny receive buffer, never read until the end.
    let mut stalled_conn = Conn::connect_with(target, Some(4096)).await?;
    let stalled = stalled_conn
        .send_streaming(Method::GET, &watch_path, None)
        .await?;
    progress!(
        "  {} watchers open (+1 stalled); writing {}/s for {:?}",
        streams.len(),
        settings.watch_write_rate,
        settings.watch_duration
    );

    let readers: Vec<_> = streams
        .into_iter()
        .map(|(conn, resp)| {
            let total_rx = total_rx.clone();
            tokio::spawn(async move {
                let _conn = conn;
                read_watch(resp, total_rx).await
            })
        })
        .collect();

    // The writer: 20 connections, each creating objects at rate/20 (open
    // enough that a slow write does not lower the rate; missed ticks are
    // caught up).
    let writers = 20u32;
    let pid = f.server.pid()?.to_string();
    let cpu_server_0 = crate::procs::cpu_seconds(&pid)?;
    let cpu_self_0 = crate::procs::cpu_seconds("self")?;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let target = target.clone();
        let path = path.clone();
        let period =
            Duration::from_secs_f64(f64::from(writers) / f64::from(settings.watch_write_rate));
        let duration = settings.watch_duration;
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(&target).await?;
            let mut tick = tokio::time::interval(period);
            let (mut ok, mut failed) = (0u64, 0u64);
            let mut first_error = None;
            let end = Instant::now() + duration;
            let mut i = 0;
            while Instant::now() < end {
                tick.tick().await;
                i += 1;
                let body = flunder(
                    &format!("w{w}-{i}"),
                    0,
                    &[("bench/sent", now_nanos().to_string())],
                );
                match conn
                    .send(Method::POST, &path, Some(body))
                    .await
                    .and_then(|r| r.ok())
                {
                    Ok(_) => ok += 1,
                    Err(e) => {
                        failed += 1;
                        first_error.get_or_insert_with(|| format!("{e:#}"));
                        if conn.is_closed() {
                            conn = Conn::connect(&target).await?;
                        }
                    }
                }
            }
            anyhow::Ok((ok, failed, first_error))
        }));
    }
    let mut writes = 0;
    let mut first_error = None;
    for t in tasks {
        let (ok, failed, err) = t.await??;
        writes += ok;
        if failed > 0 {
            first_error = first_error.or(err);
        }
    }
    let write_secs = started.elapsed().as_secs_f64();
    let write_rate = writes as f64 / write_secs;
    let server_cpu = (crate::procs::cpu_seconds(&pid)? - cpu_server_0) / write_secs;
    let bench_cpu = (crate::procs::cpu_seconds("self")? - cpu_self_0) / write_secs;
    let _ = total_tx.send(Some(writes));
    let mut complete = 0;
    let mut out_of_order = 0;
    let mut hist = load::histogram();
    // Readers get 30 s after the last write to catch up.
    let rss_after_writes = f.server.rss()?;
    for r in readers {
        let rep = r.await?;
        if rep.events == writes && rep.in_order {
            complete += 1;
        }
        if !rep.in_order {
            out_of_order += 1;
        }
        if let Some(e) = rep.error
            && first_error.is_none()
        {
            first_error = Some(format!(
                "watcher: {e} after {} of {writes} events",
                rep.events
            ));
        }
        let _ = hist.add(&rep.hist);
    }
    // The stalled watcher cannot have all events buffered in 4 KiB + the
    // server's queue: the server must have dropped it. Its own count of
    // dropped watchers says so exactly; a dropped watcher that did not get
    // every event is not complete, so more drops than incomplete watchers
    // include the stalled one. (Reading the stalled stream to its end, as
    // this check did before, depends on how soon TCP reopens a zero window.)
    let dropped = terminated_watchers(&mut Conn::connect(target).await?)
        .await?
        .saturating_sub(terminated_before);
    let stalled_dropped = dropped > (settings.watchers as u64).saturating_sub(complete);
    let mut body = stalled.into_body();
    let mut stalled_events = 0u64;
    let stream_ended = loop {
        match tokio::time::timeout(Duration::from_secs(1), body.frame()).await {
            Err(_) => break false,
            Ok(None) | Ok(Some(Err(_))) => break true,
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    stalled_events += memchr::memchr_iter(b'\n', &d).count() as u64;
                }
            }
        }
    };
    progress!(
        "  writes {writes} ({write_rate:.0}/s; CPU cores busy: server {server_cpu:.2}, bench {bench_cpu:.2}); complete watchers {complete}/{}; watchers dropped by the server: {dropped}; stalled watcher got {stalled_events} events, its stream ended: {stream_ended}",
        settings.watchers
    );
    drop(stalled_conn);
    Ok(WatchRun {
        writes,
        write_rate,
        complete,
        out_of_order,
        hist,
        rss_growth_mib: (rss_after_writes as f64 - rss_before as f64) / MIB,
        stalled_dropped,
        server_cpu,
        bench_cpu,
        first_error,
    })
}

/// The server's `apiserver_terminated_watchers_total` for Flunders (0
/// before it first drops one).
async fn terminated_watchers(conn: &mut Conn) -> anyhow::Result<u64> {
    const SERIES: &str =
        "apiserver_terminated_watchers_total{resource=\"flunders.wardle.example.com\"} ";
    let body = conn.get("/metrics").await?.ok()?;
    let text = std::str::from_utf8(&body).context("/metrics is not UTF-8")?;
    match text.lines().find_map(|l| l.strip_prefix(SERIES)) {
        Some(v) => Ok(v.trim().parse::<f64>().context("counter value")? as u64),
        None => Ok(0),
    }
}

/// Opens `n` watches of `watch_path`, each on its own connection, at most
/// `concurrency` being set up at a time; each with its connection.
pub(crate) async fn open_watches(
    target: &Target,
    watch_path: &str,
    n: usize,
    concurrency: usize,
) -> anyhow::Result<Vec<(Conn, http::Response<hyper::body::Incoming>)>> {
    let open = Arc::new(Semaphore::new(concurrency));
    let mut opened = Vec::with_capacity(n);
    for _ in 0..n {
        let target = target.clone();
        let open = open.clone();
        let watch_path = watch_path.to_string();
        opened.push(tokio::spawn(async move {
            let permit = open.acquire_owned().await?;
            let mut conn = Conn::connect(&target).await?;
            let resp = conn.send_streaming(Method::GET, &watch_path, None).await?;
            drop(permit);
            if resp.status() != StatusCode::OK {
                bail!("watch answered {}", resp.status());
            }
            anyhow::Ok((conn, resp))
        }));
    }
    let mut streams = Vec::with_capacity(n);
    for t in opened {
        streams.push(t.await??);
    }
    Ok(streams)
}

/// Watches per HTTP/2 connection in the idle-watches scenario (the
/// server allows 200 concurrent streams per connection).
const H2_WATCHES_PER_CONNECTION: usize = 100;

/// Many idle watches: the server's RSS growth per watch once they are
/// open, its CPU while they idle, and one write delivered to every one of
/// them. Twice, on fresh servers: one HTTP/1.1 connection per watch
/// (kube-rs; the worst case), then HTTP/2 streams, 100 per connection
/// (client-go and kubectl negotiate HTTP/2 and share a connection).
pub(crate) async fn idle_watches(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    let mut figures = idle_watches_over(settings, false).await?;
    figures.extend(idle_watches_over(settings, true).await?);
    Ok(figures)
}

async fn idle_watches_over(settings: &Settings, http2: bool) -> anyhow::Result<Vec<Figure>> {
    let idle = settings.idle_for;
    let s = if http2 {
        "idle-watches (HTTP/2)"
    } else {
        "idle-watches"
    };
    let n = settings.idle_watchers;
    progress!("{s}: {n} watches, idle for {idle:?}, then one event");
    let f = fresh(settings, &Backend::Embedded).await?;
    let target = &f.server.target;
    let path = collection("kube-public");
    let mut conn = Conn::connect(target).await?;
    let list = conn.get(&format!("{path}?limit=1")).await?.ok()?;
    let rv = find_str(&list, "resourceVersion")
        .context("list has no resourceVersion")?
        .to_string();
    let watch_path = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=3600");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = f.server.rss()?;
    let started = Instant::now();
    // Each HTTP/1.1 response is kept with its connection; the HTTP/2
    // connections are kept until every reader is done.
    let mut h2_conns = Vec::new();
    let streams: Vec<(Option<Conn>, http::Response<hyper::body::Incoming>)> = if http2 {
        let mut opened = Vec::with_capacity(n);
        for first in (0..n).step_by(H2_WATCHES_PER_CONNECTION) {
            let mut conn = crate::client::H2Conn::connect(target).await?;
            for _ in first..(first + H2_WATCHES_PER_CONNECTION).min(n) {
                let resp = conn.get_streaming(&watch_path).await?;
                if resp.status() != StatusCode::OK {
                    bail!("watch answered {}", resp.status());
                }
                opened.push((None, resp));
            }
            h2_conns.push(conn);
        }
        opened
    } else {
        open_watches(target, &watch_path, n, 64)
            .await?
            .into_iter()
            .map(|(conn, resp)| (Some(conn), resp))
            .collect()
    };
    let open_secs = started.elapsed().as_secs_f64();
    let (total_tx, total_rx) = tokio::sync::watch::channel(None::<u64>);
    let readers: Vec<_> = streams
        .into_iter()
        .map(|(conn, resp)| {
            let total_rx = total_rx.clone();
            tokio::spawn(async move {
                let _conn = conn;
                read_watch(resp, total_rx).await
            })
        })
        .collect();
    let pid = f.server.pid()?.to_string();
    let cpu_0 = crate::procs::cpu_seconds(&pid)?;
    tokio::time::sleep(idle).await;
    let idle_cpu = (crate::procs::cpu_seconds(&pid)? - cpu_0) / idle.as_secs_f64();
    let rss_open = f.server.rss()?;
    progress!(
        "  {n} watches opened in {open_secs:.1} s; server RSS {:.0} → {:.0} MiB; CPU cores busy while idle {idle_cpu:.3}",
        rss_before as f64 / MIB,
        rss_open as f64 / MIB
    );
    let body = flunder("idle-1", 0, &[("bench/sent", now_nanos().to_string())]);
    conn.send(Method::POST, &path, Some(body)).await?.ok()?;
    let _ = total_tx.send(Some(1));
    let mut delivered = 0usize;
    let mut first_error = None;
    let mut hist = load::histogram();
    for r in readers {
        let rep = r.await?;
        if rep.events == 1 {
            delivered += 1;
        }
        if let Some(e) = rep.error {
            first_error.get_or_insert(e);
        }
        let _ = hist.add(&rep.hist);
    }
    drop(h2_conns);
    if let Some(e) = first_error {
        progress!("  first watcher error: {e}");
    }
    let growth_mib = rss_open.saturating_sub(rss_before) as f64 / MIB;
    Ok(vec![
        Figure::new(s, "watches open", n as f64, Goal::Info),
        Figure::new(
            s,
            "watches opened per second",
            n as f64 / open_secs,
            Goal::Info,
        ),
        Figure::new(s, "server RSS growth MiB", growth_mib, Goal::Info),
        Figure::new(
            s,
            "server RSS growth per watch KiB",
            growth_mib * 1024.0 / n as f64,
            Goal::AtMost(16.0),
        ),
        Figure::new(
            s,
            "server CPU cores busy while idle",
            idle_cpu,
            Goal::AtMost(0.05),
        ),
        Figure::new(
            s,
            "watches that got the next event",
            delivered as f64,
            Goal::Equals(n as f64),
        ),
        Figure::new(
            s,
            "event to every watch: latency p99 ms",
            hist.value_at_quantile(0.99) as f64 / 1000.0,
            Goal::Info,
        ),
        Figure::new(
            s,
            "event to every watch: latency max ms",
            hist.max() as f64 / 1000.0,
            Goal::Info,
        ),
    ])
}

/// Fewer events than this cannot overflow what a stalled watcher's events
/// fill up: apiforge's queue of 1,024 events per watcher, hyper's and
/// rustls's buffers and the 128 KiB of unsent data the kernel holds per
/// connection (`TCP_NOTSENT_LOWAT`); with this scenario's small events
/// the server drops the watcher after ~1,800.
const STALL_MIN_EVENTS: u64 = 2_000;

pub(crate) async fn watch(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    const S: &str = "watch";
    progress!(
        "{S}: {} watchers, {} writes/s for {:?}",
        settings.watchers,
        settings.watch_write_rate,
        settings.watch_duration
    );
    let mut runs = Vec::new();
    for i in 0..settings.repeats {
        let r = watch_once(settings).await?;
        if let Some(e) = &r.first_error {
            progress!("  run {}: first error: {e}", i + 1);
        }
        runs.push(r);
    }
    let med = |f: &dyn Fn(&WatchRun) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let min_complete = runs.iter().map(|r| r.complete).min().unwrap_or(0);
    let watchers = settings.watchers as f64;
    Ok(vec![
        Figure::new(
            S,
            "writes/s achieved",
            med(&|r| r.write_rate),
            Goal::AtLeast(f64::from(settings.watch_write_rate) * 0.95),
        ),
        Figure::new(
            S,
            "events per watcher (writes)",
            med(&|r| r.writes as f64),
            Goal::Info,
        ),
        Figure::new(
            S,
            "watchers with every event in order (worst run)",
            min_complete as f64,
            Goal::Equals(watchers),
        ),
        Figure::new(
            S,
            "watchers out of order",
            runs.iter().map(|r| r.out_of_order).sum::<u64>() as f64,
            Goal::Equals(0.0),
        ),
        Figure::new(
            S,
            "delivery latency p50 ms",
            med(&|r| r.hist.value_at_quantile(0.5) as f64 / 1000.0),
            Goal::Info,
        ),
        Figure::new(
            S,
            "delivery latency p99 ms",
            med(&|r| r.hist.value_at_quantile(0.99) as f64 / 1000.0),
            Goal::AtMost(250.0),
        ),
        Figure::new(
            S,
            "delivery latency max ms",
            med(&|r| r.hist.max() as f64 / 1000.0),
            Goal::Info,
        ),
        Figure::new(
            S,
            "server RSS growth MiB",
            med(&|r| r.rss_growth_mib),
            Goal::Info,
        ),
        Figure::new(
            S,
            "server RSS growth per watcher KiB",
            med(&|r| r.rss_growth_mib) * 1024.0 / watchers,
            Goal::AtMost(16.0),
        ),
        Figure::new(
            S,
            "server CPU cores busy while writing",
            med(&|r| r.server_cpu),
            Goal::Info,
        ),
        Figure::new(
            S,
            "bench CPU cores busy while writing",
            med(&|r| r.bench_cpu),
            Goal::Info,
        ),
        Figure::new(
            S,
            "stalled watcher dropped (runs)",
            runs.iter().filter(|r| r.stalled_dropped).count() as f64,
            // The server closes a watcher whose queue (1,024 events) is full,
            // after the socket buffers filled: fewer writes cannot trigger it.
            if runs.iter().all(|r| r.writes > STALL_MIN_EVENTS) {
                Goal::Equals(runs.len() as f64)
            } else {
                Goal::Info
            },
        ),
    ])
}

// ---------------------------------------------------------------------------
// 6. start-up and 7. memory

pub(crate) async fn startup_memory(
    settings: &Settings,
    startup: bool,
    memory: bool,
) -> anyhow::Result<Vec<Figure>> {
    let mut out = Vec::new();
    if startup {
        const S: &str = "startup";
        progress!("{S}: spawn to /readyz 200, empty embedded store");
        let mut times = Vec::new();
        for _ in 0..settings.repeats {
            let f = fresh(settings, &Backend::Embedded).await?;
            times.push(f.server.startup.as_secs_f64() * 1000.0);
        }
        progress!("  empty: {times:.1?} ms");
        out.push(Figure::new(
            S,
            "empty store ms",
            median(&times),
            Goal::AtMost(30.0),
        ));
    }
    let n = settings.big_objects;
    progress!("memory: populating {n} objects of ~1 KiB with 64 clients");
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("data");
    let mut server = Apiforge::start(&settings.binary, &dir, &Backend::Embedded).await?;
    let pad = pad_for_1kib(&server.target, "default").await?;
    let (json_bytes, rate) = populate(&server.target, "default", "m-", n, pad).await?;
    progress!(
        "  populated {n} objects ({:.1} MiB JSON) at {rate:.0} creates/s",
        json_bytes as f64 / MIB
    );
    if memory {
        const S: &str = "memory";
        // RSS right after the writes, then after one full list (which
        // memoizes every object's encoding) and a moment to settle.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rss_written = server.rss()? as f64 / MIB;
        let mut conn = Conn::connect(&server.target).await?;
        let list = conn.get(&collection("default")).await?.ok()?;
        drop(list);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rss = server.rss()? as f64 / MIB;
        let json_mib = json_bytes as f64 / MIB;
        out.push(Figure::new(
            S,
            &format!("total JSON of {n} objects MiB"),
            json_mib,
            Goal::Info,
        ));
        out.push(Figure::new(
            S,
            "populate creates/s (64 clients)",
            rate,
            Goal::Info,
        ));
        out.push(Figure::new(
            S,
            "RSS after populating, before any read MiB",
            rss_written,
            Goal::AtMost(1.5 * json_mib + 40.0),
        ));
        out.push(Figure::new(
            S,
            "RSS after populating and one full list MiB",
            rss,
            Goal::AtMost(1.5 * json_mib + 40.0),
        ));
        server.kill();
        let restarted = Apiforge::start(&settings.binary, &dir, &Backend::Embedded).await?;
        out.push(Figure::new(
            S,
            "RSS after restart MiB",
            restarted.rss()? as f64 / MIB,
            Goal::AtMost(1.5 * json_mib + 40.0),
        ));
        // The watch cache loads at start-up (`/readyz` does not wait for
        // it, as kube-apiserver's); the first list waits until it is
        // loaded.
        let mut conn = Conn::connect(&restarted.target).await?;
        drop(conn.get(&collection("default")).await?.ok()?);
        tokio::time::sleep(Duration::from_secs(1)).await;
        out.push(Figure::new(
            S,
            "RSS after restart and one full list MiB",
            restarted.rss()? as f64 / MIB,
            Goal::AtMost(1.5 * json_mib + 40.0),
        ));
    }
    server.kill();
    if startup {
        const S: &str = "startup";
        let mut times = Vec::new();
        for _ in 0..settings.repeats {
            let mut s = Apiforge::start(&settings.binary, &dir, &Backend::Embedded).await?;
            times.push(s.startup.as_secs_f64() * 1000.0);
            s.kill();
        }
        progress!("  with {n} objects: {times:.1?} ms");
        out.push(Figure::new(
            S,
            &format!("{n} objects ms"),
            median(&times),
            Goal::AtMost(300.0),
        ));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// garbage collection

/// Dependents per owner in the garbage-collection scenario.
const GC_DEPENDENTS: usize = 1_000;

/// Creates a ConfigMap `name` in `default` with `owner` (name, uid) as its
/// owner (blocking when `block`); returns its uid.
async fn gc_configmap(
    conn: &mut Conn,
    name: &str,
    owner: Option<(&str, &str)>,
    block: bool,
) -> anyhow::Result<String> {
    let mut meta = json!({"name": name, "labels": {"bench-gc": "true"}});
    if let Some((owner, uid)) = owner {
        meta["ownerReferences"] = json!([{
            "apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid,
            "blockOwnerDeletion": block,
        }]);
        meta["labels"]["bench-gc-owner"] = json!(owner);
    }
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}});
    let reply = conn
        .send(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            Some(Bytes::from(serde_json::to_vec(&body)?)),
        )
        .await?
        .ok()
        .with_context(|| format!("creating configmap {name}"))?;
    let created: Value = serde_json::from_slice(&reply)?;
    created
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map(str::to_string)
        .context("created configmap without uid")
}

/// How many dependents of `owner` are left.
async fn gc_remaining(conn: &mut Conn, owner: &str) -> anyhow::Result<usize> {
    let body = conn
        .get(&format!(
            "/api/v1/namespaces/default/configmaps?labelSelector=bench-gc-owner%3D{owner}"
        ))
        .await?
        .ok()?;
    let list: Value = serde_json::from_slice(&body)?;
    Ok(list
        .get("items")
        .and_then(Value::as_array)
        .map_or(0, Vec::len))
}

/// One run: an owner with `count` dependents (created with 64
/// connections), deleted with `policy`; returns the milliseconds from the
/// DELETE to the last dependent (and, in the foreground, the owner) gone.
async fn gc_once(target: &Target, owner: &str, policy: &str, count: usize) -> anyhow::Result<f64> {
    let mut conn = Conn::connect(target).await?;
    let uid = gc_configmap(&mut conn, owner, None, false).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..64.min(count) {
        let (target, next, owner, uid) =
            (target.clone(), next.clone(), owner.to_string(), uid.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(&target).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return anyhow::Ok(());
                }
                gc_configmap(
                    &mut conn,
                    &format!("{owner}-{i}"),
                    Some((&owner, &uid)),
                    true,
                )
                .await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    // Let the collector's informers see the dependents.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy});
    let started = Instant::now();
    conn.send(
        Method::DELETE,
        &format!("/api/v1/namespaces/default/configmaps/{owner}"),
        Some(Bytes::from(serde_json::to_vec(&body)?)),
    )
    .await?
    .ok()
    .context("deleting the owner")?;
    let deadline = started + Duration::from_secs(120);
    loop {
        let left = gc_remaining(&mut conn, owner).await?;
        let owner_left = conn
            .get(&format!("/api/v1/namespaces/default/configmaps/{owner}"))
            .await?
            .status
            != StatusCode::NOT_FOUND;
        if left == 0 && !owner_left {
            return Ok(started.elapsed().as_secs_f64() * 1000.0);
        }
        if Instant::now() > deadline {
            bail!("{left} of {count} dependents left after 120 s ({policy})");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn gc_on(settings: &Settings, backend: &Backend) -> anyhow::Result<Vec<Figure>> {
    const S: &str = "gc";
    let f = fresh(settings, backend).await?;
    // Warm-up: the collector starts once it holds its Lease and its graph
    // is synced, a moment after /readyz.
    gc_once(&f.server.target, "gc-warmup", "Background", 1).await?;
    let mut out = Vec::new();
    for policy in ["Background", "Foreground"] {
        let mut times = Vec::new();
        for run in 0..settings.repeats {
            let owner = format!("gc-{}-{run}", policy.to_lowercase());
            times.push(gc_once(&f.server.target, &owner, policy, GC_DEPENDENTS).await?);
        }
        progress!("  {} {policy}: {times:.0?} ms", backend.name());
        out.push(Figure::new(
            S,
            &format!(
                "{} {policy} delete to last of {GC_DEPENDENTS} dependents gone ms",
                backend.name()
            ),
            median(&times),
            Goal::AtMost(30_000.0),
        ));
    }
    Ok(out)
}

/// The garbage collector: from an owner's DELETE to the last of its 1,000
/// dependents gone, in the background and in the foreground (median of
/// the runs), on the embedded store and on etcd.
pub(crate) async fn gc(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    progress!("gc: owner DELETE to the last of {GC_DEPENDENTS} dependents gone");
    let mut out = gc_on(settings, &Backend::Embedded).await?;
    if settings.etcd {
        let etcd = Etcd::start().await?;
        out.extend(gc_on(settings, &Backend::Etcd(etcd.url.clone())).await?);
    }
    Ok(out)
}
