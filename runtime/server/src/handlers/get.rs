//! `get`: one object, in the negotiated form (JSON, YAML, protobuf, Table,
//! PartialObjectMetadata).

use axum::response::Response;
use http::StatusCode;

use super::Ctx;
use super::list::shared_encoding;
use super::negotiation::{Format, Target};
use super::resource_version_param;
use crate::error::ApiResult;

pub(super) async fn get(ctx: &Ctx<'_>) -> ApiResult<Response> {
    let rv = resource_version_param(ctx.query)?;
    let (format, target) = ctx.negotiate(false)?;
    if format == Format::Json && matches!(target, Target::Object) {
        match ctx
            .store
            .get_shared(&ctx.ri.namespace, &ctx.ri.name, rv)
            .await?
        {
            Some(cached) => {
                let body = shared_encoding(ctx, &cached)?;
                return Ok(crate::request::response::bytes_response(
                    StatusCode::OK,
                    "application/json",
                    body,
                ));
            }
            // No cache, or a consistent read found it behind: storage
            // answers (without waiting for the cache a second time).
            None => {
                let hub = ctx
                    .store
                    .get_from_storage(&ctx.ri.namespace, &ctx.ri.name)
                    .await?;
                return ctx.object_response(StatusCode::OK, &hub);
            }
        }
    }
    let hub = ctx.store.get(&ctx.ri.namespace, &ctx.ri.name, rv).await?;
    ctx.object_response(StatusCode::OK, &hub)
}
