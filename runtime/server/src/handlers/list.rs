//! `list`: a page of objects (from the watch cache's shared encodings when
//! it can), with label and field selectors, limit and continue.

use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use super::negotiation::{Format, Target};
use super::parse_list_params;
use super::table::{self};
use super::{Ctx, protobuf};
use crate::error::{ApiError, ApiResult};
use apiforge_core::meta::Status;

pub(super) fn namespace_scope<'a>(ctx: &'a Ctx<'_>) -> Option<&'a str> {
    if ctx.ri.namespace.is_empty() {
        None
    } else {
        Some(ctx.ri.namespace.as_str())
    }
}

pub(super) async fn list(ctx: &Ctx<'_>) -> ApiResult<Response> {
    let params = parse_list_params(ctx)?;
    let (format, target) = ctx.negotiate(true)?;
    if format == Format::Json
        && matches!(target, Target::Object)
        && let Some(page) = ctx
            .store
            .list_shared(namespace_scope(ctx), &params, |o| shared_encoding(ctx, o))
            .await?
    {
        return shared_list_response(ctx, page);
    }
    let page = ctx.store.list(namespace_scope(ctx), &params).await?;
    let mut meta = serde_json::Map::new();
    meta.insert(
        "resourceVersion".into(),
        json!(page.resource_version.to_string()),
    );
    if let Some(c) = &page.continue_token {
        meta.insert("continue".into(), json!(c));
    }
    if let Some(r) = page.remaining {
        meta.insert("remainingItemCount".into(), json!(r));
    }
    let items: Vec<Value> = page
        .items
        .iter()
        .map(|o| ctx.encode(o))
        .collect::<ApiResult<_>>()?;
    let body = match target {
        Target::Table(v) => table::table(
            ctx.info,
            ctx.store.kind().table_printer(),
            &items,
            &v,
            ctx.include_object()?,
            Some(Value::Object(meta)),
            true,
        ),
        Target::PartialObjectMetadataList(v) => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": format!("meta.k8s.io/{v}"),
            "metadata": meta,
            "items": items.iter().map(|o| table::partial_metadata(o, &v)).collect::<Vec<_>>(),
        }),
        _ => json!({
            "apiVersion": ctx.info.api_version(),
            "kind": ctx.info.list_kind(),
            "metadata": meta,
            "items": items,
        }),
    };
    Ok(protobuf::respond_object(
        StatusCode::OK,
        format,
        ctx.protobuf(),
        &body,
        true,
    ))
}

/// The JSON encoding of one cached object in the request's version, made
/// once and shared by every list and watch that sends it.
pub(super) fn shared_encoding(
    ctx: &Ctx<'_>,
    object: &crate::registry::cache::CachedObject,
) -> ApiResult<Bytes> {
    let (kind, version) = (ctx.store.kind(), ctx.info.version);
    object
        .encoded(version, |hub| encode_json(kind, version, hub))
        .map_err(|e| Status::internal(e).into())
}

/// A hub object's JSON encoding in `version`.
pub(super) fn encode_json(
    kind: &apiforge_core::scheme::Kind,
    version: &str,
    hub: &Value,
) -> Result<Bytes, String> {
    kind.encode(version, hub)
        .map_err(|e| e.to_string())
        .and_then(|o| serde_json::to_vec(&o).map_err(|e| e.to_string()))
        .map(Bytes::from)
}

/// A JSON list assembled from the items' shared encodings (no per-request
/// conversion or serialization of the items).
pub(super) fn shared_list_response(
    ctx: &Ctx<'_>,
    page: crate::registry::SharedPage<Bytes>,
) -> ApiResult<Response> {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "resourceVersion".into(),
        json!(page.resource_version.to_string()),
    );
    if let Some(c) = &page.continue_token {
        meta.insert("continue".into(), json!(c));
    }
    if let Some(r) = page.remaining {
        meta.insert("remainingItemCount".into(), json!(r));
    }
    let head = serde_json::to_vec(&json!({
        "apiVersion": ctx.info.api_version(),
        "kind": ctx.info.list_kind(),
        "metadata": meta,
    }))
    .map_err(|e| ApiError::from(Status::internal(e.to_string())))?;
    // `{...head...}` → `{...head...,"items":[a,b,...]}`
    let mut opening = head;
    opening.pop();
    opening.extend_from_slice(b",\"items\":[");
    let body = ListBody::new(Bytes::from(opening), page.items);
    let len = body.len;
    let mut resp = crate::request::response::body_response(
        StatusCode::OK,
        "application/json",
        axum::body::Body::new(body),
    );
    resp.headers_mut()
        .insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
    Ok(resp)
}

/// The bytes of a large list body sent at a time.
const LIST_PART_BYTES: usize = 256 * 1024;

/// The largest list body assembled whole.
const LIST_WHOLE_BYTES: u64 = 1024 * 1024;

/// A JSON list assembled from the items' shared encodings: whole up to
/// [`LIST_WHOLE_BYTES`], larger in parts of about [`LIST_PART_BYTES`], each
/// assembled when the connection asks for it. A large list assembled whole
/// (10 MiB for 10,000 objects of 1 KiB) is written into fresh pages that
/// the kernel first faults in and zeroes, and read back from memory by TLS;
/// a part is reused from the allocator's cache and still in the CPU's
/// cache when TLS encrypts it. (Measured with the `list` benchmark: parts
/// of 128–256 KiB were the fastest; 64 KiB and 1 MiB cost a quarter to a
/// half more CPU, and pages of 500 objects were no faster in parts.)
struct ListBody {
    /// `{"apiVersion":…,"metadata":{…},"items":[`, sent first.
    opening: Option<Bytes>,
    items: Vec<Bytes>,
    /// The next item to send.
    next: usize,
    /// The size of a part.
    part_bytes: usize,
    /// Bytes not sent yet.
    left: u64,
    /// The whole body's length.
    len: u64,
}

impl ListBody {
    fn new(opening: Bytes, items: Vec<Bytes>) -> ListBody {
        let mut body = ListBody::in_parts(opening, items, LIST_PART_BYTES);
        if body.len <= LIST_WHOLE_BYTES {
            body.part_bytes = usize::MAX;
        }
        body
    }

    /// A list sent in parts of about `part_bytes`.
    fn in_parts(opening: Bytes, items: Vec<Bytes>, part_bytes: usize) -> ListBody {
        let commas = items.len().saturating_sub(1);
        let len = (opening.len() + items.iter().map(Bytes::len).sum::<usize>() + commas + 2) as u64;
        ListBody {
            opening: Some(opening),
            items,
            next: 0,
            part_bytes,
            left: len,
            len,
        }
    }

    /// The next part: the opening with the first items, then as many items
    /// as fit in a part (an item larger than that alone), and the closing
    /// `]}`; `None` after it. A part is allocated at its size and never
    /// grows.
    fn next_part(&mut self) -> Option<Bytes> {
        if self.left == 0 {
            return None;
        }
        let limit = self.part_bytes;
        let opening = self.opening.take();
        let mut size = opening.as_ref().map_or(0, Bytes::len);
        let mut end = self.next;
        while let Some(item) = self.items.get(end) {
            let add = item.len() + usize::from(end > 0);
            if size > 0 && size.saturating_add(add) > limit {
                break;
            }
            size += add;
            end += 1;
        }
        let closes = end == self.items.len() && (size == 0 || size.saturating_add(2) <= limit);
        if closes {
            size += 2;
        }
        let mut part = Vec::with_capacity(size);
        if let Some(opening) = opening {
            part.extend_from_slice(&opening);
        }
        for i in self.next..end {
            if i > 0 {
                part.push(b',');
            }
            part.extend_from_slice(&self.items[i]);
        }
        if closes {
            part.extend_from_slice(b"]}");
        }
        self.next = end;
        self.left -= part.len() as u64;
        Some(Bytes::from(part))
    }
}

impl hyper::body::Body for ListBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.next_part().map(|p| Ok(hyper::body::Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts of a list body, joined, are the list; a part holds what
    /// fits in its size (an item larger than that alone); a list up to
    /// [`LIST_WHOLE_BYTES`] is one part.
    #[test]
    fn list_parts_join_into_the_list() {
        const PART: usize = 4096;
        let opening = || Bytes::from_static(br#"{"kind":"FlunderList","items":["#);
        let item = |i: usize, len: usize| {
            let json = serde_json::to_vec(&json!({"n": i, "pad": "x".repeat(len)})).expect("json");
            Bytes::from(json)
        };
        // Where the closing `]}` no longer fits in the last part.
        let edge = PART - opening().len() - r#"{"n":0,"pad":""}"#.len();
        let cases = [
            (0, 0),
            (1, 10),
            (3, 100),
            (1000, 100),
            (5, 20_000),
            (1, edge - 2),
            (1, edge - 1),
            (1, edge),
            (1, edge + 1),
        ];
        for (count, len) in cases {
            let items: Vec<Bytes> = (0..count).map(|i| item(i, len)).collect();
            let mut body = ListBody::in_parts(opening(), items.clone(), PART);
            let announced = body.len;
            let mut joined = Vec::new();
            let mut parts = 0;
            while let Some(part) = body.next_part() {
                assert!(
                    part.len() <= PART.max(len + 64),
                    "a part of {} bytes",
                    part.len()
                );
                joined.extend_from_slice(&part);
                parts += 1;
                assert_eq!(
                    hyper::body::Body::is_end_stream(&body),
                    joined.len() as u64 == announced
                );
            }
            assert_eq!(joined.len() as u64, announced, "{count} items");
            let list: Value = serde_json::from_slice(&joined).expect("JSON list");
            let expected: Vec<Value> = items
                .iter()
                .map(|b| serde_json::from_slice(b).expect("item"))
                .collect();
            assert_eq!(list["items"], Value::Array(expected), "{count} items");
            assert_eq!(list["kind"], "FlunderList");
            let total = joined.len();
            assert!(parts <= total / PART + 2, "{parts} parts for {total} bytes");
        }
        // The served sizes: whole up to LIST_WHOLE_BYTES, then in parts.
        for (count, parts) in [(900, 1), (1100, 5)] {
            let items: Vec<Bytes> = (0..count).map(|i| item(i, 1000)).collect();
            let mut body = ListBody::new(opening(), items);
            assert_eq!(
                std::iter::from_fn(|| body.next_part()).count(),
                parts,
                "{count} items"
            );
        }
    }
}
