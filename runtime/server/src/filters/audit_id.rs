//! `Audit-ID` (the generic apiserver's `WithAuditInit`): the client's
//! `Audit-ID` request header is kept as the request's audit ID, otherwise a
//! random UUID is made; either is echoed as the `Audit-Id` response header
//! (unless a handler set one already).

use axum::extract::Request;
use axum::response::Response;
use http::{HeaderName, HeaderValue};

use crate::request::AuditId;

/// The header name (`Audit-ID`; HTTP header names are case-insensitive).
pub static HEADER: HeaderName = HeaderName::from_static("audit-id");

/// A random (version 4) UUID. Its bytes come from the thread-local CSPRNG
/// rather than from a `getrandom` system call per request, as
/// `Uuid::new_v4` without uuid's `fast-rng` feature does.
fn new_id() -> String {
    let bytes: [u8; 16] = rand::random();
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// The filter.
pub async fn filter(mut req: Request, next: impl super::Next) -> Response {
    let id = req
        .headers()
        .get(&HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .unwrap_or_else(new_id);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_random_version_4_uuids() {
        let id = new_id();
        let uuid = uuid::Uuid::parse_str(&id).expect("a UUID");
        assert_eq!(uuid.get_version_num(), 4);
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(id, uuid.hyphenated().to_string());
        assert_ne!(id, new_id());
    }
}
