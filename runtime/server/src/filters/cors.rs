//! CORS (the generic apiserver's `WithCORS`): with `--cors-allowed-origins`
//! set, a request whose `Origin` matches one of the patterns gets the
//! `Access-Control-*` headers; a preflight (`OPTIONS`) from such an origin
//! is answered 204 right here. Other requests pass untouched.

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};

/// Methods announced in `Access-Control-Allow-Methods`.
pub const ALLOW_METHODS: &str = "POST, GET, OPTIONS, PUT, DELETE, PATCH";
/// Headers announced in `Access-Control-Allow-Headers`.
pub const ALLOW_HEADERS: &str = "Content-Type, Content-Length, Accept-Encoding, X-CSRF-Token, Authorization, X-Requested-With, If-Modified-Since";
/// Headers announced in `Access-Control-Expose-Headers`.
pub const EXPOSE_HEADERS: &str = "Date";

/// The allowed origin patterns.
#[derive(Clone, Debug, Default)]
pub struct Cors {
    origins: Vec<regex::Regex>,
}

impl Cors {
    /// CORS for origins matching any of `origins` (none: CORS off).
    pub fn new(origins: Vec<regex::Regex>) -> Self {
        Cors { origins }
    }
}

/// Checks `--cors-allowed-origins` patterns: each must compile and pin to
/// the start (`^` or `//`) and end (`$` or `:`) of the origin's host
/// (kube-apiserver's CVE-2022-1996 rule). Returns the compiled patterns or
/// one message per bad pattern.
pub fn compile_origins(patterns: &[String]) -> Result<Vec<regex::Regex>, Vec<String>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for p in patterns {
        match regex::Regex::new(p) {
            Err(e) => errors.push(format!(
                "--cors-allowed-origins has an invalid regular expression {p:?}: {e}"
            )),
            Ok(re) => {
                let pins_start = p.contains('^') || p.contains("//");
                let pins_end = p.contains('$') || p.contains(':');
                if pins_start && pins_end {
                    out.push(re);
                } else {
                    errors.push(format!(
                        "--cors-allowed-origins has an invalid regular expression {p:?}: regular expression does not pin to start/end of host in the origin header"
                    ));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn set_headers(headers: &mut HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(ALLOW_METHODS),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOW_HEADERS),
    );
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSE_HEADERS),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
}

/// The filter.
pub async fn filter(cors: &Cors, req: Request, next: impl super::Next) -> Response {
    if cors.origins.is_empty() {
        return next.run(req).await;
    }
    let Some(origin) = req
        .headers()
        .get(header::ORIGIN)
        .filter(|o| {
            o.to_str()
                .is_ok_and(|o| !o.is_empty() && cors.origins.iter().any(|re| re.is_match(o)))
        })
        .cloned()
    else {
        return next.run(req).await;
    };
    if req.method() == Method::OPTIONS {
        let mut resp = Response::new(Body::empty());
        *resp.status_mut() = StatusCode::NO_CONTENT;
        set_headers(resp.headers_mut(), origin);
        return resp;
    }
    let mut resp = next.run(req).await;
    set_headers(resp.headers_mut(), origin);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_must_pin_host() {
        assert!(
            compile_origins(&["^https://example\\.com$".into(), "//localhost(:|$)".into()]).is_ok()
        );
        let errs = compile_origins(&["example.com".into(), "(".into()]).expect_err("bad");
        assert_eq!(errs.len(), 2);
        assert!(errs[0].contains("does not pin"), "{errs:?}");
    }
}
