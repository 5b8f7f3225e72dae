//! Request info (the generic apiserver's `WithRequestInfo` and
//! `WithRequestReceivedTimestamp`): every request gets its parsed
//! [`RequestInfo`] (as an `Arc<RequestInfo>`) and its arrival time as
//! extensions.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::Request;
use axum::response::Response;

use super::RequestInfo;

/// When the request arrived (deadlines count from here).
#[derive(Clone, Copy, Debug)]
pub struct ReceivedAt(pub Instant);

/// Parses the request's method, path and `watch` query parameter.
pub fn from_request<B>(req: &http::Request<B>) -> RequestInfo {
    let watch = req.uri().query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "watch")
            .is_some_and(|(_, v)| v != "false" && v != "0")
    });
    crate::endpoints::request_info::parse(req.method(), req.uri().path(), watch)
}

/// The request's [`RequestInfo`]: the one the filter put into its
/// extensions, or parsed now for a request that did not pass the filter.
pub fn of<B>(req: &http::Request<B>) -> Arc<RequestInfo> {
    req.extensions()
        .get::<Arc<RequestInfo>>()
        .cloned()
        .unwrap_or_else(|| Arc::new(from_request(req)))
}

/// The filter: puts [`ReceivedAt`] and an `Arc<RequestInfo>` (shared, not
/// cloned, by the filters and handlers below) into the request.
pub async fn filter(mut req: Request, next: impl super::Next) -> Response {
    let info = from_request(&req);
    req.extensions_mut().insert(ReceivedAt(Instant::now()));
    req.extensions_mut().insert(Arc::new(info));
    next.run(req).await
}
