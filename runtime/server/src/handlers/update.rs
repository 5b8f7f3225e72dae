//! `update` (PUT), which may create when the kind allows it.

use axum::extract::Request;
use axum::response::Response;
use http::StatusCode;

use super::body::read_body;
use super::{Ctx, managed_fields};
use crate::error::ApiResult;

pub(super) async fn update(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let dry_run = ctx.dry_run("UpdateOptions")?;
    let validation = super::patch::field_validation(ctx, "UpdateOptions")?;
    let hub = read_body(ctx, req, validation).await?;
    let manager = managed_fields::manager_name(ctx);
    let transform = managed_fields::hub_transform(ctx, &manager);
    let (obj, created) = ctx
        .writer()
        .update_with(
            &ctx.ri.namespace,
            &ctx.ri.name,
            hub,
            dry_run,
            Some(&transform),
        )
        .await?;
    ctx.object_response(
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        &obj,
    )
}
