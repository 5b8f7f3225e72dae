//! `Audit-ID` (the generic apiserver's `WithAuditInit`): the client's
//! `Audit-ID` request header is kept as the request's audit ID, otherwise a
//! random UUID is made; either is echoed as the `Audit-Id` response header
//! (unless a handler set one already).

use axum::extract::Request;
use axum::response::Response;
use http::{HeaderName, HeaderValue};

/// The header name (`Audit-ID`; HTTP header names are case-insensitive).
pub static HEADER: HeaderName = HeaderName::from_static("audit-id");

/// The audit ID of a request, in its extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditId(pub String);

/// The filter.
pub async fn filter(mut req: Request, next: impl super::Next) -> Response {
    let id = req
        .headers()
        .get(&HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let value = HeaderValue::from_str(&id).ok();
    req.extensions_mut().insert(AuditId(id));
    let mut resp = next.run(req).await;
    if let Some(value) = value
        && !resp.headers().contains_key(&HEADER)
    {
        resp.headers_mut().insert(HEADER.clone(), value);
    }
    resp
}
