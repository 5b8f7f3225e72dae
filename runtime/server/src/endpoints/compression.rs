//! gzip response compression, with kube-apiserver's rules.
//!
//! - The client must list the `gzip` coding in `Accept-Encoding` (the
//!   header split at commas, each entry trimmed and compared with `gzip`,
//!   as the apiserver's `negotiateContentEncoding` does: `gzip;q=0.5` does
//!   not count).
//! - API responses (resources, discovery, errors, everything but
//!   `/openapi/v2`) are compressed only when their body is larger than
//!   128 KiB (`defaultGzipThresholdBytes`), at gzip level 1; a compressed
//!   response gets `Content-Encoding: gzip` and an added `Vary:
//!   Accept-Encoding`, a smaller one neither.
//! - `/openapi/v2` goes through kube-openapi's gzip handler instead: any
//!   positive q-value for `gzip` counts, bodies of 1400 bytes or more are
//!   compressed, and `Vary: Accept-Encoding` is added whenever the client
//!   accepts gzip.
//! - Watch streams are never compressed (neither is any body whose size is
//!   not known up front, nor one that already has a `Content-Encoding`),
//!   nor is `/openapi/v3` (kube-openapi's v3 handler does not compress).

use std::io::Write;

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::extract::Request;
use axum::response::Response;
use flate2::Compression;
use flate2::write::GzEncoder;
use http::{HeaderMap, HeaderValue, header};

use crate::request::{Query, info as request_info};

/// API responses larger than this are compressed.
const GZIP_THRESHOLD_BYTES: u64 = 128 * 1024;

/// `/openapi/v2` responses of at least this size are compressed.
const OPENAPI_V2_MIN_BYTES: u64 = 1400;

/// Whether `Accept-Encoding` names gzip: exactly (`apiserver`), or with a
/// positive q-value when `q_values` is set (`gziphandler`).
fn accepts_gzip(headers: &HeaderMap, q_values: bool) -> bool {
    let Some(value) = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    value.split(',').any(|coding| {
        let coding = coding.trim();
        if !q_values {
            return coding == "gzip";
        }
        let mut parts = coding.split(';');
        let name = parts.next().unwrap_or_default().trim();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .map(|q| q.trim().parse::<f32>().unwrap_or(0.0))
            .next()
            .unwrap_or(1.0);
        name.eq_ignore_ascii_case("gzip") && q > 0.0
    })
}

/// Whether the request starts a watch (`?watch=true` or a `/watch/` path).
fn is_watch(req: &Request) -> bool {
    let query = Query::parse(req.uri().query().unwrap_or_default());
    let watch_query = query.get("watch").is_some_and(|v| v != "false" && v != "0");
    watch_query || request_info::parse(req.method(), req.uri().path(), false).verb == "watch"
}

/// The middleware: compresses the response when the rules above say so.
pub(super) async fn gzip(req: Request, next: impl crate::filters::Next) -> Response {
    let path = req.uri().path();
    let openapi_v2 = path == "/openapi/v2";
    let openapi_v3 = path == "/openapi/v3" || path.starts_with("/openapi/v3/");
    let wanted = accepts_gzip(req.headers(), openapi_v2) && !openapi_v3 && !is_watch(&req);
    let mut resp = next.run(req).await;
    if !wanted {
        return resp;
    }
    if openapi_v2 {
        resp.headers_mut()
            .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    if resp.headers().contains_key(header::CONTENT_ENCODING) {
        return resp;
    }
    let Some(size) = resp.body().size_hint().exact() else {
        return resp;
    };
    let large = if openapi_v2 {
        size >= OPENAPI_V2_MIN_BYTES
    } else {
        size > GZIP_THRESHOLD_BYTES
    };
    if !large {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    // A body of known size is already in memory: collecting cannot fail.
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return crate::request::response::error_response(
            &apiforge_core::meta::Status::internal("failed to read the response body").into(),
        );
    };
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 4), Compression::fast());
    let compressed = match encoder.write_all(&bytes).and_then(|()| encoder.finish()) {
        Ok(c) => c,
        Err(_) => return Response::from_parts(parts, Body::from(bytes)),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    if !openapi_v2 {
        parts
            .headers
            .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    Response::from_parts(parts, Body::from(compressed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(value).expect("header"),
        );
        h
    }

    #[test]
    fn gzip_negotiation() {
        assert!(!accepts_gzip(&HeaderMap::new(), false));
        assert!(accepts_gzip(&headers("gzip"), false));
        assert!(accepts_gzip(&headers("deflate, gzip"), false));
        assert!(accepts_gzip(&headers(" gzip ,br"), false));
        assert!(!accepts_gzip(&headers("gzip;q=0.5"), false));
        assert!(!accepts_gzip(&headers("identity"), false));
        assert!(!accepts_gzip(&headers("x-gzip"), false));

        assert!(accepts_gzip(&headers("gzip;q=0.5"), true));
        assert!(accepts_gzip(&headers("br, GZIP"), true));
        assert!(!accepts_gzip(&headers("gzip;q=0"), true));
        assert!(!accepts_gzip(&headers("deflate"), true));
    }
}
