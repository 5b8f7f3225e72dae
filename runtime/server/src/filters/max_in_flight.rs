//! Max-in-flight limits (the generic apiserver's `WithMaxInFlightLimit`):
//! at most `--max-requests-inflight` read-only (`get`, `list`, `watch`)
//! and `--max-mutating-requests-inflight` other requests run at once
//! (0 = unlimited). A request over the limit is rejected at once with 429
//! `TooManyRequests` and `Retry-After: 1`. Long-running requests, health
//! checks (`/healthz`, `/livez`, `/readyz` and their sub-paths) and requests
//! marked [`LimitExempt`](crate::request::LimitExempt) (by authentication, for `system:masters`) are
//! never limited.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use tokio::sync::Semaphore;

use crate::request::{LimitExempt, RequestInfo};
use apiforge_core::meta::StatusDetails;

/// The 429 message (kube-apiserver's `tooManyRequests`).
pub const MESSAGE: &str = "Too many requests, please try again later.";

/// The two buckets.
#[derive(Debug)]
pub struct Limits {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
}

impl Limits {
    /// Buckets of the given sizes (0 = unlimited).
    pub fn new(read_only: usize, mutating: usize) -> Self {
        let bucket = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Limits {
            read_only: bucket(read_only),
            mutating: bucket(mutating),
        }
    }
}

fn is_health_path(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz"]
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

/// The filter.
pub async fn filter(limits: &Limits, req: Request, next: impl super::Next) -> Response {
    let Some(info) = req.extensions().get::<Arc<RequestInfo>>() else {
        return next.run(req).await;
    };
    if crate::request::info::is_long_running(info)
        || is_health_path(req.uri().path())
        || req.extensions().get::<LimitExempt>().is_some()
    {
        return next.run(req).await;
    }
    let read_only = crate::request::info::is_read_only(info);
    let (bucket, kind) = if read_only {
        (&limits.read_only, crate::metrics::READ_ONLY)
    } else {
        (&limits.mutating, crate::metrics::MUTATING)
    };
    let Some(bucket) = bucket else {
        return next.run(req).await;
    };
    let Ok(permit) = bucket.clone().try_acquire_owned() else {
        tracing::debug!(path = req.uri().path(), kind, "max-in-flight limit reached");
        let status = crate::request::response::failure(429, "TooManyRequests", MESSAGE)
            .with_details(StatusDetails {
                retry_after_seconds: Some(1),
                ..Default::default()
            });
        return crate::metrics::terminated(crate::request::response::status_response(status));
    };
    let _in_flight =
        crate::metrics::GaugeGuard::new(crate::metrics::global().current_inflight(kind));
    let _permit = permit;
    next.run(req).await
}
