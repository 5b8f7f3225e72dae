//! The server's Prometheus metrics (names and labels as kube-apiserver's),
//! rendered in the Prometheus text format (0.0.4) at `/metrics`.
//!
//! The metrics are process-wide (as Go's default registry): filters,
//! handlers and storage record into [`global`].

use std::sync::LazyLock;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// `request_kind` of read-only requests.
pub const READ_ONLY: &str = "readOnly";
/// `request_kind` of mutating requests.
pub const MUTATING: &str = "mutating";

/// The `Content-Type` of `/metrics`.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Request duration buckets (kube-apiserver's `apiserver_request_duration_seconds`).
const REQUEST_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];
/// Storage request duration buckets (`etcd_request_duration_seconds`).
const STORAGE_BUCKETS: [f64; 21] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0,
];

const REQUEST_LABELS: [&str; 8] = [
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];

/// The metrics.
pub struct Metrics {
    registry: Registry,
    /// `apiserver_request_total`.
    pub request_total: IntCounterVec,
    /// `apiserver_request_duration_seconds`.
    pub request_duration: HistogramVec,
    /// `apiserver_current_inflight_requests{request_kind}`.
    pub current_inflight_requests: IntGaugeVec,
    /// `apiserver_longrunning_requests`.
    pub longrunning_requests: IntGaugeVec,
    /// `apiserver_registered_watchers{group,version,kind}`.
    pub registered_watchers: IntGaugeVec,
    /// `apiserver_storage_objects{resource}` (set when scraped).
    pub storage_objects: IntGaugeVec,
    /// `apiserver_terminated_watchers_total{resource}`: watchers the watch
    /// cache closed because they fell too far behind.
    pub terminated_watchers: IntCounterVec,
    /// `etcd_request_duration_seconds{operation,type}`: storage calls, for
    /// either backend.
    pub storage_request_duration: HistogramVec,
    /// `apiserver_flowcontrol_dispatched_requests_total{priority_level,flow_schema}`.
    pub flowcontrol_dispatched: IntCounterVec,
    /// `apiserver_flowcontrol_rejected_requests_total{priority_level,flow_schema,reason}`.
    pub flowcontrol_rejected: IntCounterVec,
    /// `apiserver_flowcontrol_current_inqueue_requests{priority_level,flow_schema}`.
    pub flowcontrol_inqueue: IntGaugeVec,
    /// `apiserver_flowcontrol_current_executing_requests{priority_level,flow_schema}`.
    pub flowcontrol_executing: IntGaugeVec,
    /// `apiserver_admission_webhook_admission_duration_seconds{name,type,operation,rejected}`.
    pub webhook_duration: HistogramVec,
    /// `apiserver_admission_webhook_rejection_count{name,type,operation,error_type,rejection_code}`.
    pub webhook_rejections: IntCounterVec,
    /// `apiserver_admission_webhook_fail_open_count{name,type}`.
    pub webhook_fail_open: IntCounterVec,
}

fn build() -> Result<Metrics, prometheus::Error> {
    let registry = Registry::new();
    let mut counter_labels = REQUEST_LABELS.to_vec();
    counter_labels.push("code");
    let request_total = IntCounterVec::new(
        Opts::new(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
        ),
        &counter_labels,
    )?;
    let request_duration = HistogramVec::new(
        HistogramOpts::new(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
        )
        .buckets(REQUEST_BUCKETS.to_vec()),
        &REQUEST_LABELS,
    )?;
    let current_inflight_requests = IntGaugeVec::new(
        Opts::new(
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
        ),
        &["request_kind"],
    )?;
    let longrunning_requests = IntGaugeVec::new(
        Opts::new(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
        ),
        &REQUEST_LABELS
            .iter()
            .copied()
            .filter(|l| *l != "dry_run")
            .collect::<Vec<_>>(),
    )?;
    let registered_watchers = IntGaugeVec::new(
        Opts::new(
            "apiserver_registered_watchers",
            "Number of currently registered watchers for a given resources",
        ),
        &["group", "version", "kind"],
    )?;
    let storage_objects = IntGaugeVec::new(
        Opts::new(
            "apiserver_storage_objects",
            "Number of stored objects at the time of last check split by kind.",
        ),
        &["resource"],
    )?;
    let terminated_watchers = IntCounterVec::new(
        Opts::new(
            "apiserver_terminated_watchers_total",
            "Counter of watchers closed due to unresponsiveness broken by resource type.",
        ),
        &["resource"],
    )?;
    let storage_request_duration = HistogramVec::new(
        HistogramOpts::new(
            "etcd_request_duration_seconds",
            "Etcd request latency in seconds for each operation and object type.",
        )
        .buckets(STORAGE_BUCKETS.to_vec()),
        &["operation", "type"],
    )?;
    let flow_labels = ["priority_level", "flow_schema"];
    let flowcontrol_dispatched = IntCounterVec::new(
        Opts::new(
            "apiserver_flowcontrol_dispatched_requests_total",
            "Number of requests executed by API Priority and Fairness subsystem",
        ),
        &flow_labels,
    )?;
    let flowcontrol_rejected = IntCounterVec::new(
        Opts::new(
            "apiserver_flowcontrol_rejected_requests_total",
            "Number of requests rejected by API Priority and Fairness subsystem",
        ),
        &["priority_level", "flow_schema", "reason"],
    )?;
    let flowcontrol_inqueue = IntGaugeVec::new(
        Opts::new(
            "apiserver_flowcontrol_current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
        ),
        &flow_labels,
    )?;
    let flowcontrol_executing = IntGaugeVec::new(
        Opts::new(
            "apiserver_flowcontrol_current_executing_requests",
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
        ),
        &flow_labels,
    )?;
    let webhook_duration = HistogramVec::new(
        HistogramOpts::new(
            "apiserver_admission_webhook_admission_duration_seconds",
            "Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
        )
        .buckets(vec![0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0]),
        &["name", "type", "operation", "rejected"],
    )?;
    let webhook_rejections = IntCounterVec::new(
        Opts::new(
            "apiserver_admission_webhook_rejection_count",
            "Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify an error type (calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code is greater or equal to 400). Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
        ),
        &["name", "type", "operation", "error_type", "rejection_code"],
    )?;
    let webhook_fail_open = IntCounterVec::new(
        Opts::new(
            "apiserver_admission_webhook_fail_open_count",
            "Admission webhook fail open count, identified by name and broken out for each admission type (validating or mutating).",
        ),
        &["name", "type"],
    )?;
    registry.register(Box::new(webhook_duration.clone()))?;
    registry.register(Box::new(webhook_rejections.clone()))?;
    registry.register(Box::new(webhook_fail_open.clone()))?;
    registry.register(Box::new(flowcontrol_dispatched.clone()))?;
    registry.register(Box::new(flowcontrol_rejected.clone()))?;
    registry.register(Box::new(flowcontrol_inqueue.clone()))?;
    registry.register(Box::new(flowcontrol_executing.clone()))?;
    registry.register(Box::new(request_total.clone()))?;
    registry.register(Box::new(request_duration.clone()))?;
    registry.register(Box::new(current_inflight_requests.clone()))?;
    registry.register(Box::new(longrunning_requests.clone()))?;
    registry.register(Box::new(registered_watchers.clone()))?;
    registry.register(Box::new(storage_objects.clone()))?;
    registry.register(Box::new(terminated_watchers.clone()))?;
    registry.register(Box::new(storage_request_duration.clone()))?;
    for kind in [READ_ONLY, MUTATING] {
        current_inflight_requests.with_label_values(&[kind]).set(0);
    }
    Ok(Metrics {
        registry,
        request_total,
        request_duration,
        current_inflight_requests,
        longrunning_requests,
        registered_watchers,
        storage_objects,
        terminated_watchers,
        storage_request_duration,
        flowcontrol_dispatched,
        flowcontrol_rejected,
        flowcontrol_inqueue,
        flowcontrol_executing,
        webhook_duration,
        webhook_rejections,
        webhook_fail_open,
    })
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| match build() {
    Ok(m) => m,
    // The descriptors above are constants: a failure is a programming error.
    Err(e) => panic!("invalid metric descriptors: {e}"),
});

/// The process-wide metrics.
pub fn global() -> &'static Metrics {
    &METRICS
}

/// Decrements a gauge when dropped.
pub struct GaugeGuard(IntGauge);

impl GaugeGuard {
    /// Increments `gauge` until the guard is dropped.
    pub fn new(gauge: IntGauge) -> Self {
        gauge.inc();
        GaugeGuard(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Records storage call durations into [`global`]'s
/// `etcd_request_duration_seconds`.
pub struct StorageObserver;

impl apiforge_storage::metered::Observer for StorageObserver {
    fn observe(&self, operation: &str, resource: &str, seconds: f64) {
        global().observe_storage(operation, resource, seconds);
    }
}

impl Metrics {
    /// The in-flight gauge of `request_kind`.
    pub fn current_inflight(&self, kind: &str) -> IntGauge {
        self.current_inflight_requests.with_label_values(&[kind])
    }

    /// Observes one storage call.
    pub fn observe_storage(&self, operation: &str, ty: &str, seconds: f64) {
        self.storage_request_duration
            .with_label_values(&[operation, ty])
            .observe(seconds);
    }

    /// Everything, in the Prometheus text format, process metrics included.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        let mut out = String::from_utf8(buf).unwrap_or_default();
        process::render(&mut out);
        out
    }
}

/// Process metrics from `/proc` (client_golang's process collector).
mod process {
    use std::fmt::Write;

    /// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`,
    /// 100 on every Linux architecture Rust targets).
    const TICKS: f64 = 100.0;

    fn family(out: &mut String, name: &str, ty: &str, help: &str, value: f64) {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {ty}\n{name} {value}"
        );
    }

    fn boot_time() -> Option<f64> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        stat.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse().ok())
    }

    pub(super) fn render(out: &mut String) {
        let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
            return;
        };
        // Fields after the parenthesised command name, which may hold spaces.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            return;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3 (state): field N is fields[N - 3].
        let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
        if let (Some(utime), Some(stime)) = (field(14), field(15)) {
            family(
                out,
                "process_cpu_seconds_total",
                "counter",
                "Total user and system CPU time spent in seconds.",
                (utime + stime) / TICKS,
            );
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            family(
                out,
                "process_open_fds",
                "gauge",
                "Number of open file descriptors.",
                fds.count() as f64,
            );
        }
        if let Some(max) = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| {
                l.lines()
                    .find(|l| l.starts_with("Max open files"))
                    .and_then(|l| l.split_whitespace().nth(3))
                    .and_then(|v| v.parse::<f64>().ok())
            })
        {
            family(
                out,
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
                max,
            );
        }
        if let Some(rss_kib) = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<f64>().ok())
            })
        {
            family(
                out,
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                rss_kib * 1024.0,
            );
        }
        if let Some(vsize) = field(23) {
            family(
                out,
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size in bytes.",
                vsize,
            );
        }
        if let (Some(start), Some(boot)) = (field(22), boot_time()) {
            family(
                out,
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                boot + start / TICKS,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_text_format_with_process_metrics() {
        global()
            .request_total
            .with_label_values(&[
                "GET",
                "",
                "",
                "v1",
                "pods",
                "",
                "resource",
                "apiserver",
                "200",
            ])
            .inc();
        let text = global().render();
        assert!(
            text.contains("# TYPE apiserver_request_total counter"),
            "{text}"
        );
        assert!(text.contains("apiserver_current_inflight_requests{request_kind=\"readOnly\"} 0"));
        for name in [
            "process_cpu_seconds_total",
            "process_open_fds",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
        ] {
            assert!(
                text.contains(&format!("\n{name} ")),
                "{name} missing:\n{text}"
            );
        }
    }
}
