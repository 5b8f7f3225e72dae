//! Auditing as kube-apiserver does it (`--audit-policy-file`,
//! `--audit-log-*`, `--audit-webhook-*`).
//!
//! The [`policy`] decides, from the authenticated user and the request, the
//! [`policy::Level`] of a request; [`audit`] (run by the chain's audit
//! filter, after authentication, before impersonation) then
//! records [`event::Event`]s at the stages `RequestReceived`,
//! `ResponseStarted` (long-running requests: watches), `ResponseComplete`
//! and `Panic`, and hands them to the [`backend`]s. At level `Request` the
//! request body is kept, at `RequestResponse` also the response body (not
//! for watches, whose responses keep streaming). Later filters add to the
//! event through the [`AuditContext`] in the request extensions (the
//! impersonated user, the authorizer's decision).
//!
//! Requests that fail authentication never reach the audit slot; the
//! authentication filter hands them to [`failed_authentication`], which
//! records one `ResponseStarted` event without a user, as kube-apiserver's
//! failed-authentication handler does.
//!
//! The audit ID of an event is the request's [`AuditId`], set by the
//! outermost filter and echoed as the `Audit-Id` response header.

pub mod backend;
pub mod event;
pub mod policy;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use futures::{FutureExt, StreamExt};

use crate::request::AuditId;
use crate::request::ReceivedAt;
use crate::request::RequestInfo;
use crate::request::user::UserInfo;
use backend::log::{LogBackend, LogOptions};
use backend::webhook::{WebhookBackend, WebhookOptions};
use event::{Event, ObjectReference, ResponseStatus, micro_time, strip_managed_fields};
use policy::{Level, Policy, RequestAuditConfig, Stage};

/// The audit flags.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--audit-policy-file`: without it nothing is audited.
    pub policy_file: Option<PathBuf>,
    /// `--audit-log-*`, when `--audit-log-path` is set.
    pub log: Option<LogOptions>,
    /// `--audit-webhook-*`, when `--audit-webhook-config-file` is set.
    pub webhook: Option<WebhookOptions>,
}

/// One backend.
pub enum Backend {
    /// The log file.
    Log(LogBackend),
    /// The webhook.
    Webhook(WebhookBackend),
}

/// The policy and the backends.
pub struct Auditor {
    policy: Policy,
    backends: Vec<Backend>,
}

impl Auditor {
    /// Loads the policy and opens the backends; `None` when there is no
    /// policy or no backend (nothing to audit). Must run inside the tokio
    /// runtime (the webhook's batch task).
    pub fn new(options: &Options) -> Result<Option<Arc<Auditor>>, String> {
        let Some(path) = &options.policy_file else {
            return Ok(None);
        };
        let policy = Policy::load(path).map_err(|e| e.to_string())?;
        let mut backends = Vec::new();
        if let Some(log) = &options.log {
            backends
                .push(Backend::Log(LogBackend::new(log.clone()).map_err(|e| {
                    format!("opening the audit log {:?}: {e}", log.path)
                })?));
        }
        if let Some(webhook) = &options.webhook {
            backends.push(Backend::Webhook(WebhookBackend::new(webhook)?));
        }
        if backends.is_empty() {
            return Ok(None);
        }
        Ok(Some(Arc::new(Auditor { policy, backends })))
    }

    /// An auditor from parts (tests, embedders).
    pub fn from_parts(policy: Policy, backends: Vec<Backend>) -> Arc<Auditor> {
        Arc::new(Auditor { policy, backends })
    }

    async fn emit(&self, event: &Event) {
        crate::metrics::global().audit_events.inc();
        for b in &self.backends {
            match b {
                Backend::Log(log) => log.write(event),
                Backend::Webhook(w) => w.process(event).await,
            }
        }
    }
}

#[derive(Default)]
struct Additions {
    impersonated: Option<UserInfo>,
    annotations: BTreeMap<String, String>,
}

/// What later filters add to the request's event (in the request
/// extensions while the request is audited).
#[derive(Clone, Default)]
pub struct AuditContext(Arc<Mutex<Additions>>);

impl AuditContext {
    fn with<R>(&self, f: impl FnOnce(&mut Additions) -> R) -> R {
        match self.0.lock() {
            Ok(mut a) => f(&mut a),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    /// Adds an annotation (`authorization.k8s.io/decision`, ...).
    pub fn annotate(&self, key: impl Into<String>, value: impl Into<String>) {
        self.with(|a| a.annotations.insert(key.into(), value.into()));
    }

    /// Records the user the request impersonates.
    pub fn set_impersonated_user(&self, user: &UserInfo) {
        self.with(|a| a.impersonated = Some(user.clone()));
    }

    fn apply(&self, event: &mut Event) {
        self.with(|a| {
            event.impersonated_user = a.impersonated.clone();
            event
                .annotations
                .extend(a.annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
        });
    }
}

tokio::task_local! {
    static CURRENT: AuditContext;
}

/// Runs `fut` with `ctx` as the current request's audit context, so code
/// below the handlers (admission) can annotate the event with
/// [`annotate_current`].
pub async fn with_context<F: std::future::Future>(ctx: Option<AuditContext>, fut: F) -> F::Output {
    match ctx {
        Some(ctx) => CURRENT.scope(ctx, fut).await,
        None => fut.await,
    }
}

/// [`annotate_current`] with a value built only when the request is
/// audited (an annotation that costs JSON to make).
pub fn annotate_current_with(key: impl Into<String>, value: impl FnOnce() -> String) {
    let _ = CURRENT.try_with(|ctx| ctx.annotate(key, value()));
}

/// Adds an annotation to the current request's audit event (nothing when
/// the request is not audited).
pub fn annotate_current(key: impl Into<String>, value: impl Into<String>) {
    let _ = CURRENT.try_with(|ctx| ctx.annotate(key, value));
}

/// The annotation with the authorizer's decision (`allow` or `forbid`).
pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
/// The annotation with the authorizer's reason.
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// Records the authorizer's decision on the request's event, if audited
/// (the authorization filter calls it). The reason is recorded even when
/// empty, as kube-apiserver does.
pub fn annotate_decision(req: &Request, allowed: bool, reason: &str) {
    if let Some(ctx) = req.extensions().get::<AuditContext>() {
        ctx.annotate(
            DECISION_ANNOTATION,
            if allowed { "allow" } else { "forbid" },
        );
        ctx.annotate(REASON_ANNOTATION, reason);
    }
}

/// Records the user a request impersonates on its event, if audited (the
/// impersonation filter calls it).
pub fn record_impersonated_user(req: &Request, user: &UserInfo) {
    if let Some(ctx) = req.extensions().get::<AuditContext>() {
        ctx.set_impersonated_user(user);
    }
}

/// The request's addresses as kube-apiserver lists them: `X-Forwarded-For`,
/// then `X-Real-Ip`, then the peer (without repeats).
fn source_ips(req: &Request) -> Vec<String> {
    let mut ips: Vec<String> = Vec::new();
    let mut push = |ip: &str| {
        let ip = ip.trim();
        if ip.parse::<std::net::IpAddr>().is_ok() && !ips.iter().any(|x| x == ip) {
            ips.push(ip.to_string());
        }
    };
    if let Some(v) = req
        .headers()
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
    {
        v.split(',').for_each(&mut push);
    }
    if let Some(v) = req.headers().get("x-real-ip").and_then(|v| v.to_str().ok()) {
        push(v);
    }
    if let Some(peer) = req.extensions().get::<crate::request::PeerAddr>() {
        push(&peer.0.ip().to_string());
    }
    ips
}

fn object_from_bytes(bytes: &[u8], cfg: &RequestAuditConfig) -> Option<serde_json::Value> {
    if bytes.is_empty() {
        return None;
    }
    let mut v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if cfg.omit_managed_fields {
        strip_managed_fields(&mut v);
    }
    Some(v)
}

fn status_of(code: u16, body: Option<&serde_json::Value>) -> ResponseStatus {
    let mut s = ResponseStatus {
        code,
        ..Default::default()
    };
    if let Some(b) = body.filter(|b| b.get("kind").and_then(|k| k.as_str()) == Some("Status")) {
        let text = |k: &str| {
            b.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        s.status = text("status");
        s.message = text("message");
        s.reason = text("reason");
        s.details = b.get("details").cloned();
    }
    s
}

struct Recorder {
    auditor: Arc<Auditor>,
    cfg: RequestAuditConfig,
    event: Event,
    ctx: AuditContext,
}

impl Recorder {
    async fn emit(&mut self, stage: Stage) {
        if self.cfg.omit_stages.contains(&stage) {
            return;
        }
        self.ctx.apply(&mut self.event);
        self.event.stage = stage;
        self.event.stage_timestamp = if stage == Stage::RequestReceived {
            self.event.request_received_timestamp.clone()
        } else {
            micro_time(jiff::Timestamp::now())
        };
        self.auditor.emit(&self.event).await;
    }
}

/// Holds a request's [`Recorder`] until its `ResponseComplete` event is
/// emitted. Dropped while still holding it, it emits that event itself:
/// when a watch's body ends (the client left or the watch finished), or
/// when the rest of the chain was cancelled before answering (the
/// request's deadline passed in the timeout filter, or the client went
/// away), so that every `RequestReceived` has its `ResponseComplete`.
struct Pending(Option<Recorder>);

impl Pending {
    fn take(&mut self) -> Option<Recorder> {
        self.0.take()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let Some(mut rec) = self.0.take() else {
            return;
        };
        if rec.event.response_status.is_none() {
            rec.event.response_status = Some(ResponseStatus {
                code: 504,
                status: "Failure".into(),
                reason: "Timeout".into(),
                message: "the request was cancelled before it was answered (timeout or client disconnect)"
                    .into(),
                ..Default::default()
            });
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { rec.emit(Stage::ResponseComplete).await });
        }
    }
}

/// The policy attributes of a request (`user` is `None` when
/// authentication failed).
fn attributes<'a>(user: Option<&'a UserInfo>, info: &'a RequestInfo) -> policy::Attributes<'a> {
    policy::Attributes {
        user,
        verb: &info.verb,
        is_resource_request: info.is_resource_request,
        path: &info.path,
        api_group: &info.group,
        namespace: &info.namespace,
        resource: &info.resource,
        subresource: &info.subresource,
        name: &info.name,
    }
}

/// When the request arrived: the request-info filter's arrival instant,
/// as wall-clock time.
fn received_at(req: &Request) -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    req.extensions()
        .get::<ReceivedAt>()
        .and_then(|r| now.checked_sub(r.0.elapsed()).ok())
        .unwrap_or(now)
}

/// A new event (stage `RequestReceived`) for a request.
fn new_event(level: Level, user: UserInfo, info: &RequestInfo, req: &Request) -> Event {
    let object_ref = info.is_resource_request.then(|| ObjectReference {
        resource: info.resource.clone(),
        namespace: info.namespace.clone(),
        name: info.name.clone(),
        api_group: info.group.clone(),
        api_version: info.version.clone(),
        subresource: info.subresource.clone(),
    });
    Event {
        kind: "Event",
        api_version: "audit.k8s.io/v1",
        level,
        audit_id: req
            .extensions()
            .get::<AuditId>()
            .map(|a| a.0.clone())
            .unwrap_or_default(),
        stage: Stage::RequestReceived,
        request_uri: req
            .uri()
            .path_and_query()
            .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string()),
        verb: info.verb.clone(),
        user,
        impersonated_user: None,
        source_ips: source_ips(req),
        user_agent: req
            .headers()
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
        object_ref,
        response_status: None,
        request_object: None,
        response_object: None,
        request_received_timestamp: micro_time(received_at(req)),
        stage_timestamp: String::new(),
        annotations: BTreeMap::new(),
    }
}

/// The request's [`RequestInfo`] (from the request-info filter, or parsed
/// now when the chain has none).
fn request_info(req: &Request) -> Arc<RequestInfo> {
    crate::request::info::of(req)
}

/// Audits `req` (what the chain's audit filter does): the audit ID, the
/// authenticated [`UserInfo`] and the [`RequestInfo`] come from the
/// request extensions (set by the audit-ID, authentication and
/// request-info filters); `next`, the rest of the chain (impersonation,
/// flow control, authorization, the handler), runs inside it.
pub async fn audit<Fut>(
    auditor: &Arc<Auditor>,
    mut req: Request,
    next: impl FnOnce(Request) -> Fut,
) -> Response
where
    Fut: Future<Output = Response>,
{
    let info = request_info(&req);
    let user = crate::request::user::user_of(&req)
        .map(|u| UserInfo::clone(u))
        .unwrap_or_default();
    let cfg = auditor.policy.evaluate(&attributes(Some(&user), &info));
    if cfg.level == Level::None {
        return next(req).await;
    }
    let mut event = new_event(cfg.level, user, &info, &req);
    if cfg.level >= Level::Request && !matches!(info.verb.as_str(), "get" | "list" | "watch") {
        let (parts, body) = req.into_parts();
        // The handlers refuse larger bodies with the same answer.
        let bytes = match axum::body::to_bytes(body, crate::request::MAX_REQUEST_BODY_BYTES).await {
            Ok(b) => b,
            Err(_) => {
                return crate::request::response::error_response(
                    &apiforge_core::meta::Status::too_large(format!(
                        "Request entity too large: limit is {}",
                        crate::request::MAX_REQUEST_BODY_BYTES
                    ))
                    .into(),
                );
            }
        };
        event.request_object = object_from_bytes(&bytes, &cfg);
        if let (Some(obj), Some(r)) = (&event.request_object, event.object_ref.as_mut()) {
            let meta = obj.get("metadata");
            let get = |k: &str| {
                meta.and_then(|m| m.get(k))
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            if r.name.is_empty() {
                r.name = get("name");
            }
            if r.namespace.is_empty() {
                r.namespace = get("namespace");
            }
        }
        req = Request::from_parts(parts, Body::from(bytes));
    }
    let ctx = AuditContext::default();
    req.extensions_mut().insert(ctx.clone());
    let mut rec = Recorder {
        auditor: auditor.clone(),
        cfg,
        event,
        ctx,
    };
    rec.emit(Stage::RequestReceived).await;
    let mut pending = Pending(Some(rec));

    let handler = std::pin::pin!(next(req));
    let outcome = std::panic::AssertUnwindSafe(handler).catch_unwind().await;
    let Some(mut rec) = pending.take() else {
        // Not reachable: only this function takes the recorder.
        return outcome.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    };
    let resp = match outcome {
        Ok(resp) => resp,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            rec.event.response_status = Some(ResponseStatus {
                code: 500,
                status: "Failure".into(),
                reason: "InternalError".into(),
                message: format!("APIServer panic'd: {what}"),
                ..Default::default()
            });
            rec.emit(Stage::Panic).await;
            // The panic-recovery filter answers it.
            std::panic::resume_unwind(panic);
        }
    };
    let code = resp.status().as_u16();
    if crate::request::info::is_long_running(&info) {
        rec.event.response_status = Some(status_of(code, None));
        rec.emit(Stage::ResponseStarted).await;
        let (parts, body) = resp.into_parts();
        let guard = Pending(Some(rec));
        let stream = body.into_data_stream().map(move |chunk| {
            let _keep = &guard;
            chunk
        });
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let capture = rec.cfg.level == Level::RequestResponse || code >= 400;
    if !capture {
        rec.event.response_status = Some(status_of(code, None));
        rec.emit(Stage::ResponseComplete).await;
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::warn!(error = %e, "audit: reading the response body failed");
            Default::default()
        }
    };
    let object = object_from_bytes(&bytes, &rec.cfg);
    rec.event.response_status = Some(status_of(code, object.as_ref()));
    if rec.cfg.level == Level::RequestResponse {
        rec.event.response_object = object;
    }
    rec.emit(Stage::ResponseComplete).await;
    Response::from_parts(parts, Body::from(bytes))
}

/// kube-apiserver's message for a failed authentication: the credentials
/// the request tried.
fn auth_methods(req: &Request) -> String {
    let mut methods = Vec::new();
    let authorization = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .trim();
    let mut words = authorization.split(' ');
    let scheme = words.next().unwrap_or_default();
    let credentials = words.next().is_some();
    if credentials && scheme.eq_ignore_ascii_case("basic") {
        methods.push("basic");
    }
    if credentials && scheme.eq_ignore_ascii_case("bearer") {
        methods.push("bearer");
    }
    let access_token = req.uri().query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes())
            .any(|(k, v)| k == "access_token" && !v.trim().is_empty())
    });
    if access_token {
        methods.push("access_token");
    }
    if req
        .extensions()
        .get::<crate::request::user::ClientCertificate>()
        .is_some()
    {
        methods.push("x509");
    }
    if methods.is_empty() {
        "Authentication failed, no credentials provided".into()
    } else {
        format!("Authentication failed, attempted: {}", methods.join(", "))
    }
}

/// Audits a request that failed authentication (kube-apiserver's
/// failed-authentication handler): the policy is evaluated without a
/// user, and one event is recorded at `ResponseStarted` with the answer's
/// code and a message naming the credentials tried.
pub async fn failed_authentication(auditor: &Arc<Auditor>, req: Request, code: u16) {
    let info = request_info(&req);
    let cfg = auditor.policy.evaluate(&attributes(None, &info));
    if cfg.level == Level::None {
        return;
    }
    let mut event = new_event(cfg.level, UserInfo::default(), &info, &req);
    event.response_status = Some(ResponseStatus {
        code,
        message: auth_methods(&req),
        ..Default::default()
    });
    drop(req);
    let mut rec = Recorder {
        auditor: auditor.clone(),
        cfg,
        event,
        ctx: AuditContext::default(),
    };
    rec.emit(Stage::ResponseStarted).await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    /// An auditor at `level` for every request, logging to `dir/audit.log`.
    fn auditor(dir: &std::path::Path, level: &str) -> Arc<Auditor> {
        let policy = Policy::parse(&format!(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: {level}\n"
        ))
        .unwrap_or_else(|e| panic!("policy: {e}"));
        let log = LogBackend::new(LogOptions {
            path: dir.join("audit.log"),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("log: {e}"));
        Auditor::from_parts(policy, vec![Backend::Log(log)])
    }

    fn events(dir: &std::path::Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(dir.join("audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The audit filter with the filters it reads from (audit ID, request
    /// info, panic recovery) around `router`.
    fn chain(
        router: axum::Router,
        auditor: Arc<Auditor>,
    ) -> impl tower::Service<Request, Response = Response, Error = std::convert::Infallible> {
        use crate::filters::{audit_id, panic_recovery, request_info};
        tower::service_fn(move |req: Request| {
            let (router, auditor) = (router.clone(), auditor.clone());
            async move {
                let handler =
                    |req| async move { router.oneshot(req).await.unwrap_or_else(|e| match e {}) };
                Ok(audit_id::filter(req, |req| {
                    request_info::filter(req, |req| {
                        panic_recovery::filter(req, |req| audit(&auditor, req, handler))
                    })
                })
                .await)
            }
        })
    }

    fn request(path: &str) -> Request {
        http::Request::builder()
            .uri(path)
            .header("audit-id", "test-id")
            .body(Body::empty())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn stages_and_context() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let router = axum::Router::new().route(
            "/api/v1/namespaces",
            get(|req: Request| async move {
                if let Some(ctx) = req.extensions().get::<AuditContext>() {
                    ctx.annotate("test/seen", "yes");
                }
                "{}"
            }),
        );
        let app = chain(router, auditor(dir.path(), "Metadata"));
        let resp = app
            .oneshot(request("/api/v1/namespaces"))
            .await
            .unwrap_or_else(|e| match e {});
        assert_eq!(resp.status(), 200);
        let events = events(dir.path());
        let stages: Vec<_> = events.iter().map(|e| e["stage"].clone()).collect();
        assert_eq!(stages, ["RequestReceived", "ResponseComplete"]);
        assert!(events.iter().all(|e| e["auditID"] == "test-id"));
        assert_eq!(
            events[0]["stageTimestamp"],
            events[0]["requestReceivedTimestamp"]
        );
        assert_eq!(events[1]["annotations"]["test/seen"], "yes");
        assert_eq!(events[1]["responseStatus"]["code"], 200);
        assert_eq!(events[1]["verb"], "list");
    }

    #[tokio::test]
    async fn level_none_records_nothing() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let router = axum::Router::new().route(
            "/healthz",
            get(|req: Request| async move {
                assert!(req.extensions().get::<AuditContext>().is_none());
                "ok"
            }),
        );
        let app = chain(router, auditor(dir.path(), "None"));
        let resp = app
            .oneshot(request("/healthz"))
            .await
            .unwrap_or_else(|e| match e {});
        assert_eq!(resp.status(), 200);
        assert!(events(dir.path()).is_empty());
    }

    #[tokio::test]
    async fn a_panic_is_recorded_and_passed_on() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let router = axum::Router::new().route(
            "/boom",
            get(|| async {
                if true {
                    panic!("kaboom");
                }
                "unreachable"
            }),
        );
        let app = chain(router, auditor(dir.path(), "Metadata"));
        let resp = app
            .oneshot(request("/boom"))
            .await
            .unwrap_or_else(|e| match e {});
        assert_eq!(resp.status(), 500, "the panic-recovery filter answers");
        let events = events(dir.path());
        let last = events.last().cloned().unwrap_or_default();
        assert_eq!(last["stage"], "Panic");
        assert_eq!(last["responseStatus"]["code"], 500);
        assert_eq!(
            last["responseStatus"]["message"],
            "APIServer panic'd: kaboom"
        );
    }

    #[tokio::test]
    async fn a_cancelled_request_still_completes() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let router = axum::Router::new().route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                "late"
            }),
        );
        let app = chain(router, auditor(dir.path(), "Metadata"));
        let cut = tokio::time::timeout(Duration::from_millis(50), app.oneshot(request("/slow")));
        assert!(cut.await.is_err());
        let mut stages = Vec::new();
        for _ in 0..50 {
            stages = events(dir.path());
            if stages.len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(stages.len(), 2, "{stages:#?}");
        assert_eq!(stages[1]["stage"], "ResponseComplete");
        assert_eq!(stages[1]["responseStatus"]["code"], 504);
    }

    #[test]
    fn failed_authentication_names_the_credentials() {
        let with = |header: Option<&str>, uri: &str| {
            let mut b = http::Request::builder().uri(uri);
            if let Some(h) = header {
                b = b.header(http::header::AUTHORIZATION, h);
            }
            auth_methods(&b.body(Body::empty()).unwrap_or_default())
        };
        assert_eq!(
            with(None, "/api"),
            "Authentication failed, no credentials provided"
        );
        assert_eq!(
            with(Some("Bearer abc"), "/api"),
            "Authentication failed, attempted: bearer"
        );
        assert_eq!(
            with(Some("Basic YTpi"), "/api?access_token=x"),
            "Authentication failed, attempted: basic, access_token"
        );
        assert_eq!(
            with(Some("Bearer"), "/api"),
            "Authentication failed, no credentials provided"
        );
    }
}
