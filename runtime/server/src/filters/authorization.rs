//! Authorization (the generic apiserver's `WithAuthorization`): 403 unless
//! the request's user may do what its request info says; the decision is
//! recorded on the audit event.

use crate::authz::{Attributes, Authorizer, Decision, forbidden};
use crate::request::user::{MASTERS_GROUP, UserInfo};

/// The authorization filter: 403 unless the request's user may do what
/// its [`RequestInfo`] says.
pub async fn filter(
    authorizer: &Authorizer,
    req: axum::extract::Request,
    next: impl super::Next,
) -> axum::response::Response {
    let user = crate::request::user::user_of(&req);
    if user.is_some_and(|u| u.in_group(MASTERS_GROUP)) {
        // What [`Authorizer::evaluate`](crate::authz::Authorizer::evaluate) answers first, without building
        // the attributes.
        crate::audit::annotate_decision(&req, true, "");
        return next.run(req).await;
    }
    let anonymous;
    let user = match user {
        Some(user) => &**user,
        None => {
            anonymous = UserInfo::anonymous();
            &anonymous
        }
    };
    let attrs = Attributes::from_request_info(user, &crate::request::info::of(&req));
    let verdict = authorizer.evaluate(&attrs).await;
    let allowed = verdict.decision == Decision::Allow;
    if !allowed && let Some(error) = &verdict.error {
        // Upstream's `responsewriters.InternalError`: plain text, not a
        // Status.
        tracing::error!(%error, "authorization failed");
        crate::audit::annotate_decision(&req, false, "internal error");
        return internal_error(req.uri(), error);
    }
    crate::audit::annotate_decision(&req, allowed, &verdict.reason);
    if allowed {
        next.run(req).await
    } else {
        crate::request::response::error_response(&forbidden(&attrs, &verdict.reason).into())
    }
}

/// kube-apiserver's answer when authorization failed with an error: 500,
/// `text/plain`, `Internal Server Error: "<request URI>": <error>` (HTML
/// special characters escaped, as Go's `http.Error` after upstream's
/// sanitizer).
fn internal_error(uri: &http::Uri, error: &str) -> axum::response::Response {
    let request_uri = uri.path_and_query().map_or("/", |p| p.as_str());
    let text = format!("Internal Server Error: {request_uri:?}: {error}")
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;");
    let mut resp = axum::response::Response::new(axum::body::Body::from(format!("{text}\n")));
    *resp.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
    let headers = resp.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        http::HeaderValue::from_static("nosniff"),
    );
    resp
}
