//! Warnings (the generic apiserver's `WithWarningRecorder`): everything
//! below records `Warning: 299` headers with [`crate::warning::add`].

use axum::extract::Request;
use axum::response::Response;

/// The filter.
pub async fn filter(req: Request, next: impl super::Next) -> Response {
    crate::warning::record(next.run(req)).await
}
