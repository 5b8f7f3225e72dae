//! Request info (the generic apiserver's `WithRequestInfo` and
//! `WithRequestReceivedTimestamp`): every request gets its parsed
//! [`RequestInfo`](crate::request::RequestInfo) (as an `Arc<RequestInfo>`,
//! see [`crate::request::info::of`]) and its arrival time
//! ([`ReceivedAt`]) as extensions.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::Request;
use axum::response::Response;

use crate::request::ReceivedAt;
use crate::request::info::from_request;

/// The filter: puts [`ReceivedAt`] and an `Arc<RequestInfo>` (shared, not
/// cloned, by the filters and handlers below) into the request.
pub async fn filter(mut req: Request, next: impl super::Next) -> Response {
    let info = from_request(&req);
    req.extensions_mut().insert(ReceivedAt(Instant::now()));
    req.extensions_mut().insert(Arc::new(info));
    next.run(req).await
}
