//! HSTS (the generic apiserver's `WithHSTS`): with
//! `--strict-transport-security-directives`, every response carries
//! `Strict-Transport-Security` with the directives joined by `; ` (unless
//! a handler set one).

use axum::extract::Request;
use axum::response::Response;
use http::{HeaderValue, header};

/// The header value, if HSTS is on.
#[derive(Clone, Debug, Default)]
pub struct Hsts(Option<HeaderValue>);

impl Hsts {
    /// HSTS with `directives` (none: off).
    pub fn new(directives: &[String]) -> Self {
        if directives.is_empty() {
            return Hsts(None);
        }
        Hsts(HeaderValue::from_str(&directives.join("; ")).ok())
    }
}

/// Checks `--strict-transport-security-directives`: each is `max-age=<n>`,
/// `includeSubDomains` or `preload`. Returns one message per bad directive.
pub fn validate_directives(directives: &[String]) -> Vec<String> {
    let mut errors = Vec::new();
    for d in directives {
        let ok = match d.split_once('=') {
            Some(("max-age", n)) => n.parse::<u64>().is_ok(),
            None => d == "includeSubDomains" || d == "preload",
            _ => false,
        };
        if !ok {
            errors.push(format!(
                "--strict-transport-security-directives invalid, allowed values: max-age=expireTime, includeSubDomains, preload. see https://tools.ietf.org/html/rfc6797#section-6.1 for more information (got {d:?})"
            ));
        }
    }
    errors
}

/// The filter.
pub async fn filter(hsts: &Hsts, req: Request, next: impl super::Next) -> Response {
    let mut resp = next.run(req).await;
    if let Some(value) = &hsts.0
        && !resp
            .headers()
            .contains_key(header::STRICT_TRANSPORT_SECURITY)
    {
        resp.headers_mut()
            .insert(header::STRICT_TRANSPORT_SECURITY, value.clone());
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives() {
        let ok: Vec<String> = ["max-age=31536000", "includeSubDomains", "preload"]
            .map(String::from)
            .into();
        assert!(validate_directives(&ok).is_empty());
        assert_eq!(
            validate_directives(&["max-age=x".into(), "preload".into(), "x".into()]).len(),
            2
        );
    }
}
