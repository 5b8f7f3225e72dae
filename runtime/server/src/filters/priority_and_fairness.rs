//! API Priority and Fairness (the generic apiserver's
//! `WithPriorityAndFairness`): each request is classified by the
//! FlowSchemas and waits for a seat of its priority level, or is rejected
//! with 429 ([`crate::flowcontrol`] holds the configuration and queues).

use axum::extract::Request;
use axum::response::Response;

use crate::flowcontrol::FlowControl;

/// The filter (in place of max-in-flight when APF is on).
pub async fn filter(fc: &FlowControl, req: Request, next: impl super::Next) -> Response {
    crate::flowcontrol::dispatch(fc, req, |req| next.run(req)).await
}
