//! API Priority and Fairness (kube-apiserver's
//! `--enable-priority-and-fairness`): every request is classified by the
//! first matching FlowSchema (lowest `matchingPrecedence`, then name) into
//! a priority level and a flow; requests of Exempt levels run at once,
//! those of Limited levels take one of the level's seats or wait in its
//! queues ([`queueing`]), or get 429 when no queue has room (or the level
//! rejects instead of queuing, or the queue wait ends).
//!
//! Seats: the server's total concurrency limit (`--max-requests-inflight`
//! plus `--max-mutating-requests-inflight`) is shared among the levels in
//! proportion to their `nominalConcurrencyShares`, rounded up; seats are
//! not lent or borrowed between levels (`lendablePercent` and
//! `borrowingLimitPercent` are stored but not applied).
//!
//! A request waits in a queue for at most a quarter of its remaining
//! deadline (`--request-timeout`), 15 seconds for requests without one.
//! Long-running requests (watches) take a seat only until the handler has
//! produced the response head (the watch is registered and its initial
//! state read), then give it back, approximating upstream's "seat for the
//! initialization only".
//!
//! The configuration is the FlowSchema and PriorityLevelConfiguration
//! objects: [`start`] creates the default ones ([`bootstrap`]), keeps those
//! annotated `apf.kubernetes.io/autoupdate-spec: "true"` current, and
//! applies every change to the dispatcher.

pub mod bootstrap;
pub mod matching;
pub mod queueing;
pub mod shuffle_sharding;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use http::{HeaderName, HeaderValue};
use serde_json::Value;

use crate::error::ApiResult;
use crate::metrics::GaugeGuard;
use crate::registry::Stores;
use crate::registry::{ListParams, Store};
use crate::request::RequestInfo;
use crate::request::user::UserInfo;
use apiforge_core::builtin::flowcontrol_v1::{
    FlowSchema, FlowSchemaSpec, GROUP, PriorityLevelConfiguration,
};
use apiforge_core::meta::StatusDetails;
use apiforge_core::resource::Strategy;
use prometheus::{IntCounter, IntGauge};
use queueing::{Admission, Level, QueueParams};

/// The response header naming the matched FlowSchema's UID.
pub const FLOW_SCHEMA_UID_HEADER: &str = "X-Kubernetes-PF-FlowSchema-UID";
/// The response header naming the priority level's UID.
pub const PRIORITY_LEVEL_UID_HEADER: &str = "X-Kubernetes-PF-PriorityLevel-UID";
/// The 429 message.
pub const MESSAGE: &str = "Too many requests, please try again later.";
/// The queue wait of requests without a deadline.
const DEFAULT_WAIT: Duration = Duration::from_secs(15);

struct Schema {
    name: String,
    precedence: i32,
    level: String,
    spec: FlowSchemaSpec,
    /// The level `level` names.
    priority: Arc<PriorityLevel>,
    /// The UID, as the `X-Kubernetes-PF-FlowSchema-UID` value.
    uid_header: Option<HeaderValue>,
    /// The metric series labelled with this schema and its level, made on
    /// first use (as `with_label_values` would) and kept, so requests do
    /// not look them up.
    dispatched: OnceLock<IntCounter>,
    executing: OnceLock<IntGauge>,
    inqueue: OnceLock<IntGauge>,
    executing_seats: OnceLock<IntGauge>,
    inqueue_seats: OnceLock<IntGauge>,
}

impl Schema {
    fn labels(&self) -> [&str; 2] {
        [self.level.as_str(), self.name.as_str()]
    }

    fn dispatched(&self) -> &IntCounter {
        self.dispatched.get_or_init(|| {
            crate::metrics::global()
                .flowcontrol_dispatched
                .with_label_values(&self.labels())
        })
    }

    fn executing(&self) -> &IntGauge {
        self.executing.get_or_init(|| {
            crate::metrics::global()
                .flowcontrol_executing
                .with_label_values(&self.labels())
        })
    }

    fn inqueue(&self) -> &IntGauge {
        self.inqueue.get_or_init(|| {
            crate::metrics::global()
                .flowcontrol_inqueue
                .with_label_values(&self.labels())
        })
    }

    /// Every request takes one seat (there are no wide requests here), so
    /// the seat gauges move with the request gauges.
    fn executing_seats(&self) -> &IntGauge {
        self.executing_seats.get_or_init(|| {
            crate::metrics::global()
                .flowcontrol_executing_seats
                .with_label_values(&self.labels())
        })
    }

    fn inqueue_seats(&self) -> &IntGauge {
        self.inqueue_seats.get_or_init(|| {
            crate::metrics::global()
                .flowcontrol_inqueue_seats
                .with_label_values(&self.labels())
        })
    }

    /// The request is executing until the guards drop.
    fn executing_guards(&self) -> (GaugeGuard, GaugeGuard) {
        (
            GaugeGuard::new(self.executing().clone()),
            GaugeGuard::new(self.executing_seats().clone()),
        )
    }

    /// `apiserver_flowcontrol_request_wait_duration_seconds`, and the
    /// wait left out of the request's SLI duration.
    fn observe_wait(&self, waited: Duration, executed: bool) {
        crate::metrics::LatencyTracker::exclude(waited);
        crate::metrics::global()
            .flowcontrol_wait
            .with_label_values(&[
                self.level.as_str(),
                self.name.as_str(),
                if executed { "true" } else { "false" },
            ])
            .observe(waited.as_secs_f64());
    }
}

struct PriorityLevel {
    /// The UID, as the `X-Kubernetes-PF-PriorityLevel-UID` value.
    uid_header: Option<HeaderValue>,
    /// `None` for Exempt levels.
    limited: Option<Arc<Level>>,
}

#[derive(Default)]
struct Config {
    schemas: Vec<Arc<Schema>>,
    levels: HashMap<String, Arc<PriorityLevel>>,
}

/// The dispatcher's configuration and the Limited levels' queues.
pub struct FlowControl {
    server_concurrency: usize,
    config: RwLock<Arc<Config>>,
    levels: Mutex<HashMap<String, Arc<Level>>>,
}

impl std::fmt::Debug for FlowControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowControl")
            .field("server_concurrency", &self.server_concurrency)
            .finish_non_exhaustive()
    }
}

/// Where a request was classified: its FlowSchema (and through it the
/// priority level) and its flow.
struct Classification {
    schema: Arc<Schema>,
    flow: u64,
}

fn name_of(meta: &apiforge_core::meta::ObjectMeta) -> String {
    meta.name.clone()
}

fn uid_of(meta: &apiforge_core::meta::ObjectMeta) -> String {
    meta.uid.clone()
}

fn usize_of(v: Option<i32>, default: usize) -> usize {
    v.and_then(|v| usize::try_from(v).ok()).unwrap_or(default)
}

impl FlowControl {
    /// A dispatcher sharing `server_concurrency` seats, configured with
    /// the default objects until [`start`] reads the stored ones.
    pub fn new(server_concurrency: usize) -> Arc<FlowControl> {
        let fc = Arc::new(FlowControl {
            server_concurrency: server_concurrency.max(1),
            config: RwLock::new(Arc::new(Config::default())),
            levels: Mutex::new(HashMap::new()),
        });
        fc.apply(&bootstrap::all());
        fc
    }

    fn current(&self) -> Arc<Config> {
        match self.config.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the configuration with `objects` (FlowSchemas and
    /// PriorityLevelConfigurations as JSON, `kind` set). Malformed objects
    /// and FlowSchemas naming a missing level are ignored.
    pub fn apply(&self, objects: &[Value]) {
        let mut schemas_in = Vec::new();
        let mut levels_in = Vec::new();
        for obj in objects {
            match obj.get("kind").and_then(Value::as_str) {
                Some("FlowSchema") => {
                    if let Ok(mut fs) = serde_json::from_value::<FlowSchema>(obj.clone()) {
                        fs.default_fields();
                        schemas_in.push(fs);
                    }
                }
                Some("PriorityLevelConfiguration") => {
                    if let Ok(mut pl) =
                        serde_json::from_value::<PriorityLevelConfiguration>(obj.clone())
                    {
                        pl.default_fields();
                        levels_in.push(pl);
                    }
                }
                _ => {}
            }
        }
        let shares = |pl: &PriorityLevelConfiguration| -> usize {
            match pl.spec.type_.as_str() {
                "Limited" => usize_of(
                    pl.spec
                        .limited
                        .as_ref()
                        .and_then(|l| l.nominal_concurrency_shares),
                    30,
                ),
                _ => usize_of(
                    pl.spec
                        .exempt
                        .as_ref()
                        .and_then(|e| e.nominal_concurrency_shares),
                    0,
                ),
            }
        };
        let total_shares: usize = levels_in.iter().map(shares).sum::<usize>().max(1);
        let mut kept = match self.levels.lock() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut next_kept = HashMap::new();
        let mut levels = HashMap::new();
        for pl in &levels_in {
            let name = name_of(&pl.metadata);
            let limited = match (&pl.spec.type_[..], &pl.spec.limited) {
                ("Limited", Some(l)) => {
                    let seats = (self.server_concurrency * shares(pl)).div_ceil(total_shares);
                    let queuing = (l.limit_response.type_ == "Queue")
                        .then(|| l.limit_response.queuing.clone().unwrap_or_default());
                    let params = QueueParams {
                        seats: seats.max(1),
                        queues: queuing.as_ref().map_or(0, |q| usize_of(q.queues, 64)),
                        hand_size: queuing.as_ref().map_or(0, |q| usize_of(q.hand_size, 8)),
                        queue_length_limit: queuing
                            .as_ref()
                            .map_or(0, |q| usize_of(q.queue_length_limit, 50)),
                    };
                    let level = match kept.get(&name) {
                        Some(level) => {
                            level.set_params(params);
                            level.clone()
                        }
                        None => Level::new(params),
                    };
                    next_kept.insert(name.clone(), level.clone());
                    crate::metrics::global()
                        .flowcontrol_nominal_limit_seats
                        .with_label_values(&[name.as_str()])
                        .set(i64::try_from(seats.max(1)).unwrap_or(i64::MAX));
                    Some(level)
                }
                ("Exempt", _) => None,
                _ => continue,
            };
            levels.insert(
                name,
                Arc::new(PriorityLevel {
                    uid_header: HeaderValue::from_str(&uid_of(&pl.metadata)).ok(),
                    limited,
                }),
            );
        }
        *kept = next_kept;
        drop(kept);
        let mut schemas: Vec<Arc<Schema>> = schemas_in
            .into_iter()
            .filter_map(|fs| {
                let priority = levels.get(&fs.spec.priority_level_configuration.name)?;
                Some(Arc::new(Schema {
                    name: name_of(&fs.metadata),
                    uid_header: HeaderValue::from_str(&uid_of(&fs.metadata)).ok(),
                    precedence: fs.spec.matching_precedence.unwrap_or(1000),
                    level: fs.spec.priority_level_configuration.name.clone(),
                    priority: priority.clone(),
                    spec: fs.spec,
                    dispatched: OnceLock::new(),
                    executing: OnceLock::new(),
                    inqueue: OnceLock::new(),
                    executing_seats: OnceLock::new(),
                    inqueue_seats: OnceLock::new(),
                }))
            })
            .collect();
        schemas.sort_by(|a, b| (a.precedence, &a.name).cmp(&(b.precedence, &b.name)));
        // The gauges of every flow schema exist (at 0) from the start.
        for schema in &schemas {
            schema.inqueue();
            schema.inqueue_seats();
            schema.executing();
            schema.executing_seats();
        }
        let config = Arc::new(Config { schemas, levels });
        match self.config.write() {
            Ok(mut c) => *c = config,
            Err(poisoned) => *poisoned.into_inner() = config,
        }
    }

    fn classify(&self, user: &UserInfo, info: &RequestInfo) -> Option<Classification> {
        let config = self.current();
        let schema = config
            .schemas
            .iter()
            .find(|s| matching::schema_matches(&s.spec, user, info))?;
        let distinguisher = matching::distinguisher(&schema.spec, user, info);
        Some(Classification {
            schema: schema.clone(),
            flow: shuffle_sharding::flow_hash(&schema.name, distinguisher),
        })
    }

    /// The seats of a Limited level (for diagnostics and tests).
    pub fn seats(&self, level: &str) -> Option<usize> {
        self.current()
            .levels
            .get(level)
            .and_then(|l| l.limited.as_ref())
            .map(|l| l.params().seats)
    }
}

fn rejected(c: &Classification, reason: &str) -> Response {
    crate::metrics::global()
        .flowcontrol_rejected
        .with_label_values(&[c.schema.level.as_str(), c.schema.name.as_str(), reason])
        .inc();
    tracing::debug!(priority_level = %c.schema.level, flow_schema = %c.schema.name, reason, "APF rejected a request");
    let status = crate::request::response::failure(429, "TooManyRequests", MESSAGE).with_details(
        StatusDetails {
            retry_after_seconds: Some(1),
            ..Default::default()
        },
    );
    crate::metrics::terminated(crate::request::response::status_response(status))
}

/// Classifies `req` and runs `next` (the rest of the chain) on it once it
/// has a seat of its priority level, or rejects it with 429: what the
/// API Priority and Fairness filter does (in place of max-in-flight).
pub async fn dispatch<Fut>(
    fc: &FlowControl,
    req: Request,
    next: impl FnOnce(Request) -> Fut,
) -> Response
where
    Fut: Future<Output = Response>,
{
    let (Some(info), Some(user)) = (
        req.extensions().get::<Arc<RequestInfo>>(),
        crate::request::user::user_of(&req),
    ) else {
        return next(req).await;
    };
    let Some(c) = fc.classify(user, info) else {
        return next(req).await;
    };
    let wait_until = {
        let now = tokio::time::Instant::now();
        match req.extensions().get::<crate::request::Deadline>() {
            Some(d) => now + d.0.saturating_duration_since(now) / 4,
            None => now + DEFAULT_WAIT,
        }
    };
    let schema = &c.schema;
    let request_kind = if crate::request::info::is_read_only(info) {
        crate::metrics::READ_ONLY
    } else {
        crate::metrics::MUTATING
    };
    let mut resp = match &schema.priority.limited {
        None => {
            schema.dispatched().inc();
            let _executing = schema.executing_guards();
            next(req).await
        }
        Some(level) => {
            let queued_at = tokio::time::Instant::now();
            let seat = match level.admit(c.flow) {
                Admission::Seat(seat) => Some(seat),
                Admission::Rejected => None,
                Admission::Queued(ticket) => {
                    let _queued = (
                        GaugeGuard::new(schema.inqueue().clone()),
                        GaugeGuard::new(schema.inqueue_seats().clone()),
                        GaugeGuard::new(crate::metrics::global().current_inqueue(request_kind)),
                    );
                    match ticket.wait(wait_until).await {
                        Some(seat) => Some(seat),
                        None => {
                            schema.observe_wait(queued_at.elapsed(), false);
                            let mut resp = rejected(&c, "time-out");
                            set_headers(&mut resp, &c);
                            return resp;
                        }
                    }
                }
            };
            schema.observe_wait(queued_at.elapsed(), seat.is_some());
            match seat {
                None => {
                    let reason = if level.params().queues == 0 {
                        "concurrency-limit"
                    } else {
                        "queue-full"
                    };
                    rejected(&c, reason)
                }
                Some(seat) => {
                    schema.dispatched().inc();
                    let _executing = schema.executing_guards();
                    let resp = next(req).await;
                    drop(seat);
                    resp
                }
            }
        }
    };
    set_headers(&mut resp, &c);
    resp
}

/// [`FLOW_SCHEMA_UID_HEADER`], parsed once.
static FLOW_SCHEMA_UID: HeaderName = HeaderName::from_static("x-kubernetes-pf-flowschema-uid");
/// [`PRIORITY_LEVEL_UID_HEADER`], parsed once.
static PRIORITY_LEVEL_UID: HeaderName =
    HeaderName::from_static("x-kubernetes-pf-prioritylevel-uid");

fn set_headers(resp: &mut Response, c: &Classification) {
    for (name, value) in [
        (&FLOW_SCHEMA_UID, &c.schema.uid_header),
        (&PRIORITY_LEVEL_UID, &c.schema.priority.uid_header),
    ] {
        if let Some(v) = value {
            resp.headers_mut().insert(name.clone(), v.clone());
        }
    }
}

/// The kinds, by plural resource.
const KINDS: [(&str, &str); 2] = [
    ("flowschemas", "FlowSchema"),
    ("prioritylevelconfigurations", "PriorityLevelConfiguration"),
];

fn meta_str(obj: &Value, key: &str) -> String {
    obj.pointer(&format!("/metadata/{key}"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The spec of a default object after defaulting, for comparison with a
/// stored one.
fn defaulted_spec(kind: &str, obj: &Value) -> Value {
    match kind {
        "FlowSchema" => serde_json::from_value::<FlowSchema>(obj.clone())
            .map(|mut o| {
                o.default_fields();
                serde_json::to_value(o.spec).unwrap_or_default()
            })
            .unwrap_or_default(),
        _ => serde_json::from_value::<PriorityLevelConfiguration>(obj.clone())
            .map(|mut o| {
                o.default_fields();
                serde_json::to_value(o.spec).unwrap_or_default()
            })
            .unwrap_or_default(),
    }
}

/// Creates the missing default objects and resets the spec of those whose
/// `apf.kubernetes.io/autoupdate-spec` annotation is `"true"`: all at once,
/// so that their writes share the store's commits (readiness waits for
/// this).
async fn reconcile(stores: &[(Store, &'static str)]) -> ApiResult<()> {
    futures::future::join_all(
        bootstrap::all()
            .into_iter()
            .map(|obj| reconcile_one(stores, obj)),
    )
    .await
    .into_iter()
    .collect()
}

/// [`reconcile`] of one default object.
async fn reconcile_one(stores: &[(Store, &'static str)], obj: Value) -> ApiResult<()> {
    let Some((store, kind)) = crate::registry::store_for_object(stores, &obj) else {
        return Ok(());
    };
    let name = meta_str(&obj, "name");
    let desired = defaulted_spec(kind, &obj);
    match store.get("", &name, None).await {
        Ok(existing) => {
            let autoupdate = existing
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(bootstrap::AUTOUPDATE_ANNOTATION))
                .and_then(Value::as_str)
                == Some("true");
            if !autoupdate || defaulted_spec(kind, &existing) == desired {
                return Ok(());
            }
            store
                .update_internal("", &name, |o| {
                    if o.get("spec") == Some(&desired) {
                        return false;
                    }
                    o["spec"] = desired.clone();
                    true
                })
                .await?;
            tracing::info!(%kind, %name, "APF: default configuration object updated");
            return Ok(());
        }
        Err(e) if e.code() == 404 => {}
        Err(e) => return Err(e),
    }
    if store.ensure("", "v1", obj).await? {
        tracing::info!(%kind, %name, "APF: created default configuration object");
    }
    Ok(())
}

async fn read_all(fc: &FlowControl, stores: &[(Store, &'static str)]) -> ApiResult<()> {
    let mut objects = Vec::new();
    for (store, kind) in stores {
        let page = store.list(None, &ListParams::default()).await?;
        for mut obj in page.items {
            obj["kind"] = Value::from(*kind);
            objects.push(obj);
        }
    }
    fc.apply(&objects);
    Ok(())
}

/// Reconciles the default configuration, then keeps `fc` equal to the
/// stored objects (re-read whenever one changes, recreating deleted
/// mandatory ones). Does nothing when the kinds are not served.
pub async fn start(
    stores: &Stores,
    fc: Arc<FlowControl>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> ApiResult<()> {
    let stores = stores.stores_of(GROUP, &KINDS);
    if stores.is_empty() {
        return Ok(());
    }
    reconcile(&stores).await?;
    read_all(&fc, &stores).await?;
    tokio::spawn(async move {
        let view = stores.clone();
        crate::registry::informer::keep_current("APF", stores, shutdown, move || {
            let (fc, view) = (fc.clone(), view.clone());
            async move { refresh(&fc, &view).await }
        })
        .await;
    });
    Ok(())
}

async fn refresh(fc: &FlowControl, stores: &[(Store, &'static str)]) {
    if let Err(e) = reconcile_mandatory(stores).await {
        tracing::warn!(error = %e, "APF: restoring mandatory objects failed");
    }
    if let Err(e) = read_all(fc, stores).await {
        tracing::warn!(error = %e, "APF: reading the configuration failed");
    }
}

/// Recreates deleted mandatory objects.
async fn reconcile_mandatory(stores: &[(Store, &'static str)]) -> ApiResult<()> {
    for obj in bootstrap::mandatory() {
        let Some((store, kind)) = crate::registry::store_for_object(stores, &obj) else {
            continue;
        };
        let name = meta_str(&obj, "name");
        if store.ensure("", "v1", obj).await? {
            tracing::info!(%kind, %name, "APF: recreated mandatory object");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seats_follow_shares() {
        let fc = FlowControl::new(600);
        // 245 shares in all: workload-low 100 -> ceil(600*100/245) = 245.
        assert_eq!(fc.seats("workload-low"), Some(245));
        assert_eq!(fc.seats("catch-all"), Some(13));
        assert_eq!(fc.seats("exempt"), None);
        let admin = UserInfo::new("admin", &["system:masters"]);
        let info = RequestInfo {
            verb: "get".into(),
            path: "/api".into(),
            ..Default::default()
        };
        let c = fc.classify(&admin, &info).expect("classified");
        assert_eq!(
            (c.schema.name.as_str(), c.schema.level.as_str()),
            ("exempt", "exempt")
        );
        assert!(c.schema.priority.limited.is_none());
        // A level that disappears leaves its FlowSchemas out.
        let mut objects = bootstrap::mandatory();
        objects.push(
            serde_json::json!({"kind": "FlowSchema", "metadata": {"name": "dangling"},
            "spec": {"priorityLevelConfiguration": {"name": "gone"}, "matchingPrecedence": 1,
            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "*"}}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}),
        );
        fc.apply(&objects);
        let c = fc.classify(&admin, &info).expect("classified");
        assert_eq!(c.schema.name, "exempt");
        assert_eq!(fc.seats("catch-all"), Some(600));
    }
}
