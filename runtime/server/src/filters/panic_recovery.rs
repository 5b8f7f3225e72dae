//! Panic recovery (the generic apiserver's `WithPanicRecovery`): a handler
//! that panics answers 500 and is logged; the server keeps serving.

use std::panic::AssertUnwindSafe;

use axum::extract::Request;
use axum::response::Response;
use futures::FutureExt;

/// The message kube-apiserver answers a panicking request with.
pub const MESSAGE: &str = "This request caused apiserver to panic. Look in the logs for details.";

/// The filter.
pub async fn filter(req: Request, next: impl super::Next) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let audit_id = req
        .extensions()
        .get::<crate::request::AuditId>()
        .map(|a| a.0.clone())
        .unwrap_or_default();
    // Pinned here, so `CatchUnwind` holds a pointer rather than a copy of
    // the rest of the chain's future.
    let handler = std::pin::pin!(next.run(req));
    match AssertUnwindSafe(handler).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".into());
            tracing::error!(%method, %uri, audit_id, panic = what, "apiserver panicked");
            crate::request::response::status_response(crate::request::response::failure(
                500,
                "InternalError",
                MESSAGE,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::ServiceExt;

    async fn body_text(resp: Response) -> String {
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_and_the_service_keeps_serving() {
        async fn handler(req: Request) -> Response {
            if req.uri().path() == "/boom" {
                panic!("boom");
            }
            Response::new(Body::from("fine"))
        }
        let app = tower::service_fn(|req: Request| async move {
            Ok::<_, std::convert::Infallible>(filter(req, handler).await)
        });
        let resp = app
            .oneshot(
                http::Request::get("/boom")
                    .body(Body::empty())
                    .expect("req"),
            )
            .await
            .expect("infallible");
        assert_eq!(resp.status(), 500);
        let body: serde_json::Value =
            serde_json::from_str(&body_text(resp).await).expect("a Status");
        assert_eq!(body["kind"], "Status");
        assert_eq!(body["reason"], "InternalError");
        assert_eq!(body["code"], 500);
        assert_eq!(body["message"], MESSAGE);
        let resp = app
            .oneshot(http::Request::get("/ok").body(Body::empty()).expect("req"))
            .await
            .expect("infallible");
        assert_eq!(resp.status(), 200);
        assert_eq!(body_text(resp).await, "fine");
    }
}
