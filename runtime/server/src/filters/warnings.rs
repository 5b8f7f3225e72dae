//! Warnings (the generic apiserver's `WithWarningRecorder`): everything
//! below records `Warning: 299` headers with [`crate::request::warning::add`].

use axum::extract::Request;
use axum::response::Response;

/// The filter.
pub async fn filter(req: Request, next: impl super::Next) -> Response {
    // Pinned here: the recorder polls it through a pointer instead of
    // moving the rest of the chain's future into its own.
    let handler = std::pin::pin!(next.run(req));
    crate::request::warning::record(handler).await
}
