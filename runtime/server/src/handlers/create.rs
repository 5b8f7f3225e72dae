//! `create`.

use axum::extract::Request;
use axum::response::Response;
use http::StatusCode;

use super::Ctx;
use super::body::read_object;
use crate::error::ApiResult;

pub(super) async fn create(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let dry_run = ctx.dry_run("CreateOptions")?;
    let validation = super::patch::field_validation(ctx, "CreateOptions")?;
    let hub = read_object(ctx, req, validation).await?;
    let created = ctx
        .store
        .create_object(&ctx.ri.namespace, hub, dry_run)
        .await?;
    ctx.typed_response(StatusCode::CREATED, &created)
}
