//! The request filter chain (the generic apiserver's
//! `DefaultBuildHandlerChain`), as tower layers around the director.
//!
//! Outermost first:
//!
//! 1. [`audit_id`]: reads or generates the request's `Audit-ID` (the one
//!    [`audit_id::AuditId`] of the request, which audit events, logs and
//!    the `Audit-Id` response header all use);
//! 2. [`request_info`]: parses the path into [`RequestInfo`] and records
//!    the arrival time, for every filter below;
//! 3. [`metrics`]: `apiserver_request_total`, request durations, long-running
//!    request gauges;
//! 4. [`panic_recovery`]: a panicking handler becomes a 500 `Status`;
//! 5. [`in_flight`]: counts in-flight non-long-running requests so shutdown
//!    can drain them, and turns late arrivals away once draining started;
//! 6. [`timeout`]: the `--request-timeout` / `?timeout=` deadline of
//!    non-long-running requests (504 when exceeded);
//! 7. [`warnings`]: collects `Warning: 299` headers;
//! 8. [`cors`] and [`hsts`]: CORS (with `--cors-allowed-origins`) and
//!    `Strict-Transport-Security` (with
//!    `--strict-transport-security-directives`);
//! 9. authentication ([`crate::authn::filter`]; with auditing on, requests
//!    failing it are audited by [`crate::audit::failed_authentication`]),
//!    then the **audit slot** ([`crate::audit::filter`], with
//!    `--audit-policy-file` and a backend) and impersonation
//!    ([`crate::authn::impersonation::filter`]). The audit filter sees the
//!    authenticated user and puts an [`crate::audit::AuditContext`] into the
//!    request, through which impersonation records the impersonated user
//!    and authorization its decision;
//! 10. API Priority and Fairness ([`crate::flowcontrol`], with
//!     `--enable-priority-and-fairness`, the default) or else
//!     [`max_in_flight`]: `--max-requests-inflight` /
//!     `--max-mutating-requests-inflight`;
//! 11. authorization ([`crate::authz::filter`]);
//! 12. the director (`endpoints`).
//!
//! The slots are marked in [`build`]: each is one `.layer(...)` line.

pub mod audit_id;
pub mod cors;
pub mod hsts;
pub mod in_flight;
pub mod max_in_flight;
pub mod metrics;
pub mod panic_recovery;
pub mod request_info;
pub mod timeout;
pub mod warnings;

use std::sync::Arc;
use std::time::Duration;

use axum::middleware::from_fn_with_state;
use axum::response::Response;

pub use crate::endpoints::request_info::RequestInfo;
use crate::meta::{Status, StatusDetails};

/// Settings of the filters (kube-apiserver's generic serving flags).
#[derive(Clone, Debug)]
pub struct ChainConfig {
    /// `--request-timeout`: the deadline of non-long-running requests.
    pub request_timeout: Duration,
    /// `--min-request-timeout`: watches without `timeoutSeconds` end after a
    /// random time in `[1x, 2x)` of this.
    pub min_request_timeout: Duration,
    /// `--max-requests-inflight` (0 = unlimited): concurrent read-only
    /// requests.
    pub max_requests_inflight: usize,
    /// `--max-mutating-requests-inflight` (0 = unlimited): concurrent
    /// mutating requests.
    pub max_mutating_requests_inflight: usize,
    /// `--enable-priority-and-fairness`: API Priority and Fairness
    /// ([`crate::flowcontrol`]) replaces the max-in-flight filter, with the
    /// sum of both in-flight limits as the server's concurrency limit.
    pub enable_priority_and_fairness: bool,
    /// `--cors-allowed-origins`: origins (regular expressions) allowed to
    /// make CORS requests; empty turns CORS off.
    pub cors_allowed_origins: Vec<regex::Regex>,
    /// `--strict-transport-security-directives`; empty sends no header.
    pub hsts_directives: Vec<String>,
}

impl Default for ChainConfig {
    fn default() -> Self {
        ChainConfig {
            request_timeout: Duration::from_secs(60),
            min_request_timeout: Duration::from_secs(1800),
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            enable_priority_and_fairness: true,
            cors_allowed_origins: Vec::new(),
            hsts_directives: Vec::new(),
        }
    }
}

/// The peer address of a request's connection, in its extensions (set by
/// the server for every request; audit events list it in `sourceIPs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// The shared state of the chain the server keeps a handle on (for
/// draining at shutdown).
#[derive(Clone)]
pub struct ChainHandles {
    /// The in-flight tracker of [`in_flight`].
    pub in_flight: Arc<in_flight::InFlight>,
}

/// Whether a request is long-running: watches (kube-apiserver also counts
/// `proxy` and the `attach`/`exec`/`log`/`portforward`/`proxy`
/// subresources, none of which apiforge serves yet). Long-running requests
/// have no deadline, are not limited by max-in-flight and are not waited
/// for when draining.
pub fn is_long_running(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "watch" | "proxy")
        || (info.is_resource_request
            && matches!(
                info.subresource.as_str(),
                "attach" | "exec" | "proxy" | "log" | "portforward"
            ))
}

/// Wraps the director in the filter chain. Returns the router to serve and
/// the handles the server needs at shutdown. Without an `auditor` the audit
/// slot stays empty.
pub fn build(
    director: axum::Router,
    config: &ChainConfig,
    authenticator: Arc<crate::authn::Authenticator>,
    authorizer: Arc<crate::authz::Authorizer>,
    flow_control: Option<Arc<crate::flowcontrol::FlowControl>>,
    auditor: Option<Arc<crate::audit::Auditor>>,
) -> (axum::Router, ChainHandles) {
    let in_flight = Arc::new(in_flight::InFlight::default());
    let handles = ChainHandles {
        in_flight: in_flight.clone(),
    };
    let limits = Arc::new(max_in_flight::Limits::new(
        config.max_requests_inflight,
        config.max_mutating_requests_inflight,
    ));
    // `Router::layer` wraps what is already there: the layers are added
    // innermost first.
    let router = director.layer(from_fn_with_state(authorizer.clone(), crate::authz::filter));
    let router = match flow_control {
        Some(fc) => router.layer(from_fn_with_state(fc, crate::flowcontrol::filter)),
        None => router.layer(from_fn_with_state(limits, max_in_flight::filter)),
    };
    let router = router.layer(from_fn_with_state(
        authorizer,
        crate::authn::impersonation::filter,
    ));
    // -- audit slot
    let router = match auditor.clone() {
        Some(auditor) => router.layer(from_fn_with_state(auditor, crate::audit::filter)),
        None => router,
    };
    let authentication = crate::authn::Authentication {
        authenticator,
        failed_audit: auditor,
    };
    let router = router
        .layer(from_fn_with_state(authentication, crate::authn::filter))
        .layer(from_fn_with_state(
            Arc::new(cors::Cors::new(config.cors_allowed_origins.clone())),
            cors::filter,
        ))
        .layer(from_fn_with_state(
            Arc::new(hsts::Hsts::new(&config.hsts_directives)),
            hsts::filter,
        ))
        .layer(axum::middleware::from_fn(warnings::filter))
        .layer(from_fn_with_state(config.request_timeout, timeout::filter))
        .layer(from_fn_with_state(in_flight, in_flight::filter))
        .layer(axum::middleware::from_fn(panic_recovery::filter))
        .layer(axum::middleware::from_fn(metrics::filter))
        .layer(axum::middleware::from_fn(request_info::filter))
        .layer(axum::middleware::from_fn(audit_id::filter));
    (router, handles)
}

/// A `Status` error response (JSON), with `Retry-After` when the status
/// carries `retryAfterSeconds`.
pub(crate) fn status_response(status: Status) -> Response {
    crate::endpoints::error_response(&status.into())
}

/// A Status with empty details, as `apierrors` builds them.
pub(crate) fn failure(code: u16, reason: &str, message: impl Into<String>) -> Status {
    Status::failure(code, reason, message).with_details(StatusDetails::default())
}
