//! Request info (the generic apiserver's `WithRequestInfo` and
//! `WithRequestReceivedTimestamp`): every request gets its parsed
//! [`RequestInfo`] and its arrival time as extensions.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
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

/// The filter.
pub async fn filter(mut req: Request, next: Next) -> Response {
    let info = from_request(&req);
    req.extensions_mut().insert(ReceivedAt(Instant::now()));
    req.extensions_mut().insert(info);
    next.run(req).await
}
