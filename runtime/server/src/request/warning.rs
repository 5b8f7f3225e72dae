//! Warnings returned to the client as `Warning: 299 - "<text>"` headers
//! (the generic apiserver's `warning.AddWarning(ctx, ...)`).
//!
//! The endpoint runs each request inside [`record`]; anything below it —
//! the registry calling a strategy's `warnings_on_create`, the resource
//! handler noting a deprecated version — calls [`add`] without threading a
//! collector through every signature. Outside [`record`], [`add`] does
//! nothing. Warnings are deduplicated and capped like kube-apiserver's
//! recorder.

use std::cell::RefCell;
use std::future::Future;

use axum::response::Response;
use http::HeaderValue;

/// At most this many warnings per response (kube-apiserver: 4 KiB of
/// headers; a count is simpler and enough here).
const MAX_WARNINGS: usize = 64;

tokio::task_local! {
    static RECORDER: RefCell<Vec<String>>;
}

/// Records a warning for the current request (no-op outside [`record`]).
pub fn add(text: impl Into<String>) {
    let text = text.into();
    if text.is_empty() {
        return;
    }
    let _ = RECORDER.try_with(|r| {
        let mut r = r.borrow_mut();
        if r.len() < MAX_WARNINGS && !r.contains(&text) {
            r.push(text);
        }
    });
}

/// Runs `handler` with a warning recorder and adds what was recorded to
/// its response as `Warning` headers.
pub async fn record<F>(handler: F) -> Response
where
    F: Future<Output = Response>,
{
    let (mut resp, warnings) = RECORDER
        .scope(RefCell::new(Vec::new()), async move {
            let resp = handler.await;
            let warnings = RECORDER.with(|r| r.take());
            (resp, warnings)
        })
        .await;
    for text in warnings {
        if let Ok(v) = HeaderValue::from_str(&header_value(&text)) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
    resp
}

/// `299 - "<text>"`, with `"` and `\` escaped and control characters
/// replaced by spaces (RFC 7234 warn-text is a quoted-string).
pub fn header_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_quoted() {
        assert_eq!(header_value("a \"b\"\n"), "299 - \"a \\\"b\\\" \"");
    }

    #[tokio::test]
    async fn recorded_warnings_become_headers() {
        add("outside a request: dropped");
        let resp = record(async {
            add("one");
            add("two");
            add("one");
            Response::new(axum::body::Body::empty())
        })
        .await;
        let values: Vec<_> = resp
            .headers()
            .get_all(http::header::WARNING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(values, ["299 - \"one\"", "299 - \"two\""]);
    }
}
