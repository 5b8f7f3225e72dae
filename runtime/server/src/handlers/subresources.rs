//! The `/status` and `/scale` subresources (kube-apiserver's status and
//! scale REST storages, with the CRD rules for what each may change).
//!
//! * `/status` (get, update, patch) serves the whole object; writes go
//!   through [`Store::subresource`]`("status")`, which keeps everything but
//!   `status` from the stored object and never bumps the generation.
//! * `/scale` (get, update, patch) serves an `autoscaling/v1` [`Scale`]
//!   mapped through the kind's scale paths; a write sets the spec replicas
//!   path of the object and stores it through the main resource's rules
//!   (so the generation grows), with the Scale's `resourceVersion` as a
//!   precondition.
//!
//! A kind without the subresource answers 404, as an unknown path; other
//! verbs answer 405 (kube-apiserver's router has no such route).

use std::sync::{Arc, OnceLock};

use axum::extract::Request;
use axum::response::Response;
use http::{StatusCode, header};
use serde_json::Value;

use super::negotiation::{self, Allowed, Format, Target};
use super::{Ctx, managed_fields, patch as patching, protobuf, table};
use crate::error::{ApiError, ApiResult};
use crate::patch::fieldpath::{Path, Set};
use crate::patch::managed::{self, FieldManager, Managed, VersionedSet, Versions};
use crate::patch::{self, FieldValidation, KindSchema, PatchType, fields};
use crate::registry::{Store, UpdateTransform};
use crate::request::RequestInfo;
use apiforge_core::meta::Status;
use apiforge_core::resource::{KindInfo, ScaleSubresource};
use apiforge_core::scale::{SCALE_GROUP, SCALE_INFO, SCALE_VERSION, Scale};

/// Whether the request's subresource exists for its kind in the requested
/// version. A watch path (`/watch/.../{name}/status`) has no route either.
pub(super) fn served(info: &KindInfo, ri: &RequestInfo) -> bool {
    let exists = match ri.subresource.as_str() {
        "status" => info.subresources.status,
        "scale" => info.subresources.scale.is_some(),
        _ => false,
    };
    exists && ri.verb != "watch"
}

/// 405 from the router: the path exists, the method does not.
fn method_not_allowed() -> ApiError {
    Status::failure(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
    .with_details(Default::default())
    .into()
}

/// Serves a request on a subresource that [`served`] accepted.
pub(super) async fn handle(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    match (ctx.ri.subresource.as_str(), ctx.ri.verb.as_str()) {
        ("status", "get") => super::get(ctx).await,
        ("status", "update") => super::update(ctx, req).await,
        ("status", "patch") => patching::patch(ctx, req).await,
        ("scale", "get") => get_scale(ctx).await,
        ("scale", "update") => update_scale(ctx, req).await,
        ("scale", "patch") => patch_scale(ctx, req).await,
        _ => Err(method_not_allowed()),
    }
}

/// The scale paths of the requested version.
fn scale_paths(ctx: &Ctx<'_>) -> ApiResult<&'static ScaleSubresource> {
    ctx.info
        .subresources
        .scale
        .as_ref()
        .ok_or_else(|| Status::path_not_found().into())
}

/// The Scale of a stored (hub) object, read in the requested version.
fn scale_of(ctx: &Ctx<'_>, hub: &Value) -> ApiResult<Scale> {
    let obj = ctx.encode(hub)?;
    Ok(Scale::of(&obj, scale_paths(ctx)?))
}

/// The schema of Scale bodies (unknown-field checks and patches).
fn scale_schema() -> &'static KindSchema {
    static SCHEMA: OnceLock<KindSchema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
        let root = generator.subschema_for::<Scale>().to_value();
        KindSchema::from_parts(root, generator.take_definitions(true))
    })
}

/// Renders a Scale in the negotiated form (JSON or YAML; a Table or
/// PartialObjectMetadata when asked).
fn scale_response(ctx: &Ctx<'_>, code: StatusCode, scale: &Scale) -> ApiResult<Response> {
    let (format, target) = negotiation::negotiate(
        ctx.accept.as_deref(),
        Allowed {
            meta_targets: true,
            ..Default::default()
        },
    )
    .ok_or_else(super::not_acceptable)?;
    let obj = serde_json::to_value(scale).map_err(|e| Status::internal(e.to_string()))?;
    let body = match target {
        Target::Table(v) => table::table(
            &SCALE_INFO,
            None,
            &[obj],
            &v,
            ctx.include_object()?,
            None,
            true,
        ),
        Target::PartialObjectMetadata(v) => table::partial_metadata(&obj, &v),
        _ => obj,
    };
    Ok(protobuf::respond_object(code, format, None, &body, false))
}

async fn get_scale(ctx: &Ctx<'_>) -> ApiResult<Response> {
    let rv = match ctx.query.get("resourceVersion") {
        None | Some("") => None,
        Some(v) => Some(v.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            ApiError::from(Status::bad_request(format!(
                "invalid resource version: {v:?}"
            )))
        })?),
    };
    let hub = ctx.store.get(&ctx.ri.namespace, &ctx.ri.name, rv).await?;
    scale_response(ctx, StatusCode::OK, &scale_of(ctx, &hub)?)
}

/// `Scale in version "v1" cannot be handled as a Scale: <e>`.
fn cannot_handle(e: String) -> ApiError {
    Status::bad_request(format!(
        "Scale in version \"{SCALE_VERSION}\" cannot be handled as a Scale: {e}"
    ))
    .into()
}

fn scale_api_version() -> String {
    format!("{SCALE_GROUP}/{SCALE_VERSION}")
}

/// Reads a Scale request body (JSON or YAML).
async fn read_scale(req: Request, validation: FieldValidation) -> ApiResult<Scale> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let format = negotiation::body_format(content_type.as_deref())
        .filter(|f| *f != Format::Protobuf)
        .ok_or_else(|| protobuf::unsupported_media_type(false))?;
    let bytes = super::read_body_limited(req).await?;
    let value: Value = match format {
        Format::Yaml => {
            let text = std::str::from_utf8(&bytes).map_err(|e| cannot_handle(e.to_string()))?;
            serde_saphyr::from_str(text).map_err(|e| cannot_handle(e.to_string()))?
        }
        _ => serde_json::from_slice(&bytes).map_err(|e| cannot_handle(e.to_string()))?,
    };
    if !value.is_object() {
        return Err(cannot_handle("the body must be a JSON object".into()));
    }
    let issues = if validation == FieldValidation::Ignore {
        Vec::new()
    } else {
        let root = scale_schema().root();
        match format {
            Format::Json => fields::check_json(&bytes, &root, true)
                .unwrap_or_else(|_| fields::check_value(&value, &root, true)),
            _ => fields::check_value(&value, &root, true),
        }
    };
    if let Some(api_version) = value.get("apiVersion").and_then(Value::as_str)
        && api_version != scale_api_version()
    {
        return Err(Status::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            scale_api_version()
        ))
        .into());
    }
    if let Some(kind) = value.get("kind").and_then(Value::as_str)
        && kind != "Scale"
    {
        return Err(Status::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind (Scale)"
        ))
        .into());
    }
    let scale: Scale = serde_json::from_value(value).map_err(|e| cannot_handle(e.to_string()))?;
    patching::report_field_issues(validation, issues, cannot_handle)?;
    Ok(scale)
}

async fn update_scale(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let dry_run = ctx.dry_run("UpdateOptions")?;
    let validation = patching::field_validation(ctx, "UpdateOptions")?;
    let scale = read_scale(req, validation).await?;
    let manager = managed_fields::manager_name(ctx);
    let transform = managed_fields::hub_transform(ctx, &manager);
    let updated = write_scale(ctx, &scale, dry_run, &transform).await?;
    scale_response(ctx, StatusCode::OK, &updated)
}

/// Writes a Scale's replicas into the object: name and namespace must match
/// the URL, replicas may not be negative (422 on `Scale.autoscaling`), and
/// a non-empty `metadata.resourceVersion` is a precondition (409 when
/// stale); without one, write conflicts are retried on the fresh object.
/// Returns the Scale of the stored object.
async fn write_scale(
    ctx: &Ctx<'_>,
    scale: &Scale,
    dry_run: bool,
    transform: UpdateTransform<'_>,
) -> ApiResult<Scale> {
    let paths = scale_paths(ctx)?;
    let (namespace, name) = (&ctx.ri.namespace, &ctx.ri.name);
    let body_name = &scale.metadata.name;
    if !body_name.is_empty() && body_name != name {
        return Err(Status::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        ))
        .into());
    }
    if ctx.info.namespaced()
        && !scale.metadata.namespace.is_empty()
        && scale.metadata.namespace != *namespace
    {
        return Err(Status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )
        .into());
    }
    let errs = scale.validate();
    if !errs.is_empty() {
        return Err(Status::invalid(SCALE_GROUP, "Scale", name, errs.to_causes()).into());
    }
    let precondition = !scale.metadata.resource_version.is_empty();
    let writer: Store = ctx.store.subresource("scale");
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = ctx.store.get_live(namespace, name).await?;
        let mut obj = ctx.encode(&current)?;
        scale.apply_to(&mut obj, paths);
        if precondition && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "resourceVersion".into(),
                Value::String(scale.metadata.resource_version.clone()),
            );
        }
        let hub = ctx
            .store
            .kind()
            .decode(ctx.info.version, obj)
            .map_err(|e| Status::internal(e.to_string()))?;
        match writer
            .update_with(namespace, name, hub, dry_run, Some(transform))
            .await
        {
            Ok((stored, _)) => return scale_of(ctx, &stored),
            Err(e)
                if e.code() == 409
                    && e.0.reason == "Conflict"
                    && !precondition
                    && attempt < patching::MAX_PATCH_ATTEMPTS =>
            {
                continue;
            }
            Err(e) => return Err(e),
        }
    }
}

/// PATCH on `/scale`: the patch applies to the current Scale; the result
/// is written as an update (its resourceVersion, the current one unless
/// the patch changed it, is a precondition: conflicts re-apply the patch).
async fn patch_scale(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let types = patching::patch_types(ctx.store.kind());
    let patch_type = PatchType::from_content_type(&content_type)
        .filter(|t| types.contains(t))
        .ok_or_else(|| patching::unsupported_patch_type(&types))?;
    let body = super::read_body_limited(req).await?;
    let (dry_run, validation) = patching::patch_options(ctx, patch_type)?;
    if patch_type == PatchType::Apply {
        return apply_scale(ctx, &body, dry_run).await;
    }
    let manager = managed_fields::manager_name(ctx);
    let transform = managed_fields::hub_transform(ctx, &manager);
    let root = scale_schema().root();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current_hub = ctx.store.get(&ctx.ri.namespace, &ctx.ri.name, None).await?;
        let current = scale_of(ctx, &current_hub)?;
        let base_rv = current.metadata.resource_version.clone();
        let current =
            serde_json::to_value(&current).map_err(|e| Status::internal(e.to_string()))?;
        let patched =
            patch::apply(patch_type, &current, &body, &root).map_err(patching::patch_error)?;
        let mut issues = Vec::new();
        if validation != FieldValidation::Ignore {
            issues = patching::patch_body_issues(patch_type, &body)?;
            issues.extend(fields::check_value(&patched, &root, true));
        }
        let shown = || match patch_type {
            PatchType::Strategic => String::from_utf8_lossy(&body).into_owned(),
            _ => serde_json::to_string(&patched).unwrap_or_default(),
        };
        if let Some(api_version) = patched.get("apiVersion").and_then(Value::as_str)
            && api_version != scale_api_version()
        {
            return Err(patching::invalid_patch(
                shown(),
                format!(
                    "the API version in the data ({api_version}) does not match the expected API version ({})",
                    scale_api_version()
                ),
            ));
        }
        if let Some(k) = patched.get("kind").and_then(Value::as_str)
            && k != "Scale"
        {
            return Err(patching::invalid_patch(
                shown(),
                format!("the kind in the data ({k}) does not match the expected kind (Scale)"),
            ));
        }
        let scale: Scale = serde_json::from_value(patched.clone())
            .map_err(|e| patching::invalid_patch(shown(), e.to_string()))?;
        if validation == FieldValidation::Strict && !issues.is_empty() {
            return Err(patching::invalid_patch(
                shown(),
                format!("strict decoding error: {}", issues.join(", ")),
            ));
        }
        match write_scale(ctx, &scale, dry_run, &transform).await {
            Ok(updated) => {
                if validation == FieldValidation::Warn {
                    for issue in issues {
                        crate::request::warning::add(issue);
                    }
                }
                return scale_response(ctx, StatusCode::OK, &updated);
            }
            Err(e)
                if e.code() == 409
                    && e.0.reason == "Conflict"
                    && scale.metadata.resource_version == base_rv
                    && attempt < patching::MAX_PATCH_ATTEMPTS =>
            {
                continue;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The Scale kind's one version, for the ownership rules.
struct ScaleVersions;

impl Versions for ScaleVersions {
    fn schema(&self, api_version: &str) -> Option<Arc<KindSchema>> {
        static SCHEMA: OnceLock<Arc<KindSchema>> = OnceLock::new();
        (api_version == scale_api_version()).then(|| {
            SCHEMA
                .get_or_init(|| Arc::new(scale_schema().clone()))
                .clone()
        })
    }

    fn convert(&self, obj: &Value, _from: &str, to: &str) -> Option<Value> {
        (to == scale_api_version()).then(|| obj.clone())
    }
}

/// A dotted JSON path (`.spec.replicas`) as a field path.
fn dotted(path: &str) -> Path {
    Path::fields(&path.trim_start_matches('.').split('.').collect::<Vec<_>>())
}

/// Server-side apply of a Scale (kube-apiserver's scale handler for
/// managed fields): the object's owners of the replicas field are the
/// Scale's owners of `spec.replicas`; the applied Scale is merged over the
/// current one with their conflicts, and the ownership mapped back onto
/// the object, whose replicas field the applier then owns (an `Apply`
/// entry with subresource `scale`).
async fn apply_scale(ctx: &Ctx<'_>, body: &[u8], dry_run: bool) -> ApiResult<Response> {
    let scale_version = scale_api_version();
    let (config, super::apply::Applier { manager, force }) =
        super::apply::read_config(ctx, body, &scale_version, "Scale").await?;
    let replicas_path = dotted(scale_paths(ctx)?.spec_replicas_path);
    let replicas_set = Set::from_paths([replicas_path.clone()]);
    let scale_replicas = Path::fields(&["spec", "replicas"]);
    let fm = FieldManager {
        versions: &ScaleVersions,
        api_version: scale_version.clone(),
        subresource: "scale",
        reset_fields: Set::new(),
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = ctx.store.get_live(&ctx.ri.namespace, &ctx.ri.name).await?;
        let parent = ctx.encode(&current)?;
        let owners = managed::decode(parent.pointer("/metadata/managedFields")).unwrap_or_default();
        // The Scale's view of who owns the replicas.
        let mut scale_owners = Managed::default();
        for (id, owned) in &owners.fields {
            if owned.set.has(&replicas_path.0) {
                scale_owners.fields.insert(
                    id.clone(),
                    VersionedSet {
                        set: Set::from_paths([scale_replicas.clone()]),
                        api_version: scale_version.clone(),
                        applied: owned.applied,
                    },
                );
                if let Some(t) = owners.times.get(id) {
                    scale_owners.times.insert(id.clone(), *t);
                }
            }
        }
        let live_scale = serde_json::to_value(scale_of(ctx, &current)?)
            .map_err(|e| Status::internal(e.to_string()))?;
        let (merged, scale_owners) = fm
            .apply(&live_scale, &config, scale_owners, &manager, force)
            .map_err(|e| super::apply::apply_error(ctx, &scale_version, "Scale", e))?;
        // Back onto the object: the replicas field is owned by whoever
        // owns the Scale's spec.replicas now.
        let mut new_owners = owners.clone();
        for owned in new_owners.fields.values_mut() {
            owned.set = owned.set.difference(&replicas_set);
        }
        for (id, owned) in &scale_owners.fields {
            if !owned.set.has(&scale_replicas.0) {
                continue;
            }
            let entry = new_owners.fields.entry(id.clone()).or_insert(VersionedSet {
                set: Set::new(),
                api_version: ctx.info.api_version(),
                applied: owned.applied,
            });
            entry.set.insert(&replicas_path.0);
            if let Some(t) = scale_owners.times.get(id) {
                new_owners.times.insert(id.clone(), *t);
            }
        }
        new_owners.fields.retain(|_, owned| !owned.set.is_empty());
        let entries = managed::encode(&new_owners);
        let mut scale: Scale = serde_json::from_value(merged.unwrap_or(live_scale))
            .map_err(|e| Status::bad_request(e.to_string()))?;
        if scale.metadata.resource_version.is_empty() {
            scale.metadata.resource_version = parent
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
        }
        let set_owners = move |_old: Option<&Value>, new: &mut Value| -> ApiResult<()> {
            managed_fields::set_managed(new, entries.clone());
            Ok(())
        };
        match write_scale(ctx, &scale, dry_run, &set_owners).await {
            Ok(updated) => return scale_response(ctx, StatusCode::OK, &updated),
            Err(e)
                if e.code() == 409
                    && e.0.reason == "Conflict"
                    && attempt < patching::MAX_PATCH_ATTEMPTS =>
            {
                continue;
            }
            Err(e) => return Err(e),
        }
    }
}
