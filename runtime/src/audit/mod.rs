//! Auditing as kube-apiserver does it (`--audit-policy-file`,
//! `--audit-log-*`, `--audit-webhook-*`).
//!
//! The [`policy`] decides, from the authenticated user and the request, the
//! [`policy::Level`] of a request; [`process`] (the audit filter: after
//! authentication, before impersonation) then records
//! [`event::Event`]s at the stages `RequestReceived`, `ResponseStarted`
//! (watches), `ResponseComplete` and `Panic`, and hands them to the
//! [`backend`]s. At level `Request` the request body is kept, at
//! `RequestResponse` also the response body (not for watches, whose
//! responses keep streaming). Later filters add to the event through the
//! [`AuditContext`] in the request extensions (the impersonated user, the
//! authorizer's decision).

pub mod backend;
pub mod event;
pub mod policy;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use futures::{FutureExt, StreamExt};

use crate::authn::UserInfo;
use crate::endpoints::request_info::RequestInfo;
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

/// The peer address of a request's connection, in its extensions.
#[derive(Clone, Copy, Debug)]
pub struct PeerAddr(pub SocketAddr);

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

/// Records the authorizer's decision on the request's event, if audited.
pub fn annotate_decision(req: &Request, allowed: bool, reason: &str) {
    if let Some(ctx) = req.extensions().get::<AuditContext>() {
        ctx.annotate(
            "authorization.k8s.io/decision",
            if allowed { "allow" } else { "forbid" },
        );
        if !reason.is_empty() {
            ctx.annotate("authorization.k8s.io/reason", reason);
        }
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
    if let Some(peer) = req.extensions().get::<PeerAddr>() {
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
        self.event.stage_timestamp = micro_time(jiff::Timestamp::now());
        self.auditor.emit(&self.event).await;
    }
}

/// Emits `ResponseComplete` of a watch when its body is dropped.
struct CompleteOnDrop(Option<Recorder>);

impl Drop for CompleteOnDrop {
    fn drop(&mut self) {
        if let Some(mut rec) = self.0.take() {
            tokio::spawn(async move { rec.emit(Stage::ResponseComplete).await });
        }
    }
}

/// Audits one request: `user` is the authenticated user, `info` the
/// parsed request, `audit_id` its audit ID; `inner` is the rest of the
/// chain (impersonation, authorization, the handler).
pub async fn process<F, Fut>(
    auditor: &Arc<Auditor>,
    audit_id: &str,
    user: &UserInfo,
    info: &RequestInfo,
    mut req: Request,
    inner: F,
) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let received = jiff::Timestamp::now();
    let attrs = policy::Attributes {
        user: Some(user),
        verb: &info.verb,
        is_resource_request: info.is_resource_request,
        path: &info.path,
        api_group: &info.group,
        namespace: &info.namespace,
        resource: &info.resource,
        subresource: &info.subresource,
        name: &info.name,
    };
    let cfg = auditor.policy.evaluate(&attrs);
    if cfg.level == Level::None {
        return inner(req).await;
    }
    let object_ref = info.is_resource_request.then(|| ObjectReference {
        resource: info.resource.clone(),
        namespace: info.namespace.clone(),
        name: info.name.clone(),
        api_group: info.group.clone(),
        api_version: info.version.clone(),
        subresource: info.subresource.clone(),
    });
    let mut event = Event {
        kind: "Event",
        api_version: "audit.k8s.io/v1",
        level: cfg.level,
        audit_id: audit_id.to_string(),
        stage: Stage::RequestReceived,
        request_uri: req
            .uri()
            .path_and_query()
            .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string()),
        verb: info.verb.clone(),
        user: user.clone(),
        impersonated_user: None,
        source_ips: source_ips(&req),
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
        request_received_timestamp: micro_time(received),
        stage_timestamp: String::new(),
        annotations: BTreeMap::new(),
    };
    if cfg.level >= Level::Request && !matches!(info.verb.as_str(), "get" | "list" | "watch") {
        let (parts, body) = req.into_parts();
        let bytes = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(b) => b,
            Err(e) => {
                return crate::endpoints::error_response(
                    &crate::meta::Status::failure(
                        400,
                        "BadRequest",
                        format!("error reading the request body: {e}"),
                    )
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

    let resp = match std::panic::AssertUnwindSafe(inner(req))
        .catch_unwind()
        .await
    {
        Ok(resp) => resp,
        Err(panic) => {
            rec.event.response_status = Some(ResponseStatus {
                code: 500,
                status: "Failure".into(),
                reason: "InternalError".into(),
                message: "APIServer panic'd".into(),
                ..Default::default()
            });
            rec.emit(Stage::Panic).await;
            std::panic::resume_unwind(panic);
        }
    };
    let code = resp.status().as_u16();
    if info.verb == "watch" {
        rec.event.response_status = Some(status_of(code, None));
        rec.emit(Stage::ResponseStarted).await;
        let (parts, body) = resp.into_parts();
        let guard = CompleteOnDrop(Some(rec));
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
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let object = object_from_bytes(&bytes, &rec.cfg);
    rec.event.response_status = Some(status_of(code, object.as_ref()));
    if rec.cfg.level == Level::RequestResponse {
        rec.event.response_object = object;
    }
    rec.emit(Stage::ResponseComplete).await;
    Response::from_parts(parts, Body::from(bytes))
}

/// The audit filter for the tower chain: the audit ID, the authenticated
/// [`UserInfo`] and the [`RequestInfo`] come from the request extensions
/// (set by the audit-ID, request-info and authentication filters).
pub async fn filter(
    axum::extract::State(auditor): axum::extract::State<Option<Arc<Auditor>>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let (Some(auditor), Some(user), Some(info)) = (
        auditor,
        req.extensions().get::<UserInfo>().cloned(),
        req.extensions().get::<RequestInfo>().cloned(),
    ) else {
        return next.run(req).await;
    };
    let id = audit_id(&req);
    process(&auditor, &id, &user, &info, req, |r| next.run(r)).await
}

/// The request's audit ID (its `Audit-ID` header or the one the audit-ID
/// filter recorded), or a new UUID.
pub fn audit_id(req: &Request) -> String {
    req.extensions()
        .get::<AuditId>()
        .map(|a| a.0.clone())
        .or_else(|| {
            req.headers()
                .get("audit-id")
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

/// A request's audit ID, in its extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditId(pub String);
