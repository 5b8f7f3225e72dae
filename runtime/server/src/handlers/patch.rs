//! PATCH and DELETE-on-collection handlers, and the `fieldValidation`
//! plumbing that create, update and patch share (kube-apiserver's
//! `handlers/patch.go`, `handlers/delete.go` `DeleteCollection`, and the
//! strict decoding of `handlers/create.go`).

use axum::extract::Request;
use axum::response::Response;
use http::{StatusCode, header};
use serde_json::{Value, json};

use super::negotiation::Format;
use super::respond;
use super::{Ctx, delete_options, managed_fields, namespace_scope, parse_list_params};
use crate::error::{ApiError, ApiResult};
use crate::patch::{self, FieldValidation, KindSchema, PatchError, PatchType, fields};
use apiforge_core::meta::Status;
use apiforge_core::validation::{ErrorList, ErrorType, FieldError};

/// How often a patch is re-applied to a fresher object after a write
/// conflict it did not ask for (its result kept the object's
/// resourceVersion).
pub(super) const MAX_PATCH_ATTEMPTS: usize = 10;

/// The patch types served, as the 415 message lists them.
pub(super) const SUPPORTED_PATCH_TYPES: [PatchType; 4] = [
    PatchType::Json,
    PatchType::Merge,
    PatchType::Strategic,
    PatchType::Apply,
];

/// kube-apiserver's limit on `fieldManager`.
const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// Records field-validation warnings for the request's `Warning` headers.
fn warn(texts: impl IntoIterator<Item = String>) {
    for text in texts {
        crate::request::warning::add(text);
    }
}

/// `422 Invalid` on `<options_kind>.meta.k8s.io ""`.
fn options_invalid(options_kind: &str, errs: &ErrorList) -> ApiError {
    Status::invalid("meta.k8s.io", options_kind, "", errs.to_causes()).into()
}

fn field_validation_errors(ctx: &Ctx<'_>) -> (Option<FieldValidation>, ErrorList) {
    let raw = ctx.query.get("fieldValidation");
    match FieldValidation::parse(raw) {
        Some(v) => (Some(v), ErrorList::default()),
        None => (
            None,
            ErrorList(vec![FieldError::not_supported(
                "fieldValidation",
                raw.unwrap_or_default(),
                &FieldValidation::SUPPORTED,
            )]),
        ),
    }
}

/// The request's `fieldValidation` directive; an unsupported value is a
/// 422 on `<options_kind>` (`CreateOptions`, `UpdateOptions`).
pub(super) fn field_validation(ctx: &Ctx<'_>, options_kind: &str) -> ApiResult<FieldValidation> {
    match field_validation_errors(ctx) {
        (Some(v), _) => Ok(v),
        (None, errs) => Err(options_invalid(options_kind, &errs)),
    }
}

/// The cached schema of the request's kind and version.
pub(super) fn schema(ctx: &Ctx<'_>) -> std::sync::Arc<KindSchema> {
    match ctx.store.kind().version(ctx.info.version) {
        Some(ops) => KindSchema::cached(ops),
        None => std::sync::Arc::new(KindSchema::unknown()),
    }
}

/// Unknown and duplicate fields of a create/update body (none with
/// `fieldValidation=Ignore`).
pub(super) fn field_issues(
    ctx: &Ctx<'_>,
    validation: FieldValidation,
    format: Format,
    bytes: &[u8],
    value: &Value,
) -> Vec<String> {
    if validation == FieldValidation::Ignore {
        return Vec::new();
    }
    let schema = schema(ctx);
    let root = schema.root();
    match format {
        Format::Json => fields::check_json(bytes, &root, true)
            .unwrap_or_else(|_| fields::check_value(value, &root, true)),
        Format::Yaml | Format::Protobuf => fields::check_value(value, &root, true),
    }
}

/// Strict: the body is refused (`cannot_handle` builds kube-apiserver's
/// 400 "... cannot be handled as a ..." error); Warn: each issue becomes a
/// warning.
pub(super) fn report_field_issues(
    validation: FieldValidation,
    issues: Vec<String>,
    cannot_handle: impl Fn(String) -> ApiError,
) -> ApiResult<()> {
    if issues.is_empty() {
        return Ok(());
    }
    match validation {
        FieldValidation::Strict => Err(cannot_handle(format!(
            "strict decoding error: {}",
            issues.join(", ")
        ))),
        FieldValidation::Warn => {
            warn(issues);
            Ok(())
        }
        FieldValidation::Ignore => Ok(()),
    }
}

/// The patch types `kind` takes: all of [`SUPPORTED_PATCH_TYPES`], or, for
/// custom resources, all but strategic merge patches.
pub(super) fn patch_types(kind: &apiforge_core::scheme::Kind) -> Vec<PatchType> {
    SUPPORTED_PATCH_TYPES
        .into_iter()
        .filter(|t| *t != PatchType::Strategic || kind.supports_strategic_merge_patch())
        .collect()
}

/// The 415 of a PATCH whose content type is none of `types`.
pub(super) fn unsupported_patch_type(types: &[PatchType]) -> ApiError {
    let accepted: Vec<&str> = types.iter().map(|t| t.media_type()).collect();
    Status::failure(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        ),
    )
    .into()
}

/// Validates the PatchOptions query parameters (kube-apiserver's
/// `ValidatePatchOptions`): returns the dry-run flag and the field
/// validation directive.
pub(super) fn patch_options(
    ctx: &Ctx<'_>,
    patch_type: PatchType,
) -> ApiResult<(bool, FieldValidation)> {
    let mut errs = ErrorList::default();
    if patch_type != PatchType::Apply {
        if ctx.query.get("force").is_some() {
            errs.push(FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        }
    } else if ctx.query.get("fieldManager").unwrap_or_default().is_empty() {
        // kubectl defaults it to "kubectl"; controllers must set it.
        errs.push(FieldError::required(
            "fieldManager",
            "is required for apply patch",
        ));
    }
    if let Some(manager) = ctx.query.get("fieldManager") {
        if manager.len() > FIELD_MANAGER_MAX_LENGTH {
            errs.push(FieldError {
                type_: ErrorType::TooLong,
                field: "fieldManager".into(),
                bad_value: None,
                detail: format!("may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"),
            });
        }
        for (i, c) in manager.chars().enumerate() {
            if c.is_control() {
                errs.push(FieldError::invalid(
                    "fieldManager",
                    manager,
                    format!("invalid character U+{:04X} (at position {i})", u32::from(c)),
                ));
            }
        }
    }
    let dry_run = match ctx.query.get("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            errs.push(FieldError::not_supported(
                "dryRun",
                json!([other]),
                &["All"],
            ));
            false
        }
    };
    let (validation, validation_errs) = field_validation_errors(ctx);
    errs.extend(validation_errs);
    if !errs.is_empty() {
        return Err(options_invalid("PatchOptions", &errs));
    }
    Ok((dry_run, validation.unwrap_or_default()))
}

/// kube-apiserver's answer to a patch that does not apply.
pub(super) fn patch_error(e: PatchError) -> ApiError {
    match e {
        PatchError::BadRequest(m) => Status::bad_request(m).into(),
        PatchError::TooLarge(m) => Status::too_large(m).into(),
        PatchError::Invalid(m) => {
            tracing::debug!(error = %m, "patch does not apply");
            Status::failure(
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
            )
            .with_details(Default::default())
            .into()
        }
        PatchError::Internal(m) => Status::failure(500, "", m).into(),
    }
}

/// `422` ` "" is invalid: patch: Invalid value: "<value>": <detail>`, as
/// kube-apiserver reports a patched object it cannot decode.
pub(super) fn invalid_patch(value: String, detail: String) -> ApiError {
    let errs = ErrorList(vec![FieldError::invalid("patch", value, detail)]);
    Status::invalid("", "", "", errs.to_causes()).into()
}

/// The schema of a JSON patch's operations (for strict decoding).
fn json_patch_schema() -> KindSchema {
    let op = json!({"type": "object", "properties": {
        "op": {"type": "string"}, "path": {"type": "string"},
        "from": {"type": "string"}, "value": {},
    }});
    KindSchema::from_parts(json!({"type": "array", "items": op}), Default::default())
}

/// Strict-decoding problems of the patch body itself: duplicate keys (and,
/// for JSON patches, unknown operation fields).
pub(super) fn patch_body_issues(patch_type: PatchType, body: &[u8]) -> ApiResult<Vec<String>> {
    match patch_type {
        PatchType::Json => {
            let schema = json_patch_schema();
            let issues = fields::check_json(body, &schema.root(), false)
                .map_err(|e| Status::bad_request(format!("error decoding patch: {e}")))?;
            Ok(issues
                .into_iter()
                .map(|i| format!("json patch {i}"))
                .collect())
        }
        PatchType::Merge => {
            let schema = KindSchema::unknown();
            fields::check_json(body, &schema.root(), false)
                .map_err(|e| Status::bad_request(format!("error decoding patch: {e}")).into())
        }
        _ => {
            let schema = KindSchema::unknown();
            fields::check_json(body, &schema.root(), false)
                .map_err(|e| Status::bad_request(e).into())
        }
    }
}

/// PATCH on an item: applies the patch to the current object in the
/// request's version and stores the result through the update path,
/// re-applying it on write conflicts unless the patch itself pinned
/// `metadata.resourceVersion`.
pub(super) async fn patch(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let types = patch_types(ctx.store.kind());
    let patch_type = PatchType::from_content_type(&content_type)
        .filter(|t| types.contains(t))
        .ok_or_else(|| unsupported_patch_type(&types))?;
    let body = super::read_body_limited(req).await?;
    let (dry_run, validation) = patch_options(ctx, patch_type)?;
    if patch_type == PatchType::Apply {
        return super::apply::apply(ctx, &body, dry_run, validation).await;
    }
    let schema = schema(ctx);
    let root = schema.root();
    let kind = ctx.store.kind();
    let info = ctx.info;

    let mut attempt = 0;
    loop {
        attempt += 1;
        let current_hub = ctx.store.get(&ctx.ri.namespace, &ctx.ri.name, None).await?;
        let current = ctx.encode(&current_hub)?;
        let base_rv = apiforge_core::scheme::object_meta(&current).resource_version;
        let patched = patch::apply(patch_type, &current, &body, &root).map_err(patch_error)?;

        let mut issues = Vec::new();
        if validation != FieldValidation::Ignore {
            issues = patch_body_issues(patch_type, &body)?;
            issues.extend(fields::check_value(&patched, &root, true));
        }
        let shown = || match patch_type {
            PatchType::Strategic => String::from_utf8_lossy(&body).into_owned(),
            _ => serde_json::to_string(&patched).unwrap_or_default(),
        };
        if let Some(e) = crate::go_errors::not_an_object(&patched) {
            return Err(invalid_patch(
                shown(),
                format!("couldn't get version/kind; json parse error: {e}"),
            ));
        }
        if let Some(api_version) = patched.get("apiVersion").and_then(Value::as_str)
            && api_version != info.api_version()
        {
            return Err(invalid_patch(
                shown(),
                format!(
                    "the API version in the data ({api_version}) does not match the expected API version ({})",
                    info.api_version()
                ),
            ));
        }
        if let Some(k) = patched.get("kind").and_then(Value::as_str)
            && k != info.kind
        {
            return Err(invalid_patch(
                shown(),
                format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    info.kind
                ),
            ));
        }
        let hub = kind
            .decode(info.version, patched.clone())
            .map_err(|e| invalid_patch(shown(), e.to_string()))?;
        if validation == FieldValidation::Strict && !issues.is_empty() {
            return Err(invalid_patch(
                shown(),
                format!("strict decoding error: {}", issues.join(", ")),
            ));
        }
        // kube-apiserver's `checkName` on the patched object: a patch that
        // removes or renames the metadata's name is refused rather than
        // given the URL's name.
        let patched_name = apiforge_core::scheme::object_meta(&hub).name;
        if patched_name != ctx.ri.name {
            return Err(Status::bad_request(format!(
                "the name of the object ({patched_name}) does not match the name on the URL ({})",
                ctx.ri.name
            ))
            .into());
        }
        let patched_rv = apiforge_core::scheme::object_meta(&hub).resource_version;
        match managed_fields::recorded_update(ctx, hub, dry_run).await {
            Ok((obj, _)) => {
                if validation == FieldValidation::Warn {
                    warn(issues);
                }
                return ctx.object_response(StatusCode::OK, &obj);
            }
            Err(e)
                if e.code() == 409
                    && e.0.reason == "Conflict"
                    && patched_rv == base_rv
                    && attempt < MAX_PATCH_ATTEMPTS =>
            {
                continue;
            }
            Err(e) => return Err(e),
        }
    }
}

/// DELETE on the collection: deletes every object matching the label and
/// field selectors (each through the normal delete path) and answers the
/// `<Kind>List` of the matched objects in the request's version.
pub(super) async fn delete_collection(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let mut params = parse_list_params(ctx)?;
    params.limit = 0;
    params.continue_token = None;
    let (pre, dry_run, propagation) = delete_options(ctx, req).await?;
    let page = ctx.store.list(namespace_scope(ctx), &params).await?;
    let mut items = Vec::with_capacity(page.items.len());
    for obj in &page.items {
        let meta = apiforge_core::scheme::object_meta(obj);
        match ctx
            .store
            .delete_propagating(&meta.namespace, &meta.name, &pre, dry_run, &propagation)
            .await
        {
            Ok(_) => {}
            Err(e) if e.code() == 404 => {}
            Err(e) => return Err(e),
        }
        items.push(ctx.encode(obj)?);
    }
    let body = json!({
        "apiVersion": ctx.info.api_version(),
        "kind": ctx.info.list_kind(),
        "metadata": {"resourceVersion": page.resource_version.to_string()},
        "items": items,
    });
    Ok(respond(StatusCode::OK, Format::Json, &body))
}
