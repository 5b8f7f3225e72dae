//! `delete`, and the DeleteOptions of every delete.

use axum::extract::Request;
use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};

use super::body::read_body_limited;
use super::negotiation::Format;
use super::{Ctx, respond};
use crate::error::ApiResult;
use crate::registry::{DeleteOutcome, Preconditions, Propagation, PropagationPolicy};
use apiforge_core::meta::{Status, StatusDetails};
use apiforge_core::validation::{ErrorList, FieldError};

pub(super) async fn delete(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let (pre, dry_run, propagation) = delete_options(ctx, req).await?;
    let cascade = propagation.orphan_dependents == Some(false);
    let deleted = match ctx
        .store
        .delete_propagating(&ctx.ri.namespace, &ctx.ri.name, &pre, dry_run, &propagation)
        .await?
    {
        DeleteOutcome::Removed(obj) => obj,
        // As kube-apiserver: 202 Accepted when the object was not removed
        // at once and the client asked for cascading deletion with the
        // (deprecated) `orphanDependents: false`; 200 otherwise.
        DeleteOutcome::Terminating(obj) => {
            let code = if cascade {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            return ctx.object_response(code, &obj);
        }
    };
    let meta = apiforge_core::scheme::object_meta(&deleted);
    let status = Status::success(Some(StatusDetails {
        name: meta.name,
        group: ctx.info.group.into(),
        kind: ctx.info.plural.into(),
        uid: meta.uid,
        ..Default::default()
    }));
    Ok(respond(
        StatusCode::OK,
        Format::Json,
        &serde_json::to_value(status).unwrap_or_default(),
    ))
}

/// The preconditions, the dry-run flag and the garbage-collection options
/// (`orphanDependents`, `propagationPolicy`) of a delete's `DeleteOptions`
/// body (or, without a body, its query parameters), validated as
/// kube-apiserver's `ValidateDeleteOptions`.
pub(super) async fn delete_options(
    ctx: &Ctx<'_>,
    req: Request,
) -> ApiResult<(Preconditions, bool, Propagation)> {
    let bytes = read_body_limited(req).await?;
    let mut pre = Preconditions::default();
    // As kube-apiserver: a body carries the options; without one they come
    // from the query parameters.
    let (dry_run, policy, orphan): (Vec<String>, Option<String>, Option<bool>) =
        if !bytes.iter().all(u8::is_ascii_whitespace) {
            // kube-apiserver's decoder texts, without a summary of the body.
            let undecodable = |e: String| {
                Status::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
            };
            let opts: Value = serde_json::from_slice(&bytes)
                .map_err(|e| undecodable(crate::go_errors::json_error(&e, &bytes)))?;
            if let Some(e) = crate::go_errors::not_an_object(&opts) {
                return Err(undecodable(e).into());
            }
            if let Some(p) = opts.get("preconditions") {
                pre.uid = p.get("uid").and_then(Value::as_str).map(str::to_string);
                pre.resource_version = p
                    .get("resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            let dry_run = opts
                .get("dryRun")
                .and_then(Value::as_array)
                .map(|values| {
                    values
                        .iter()
                        .map(|v| v.as_str().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default();
            let policy = opts
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string);
            let orphan = opts.get("orphanDependents").and_then(Value::as_bool);
            (dry_run, policy, orphan)
        } else {
            if let Some(v) = ctx.query.get("gracePeriodSeconds") {
                crate::go_errors::parse_int64(v).map_err(Status::bad_request)?;
            }
            let dry_run = ctx
                .query
                .get("dryRun")
                .filter(|v| !v.is_empty())
                .map(|v| vec![v.to_string()])
                .unwrap_or_default();
            (
                dry_run,
                ctx.query.get("propagationPolicy").map(str::to_string),
                ctx.query.get("orphanDependents").map(query_bool),
            )
        };
    let mut errs = ErrorList::default();
    if orphan.is_some()
        && let Some(policy) = &policy
    {
        errs.push(FieldError::invalid(
            "propagationPolicy",
            policy.as_str(),
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    let parsed = policy.as_deref().map(PropagationPolicy::parse);
    if let (Some(policy), Some(None)) = (&policy, parsed) {
        errs.push(FieldError::not_supported(
            "propagationPolicy",
            policy.as_str(),
            &["Foreground", "Background", "Orphan", "nil"],
        ));
    }
    if dry_run.iter().any(|v| v != "All") {
        errs.push(FieldError::not_supported(
            "dryRun",
            json!(dry_run),
            &["All"],
        ));
    }
    if !errs.is_empty() {
        return Err(Status::invalid("meta.k8s.io", "DeleteOptions", "", errs.to_causes()).into());
    }
    let propagation = Propagation {
        orphan_dependents: orphan,
        policy: parsed.flatten(),
    };
    Ok((pre, !dry_run.is_empty(), propagation))
}

/// A boolean query parameter as the apimachinery parameter codec reads it:
/// `false` (any case) and `0` are false, anything else is true.
fn query_bool(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}
