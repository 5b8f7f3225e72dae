//! Closed-loop load: N keep-alive connections, each a task sending
//! requests back to back for a fixed duration, latencies in an HDR
//! histogram.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use tokio::sync::Barrier;

use crate::client::{Conn, Target};

/// One kind of request a load worker repeats.
pub(crate) trait Op: Send + Sync + 'static {
    /// Sends one request on `conn` for worker `worker`; returns the number
    /// of response bytes.
    fn call(
        &self,
        worker: usize,
        conn: &mut Conn,
    ) -> impl Future<Output = anyhow::Result<u64>> + Send;
}

/// A new latency histogram (microseconds, 1 µs .. 1 h, 3 digits).
pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

/// What one load run measured.
pub(crate) struct LoadResult {
    /// Successful requests.
    pub(crate) requests: u64,
    /// Failed requests.
    pub(crate) errors: u64,
    /// Response bytes of successful requests.
    pub(crate) bytes: u64,
    /// Wall time of the run.
    pub(crate) elapsed: Duration,
    /// Latencies of successful requests (µs).
    pub(crate) hist: Histogram<u64>,
    /// The first error seen.
    pub(crate) first_error: Option<String>,
}

impl LoadResult {
    /// Successful requests per second.
    pub(crate) fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// Response bytes per second.
    pub(crate) fn byte_rate(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64()
    }

    /// A latency quantile in milliseconds.
    pub(crate) fn quantile_ms(&self, q: f64) -> f64 {
        self.hist.value_at_quantile(q) as f64 / 1000.0
    }

    /// The maximum latency in milliseconds.
    pub(crate) fn max_ms(&self) -> f64 {
        self.hist.max() as f64 / 1000.0
    }
}

/// Runs `op` on `conns` connections for `duration`.
pub(crate) async fn run<O: Op>(
    target: &Target,
    conns: usize,
    duration: Duration,
    op: Arc<O>,
) -> anyhow::Result<LoadResult> {
    let mut connections = Vec::with_capacity(conns);
    for _ in 0..conns {
        connections.push(Conn::connect(target).await?);
    }
    let barrier = Arc::new(Barrier::new(conns + 1));
    let mut tasks = Vec::with_capacity(conns);
    for (worker, mut conn) in connections.into_iter().enumerate() {
        let barrier = barrier.clone();
        let op = op.clone();
        let target = target.clone();
        tasks.push(tokio::spawn(async move {
            let mut hist = histogram();
            let (mut requests, mut errors, mut bytes) = (0u64, 0u64, 0u64);
            let mut first_error = None;
            barrier.wait().await;
            let deadline = Instant::now() + duration;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                match op.call(worker, &mut conn).await {
                    Ok(n) => {
                        let _ = hist.record((t0.elapsed().as_micros() as u64).max(1));
                        requests += 1;
                        bytes += n;
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| format!("{e:#}"));
                        if conn.is_closed() {
                            match Conn::connect(&target).await {
                                Ok(c) => conn = c,
                                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                            }
                        }
                    }
                }
            }
            (hist, requests, errors, bytes, first_error)
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut total = LoadResult {
        requests: 0,
        errors: 0,
        bytes: 0,
        elapsed: Duration::ZERO,
        hist: histogram(),
        first_error: None,
    };
    for task in tasks {
        let (hist, requests, errors, bytes, first_error) = task.await?;
        let _ = total.hist.add(&hist);
        total.requests += requests;
        total.errors += errors;
        total.bytes += bytes;
        if total.first_error.is_none() {
            total.first_error = first_error;
        }
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

/// Runs `call(worker)` from `workers` tasks back to back for `duration`
/// (a closed loop without an HTTP connection, e.g. raw etcd requests).
pub(crate) async fn run_fn<F, Fut>(
    workers: usize,
    duration: Duration,
    call: Arc<F>,
) -> anyhow::Result<LoadResult>
where
    F: Fn(usize) -> Fut + Send + Sync + ?Sized + 'static,
    Fut: Future<Output = anyhow::Result<u64>> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(workers + 1));
    let mut tasks = Vec::with_capacity(workers);
    for worker in 0..workers {
        let barrier = barrier.clone();
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut hist = histogram();
            let (mut requests, mut errors, mut bytes) = (0u64, 0u64, 0u64);
            let mut first_error = None;
            barrier.wait().await;
            let deadline = Instant::now() + duration;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                match call(worker).await {
                    Ok(n) => {
                        let _ = hist.record((t0.elapsed().as_micros() as u64).max(1));
                        requests += 1;
                        bytes += n;
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| format!("{e:#}"));
                    }
                }
            }
            (hist, requests, errors, bytes, first_error)
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut total = LoadResult {
        requests: 0,
        errors: 0,
        bytes: 0,
        elapsed: Duration::ZERO,
        hist: histogram(),
        first_error: None,
    };
    for task in tasks {
        let (hist, requests, errors, bytes, first_error) = task.await?;
        let _ = total.hist.add(&hist);
        total.requests += requests;
        total.errors += errors;
        total.bytes += bytes;
        if total.first_error.is_none() {
            total.first_error = first_error;
        }
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

/// The median of `values` (NaN when empty).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Rates and server CPU per request of alternated runs of two ops.
#[derive(Default)]
pub(crate) struct Pair {
    /// Requests per second of each run, per side.
    pub(crate) rate: [Vec<f64>; 2],
    /// Server CPU µs per request of each run, per side.
    pub(crate) cpu_us: [Vec<f64>; 2],
    /// Median latency (ms) of each run, per side.
    pub(crate) p50_ms: [Vec<f64>; 2],
}

/// Runs `a` and `b` alternately (`settings.repeats` times each, after a
/// warm-up of each) with `clients` clients against the server `pid`;
/// `labels` names the pair and its two sides in the progress lines. The
/// order flips every round (a b, b a, a b, …), so that neither side is
/// always the one that runs first.
pub(crate) async fn alternate<A: Op, B: Op>(
    settings: &crate::Settings,
    clients: usize,
    labels: (&str, &str, &str),
    target: &Target,
    pid: &str,
    a: Arc<A>,
    b: Arc<B>,
) -> anyhow::Result<Pair> {
    let (label, side_a, side_b) = labels;
    let mut pair = Pair::default();
    run(target, clients, settings.warmup, a.clone()).await?;
    run(target, clients, settings.warmup, b.clone()).await?;
    for i in 0..settings.repeats {
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let before = crate::procs::cpu_seconds(pid)?;
            let r = if side == 0 {
                run(target, clients, settings.run, a.clone()).await?
            } else {
                run(target, clients, settings.run, b.clone()).await?
            };
            anyhow::ensure!(
                r.errors == 0,
                "{label}: {} errors, first: {}",
                r.errors,
                r.first_error.as_deref().unwrap_or_default()
            );
            let used = crate::procs::cpu_seconds(pid)? - before;
            pair.rate[side].push(r.rate());
            pair.p50_ms[side].push(r.quantile_ms(0.5));
            if r.requests > 0 {
                pair.cpu_us[side].push(used * 1e6 / r.requests as f64);
            }
            crate::progress!(
                "  {label} run {}/{}: {} {:.0} req/s",
                i + 1,
                settings.repeats,
                if side == 0 { side_a } else { side_b },
                r.rate()
            );
        }
    }
    Ok(pair)
}

/// Latencies of two ops sent in turn, request by request, on one
/// connection ([`interleave`]).
pub(crate) struct Interleaved {
    /// The latencies (µs) of each side over every run.
    pub(crate) hist: [Histogram<u64>; 2],
}

impl Interleaved {
    /// Side `side`'s latency quantile in milliseconds.
    pub(crate) fn quantile_ms(&self, side: usize, q: f64) -> f64 {
        self.hist[side].value_at_quantile(q) as f64 / 1000.0
    }
}

/// Sends `a` and `b` in turn on one connection (a, b, a, b, …) for
/// `settings.repeats` runs of `settings.run` after a warm-up, keeping each
/// side's latencies apart. Both sides see the same moment of the machine
/// (the same disk flushes, the same neighbours), so the difference of
/// their quantiles is steadier than one taken between separate runs.
pub(crate) async fn interleave<A: Op, B: Op>(
    settings: &crate::Settings,
    label: &str,
    target: &Target,
    a: &A,
    b: &B,
) -> anyhow::Result<Interleaved> {
    let mut conn = Conn::connect(target).await?;
    let mut out = Interleaved {
        hist: [histogram(), histogram()],
    };
    for round in 0..=settings.repeats {
        // Round 0 is the warm-up; the server closes a connection idle for
        // long, so each round starts on a fresh one.
        if round > 0 {
            conn = Conn::connect(target).await?;
        }
        let duration = if round == 0 {
            settings.warmup
        } else {
            settings.run
        };
        let deadline = Instant::now() + duration;
        let mut pairs = 0u64;
        while Instant::now() < deadline {
            for (side, hist) in out.hist.iter_mut().enumerate() {
                let t0 = Instant::now();
                let result = if side == 0 {
                    a.call(0, &mut conn).await
                } else {
                    b.call(0, &mut conn).await
                };
                result.with_context(|| format!("{label}: side {side}"))?;
                if round > 0 {
                    let _ = hist.record((t0.elapsed().as_micros() as u64).max(1));
                }
            }
            pairs += 1;
        }
        if round > 0 {
            crate::progress!(
                "  {label} run {round}/{}: {pairs} requests each side",
                settings.repeats
            );
        }
    }
    Ok(out)
}
