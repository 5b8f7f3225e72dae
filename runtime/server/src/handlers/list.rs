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
        && let Some(page) = ctx.store.list_shared(namespace_scope(ctx), &params).await?
    {
        return shared_list_response(ctx, &page);
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
    page: &crate::registry::SharedPage,
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
    let encoded: Vec<Bytes> = page
        .items
        .iter()
        .map(|o| shared_encoding(ctx, o))
        .collect::<ApiResult<_>>()?;
    let mut body =
        Vec::with_capacity(head.len() + 16 + encoded.iter().map(|b| b.len() + 1).sum::<usize>());
    // `{...head...}` → `{...head...,"items":[a,b,...]}`
    body.extend_from_slice(&head[..head.len() - 1]);
    body.extend_from_slice(b",\"items\":[");
    for (i, item) in encoded.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(b"]}");
    Ok(crate::request::response::bytes_response(
        StatusCode::OK,
        "application/json",
        Bytes::from(body),
    ))
}
