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
    let (obj, created) = managed_fields::recorded_update(ctx, hub, dry_run).await?;
    ctx.object_response(
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        &obj,
    )
}
