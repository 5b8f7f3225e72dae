//! Response writers every layer uses: a [`Status`] error (always JSON, with
//! `Retry-After` when it carries `retryAfterSeconds`) and raw bytes with a
//! content type.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};

use crate::error::ApiError;
use apiforge_core::meta::{Status, StatusDetails};

/// A response with `body` and `content_type`.
pub fn bytes_response(code: StatusCode, content_type: &str, body: Bytes) -> Response {
    body_response(code, content_type, Body::from(body))
}

/// A response with a body of any kind (a stream, a body sent in parts) and
/// `content_type`.
pub fn body_response(code: StatusCode, content_type: &str, body: Body) -> Response {
    let mut resp = Response::new(body);
    *resp.status_mut() = code;
    // The usual type without copying it into a new header value.
    let ct = match content_type {
        "application/json" => Ok(HeaderValue::from_static("application/json")),
        other => HeaderValue::from_str(other),
    };
    if let Ok(ct) = ct {
        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    resp
}

/// Renders an API error as its Status (always JSON).
pub fn error_response(err: &ApiError) -> Response {
    let code = StatusCode::from_u16(err.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(&*err.0).unwrap_or_default();
    let mut resp = bytes_response(code, "application/json", Bytes::from(body));
    if let Some(retry) = err.0.details.as_ref().and_then(|d| d.retry_after_seconds)
        && let Ok(v) = HeaderValue::from_str(&retry.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// A `Status` error response (JSON), with `Retry-After` when the status
/// carries `retryAfterSeconds`.
pub fn status_response(status: Status) -> Response {
    error_response(&status.into())
}

/// A Status with empty details, as `apierrors` builds them.
pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Status {
    Status::failure(code, reason, message).with_details(StatusDetails::default())
}
