//! `GET /openapi/v2`: the Swagger 2.0 document of every served group, as
//! kube-openapi's handler serves it.
//!
//! Two forms: JSON (`application/json`) and gnostic protobuf
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf` or
//! `...spec.v2.v1.0+protobuf`, both answered with the latter content type;
//! kubectl up to 1.28 asks only for it). The Accept clauses are tried in
//! preference order (no Accept header means `*/*`), each against JSON
//! then protobuf, wildcards matching; the first match wins, and none is a
//! `406` with an empty body. Both forms carry the JSON form's ETag (upper
//! case hex SHA-512, quoted), `Vary: Accept` and `Cache-Control: no-cache,
//! private`; a matching `If-None-Match` is a `304 Not Modified`.

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};

use super::documents::OpenApiDocuments;
use super::negotiation::parse_accept;

/// The protobuf content type served.
const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The forms, in kube-openapi's order: media sub-type and form.
const FORMS: [(&str, Form); 3] = [
    ("json", Form::Json),
    (
        "com.github.proto-openapi.spec.v2@v1.0+protobuf",
        Form::Protobuf,
    ),
    (
        "com.github.proto-openapi.spec.v2.v1.0+protobuf",
        Form::Protobuf,
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Json,
    Protobuf,
}

/// The form the Accept header asks for, if any.
fn negotiate(accept: Option<&str>) -> Option<Form> {
    let accept = accept.filter(|a| !a.trim().is_empty()).unwrap_or("*/*");
    parse_accept(accept)
        .iter()
        .filter(|c| c.q > 0.0)
        .find_map(|c| {
            let (kind, sub) = c.media.split_once('/')?;
            if kind != "application" && kind != "*" {
                return None;
            }
            FORMS
                .iter()
                .find(|(s, _)| sub == *s || sub == "*")
                .map(|(_, form)| *form)
        })
}

/// Serves the v2 document.
pub(super) fn serve(req: &Request, docs: &OpenApiDocuments) -> Response {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let mut resp = Response::new(Body::empty());
    resp.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    let Some(doc) = docs.v2.as_ref() else {
        *resp.status_mut() = StatusCode::NOT_FOUND;
        return resp;
    };
    let (body, content_type) = match negotiate(accept) {
        Some(Form::Json) => (doc.body.clone(), "application/json"),
        Some(Form::Protobuf) => match docs.v2_protobuf.as_ref() {
            Some(body) => (body.clone(), PROTOBUF),
            None => {
                *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                return resp;
            }
        },
        None => {
            *resp.status_mut() = StatusCode::NOT_ACCEPTABLE;
            return resp;
        }
    };
    let etag = format!("\"{}\"", doc.hash);
    let matches = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if matches {
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
    } else {
        *resp.body_mut() = Body::from(body);
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
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
        assert_eq!(negotiate(None), Some(Form::Json));
        assert_eq!(negotiate(Some("")), Some(Form::Json));
        assert_eq!(negotiate(Some("application/json")), Some(Form::Json));
        assert_eq!(negotiate(Some("application/json, */*")), Some(Form::Json));
        assert_eq!(negotiate(Some("*/*")), Some(Form::Json));
        assert_eq!(negotiate(Some("application/*")), Some(Form::Json));
        assert_eq!(
            negotiate(Some(
                "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            )),
            Some(Form::Protobuf)
        );
        assert_eq!(negotiate(Some(PROTOBUF)), Some(Form::Protobuf));
        assert_eq!(
            negotiate(Some(
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json;q=0.9"
            )),
            Some(Form::Protobuf)
        );
        assert_eq!(
            negotiate(Some(
                "application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            )),
            Some(Form::Protobuf)
        );
        assert_eq!(negotiate(Some("application/yaml")), None);
        assert_eq!(negotiate(Some("application/json;q=0")), None);
    }
}
