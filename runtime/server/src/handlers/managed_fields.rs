//! The field manager of the write handlers: who a write's manager is
//! (`fieldManager`, or the client's user agent), the kind's versions as
//! the ownership rules need them, and `metadata.managedFields` kept by
//! every create, update and patch (kube-apiserver's
//! `FieldManager.UpdateNoErrors`).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::Ctx;
use crate::error::ApiResult;
use crate::patch::KindSchema;
use crate::patch::fieldpath::{Path, Set};
use crate::patch::managed::{self, FieldManager, Managed, Versions};
use apiforge_core::meta::{ManagedFieldsEntry, Status, StatusCause, StatusDetails};
use apiforge_core::scheme::{Kind, Object};

/// kube-apiserver's limit on `fieldManager` (a manager derived from the
/// user agent is cut to it).
const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// A kind's served versions, by `group/version`.
pub(super) struct KindVersions<'a>(pub &'a Kind);

fn version_name(api_version: &str) -> &str {
    api_version.rsplit('/').next().unwrap_or(api_version)
}

impl Versions for KindVersions<'_> {
    fn schema(&self, api_version: &str) -> Option<Arc<KindSchema>> {
        self.0
            .version(version_name(api_version))
            .map(KindSchema::cached)
    }

    fn convert(&self, obj: &Value, from: &str, to: &str) -> Option<Value> {
        let hub = self.0.decode(version_name(from), obj.clone()).ok()?;
        let mut out = self.0.encode(version_name(to), &hub).ok()?;
        if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        Some(out)
    }
}

/// The manager of a write: `fieldManager`, or else the user agent up to
/// its first `/`, printable characters only, at most 128 bytes (so
/// `kubectl/v1.33.0 (linux/amd64)` is `kubectl`).
pub(super) fn manager_name(ctx: &Ctx<'_>) -> String {
    if let Some(m) = ctx.query.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let agent = ctx.user_agent.as_deref().unwrap_or_default();
    let prefix = agent.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars() {
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            continue;
        }
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// The fields a write through the request's (sub)resource may not set:
/// `status` through the main resource of a kind with `/status`, `spec`
/// through `/status`.
fn reset_fields(ctx: &Ctx<'_>) -> Set {
    match ctx.ri.subresource.as_str() {
        "" if ctx.info.subresources.status => Set::from_paths([Path::fields(&["status"])]),
        "status" => Set::from_paths([Path::fields(&["spec"])]),
        _ => Set::new(),
    }
}

/// The field manager of this request.
pub(super) fn field_manager<'a>(
    ctx: &'a Ctx<'_>,
    versions: &'a KindVersions<'a>,
) -> FieldManager<'a> {
    FieldManager {
        versions,
        api_version: ctx.info.api_version(),
        subresource: ctx.ri.subresource.as_str(),
        reset_fields: reset_fields(ctx),
    }
}

/// The kind's empty object in the request's version, as the ownership of
/// a create is computed against (Go's zero value: the top-level structs
/// present and empty).
pub(super) fn zero_object(ctx: &Ctx<'_>) -> Value {
    match ctx.store.kind().version(ctx.info.version) {
        Some(ops) => KindSchema::cached(ops).zero_object().clone(),
        None => Value::Object(Map::new()),
    }
}

fn managed_of(obj: &Value) -> Option<&Value> {
    obj.get("metadata")?.get("managedFields")
}

/// `obj` without `metadata.managedFields` (a copy only when it has them).
pub(super) fn without_managed(obj: &Value) -> Cow<'_, Value> {
    if managed_of(obj).is_none() {
        return Cow::Borrowed(obj);
    }
    let mut out = obj.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    Cow::Owned(out)
}

/// The ownership a non-apply write starts from (kube-apiserver's
/// `decodeLiveOrNew`): what the body sent when it sent any (a reset when
/// it sent `[]` or `[{}]`), otherwise the stored object's; a subresource
/// write always starts from the stored object's.
fn starting_ownership(ctx: &Ctx<'_>, live: &Value, new: &Value) -> Managed {
    let sent = managed_of(new);
    if ctx.ri.subresource.is_empty() {
        if managed::is_reset(sent) {
            return Managed::default();
        }
        if let Ok(m) = managed::decode(sent)
            && !m.fields.is_empty()
        {
            return m;
        }
    }
    managed::decode(managed_of(live)).unwrap_or_default()
}

/// Records a non-apply write of `new` over `live` (both in the request's
/// version; `live` None for a create) by `manager`: sets
/// `metadata.managedFields` of `new`. Like upstream's `UpdateNoErrors`, a
/// failure leaves the object without managed fields rather than failing
/// the write.
pub(super) fn record_update(ctx: &Ctx<'_>, live: Option<&Value>, new: &mut Value, manager: &str) {
    let versions = KindVersions(ctx.store.kind());
    let fm = field_manager(ctx, &versions);
    let zero;
    let live = match live {
        Some(l) => l,
        None => {
            zero = zero_object(ctx);
            &zero
        }
    };
    let start = starting_ownership(ctx, live, new);
    let entries = match fm.update(
        &without_managed(live),
        &without_managed(new),
        start,
        manager,
    ) {
        Ok(m) => managed::encode(&m),
        Err(e) => {
            tracing::warn!(error = %e, "managed fields could not be updated");
            Value::Array(Vec::new())
        }
    };
    set_managed(new, entries);
}

/// Sets `metadata.managedFields` (removes it when empty).
pub(super) fn set_managed(obj: &mut Value, entries: Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.as_array().is_some_and(Vec::is_empty) {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), entries);
        }
    }
}

/// Records a create of the typed `hub` (kept typed: the versioned JSON is
/// only read).
pub(super) fn record_create(ctx: &Ctx<'_>, hub: &mut Object, manager: &str) -> ApiResult<()> {
    let kind = ctx.store.kind();
    let Ok(mut versioned) = kind.encode_object(ctx.info.version, hub) else {
        return Ok(());
    };
    record_update(ctx, None, &mut versioned, manager);
    let entries: Vec<ManagedFieldsEntry> = managed_of(&versioned)
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| Status::internal(e.to_string()))?
        .unwrap_or_default();
    hub.metadata_mut().managed_fields = entries;
    Ok(())
}

/// kube-apiserver's 409 for apply conflicts: one `FieldManagerConflict`
/// cause per field.
pub(super) fn conflict_status(conflicts: &[managed::Conflict]) -> Status {
    let causes = conflicts
        .iter()
        .map(|c| StatusCause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with {}", c.manager.describe()),
            field: c.path.to_string(),
        })
        .collect();
    Status::failure(409, "Conflict", managed::conflict_message(conflicts)).with_details(
        StatusDetails {
            causes,
            ..Default::default()
        },
    )
}

/// The update transform that records `manager`'s write: both objects in
/// hub form, compared in the request's version.
pub(super) fn hub_transform<'c>(
    ctx: &'c Ctx<'_>,
    manager: &'c str,
) -> impl Fn(Option<&Value>, &mut Value) -> ApiResult<()> + Send + Sync + 'c {
    move |old, new| {
        let kind = ctx.store.kind();
        let version = ctx.info.version;
        let old_versioned = match old.map(|o| kind.encode(version, o)).transpose() {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "managed fields: stored object not convertible");
                return Ok(());
            }
        };
        let mut new_versioned = match kind.encode(version, new) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "managed fields: new object not convertible");
                return Ok(());
            }
        };
        record_update(ctx, old_versioned.as_ref(), &mut new_versioned, manager);
        let entries = managed_of(&new_versioned)
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        set_managed(new, entries);
        Ok(())
    }
}

/// Writes `hub` as an update through the request's (sub)resource, with the
/// write recorded for the request's manager.
pub(super) async fn recorded_update(
    ctx: &Ctx<'_>,
    hub: Value,
    dry_run: bool,
) -> ApiResult<(Value, bool)> {
    let manager = manager_name(ctx);
    let transform = hub_transform(ctx, &manager);
    ctx.writer()
        .update_with(
            &ctx.ri.namespace,
            &ctx.ri.name,
            hub,
            dry_run,
            Some(&transform),
        )
        .await
}
