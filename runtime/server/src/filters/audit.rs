//! Auditing (the generic apiserver's `WithAudit`): with an audit policy and
//! a backend, every request's event is built and emitted at its stages by
//! [`crate::audit::audit`], with the rest of the chain running inside it.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;

use crate::audit::Auditor;

/// The filter.
pub async fn filter(auditor: &Arc<Auditor>, req: Request, next: impl super::Next) -> Response {
    crate::audit::audit(auditor, req, |req| next.run(req)).await
}
