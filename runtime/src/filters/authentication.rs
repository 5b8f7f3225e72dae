//! The authentication slot. Until the `authn` module takes this position,
//! the admin bearer token (generated into the data directory) is required
//! for everything but `/healthz`, `/livez`, `/readyz` (and their checks)
//! and `/version`; a missing or wrong token is a 401 `Status`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::header;

use crate::meta::Status;

/// The admin token check.
pub struct AdminToken(String);

impl AdminToken {
    /// Accepts `Authorization: Bearer <token>`.
    pub fn new(token: String) -> Self {
        AdminToken(token)
    }

    fn accepts(&self, req: &Request) -> bool {
        req.headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| constant_time_eq(t.trim().as_bytes(), self.0.as_bytes()))
    }
}

/// Paths anyone may read (kube-apiserver's `system:public-info-viewer`).
pub fn is_public_path(path: &str) -> bool {
    matches!(path, "/healthz" | "/livez" | "/readyz" | "/version")
        || path.starts_with("/healthz/")
        || path.starts_with("/livez/")
        || path.starts_with("/readyz/")
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The filter.
pub async fn filter(State(token): State<Arc<AdminToken>>, req: Request, next: Next) -> Response {
    if is_public_path(req.uri().path()) || token.accepts(&req) {
        return next.run(req).await;
    }
    super::status_response(Status::unauthorized())
}
