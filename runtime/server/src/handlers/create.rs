//! `create`.

use axum::extract::Request;
use axum::response::Response;
use http::StatusCode;

use super::body::read_object;
use super::{Ctx, managed_fields};
use crate::error::ApiResult;

pub(super) async fn create(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let dry_run = ctx.dry_run("CreateOptions")?;
    let validation = super::patch::field_validation(ctx, "CreateOptions")?;
    let mut hub = read_object(ctx, req, validation).await?;
    managed_fields::record_create(ctx, &mut hub, &managed_fields::manager_name(ctx))?;
    let created = ctx
        .store
        .create_object(&ctx.ri.namespace, hub, dry_run)
        .await?;
    ctx.typed_response(StatusCode::CREATED, &created)
}
