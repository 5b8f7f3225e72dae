//! The request filter chain (the generic apiserver's
//! `DefaultBuildHandlerChain`) around the director.
//!
//! Each filter is an `async fn` in its own module that takes its state,
//! the request and the rest of the chain ([`Next`]). [`build`] composes
//! them into one tower service, [`Chain`], whose per-request cost is one
//! `Arc` clone and one boxed future for the whole chain (axum's `from_fn`
//! layers cloned and boxed every layer per request).
//!
//! Outermost first:
//!
//! 1. [`audit_id`]: reads or generates the request's `Audit-ID` (the one
//!    [`AuditId`](crate::request::AuditId) of the request, which audit
//!    events, logs and the `Audit-Id` response header all use);
//! 2. [`request_info`]: parses the path into
//!    [`RequestInfo`](crate::request::RequestInfo) (shared by everything
//!    below as an `Arc<RequestInfo>`, see [`crate::request::info::of`]),
//!    records the arrival time and runs the rest of the chain in the
//!    request's tracing span (audit ID, verb, resource, namespace, user,
//!    status);
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
//! 9. [`authentication`] (with auditing on, requests failing it are
//!    audited by [`crate::audit::failed_authentication`]), then the
//!    **audit slot** ([`audit`], with `--audit-policy-file` and a backend)
//!    and [`impersonation`]. The audit filter sees the authenticated user
//!    and puts an [`crate::audit::AuditContext`] into the request, through
//!    which impersonation records the impersonated user and authorization
//!    its decision;
//! 10. [`priority_and_fairness`] (API Priority and Fairness, with
//!     `--enable-priority-and-fairness`, the default) or else
//!     [`max_in_flight`]: `--max-requests-inflight` /
//!     `--max-mutating-requests-inflight`;
//! 11. [`authorization`];
//! 12. the [`Handler`] the chain wraps: the server's director.
//!
//! The filters only compose: what a filter decides comes from its domain
//! module (`authn`, `audit`, `authz`, `flowcontrol`), which knows nothing
//! of the chain.
//!
//! The composition is `Filters::serve` (and, for the optional slots,
//! `Filters::audited` and `Filters::impersonated`): each filter is one
//! nested call there.

pub mod audit;
pub mod audit_id;
pub mod authentication;
pub mod authorization;
pub mod cors;
pub mod hsts;
pub mod impersonation;
pub mod in_flight;
pub mod max_in_flight;
pub mod metrics;
pub mod panic_recovery;
pub mod priority_and_fairness;
pub mod request_info;
pub mod timeout;
pub mod warnings;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use tower::Service;

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

/// The shared state of the chain the server keeps a handle on (for
/// draining at shutdown).
#[derive(Clone)]
pub struct ChainHandles {
    /// The in-flight tracker of [`in_flight`].
    pub in_flight: Arc<in_flight::InFlight>,
}

/// The rest of the chain below a filter: what a filter calls (at most
/// once) to pass the request on, as `axum::middleware::Next` but without
/// boxing. Any `FnOnce(Request) -> impl Future<Output = Response>` is one,
/// so a filter can be run alone in a test with a closure as the handler.
pub trait Next: Send {
    /// Runs the rest of the chain on `req`.
    fn run(self, req: Request) -> impl Future<Output = Response> + Send;
}

impl<F, Fut> Next for F
where
    F: FnOnce(Request) -> Fut + Send,
    Fut: Future<Output = Response> + Send,
{
    fn run(self, req: Request) -> impl Future<Output = Response> + Send {
        self(req)
    }
}

/// The limiter slot: API Priority and Fairness or max-in-flight.
enum Limiter {
    Apf(Arc<crate::flowcontrol::FlowControl>),
    MaxInFlight(max_in_flight::Limits),
}

/// What the chain ends in (the server's director): serves a request that
/// passed every filter.
pub trait Handler: Send + Sync + 'static {
    /// Serves `req`.
    fn serve(&self, req: Request) -> impl Future<Output = Response> + Send;
}

/// The state of every filter, shared by all requests.
struct Filters<H> {
    in_flight: Arc<in_flight::InFlight>,
    request_timeout: Duration,
    cors: cors::Cors,
    hsts: hsts::Hsts,
    authentication: authentication::Authentication,
    auditor: Option<Arc<crate::audit::Auditor>>,
    authorizer: Arc<crate::authz::Authorizer>,
    limiter: Limiter,
    handler: H,
}

impl<H: Handler> Filters<H> {
    /// Runs `req` through the chain, outermost filter first (the order of
    /// the module documentation). Each filter gets the rest of the chain as
    /// a closure: the whole chain is one future, with no allocation or
    /// clone per filter.
    async fn serve(&self, req: Request) -> Response {
        audit_id::filter(req, |req| {
            request_info::filter(req, |req| {
                metrics::filter(req, |req| {
                    panic_recovery::filter(req, |req| {
                        in_flight::filter(&self.in_flight, req, |req| {
                            timeout::filter(self.request_timeout, req, |req| {
                                warnings::filter(req, |req| {
                                    cors::filter(&self.cors, req, |req| {
                                        hsts::filter(&self.hsts, req, |req| {
                                            authentication::filter(
                                                &self.authentication,
                                                req,
                                                |req| self.audited(req),
                                            )
                                        })
                                    })
                                })
                            })
                        })
                    })
                })
            })
        })
        .await
    }

    /// The audit slot (empty without an auditor) and what runs inside it.
    /// The audit filter's future is large and boxed, so that the chain's
    /// future (copied as each filter starts the next) stays small when
    /// auditing is off.
    async fn audited(&self, req: Request) -> Response {
        match &self.auditor {
            Some(auditor) => {
                Box::pin(audit::filter(auditor, req, |req| self.impersonated(req))).await
            }
            None => self.impersonated(req).await,
        }
    }

    /// Impersonation, the limiter slot, authorization and the handler.
    async fn impersonated(&self, req: Request) -> Response {
        impersonation::filter(&self.authorizer, req, |req| async move {
            let authorized =
                |req| authorization::filter(&self.authorizer, req, |req| self.handler.serve(req));
            match &self.limiter {
                Limiter::Apf(fc) => priority_and_fairness::filter(fc, req, authorized).await,
                Limiter::MaxInFlight(limits) => {
                    max_in_flight::filter(limits, req, authorized).await
                }
            }
        })
        .await
    }
}

/// The filter chain around a [`Handler`], as the tower [`Service`] the
/// server serves connections with. Cloning it clones one `Arc`.
pub struct Chain<H> {
    filters: Arc<Filters<H>>,
}

impl<H> Clone for Chain<H> {
    fn clone(&self) -> Self {
        Chain {
            filters: self.filters.clone(),
        }
    }
}

impl<H: Handler, B> Service<http::Request<B>> for Chain<H>
where
    B: axum::body::HttpBody<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let filters = self.filters.clone();
        let req = req.map(axum::body::Body::new);
        Box::pin(async move { Ok(filters.serve(req).await) })
    }
}

/// Wraps `handler` (the director) in the filter chain. Returns the
/// service to serve and the handles the server needs at shutdown. Without
/// an `auditor` the audit slot stays empty; without `flow_control` the
/// limiter slot holds max-in-flight.
pub fn build<H: Handler>(
    handler: H,
    config: &ChainConfig,
    authenticator: Arc<crate::authn::Authenticator>,
    authorizer: Arc<crate::authz::Authorizer>,
    flow_control: Option<Arc<crate::flowcontrol::FlowControl>>,
    auditor: Option<Arc<crate::audit::Auditor>>,
) -> (Chain<H>, ChainHandles) {
    let in_flight = Arc::new(in_flight::InFlight::default());
    let handles = ChainHandles {
        in_flight: in_flight.clone(),
    };
    let limiter = match flow_control {
        Some(fc) => Limiter::Apf(fc),
        None => Limiter::MaxInFlight(max_in_flight::Limits::new(
            config.max_requests_inflight,
            config.max_mutating_requests_inflight,
        )),
    };
    let filters = Filters {
        in_flight,
        request_timeout: config.request_timeout,
        cors: cors::Cors::new(config.cors_allowed_origins.clone()),
        hsts: hsts::Hsts::new(&config.hsts_directives),
        authentication: authentication::Authentication {
            authenticator,
            failed_audit: auditor.clone(),
        },
        auditor,
        authorizer,
        limiter,
        handler,
    };
    (
        Chain {
            filters: Arc::new(filters),
        },
        handles,
    )
}
