//! `watch`: a stream of watch events, batched into chunks, ended by
//! `timeoutSeconds`, the server's default watch timeout or shutdown.

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, header};
use serde_json::{Value, json};

use super::list::{encode_json, namespace_scope};
use super::negotiation::{self, Allowed, Format, Target};
use super::table::{self};
use super::{Ctx, not_acceptable};
use super::{parse_list_params, query_bool, timeout_seconds_param};
use crate::error::ApiResult;
use crate::registry::WatchEvent;
use apiforge_core::meta::Status;

pub(super) async fn watch(ctx: &Ctx<'_>) -> ApiResult<Response> {
    let params = parse_list_params(ctx)?;
    // Watch streams are JSON only: a client preferring protobuf gets its
    // JSON clause (client-go decodes by the response Content-Type).
    let (format, target) = negotiation::negotiate(
        ctx.accept.as_deref(),
        Allowed {
            meta_targets: true,
            ..Default::default()
        },
    )
    .ok_or_else(not_acceptable)?;
    if format != Format::Json {
        return Err(not_acceptable());
    }
    let include = ctx.include_object()?;
    let bookmarks = ctx.query.get("allowWatchBookmarks").is_some_and(query_bool);
    let timeout = match timeout_seconds_param(ctx.query)? {
        // Zero or negative: the server's default, as kube-apiserver.
        Some(n) if n > 0 => Duration::from_secs(n.unsigned_abs()),
        _ => ctx.served.default_watch_timeout(),
    };
    let events = ctx
        .store
        .watch(namespace_scope(ctx), &params, bookmarks)
        .await?;
    let watcher = crate::metrics::GaugeGuard::new(
        crate::metrics::global()
            .registered_watchers
            .with_label_values(&[ctx.info.group, ctx.info.version, ctx.info.kind]),
    );
    let kind = ctx.store.kind().clone();
    let info = ctx.info;
    let mut first = true;
    let lines = events.map(move |ev| {
        let (ty, object) = match ev {
            // The plain object: encoded once per version and shared by every
            // watcher (and list) that sends this cached object.
            WatchEvent::Object(ty, cached) if matches!(target, Target::Object) => {
                let encoded = cached.encoded(info.version, |hub| encode_json(&kind, info.version, hub));
                return match encoded {
                    Ok(bytes) => event_line(ty, &bytes),
                    Err(e) => encode_line(
                        "ERROR",
                        &serde_json::to_value(Status::internal(e)).unwrap_or_default(),
                    ),
                };
            }
            WatchEvent::Object(ty, cached) => {
                let obj = match cached
                    .object()
                    .and_then(|hub| kind.encode(info.version, &hub).map_err(|e| e.to_string()))
                {
                    Ok(o) => o,
                    Err(e) => return encode_line("ERROR", &serde_json::to_value(Status::internal(e)).unwrap_or_default()),
                };
                let obj = match &target {
                    Target::Table(v) => {
                        let t = table::table(info, kind.table_printer(), &[obj], v, include, None, first);
                        first = false;
                        t
                    }
                    Target::PartialObjectMetadata(v) => table::partial_metadata(&obj, v),
                    _ => obj,
                };
                (ty, obj)
            }
            WatchEvent::Bookmark(rv) => (
                "BOOKMARK",
                json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": {"resourceVersion": rv.to_string()}}),
            ),
            WatchEvent::InitialEventsEnd(rv) => (
                "BOOKMARK",
                json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": {
                    "resourceVersion": rv.to_string(),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                }}),
            ),
            WatchEvent::Error(status) => ("ERROR", serde_json::to_value(&*status).unwrap_or_default()),
        };
        encode_line(ty, &object)
    });
    let metrics = crate::metrics::global();
    let labels = [ctx.info.group, ctx.info.version, ctx.info.plural];
    let (sent, sizes) = (
        metrics.watch_events.with_label_values(&labels),
        metrics.watch_event_sizes.with_label_values(&labels),
    );
    let lines = lines.inspect(move |line| {
        sent.inc();
        sizes.observe(line.len() as f64);
    });
    let mut shutdown = ctx.served.shutdown.clone();
    let stop = async move {
        let _watcher = watcher;
        tokio::select! {
            _ = tokio::time::sleep(timeout) => {}
            _ = shutdown.wait_for(|v| *v) => {}
        }
    };
    // Events already waiting for this watcher go out as one chunk: under
    // load a watcher that fell behind catches up with one TLS record and
    // one write per batch instead of per event (the bytes on the wire are
    // the same newline-separated events).
    let stream = lines
        .ready_chunks(WATCH_BATCH_EVENTS)
        .map(join_lines)
        .take_until(Box::pin(stop))
        .map(Ok::<Bytes, std::convert::Infallible>);
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// At most this many waiting watch events are joined into one chunk.
pub(super) const WATCH_BATCH_EVENTS: usize = 64;

/// One chunk of watch events (each a line).
pub(super) fn join_lines(mut lines: Vec<Bytes>) -> Bytes {
    if lines.len() == 1 {
        return lines.pop().unwrap_or_default();
    }
    let mut chunk = Vec::with_capacity(lines.iter().map(Bytes::len).sum());
    for line in &lines {
        chunk.extend_from_slice(line);
    }
    Bytes::from(chunk)
}

/// A watch event line around an already encoded object.
pub(super) fn event_line(ty: &str, object: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + ty.len() + 24);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(ty.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

pub(super) fn encode_line(ty: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": ty, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}
