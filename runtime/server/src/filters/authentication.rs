//! Authentication (the generic apiserver's `WithAuthentication`): the
//! request's user, from its client certificate or bearer token (or
//! anonymous), goes into its extensions; a request that fails it ends with
//! 401, audited when auditing is on.

use std::sync::Arc;

use crate::authn::Authenticator;
use crate::request::user::ClientCertificate;

/// The state of the authentication [`filter`].
#[derive(Clone)]
pub struct Authentication {
    /// Who requests are from.
    pub authenticator: Arc<Authenticator>,
    /// With auditing on: where requests that fail authentication are
    /// audited ([`crate::audit::failed_authentication`]).
    pub failed_audit: Option<Arc<crate::audit::Auditor>>,
}

/// The authentication filter: the request's
/// [`UserInfo`](crate::request::user::UserInfo) goes into its
/// extensions (as an `Arc<UserInfo>`, see
/// [`user_of`](crate::request::user::user_of)), or the request
/// ends with 401 (audited, with auditing on).
pub async fn filter(
    state: &Authentication,
    mut req: axum::extract::Request,
    next: impl super::Next,
) -> axum::response::Response {
    let cert = req.extensions().get::<ClientCertificate>().cloned();
    let started = std::time::Instant::now();
    let outcome = state
        .authenticator
        .authenticate(req.headers_mut(), cert.as_ref())
        .await;
    // Upstream's `authentication_attempts` results: a refused credential
    // is a failure, anything else that stopped authentication an error.
    let result = match &outcome {
        Ok(_) => "success",
        Err(e) if e.code() == 401 => "failure",
        Err(_) => "error",
    };
    let metrics = crate::metrics::global();
    metrics
        .authentication_attempts
        .with_label_values(&[result])
        .inc();
    metrics
        .authentication_duration
        .with_label_values(&[result])
        .observe(started.elapsed().as_secs_f64());
    match outcome {
        Ok(user) => {
            tracing::Span::current().record("user", user.name.as_str());
            req.extensions_mut().insert(Arc::new(user));
            next.run(req).await
        }
        Err(e) => {
            if let Some(auditor) = &state.failed_audit {
                // Boxed: a rare path with a large future.
                Box::pin(crate::audit::failed_authentication(auditor, req, e.code())).await;
            }
            crate::request::response::error_response(&e)
        }
    }
}
