//! Server-side apply: `PATCH` with `application/apply-patch+yaml` on an
//! object or its `/status` (kube-apiserver's `applyPatcher` and field
//! manager): the configuration is merged over the live object in the
//! request's version by the kind's schema, ownership is recorded in
//! `metadata.managedFields`, fields another manager owns conflict unless
//! `force=true`, and a missing object is created.

use axum::response::Response;
use http::StatusCode;
use serde_json::Value;

use super::managed_fields::{self, KindVersions};
use super::{Ctx, body};
use crate::error::{ApiError, ApiResult};
use crate::patch::FieldValidation;
use crate::patch::managed::{self, ManagedError};
use apiforge_core::meta::Status;

/// How often an apply is redone on a fresher object after a write
/// conflict it did not ask for.
const MAX_APPLY_ATTEMPTS: usize = 10;

/// Go's `%v` of a GroupVersionKind (`group/version, Kind=Kind`).
fn gvk_text(api_version: &str, kind: &str) -> String {
    let (group, version) = match api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    format!("{group}/{version}, Kind={kind}")
}

/// Parses the apply body into an object: as JSON when it is JSON (what
/// kubectl, client-go and kube-rs send; JSON is YAML), else as YAML (on
/// the YAML decoder's own thread).
pub(super) async fn parse_config(body: &[u8]) -> ApiResult<Value> {
    let value = match serde_json::from_slice::<Value>(body) {
        Ok(v) => v,
        Err(_) => {
            let text = String::from_utf8(body.to_vec())
                .map_err(|e| Status::bad_request(format!("error decoding YAML: {e}")))?;
            body::decode_yaml(text).await.map_err(|e| {
                let first = e.lines().next().unwrap_or_default().to_string();
                Status::bad_request(format!("error decoding YAML: {first}"))
            })?
        }
    };
    match value {
        Value::Object(_) => Ok(value),
        Value::Null => Ok(Value::Object(Default::default())),
        other => Err(Status::bad_request(format!(
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            }
        ))
        .into()),
    }
}

/// Who applies (`fieldManager`, required by the PatchOptions checks) and
/// whether they force.
pub(super) struct Applier {
    /// The manager.
    pub(super) manager: String,
    /// `force=true`.
    pub(super) force: bool,
}

/// Reads an apply request's configuration: parsed, of `api_version` and
/// `kind` (else kube-apiserver's version-check 400), without
/// `managedFields` (400); with the applier from the query.
pub(super) async fn read_config(
    ctx: &Ctx<'_>,
    body: &[u8],
    api_version: &str,
    kind: &str,
) -> ApiResult<(Value, Applier)> {
    let config = parse_config(body).await?;
    let sent_version = config.get("apiVersion").and_then(Value::as_str);
    let sent_kind = config.get("kind").and_then(Value::as_str);
    if sent_version != Some(api_version) || sent_kind != Some(kind) {
        return Err(Status::bad_request(format!(
            "invalid object type: {}",
            gvk_text(
                sent_version.unwrap_or_default(),
                sent_kind.unwrap_or_default()
            )
        ))
        .into());
    }
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(Status::bad_request("metadata.managedFields must be nil").into());
    }
    let applier = Applier {
        manager: ctx
            .query
            .get("fieldManager")
            .unwrap_or_default()
            .to_string(),
        force: matches!(ctx.query.get("force"), Some("true" | "1" | "True")),
    };
    Ok((config, applier))
}

/// The answer to an apply the ownership rules refused: 409 for conflicts,
/// else upstream's typed-conversion error (a 500 naming the object).
pub(super) fn apply_error(
    ctx: &Ctx<'_>,
    api_version: &str,
    kind: &str,
    e: ManagedError,
) -> ApiError {
    match e {
        ManagedError::Conflicts(c) => managed_fields::conflict_status(&c).into(),
        other => Status::failure(
            500,
            "",
            format!(
                "failed to create typed patch object ({}/{}; {}): {other}",
                ctx.ri.namespace,
                ctx.ri.name,
                gvk_text(api_version, kind)
            ),
        )
        .into(),
    }
}

/// Serves an apply patch (PatchOptions already validated).
pub(super) async fn apply(
    ctx: &Ctx<'_>,
    body: &[u8],
    dry_run: bool,
    validation: FieldValidation,
) -> ApiResult<Response> {
    let api_version = ctx.info.api_version();
    let (config, Applier { manager, force }) =
        read_config(ctx, body, &api_version, ctx.info.kind).await?;
    let pinned = config
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty());
    let kind = ctx.store.kind();
    let versions = KindVersions(kind);
    let fm = managed_fields::field_manager(ctx, &versions);
    let schema = super::patch::schema(ctx);

    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = match ctx.store.get(&ctx.ri.namespace, &ctx.ri.name, None).await {
            Ok(hub) => Some(hub),
            Err(e) if e.code() == 404 && ctx.ri.subresource.is_empty() => None,
            Err(e) => return Err(e),
        };
        let live = match &current {
            Some(hub) => ctx.encode(hub)?,
            None => {
                let mut zero = managed_fields::zero_object(ctx);
                if let Some(obj) = zero.as_object_mut() {
                    obj.insert("apiVersion".into(), Value::String(api_version.clone()));
                    obj.insert("kind".into(), Value::String(ctx.info.kind.into()));
                }
                zero
            }
        };
        let start = managed::decode(live.get("metadata").and_then(|m| m.get("managedFields")))
            .unwrap_or_default();
        let live_clean = managed_fields::without_managed(&live);
        let outcome = match fm.apply(&live_clean, &config, start.clone(), &manager, force) {
            Err(ManagedError::Conflicts(conflicts)) if manager == managed::KUBECTL_MANAGER => {
                // Upgrading from client-side apply: fields the
                // last-applied configuration names, with the values it
                // gave them, may be taken.
                let allowed = managed::allowed_conflicts_from_last_applied(&live_clean, &schema);
                let left: Vec<_> = match &allowed {
                    Some(set) => conflicts
                        .iter()
                        .filter(|c| !set.has(&c.path.0))
                        .cloned()
                        .collect(),
                    None => conflicts.clone(),
                };
                if left.is_empty() {
                    fm.apply(&live_clean, &config, start, &manager, true)
                } else {
                    Err(ManagedError::Conflicts(left))
                }
            }
            other => other,
        };
        let (merged, owners) =
            outcome.map_err(|e| apply_error(ctx, &api_version, ctx.info.kind, e))?;
        let mut new = merged.unwrap_or_else(|| Value::clone(&live_clean));
        managed_fields::set_managed(&mut new, managed::encode(&owners));
        if manager == managed::KUBECTL_MANAGER {
            keep_last_applied_in_step(&mut new, &config);
        }
        if validation != FieldValidation::Ignore {
            check_strict(body, validation)?;
        }
        check_name_and_namespace(ctx, &new)?;
        let bad = |e: apiforge_core::scheme::DecodeError| Status::bad_request(e.to_string());
        let result = match &current {
            Some(_) => {
                let hub = kind.decode(ctx.info.version, new).map_err(bad)?;
                match ctx
                    .writer()
                    .update(&ctx.ri.namespace, &ctx.ri.name, hub, dry_run)
                    .await
                {
                    Ok((obj, _)) => return ctx.object_response(StatusCode::OK, &obj),
                    Err(e) => e,
                }
            }
            None => {
                // Decoded once, typed, through the create path.
                let hub = kind.decode_object(ctx.info.version, new).map_err(bad)?;
                match ctx
                    .store
                    .create_object(&ctx.ri.namespace, hub, dry_run)
                    .await
                {
                    Ok(obj) => return ctx.typed_response(StatusCode::CREATED, &obj),
                    Err(e) => e,
                }
            }
        };
        if retryable(&result, current.is_some(), pinned) && attempt < MAX_APPLY_ATTEMPTS {
            continue;
        }
        return Err(result);
    }
}

/// A conflict on the resourceVersion the apply started from (someone
/// wrote meanwhile), or a create that lost a race: apply again — unless
/// the configuration itself `pinned` a resourceVersion (a precondition).
fn retryable(e: &ApiError, updating: bool, pinned: bool) -> bool {
    (updating && !pinned && e.code() == 409 && e.0.reason == "Conflict")
        || (!updating && e.code() == 409 && e.0.reason == "AlreadyExists")
}

/// After an apply by `kubectl`, an object that has the client-side
/// last-applied annotation gets the new configuration there.
fn keep_last_applied_in_step(new: &mut Value, config: &Value) {
    let Some(annotations) = new
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if annotations.contains_key(managed::LAST_APPLIED_ANNOTATION) {
        annotations.insert(
            managed::LAST_APPLIED_ANNOTATION.into(),
            Value::String(managed::last_applied_value(config)),
        );
    }
}

/// Duplicate keys in the body: refused under Strict, warned under Warn.
fn check_strict(body: &[u8], validation: FieldValidation) -> ApiResult<()> {
    let schema = crate::patch::KindSchema::unknown();
    let Ok(issues) = crate::patch::fields::check_json(body, &schema.root(), false) else {
        // Not JSON: YAML bodies are checked for duplicates when parsed.
        return Ok(());
    };
    super::patch::report_field_issues(validation, issues, |e| {
        Status::bad_request(format!("error strict decoding YAML: {e}")).into()
    })
}

/// The applied object's name and namespace must be the URL's.
fn check_name_and_namespace(ctx: &Ctx<'_>, obj: &Value) -> ApiResult<()> {
    let meta = obj.get("metadata");
    let text = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    if text("name") != ctx.ri.name {
        return Err(Status::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            text("name"),
            ctx.ri.name
        ))
        .into());
    }
    if ctx.info.namespaced()
        && !text("namespace").is_empty()
        && text("namespace") != ctx.ri.namespace
    {
        return Err(Status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )
        .into());
    }
    Ok(())
}
