//! Request metrics (the generic apiserver's `InstrumentRouteFunc`):
//! `apiserver_request_total` and `apiserver_request_duration_seconds` for
//! every request, with kube-apiserver's labels;
//! `apiserver_request_sli_duration_seconds` (less the time queued by flow
//! control and spent in admission webhooks, not for dry runs);
//! `apiserver_request_terminations_total` for responses the server made to
//! end a request (timeouts, flow control's 429s);
//! `apiserver_response_sizes` of GET and LIST; watches (long-running) are
//! counted in `apiserver_longrunning_requests` while their stream lasts.

use std::borrow::Cow;
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use futures::StreamExt;
use http::header;

use crate::request::ReceivedAt;
use crate::request::RequestInfo;

/// kube-apiserver's `CleanVerb`: upper-case metric verbs.
pub fn metric_verb(info: &RequestInfo, method: &http::Method, apply: bool) -> Cow<'static, str> {
    if !info.is_resource_request {
        return upper_case(method);
    }
    match info.verb.as_str() {
        "list" => "LIST".into(),
        "watch" => "WATCH".into(),
        "deletecollection" => "DELETECOLLECTION".into(),
        "patch" if apply => "APPLY".into(),
        _ => upper_case(method),
    }
}

/// The method in upper case (the standard methods without allocating).
fn upper_case(method: &http::Method) -> Cow<'static, str> {
    const STANDARD: [&str; 9] = [
        "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE",
    ];
    match STANDARD.iter().find(|m| **m == method.as_str()) {
        Some(m) => Cow::Borrowed(m),
        None => Cow::Owned(method.as_str().to_uppercase()),
    }
}

/// kube-apiserver's `CleanScope`.
pub fn metric_scope(info: &RequestInfo) -> &'static str {
    if !info.name.is_empty() || info.verb == "create" {
        "resource"
    } else if !info.namespace.is_empty() {
        "namespace"
    } else if info.is_resource_request {
        "cluster"
    } else {
        ""
    }
}

/// The filter.
pub async fn filter(req: Request, next: impl super::Next) -> Response {
    let Some(info) = req
        .extensions()
        .get::<std::sync::Arc<RequestInfo>>()
        .cloned()
    else {
        return next.run(req).await;
    };
    let started = req
        .extensions()
        .get::<ReceivedAt>()
        .map_or_else(Instant::now, |r| r.0);
    let apply = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/apply-patch"));
    let dry_run = req.uri().query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "dryRun" && v == "All")
    });
    let verb = metric_verb(&info, req.method(), apply);
    let scope = metric_scope(&info);
    let long_running = crate::request::info::is_long_running(&info);
    let tracker = std::sync::Arc::new(crate::metrics::LatencyTracker::default());
    let resp = crate::metrics::LatencyTracker::scope(tracker.clone(), next.run(req)).await;

    let metrics = crate::metrics::global();
    let dry_run = if dry_run { "All" } else { "" };
    let status = resp.status();
    let code = status.as_str();
    // The request labels without `dry_run`, in upstream's order; the
    // families with `dry_run` have it after the verb.
    let labels = [
        &*verb,
        info.group.as_str(),
        info.version.as_str(),
        info.resource.as_str(),
        info.subresource.as_str(),
        scope,
        "apiserver",
    ];
    metrics
        .request_total
        .with_label_values(&[
            labels[0], dry_run, labels[1], labels[2], labels[3], labels[4], labels[5], labels[6],
            code,
        ])
        .inc();
    if resp
        .extensions()
        .get::<crate::metrics::Terminated>()
        .is_some()
    {
        metrics
            .request_terminations
            .with_label_values(&[
                labels[0], labels[1], labels[2], labels[3], labels[4], labels[5], labels[6], code,
            ])
            .inc();
    }
    if !long_running {
        let elapsed = started.elapsed();
        metrics
            .request_duration
            .with_label_values(&[
                labels[0], dry_run, labels[1], labels[2], labels[3], labels[4], labels[5],
                labels[6],
            ])
            .observe(elapsed.as_secs_f64());
        if dry_run.is_empty() {
            metrics
                .request_sli_duration
                .with_label_values(&labels)
                .observe(elapsed.saturating_sub(tracker.excluded()).as_secs_f64());
        }
        if matches!(&*verb, "GET" | "LIST") {
            return count_response_size(resp, metrics.response_sizes.with_label_values(&labels));
        }
        return resp;
    }
    if !resp.status().is_success() {
        return resp;
    }
    // Long-running: counted until the response stream ends.
    let guard =
        crate::metrics::GaugeGuard::new(metrics.longrunning_requests.with_label_values(&labels));
    let (parts, body) = resp.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _counted = &guard;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Observes the size of `resp`'s body into `histogram`: at once when its
/// length is known, else when its stream ends (a paged or chunked list).
fn count_response_size(resp: Response, histogram: prometheus::Histogram) -> Response {
    use axum::body::HttpBody as _;
    if let Some(len) = resp.body().size_hint().exact() {
        histogram.observe(len as f64);
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let counter = SizeCounter {
        bytes: 0,
        histogram,
    };
    let stream = body.into_data_stream().scan(counter, |counter, chunk| {
        if let Ok(bytes) = &chunk {
            counter.bytes += bytes.len();
        }
        std::future::ready(Some(chunk))
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Counts a streamed body's bytes; observed when the stream is dropped.
struct SizeCounter {
    bytes: usize,
    histogram: prometheus::Histogram,
}

impl Drop for SizeCounter {
    fn drop(&mut self) {
        self.histogram.observe(self.bytes as f64);
    }
}
