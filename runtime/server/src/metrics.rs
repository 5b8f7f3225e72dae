//! The server's Prometheus metrics (names and labels as kube-apiserver's),
//! rendered in the Prometheus text format (0.0.4) at `/metrics`.
//!
//! The metrics are process-wide (as Go's default registry): filters,
//! handlers and storage record into [`global`].

use std::sync::LazyLock;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
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
/// `apiserver_request_sli_duration_seconds` buckets: the SLO rules of
/// kubernetes-mixin read the 1, 5 and 30 s buckets.
const SLI_BUCKETS: [f64; 21] = [
    0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0,
    30.0, 45.0, 60.0,
];
/// Storage request duration buckets (`etcd_request_duration_seconds`).
const STORAGE_BUCKETS: [f64; 21] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0,
];
/// Admission plugin and step buckets.
const ADMISSION_BUCKETS: [f64; 6] = [0.005, 0.025, 0.1, 0.5, 1.0, 2.5];
/// API Priority and Fairness wait buckets.
const FLOWCONTROL_WAIT_BUCKETS: [f64; 13] = [
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
];
/// `apiserver_client_certificate_expiration_seconds` buckets: 0 s to a
/// year; the mixin alerts at 1 and 7 days.
const CERTIFICATE_EXPIRATION_BUCKETS: [f64; 14] = [
    0.0, 1800.0, 3600.0, 7200.0, 21600.0, 43200.0, 86400.0, 172800.0, 345600.0, 604800.0,
    2592000.0, 7776000.0, 15552000.0, 31104000.0,
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
/// The request labels without `dry_run` (SLI, response sizes,
/// long-running requests).
const REQUEST_LABELS_NO_DRY_RUN: [&str; 7] = [
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];
const TERMINATION_LABELS: [&str; 8] = [
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
    "code",
];
const GROUP_RESOURCE: [&str; 2] = ["group", "resource"];
const GROUP_VERSION_RESOURCE: [&str; 3] = ["group", "version", "resource"];
const WORKQUEUE: [&str; 1] = ["name"];

/// The metrics.
pub struct Metrics {
    registry: Registry,
    /// `apiserver_request_total`.
    pub request_total: IntCounterVec,
    /// `apiserver_request_duration_seconds`.
    pub request_duration: HistogramVec,
    /// `apiserver_request_sli_duration_seconds`: the duration less the
    /// time queued by API Priority and Fairness and spent in admission
    /// webhooks; not for dry runs or long-running requests.
    pub request_sli_duration: HistogramVec,
    /// `apiserver_request_terminations_total`: requests the server ended
    /// itself (timed out: 504; rejected by flow control: 429).
    pub request_terminations: IntCounterVec,
    /// `apiserver_response_sizes` (GET and LIST).
    pub response_sizes: HistogramVec,
    /// `apiserver_current_inflight_requests{request_kind}`.
    pub current_inflight_requests: IntGaugeVec,
    /// `apiserver_current_inqueue_requests{request_kind}`.
    pub current_inqueue_requests: IntGaugeVec,
    /// `apiserver_longrunning_requests`.
    pub longrunning_requests: IntGaugeVec,
    /// `apiserver_registered_watchers{group,version,kind}`.
    pub registered_watchers: IntGaugeVec,
    /// `apiserver_watch_events_total{group,version,resource}`.
    pub watch_events: IntCounterVec,
    /// `apiserver_watch_events_sizes{group,version,resource}`.
    pub watch_event_sizes: HistogramVec,
    /// `apiserver_storage_objects{resource}` (set when scraped).
    pub storage_objects: IntGaugeVec,
    /// `apiserver_resource_objects{group,resource}` (set when scraped).
    pub resource_objects: IntGaugeVec,
    /// `apiserver_storage_size_bytes{storage_cluster_id}` (set when scraped).
    pub storage_size_bytes: IntGaugeVec,
    /// `apiserver_terminated_watchers_total{resource}`: watchers the watch
    /// cache closed because they fell too far behind.
    pub terminated_watchers: IntCounterVec,
    /// `apiserver_watch_cache_events_received_total{group,resource}`.
    pub watch_cache_events_received: IntCounterVec,
    /// `apiserver_watch_cache_events_dispatched_total{group,resource}`.
    pub watch_cache_events_dispatched: IntCounterVec,
    /// `apiserver_watch_cache_initializations_total{group,resource}`.
    pub watch_cache_initializations: IntCounterVec,
    /// `apiserver_watch_cache_resource_version{group,resource}`.
    pub watch_cache_resource_version: IntGaugeVec,
    /// `watch_cache_capacity{group,resource}` (upstream has no
    /// `apiserver_` prefix on this one).
    pub watch_cache_capacity: IntGaugeVec,
    /// `apiserver_cache_list_total{group,resource,index}`.
    pub cache_list: IntCounterVec,
    /// `apiserver_cache_list_fetched_objects_total{group,resource,index}`.
    pub cache_list_fetched: IntCounterVec,
    /// `apiserver_cache_list_returned_objects_total{group,resource}`.
    pub cache_list_returned: IntCounterVec,
    /// `etcd_request_duration_seconds{operation,type}`: storage calls, for
    /// either backend.
    pub storage_request_duration: HistogramVec,
    /// `apiserver_storage_transformation_operations_total{resource,transformation_type,transformer_prefix,status}`:
    /// values encrypted and decrypted at rest.
    pub transformation_operations: IntCounterVec,
    /// `apiserver_storage_transformation_duration_seconds{transformation_type,transformer_prefix}`:
    /// how long successful transformations took.
    pub transformation_duration: HistogramVec,
    /// `apiserver_flowcontrol_dispatched_requests_total{priority_level,flow_schema}`.
    pub flowcontrol_dispatched: IntCounterVec,
    /// `apiserver_flowcontrol_rejected_requests_total{priority_level,flow_schema,reason}`.
    pub flowcontrol_rejected: IntCounterVec,
    /// `apiserver_flowcontrol_current_inqueue_requests{priority_level,flow_schema}`.
    pub flowcontrol_inqueue: IntGaugeVec,
    /// `apiserver_flowcontrol_current_inqueue_seats{priority_level,flow_schema}`.
    pub flowcontrol_inqueue_seats: IntGaugeVec,
    /// `apiserver_flowcontrol_current_executing_requests{priority_level,flow_schema}`.
    pub flowcontrol_executing: IntGaugeVec,
    /// `apiserver_flowcontrol_current_executing_seats{priority_level,flow_schema}`.
    pub flowcontrol_executing_seats: IntGaugeVec,
    /// `apiserver_flowcontrol_nominal_limit_seats{priority_level}`.
    pub flowcontrol_nominal_limit_seats: IntGaugeVec,
    /// `apiserver_flowcontrol_request_wait_duration_seconds{priority_level,flow_schema,execute}`.
    pub flowcontrol_wait: HistogramVec,
    /// `apiserver_admission_controller_admission_duration_seconds{name,type,operation,rejected}`.
    pub admission_controller_duration: HistogramVec,
    /// `apiserver_admission_step_admission_duration_seconds{type,operation,rejected}`.
    pub admission_step_duration: HistogramVec,
    /// `apiserver_admission_webhook_admission_duration_seconds{name,type,operation,rejected}`.
    pub webhook_duration: HistogramVec,
    /// `apiserver_admission_webhook_rejection_count{name,type,operation,error_type,rejection_code}`.
    pub webhook_rejections: IntCounterVec,
    /// `apiserver_admission_webhook_fail_open_count{name,type}`.
    pub webhook_fail_open: IntCounterVec,
    /// `apiserver_audit_event_total`.
    pub audit_events: IntCounter,
    /// `apiserver_audit_error_total{plugin}`.
    pub audit_errors: IntCounterVec,
    /// `authentication_attempts{result}` (upstream has no `_total` here).
    pub authentication_attempts: IntCounterVec,
    /// `authentication_duration_seconds{result}`.
    pub authentication_duration: HistogramVec,
    /// `apiserver_authorization_decisions_total{type,name,decision}`.
    pub authorization_decisions: IntCounterVec,
    /// `apiserver_client_certificate_expiration_seconds`: for each request
    /// with a client certificate, the seconds until it expires.
    pub client_certificate_expiration: Histogram,
    /// `apiserver_tls_handshake_errors_total`.
    pub tls_handshake_errors: IntCounter,
    /// `aggregator_unavailable_apiservice{name}`: 1 while an APIService is
    /// not available.
    pub unavailable_apiservice: IntGaugeVec,
    /// `aggregator_unavailable_apiservice_total{name,reason}`: changes to
    /// unavailable.
    pub unavailable_apiservice_total: IntCounterVec,
    /// `rest_client_requests_total{code,method,host}`: the server's own
    /// HTTP calls through `webhook::Client` (admission, authentication,
    /// authorization, audit and conversion webhooks, delegated authentication
    /// and authorization).
    pub rest_client_requests: IntCounterVec,
    /// `workqueue_adds_total{name}`.
    pub workqueue_adds: IntCounterVec,
    /// `workqueue_depth{name}`.
    pub workqueue_depth: IntGaugeVec,
    /// `workqueue_queue_duration_seconds{name}`.
    pub workqueue_queue_duration: HistogramVec,
    /// `workqueue_work_duration_seconds{name}`.
    pub workqueue_work_duration: HistogramVec,
    /// `workqueue_retries_total{name}`.
    pub workqueue_retries: IntCounterVec,
    /// `kubernetes_build_info` (1, with the `/version` facts as labels).
    pub build_info: IntGaugeVec,
}

/// Registers metric families in one registry.
struct Families(Registry);

impl Families {
    fn add<C: prometheus::core::Collector + Clone + 'static>(
        &self,
        c: C,
    ) -> Result<C, prometheus::Error> {
        self.0.register(Box::new(c.clone()))?;
        Ok(c)
    }

    fn counter(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> prometheus::Result<IntCounterVec> {
        self.add(IntCounterVec::new(Opts::new(name, help), labels)?)
    }

    fn gauge(&self, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
        self.add(IntGaugeVec::new(Opts::new(name, help), labels)?)
    }

    fn histogram(
        &self,
        name: &str,
        help: &str,
        buckets: Vec<f64>,
        labels: &[&str],
    ) -> prometheus::Result<HistogramVec> {
        self.add(HistogramVec::new(
            HistogramOpts::new(name, help).buckets(buckets),
            labels,
        )?)
    }
}

fn build() -> Result<Metrics, prometheus::Error> {
    let f = Families(Registry::new());
    let mut counter_labels = REQUEST_LABELS.to_vec();
    counter_labels.push("code");
    let flow_labels = ["priority_level", "flow_schema"];
    let workqueue_buckets = prometheus::exponential_buckets(10e-9, 10.0, 10)?;
    let metrics = Metrics {
        request_total: f.counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            &counter_labels,
        )?,
        request_duration: f.histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
            REQUEST_BUCKETS.to_vec(),
            &REQUEST_LABELS,
        )?,
        request_sli_duration: f.histogram(
            "apiserver_request_sli_duration_seconds",
            "Response latency distribution (not counting webhook duration and priority & fairness queue wait times) in seconds for each verb, group, version, resource, subresource, scope and component.",
            SLI_BUCKETS.to_vec(),
            &REQUEST_LABELS_NO_DRY_RUN,
        )?,
        request_terminations: f.counter(
            "apiserver_request_terminations_total",
            "Number of requests which apiserver terminated in self-defense.",
            &TERMINATION_LABELS,
        )?,
        response_sizes: f.histogram(
            "apiserver_response_sizes",
            "Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component.",
            prometheus::exponential_buckets(1000.0, 10.0, 7)?,
            &REQUEST_LABELS_NO_DRY_RUN,
        )?,
        current_inflight_requests: f.gauge(
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
            &["request_kind"],
        )?,
        current_inqueue_requests: f.gauge(
            "apiserver_current_inqueue_requests",
            "Maximal number of queued requests in this apiserver per request kind in last second.",
            &["request_kind"],
        )?,
        longrunning_requests: f.gauge(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
            &REQUEST_LABELS_NO_DRY_RUN,
        )?,
        registered_watchers: f.gauge(
            "apiserver_registered_watchers",
            "Number of currently registered watchers for a given resources",
            &["group", "version", "kind"],
        )?,
        watch_events: f.counter(
            "apiserver_watch_events_total",
            "Number of events sent in watch clients",
            &GROUP_VERSION_RESOURCE,
        )?,
        watch_event_sizes: f.histogram(
            "apiserver_watch_events_sizes",
            "Watch event size distribution in bytes",
            prometheus::exponential_buckets(1024.0, 2.0, 8)?,
            &GROUP_VERSION_RESOURCE,
        )?,
        storage_objects: f.gauge(
            "apiserver_storage_objects",
            "[DEPRECATED, consider using apiserver_resource_objects instead] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
            &["resource"],
        )?,
        resource_objects: f.gauge(
            "apiserver_resource_objects",
            "Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
            &GROUP_RESOURCE,
        )?,
        storage_size_bytes: f.gauge(
            "apiserver_storage_size_bytes",
            "Size of the storage database file physically allocated in bytes.",
            &["storage_cluster_id"],
        )?,
        terminated_watchers: f.counter(
            "apiserver_terminated_watchers_total",
            "Counter of watchers closed due to unresponsiveness broken by resource type.",
            &["resource"],
        )?,
        watch_cache_events_received: f.counter(
            "apiserver_watch_cache_events_received_total",
            "Counter of events received in watch cache broken by resource type.",
            &GROUP_RESOURCE,
        )?,
        watch_cache_events_dispatched: f.counter(
            "apiserver_watch_cache_events_dispatched_total",
            "Counter of events dispatched in watch cache broken by resource type.",
            &GROUP_RESOURCE,
        )?,
        watch_cache_initializations: f.counter(
            "apiserver_watch_cache_initializations_total",
            "Counter of watch cache initializations broken by resource type.",
            &GROUP_RESOURCE,
        )?,
        watch_cache_resource_version: f.gauge(
            "apiserver_watch_cache_resource_version",
            "Current resource version of watch cache broken by resource type.",
            &GROUP_RESOURCE,
        )?,
        watch_cache_capacity: f.gauge(
            "watch_cache_capacity",
            "Total capacity of watch cache broken by resource type.",
            &GROUP_RESOURCE,
        )?,
        cache_list: f.counter(
            "apiserver_cache_list_total",
            "Number of LIST requests served from watch cache",
            &["group", "resource", "index"],
        )?,
        cache_list_fetched: f.counter(
            "apiserver_cache_list_fetched_objects_total",
            "Number of objects read from watch cache in the course of serving a LIST request",
            &["group", "resource", "index"],
        )?,
        cache_list_returned: f.counter(
            "apiserver_cache_list_returned_objects_total",
            "Number of objects returned for a LIST request from watch cache",
            &GROUP_RESOURCE,
        )?,
        storage_request_duration: f.histogram(
            "etcd_request_duration_seconds",
            "Etcd request latency in seconds for each operation and object type.",
            STORAGE_BUCKETS.to_vec(),
            &["operation", "type"],
        )?,
        transformation_operations: f.counter(
            "apiserver_storage_transformation_operations_total",
            "Number of stored values transformed (encrypted on the way to storage, decrypted on the way back) by resource, direction, provider prefix and status ('OK' on success).",
            &[
                "resource",
                "transformation_type",
                "transformer_prefix",
                "status",
            ],
        )?,
        transformation_duration: f.histogram(
            "apiserver_storage_transformation_duration_seconds",
            "Seconds taken by successful transformations of stored values.",
            prometheus::exponential_buckets(5e-6, 2.0, 25)?,
            &["transformation_type", "transformer_prefix"],
        )?,
        flowcontrol_dispatched: f.counter(
            "apiserver_flowcontrol_dispatched_requests_total",
            "Number of requests executed by API Priority and Fairness subsystem",
            &flow_labels,
        )?,
        flowcontrol_rejected: f.counter(
            "apiserver_flowcontrol_rejected_requests_total",
            "Number of requests rejected by API Priority and Fairness subsystem",
            &["priority_level", "flow_schema", "reason"],
        )?,
        flowcontrol_inqueue: f.gauge(
            "apiserver_flowcontrol_current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
            &flow_labels,
        )?,
        flowcontrol_inqueue_seats: f.gauge(
            "apiserver_flowcontrol_current_inqueue_seats",
            "Number of seats currently pending in queues of the API Priority and Fairness subsystem",
            &flow_labels,
        )?,
        flowcontrol_executing: f.gauge(
            "apiserver_flowcontrol_current_executing_requests",
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
            &flow_labels,
        )?,
        flowcontrol_executing_seats: f.gauge(
            "apiserver_flowcontrol_current_executing_seats",
            "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
            &flow_labels,
        )?,
        flowcontrol_nominal_limit_seats: f.gauge(
            "apiserver_flowcontrol_nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level",
            &["priority_level"],
        )?,
        flowcontrol_wait: f.histogram(
            "apiserver_flowcontrol_request_wait_duration_seconds",
            "Length of time a request spent waiting in its queue",
            FLOWCONTROL_WAIT_BUCKETS.to_vec(),
            &["priority_level", "flow_schema", "execute"],
        )?,
        admission_controller_duration: f.histogram(
            "apiserver_admission_controller_admission_duration_seconds",
            "Admission controller latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
            ADMISSION_BUCKETS.to_vec(),
            &["name", "type", "operation", "rejected"],
        )?,
        admission_step_duration: f.histogram(
            "apiserver_admission_step_admission_duration_seconds",
            "Admission sub-step latency histogram in seconds, broken out for each operation and API resource and step type (validate or admit).",
            ADMISSION_BUCKETS.to_vec(),
            &["type", "operation", "rejected"],
        )?,
        webhook_duration: f.histogram(
            "apiserver_admission_webhook_admission_duration_seconds",
            "Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
            vec![0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0],
            &["name", "type", "operation", "rejected"],
        )?,
        webhook_rejections: f.counter(
            "apiserver_admission_webhook_rejection_count",
            "Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify an error type (calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code is greater or equal to 400). Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
            &["name", "type", "operation", "error_type", "rejection_code"],
        )?,
        webhook_fail_open: f.counter(
            "apiserver_admission_webhook_fail_open_count",
            "Admission webhook fail open count, identified by name and broken out for each admission type (validating or mutating).",
            &["name", "type"],
        )?,
        audit_events: f.add(IntCounter::new(
            "apiserver_audit_event_total",
            "Counter of audit events generated and sent to the audit backend.",
        )?)?,
        audit_errors: f.counter(
            "apiserver_audit_error_total",
            "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error.",
            &["plugin"],
        )?,
        authentication_attempts: f.counter(
            "authentication_attempts",
            "Counter of authenticated attempts.",
            &["result"],
        )?,
        authentication_duration: f.histogram(
            "authentication_duration_seconds",
            "Authentication duration in seconds broken out by result.",
            prometheus::exponential_buckets(0.001, 2.0, 15)?,
            &["result"],
        )?,
        authorization_decisions: f.counter(
            "apiserver_authorization_decisions_total",
            "Total number of terminal decisions made by an authorizer split by authorizer type, name, and decision.",
            &["type", "name", "decision"],
        )?,
        client_certificate_expiration: f.add(Histogram::with_opts(
            HistogramOpts::new(
                "apiserver_client_certificate_expiration_seconds",
                "Distribution of the remaining lifetime on the certificate used to authenticate a request.",
            )
            .buckets(CERTIFICATE_EXPIRATION_BUCKETS.to_vec()),
        )?)?,
        tls_handshake_errors: f.add(IntCounter::new(
            "apiserver_tls_handshake_errors_total",
            "Number of requests dropped with 'TLS handshake error from' error",
        )?)?,
        unavailable_apiservice: f.gauge(
            "aggregator_unavailable_apiservice",
            "Gauge of APIServices which are marked as unavailable broken down by APIService name.",
            &["name"],
        )?,
        unavailable_apiservice_total: f.counter(
            "aggregator_unavailable_apiservice_total",
            "Counter of APIServices which are marked as unavailable broken down by APIService name and reason.",
            &["name", "reason"],
        )?,
        rest_client_requests: f.counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            &["code", "method", "host"],
        )?,
        workqueue_adds: f.counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            &WORKQUEUE,
        )?,
        workqueue_depth: f.gauge("workqueue_depth", "Current depth of workqueue", &WORKQUEUE)?,
        workqueue_queue_duration: f.histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            workqueue_buckets.clone(),
            &WORKQUEUE,
        )?,
        workqueue_work_duration: f.histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            workqueue_buckets,
            &WORKQUEUE,
        )?,
        workqueue_retries: f.counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            &WORKQUEUE,
        )?,
        build_info: f.gauge(
            "kubernetes_build_info",
            "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
            &[
                "major",
                "minor",
                "git_version",
                "git_commit",
                "git_tree_state",
                "build_date",
                "go_version",
                "compiler",
                "platform",
            ],
        )?,
        registry: f.0,
    };
    for kind in [READ_ONLY, MUTATING] {
        metrics
            .current_inflight_requests
            .with_label_values(&[kind])
            .set(0);
        metrics
            .current_inqueue_requests
            .with_label_values(&[kind])
            .set(0);
    }
    Ok(metrics)
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

/// The time of a request spent waiting on others, which its SLI duration
/// leaves out (upstream's latency trackers): queued by API Priority and
/// Fairness, and in admission webhooks. Set for the request's task by the
/// metrics filter ([`LatencyTracker::scope`]); outside one, recording does
/// nothing.
#[derive(Default)]
pub struct LatencyTracker {
    excluded_nanos: std::sync::atomic::AtomicU64,
}

tokio::task_local! {
    static LATENCY: std::sync::Arc<LatencyTracker>;
}

impl LatencyTracker {
    /// Runs `fut` with `tracker` as its task's tracker. (Not an `async fn`:
    /// that would keep a second copy of `fut`, a request's whole filter
    /// chain, in its state.)
    pub fn scope<F: std::future::Future>(
        tracker: std::sync::Arc<LatencyTracker>,
        fut: F,
    ) -> impl std::future::Future<Output = F::Output> {
        LATENCY.scope(tracker, fut)
    }

    /// Leaves `elapsed` out of the current request's SLI duration.
    pub fn exclude(elapsed: std::time::Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let _ = LATENCY.try_with(|t| {
            t.excluded_nanos
                .fetch_add(nanos, std::sync::atomic::Ordering::Relaxed)
        });
    }

    /// The time left out so far.
    pub fn excluded(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(
            self.excluded_nanos
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }
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

/// Marks a response the server made to end a request in self-defense
/// (timed out, or rejected by flow control): counted in
/// `apiserver_request_terminations_total` by the metrics filter.
#[derive(Clone, Copy, Debug)]
pub struct Terminated;

/// `resp`, marked [`Terminated`].
pub fn terminated(mut resp: axum::response::Response) -> axum::response::Response {
    resp.extensions_mut().insert(Terminated);
    resp
}

/// Records encryption-at-rest transformations into [`global`]'s
/// `apiserver_storage_transformation_*` families.
pub struct TransformationObserver;

impl apiforge_storage::encryption::Observer for TransformationObserver {
    fn observe(&self, resource: &str, transformation: &str, prefix: &str, ok: bool, seconds: f64) {
        let m = global();
        // Failures are not gRPC errors (there is no KMS plugin): upstream
        // labels those `unknown-non-grpc`.
        let status = if ok { "OK" } else { "unknown-non-grpc" };
        m.transformation_operations
            .with_label_values(&[resource, transformation, prefix, status])
            .inc();
        if ok {
            m.transformation_duration
                .with_label_values(&[transformation, prefix])
                .observe(seconds);
        }
    }
}

impl Metrics {
    /// The in-flight gauge of `request_kind`.
    pub fn current_inflight(&self, kind: &str) -> IntGauge {
        self.current_inflight_requests.with_label_values(&[kind])
    }

    /// Counts one of the server's own HTTP requests: its status, or
    /// `<error>` when none came back (client-go's label).
    pub fn count_client_request(
        &self,
        status: Option<http::StatusCode>,
        method: &http::Method,
        host: &str,
    ) {
        let code = status.map_or_else(|| "<error>".to_string(), |s| s.as_str().to_string());
        self.rest_client_requests
            .with_label_values(&[code.as_str(), method.as_str(), host])
            .inc();
    }

    /// The in-queue gauge of `request_kind`.
    pub fn current_inqueue(&self, kind: &str) -> IntGauge {
        self.current_inqueue_requests.with_label_values(&[kind])
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
    fn the_latency_scope_holds_one_copy_of_the_future_it_runs() {
        // The metrics filter wraps the rest of the filter chain (~10 KiB of
        // future) in this scope; an `async fn` here kept it twice, and every
        // filter above copied both on each request.
        let inner = async {
            let held = [1u8; 4096];
            std::future::ready(()).await;
            held[0]
        };
        let inner_size = std::mem::size_of_val(&inner);
        assert!(inner_size >= 4096);
        let scoped = LatencyTracker::scope(Default::default(), inner);
        assert!(
            std::mem::size_of_val(&scoped) < inner_size + 256,
            "{} bytes around a {inner_size}-byte future",
            std::mem::size_of_val(&scoped)
        );
    }

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
