//! `GET /openapi/v2`: the Swagger 2.0 document of every served group.
//!
//! JSON for `application/json` (and `*/*`, `application/*`, no Accept),
//! with an ETag (upper-case hex SHA-512 of the body, quoted), `Vary:
//! Accept` and `304 Not Modified` on a matching `If-None-Match`. The gnostic
//! protobuf form (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`,
//! the only form kubectl asks for) is not implemented: it gets `406` with
//! an empty body, which kubectl reports as a download failure rather than
//! a parse error of a JSON body.

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};

use super::documents::Document;
use super::negotiation::parse_accept;

/// Media types of the gnostic protobuf form.
const PROTOBUF: [&str; 2] = [
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// Whether the Accept header lets us answer with JSON.
fn accepts_json(accept: Option<&str>) -> bool {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return true;
    };
    parse_accept(accept).iter().any(|c| {
        c.q > 0.0
            && matches!(
                c.media.as_str(),
                "application/json" | "application/*" | "*/*"
            )
            && !PROTOBUF.contains(&c.media.as_str())
    })
}

/// Serves the v2 document.
pub(super) fn serve(req: &Request, doc: Option<&Document>) -> Response {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let mut resp = Response::new(Body::empty());
    resp.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    let Some(doc) = doc else {
        *resp.status_mut() = StatusCode::NOT_FOUND;
        return resp;
    };
    if !accepts_json(accept) {
        *resp.status_mut() = StatusCode::NOT_ACCEPTABLE;
        return resp;
    }
    let etag = format!("\"{}\"", doc.hash);
    let matches = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if matches {
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
    } else {
        *resp.body_mut() = Body::from(doc.body.clone());
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        assert!(accepts_json(None));
        assert!(accepts_json(Some("application/json")));
        assert!(accepts_json(Some("application/json, */*")));
        assert!(accepts_json(Some("*/*")));
        assert!(!accepts_json(Some(PROTOBUF[0])));
        assert!(!accepts_json(Some(PROTOBUF[1])));
        assert!(!accepts_json(Some("application/yaml")));
        assert!(!accepts_json(Some("application/json;q=0")));
    }
}
