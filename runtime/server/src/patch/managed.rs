//! Field ownership: `metadata.managedFields`, updated by every write and
//! enforced by server-side apply — structured-merge-diff's `merge.Updater`
//! and kube-apiserver's field manager layers (manager identity, stripped
//! metadata, reset fields, timestamps, the cap on update managers, the
//! upgrade from client-side apply), over JSON objects in the request's
//! version.
//!
//! Objects of other versions (a manager that wrote through another
//! version) are compared after conversion through [`Versions`].

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::fieldpath::{Path, Set};
use super::schema::KindSchema;
use super::structured::{self, Comparison};
use apiforge_core::meta::Time;

/// The annotation client-side `kubectl apply` keeps its configuration in.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// How many `Update` managers an object keeps before the oldest are
/// merged into [`ANCIENT_CHANGES_MANAGER`] (kube-apiserver's
/// `DefaultMaxUpdateManagers`).
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager that absorbs the oldest update managers.
pub const ANCIENT_CHANGES_MANAGER: &str = "ancient-changes";

/// The manager name `kubectl apply --server-side` uses by default; only
/// it upgrades client-side-applied fields and keeps the last-applied
/// annotation in step (as upstream).
pub const KUBECTL_MANAGER: &str = "kubectl";

/// The operation a managedFields entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write (create, update, patch).
    Update,
}

impl Operation {
    /// As written in `managedFields[].operation`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who owns a set of fields: an entry of `managedFields` without its time
/// and fields. Appliers are one manager whatever version they apply in;
/// updaters are one per version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManagerId {
    /// `manager`.
    pub manager: String,
    /// `operation`.
    pub operation: Operation,
    /// `apiVersion` (empty for appliers).
    pub api_version: String,
    /// `subresource`.
    pub subresource: String,
}

impl ManagerId {
    /// The identity of `manager` doing `operation` through `api_version`
    /// and `subresource`.
    pub fn new(manager: &str, operation: Operation, api_version: &str, subresource: &str) -> Self {
        ManagerId {
            manager: manager.to_string(),
            operation,
            api_version: if operation == Operation::Apply {
                String::new()
            } else {
                api_version.to_string()
            },
            subresource: subresource.to_string(),
        }
    }

    /// As conflict messages print a manager (`"kubectl" using v1`, with
    /// `with subresource "status"` when it wrote a subresource).
    pub fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out = format!("{out} with subresource {:?}", self.subresource);
        }
        if self.operation == Operation::Update {
            out = format!("{out} using {}", self.api_version);
        }
        out
    }
}

/// The fields one manager owns, in the version it wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionedSet {
    /// The owned paths.
    pub set: Set,
    /// The version the paths are in.
    pub api_version: String,
    /// Whether they were applied.
    pub applied: bool,
}

/// Every manager's fields and the time each last changed the object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Managed {
    /// The field sets.
    pub fields: BTreeMap<ManagerId, VersionedSet>,
    /// The times.
    pub times: BTreeMap<ManagerId, Time>,
}

/// One field another manager owns that an apply would change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The owner.
    pub manager: ManagerId,
    /// The field.
    pub path: Path,
}

/// Why ownership could not be worked out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManagedError {
    /// An apply would change fields others own.
    #[error("{}", conflict_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The applied configuration is not well-formed for the schema.
    #[error("{0}")]
    Invalid(String),
    /// `managedFields` could not be read.
    #[error("{0}")]
    Decode(String),
}

/// kube-apiserver's message for apply conflicts.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager.describe(),
            only.path
        );
    }
    let mut by_manager: BTreeMap<String, Vec<&Path>> = BTreeMap::new();
    for c in conflicts {
        by_manager
            .entry(c.manager.describe())
            .or_default()
            .push(&c.path);
    }
    let mut lines = Vec::new();
    for (manager, paths) in by_manager {
        lines.push(format!("conflicts with {manager}:"));
        for p in paths {
            lines.push(format!("- {p}"));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// The versions of a kind: their schemas and conversion between them.
pub trait Versions: Sync {
    /// The schema of `api_version` (None: not served).
    fn schema(&self, api_version: &str) -> Option<Arc<KindSchema>>;
    /// `obj` (in `from`) converted to `to` (None: cannot be).
    fn convert(&self, obj: &Value, from: &str, to: &str) -> Option<Value>;
}

/// The metadata fields nobody owns (kube-apiserver's strip set).
fn stripped_fields() -> &'static Set {
    static STRIPPED: std::sync::LazyLock<Set> = std::sync::LazyLock::new(|| {
        let mut s = Set::from_paths([
            Path::fields(&["apiVersion"]),
            Path::fields(&["kind"]),
            Path::fields(&["metadata"]),
        ]);
        for f in [
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
        ] {
            s.insert(&Path::fields(&["metadata", f]).0);
        }
        s
    });
    &STRIPPED
}

/// What one write's ownership bookkeeping works with.
pub struct FieldManager<'a> {
    /// The kind's versions.
    pub versions: &'a dyn Versions,
    /// The version the request's objects are in (`group/version`).
    pub api_version: String,
    /// The subresource written (`""`, `status`, `scale`).
    pub subresource: &'a str,
    /// Fields the write cannot set (the strategy resets them: `status`
    /// through the main resource, `spec` through `/status`).
    pub reset_fields: Set,
}

impl FieldManager<'_> {
    fn schema(&self, version: &str) -> Option<Arc<KindSchema>> {
        self.versions.schema(version)
    }

    fn convert(&self, obj: &Value, to: &str) -> Option<Value> {
        if to == self.api_version {
            return Some(obj.clone());
        }
        self.versions.convert(obj, &self.api_version, to)
    }

    /// The comparison of `old` and `new` in `version` (None: that version
    /// is gone).
    fn compare_in(&self, old: &Value, new: &Value, version: &str) -> Option<Comparison> {
        let schema = self.schema(version)?;
        let root = schema.root();
        let cmp = if version == self.api_version {
            structured::compare(old, new, &root)
        } else {
            let old = self.convert(old, version)?;
            let new = self.convert(new, version)?;
            structured::compare(&old, &new, &root)
        };
        Some(cmp.exclude(&self.reset_fields))
    }

    /// Removes, from every manager but `workflow`, what the change from
    /// `old` to `new` took from them; the fields others owned that it
    /// changed are conflicts unless `force`.
    fn update_owners(
        &self,
        old: &Value,
        new: &Value,
        managers: &mut BTreeMap<ManagerId, VersionedSet>,
        workflow: &ManagerId,
        force: bool,
    ) -> Result<Comparison, ManagedError> {
        let mine = self
            .compare_in(old, new, &self.api_version)
            .unwrap_or_default();
        // The comparisons in the other managers' versions, made once each.
        let mut by_version: BTreeMap<String, Option<Comparison>> = BTreeMap::new();
        let mut conflicts: BTreeMap<ManagerId, Set> = BTreeMap::new();
        let mut removed: BTreeMap<ManagerId, Set> = BTreeMap::new();
        let mut gone = Vec::new();
        for (id, owned) in managers.iter() {
            if id == workflow {
                continue;
            }
            let cmp = if owned.api_version == self.api_version {
                Some(&mine)
            } else {
                by_version
                    .entry(owned.api_version.clone())
                    .or_insert_with(|| self.compare_in(old, new, &owned.api_version))
                    .as_ref()
            };
            let Some(cmp) = cmp else {
                gone.push(id.clone());
                continue;
            };
            let conflict = owned.set.intersection(&cmp.modified.union(&cmp.added));
            if !conflict.is_empty() {
                conflicts.insert(id.clone(), conflict);
            }
            if !cmp.removed.is_empty() {
                removed.insert(id.clone(), cmp.removed.clone());
            }
        }
        for id in gone {
            managers.remove(&id);
        }
        if !force && !conflicts.is_empty() {
            let mut list = Vec::new();
            for (manager, set) in conflicts {
                set.iterate(&mut |p| {
                    list.push(Conflict {
                        manager: manager.clone(),
                        path: p.clone(),
                    })
                });
            }
            return Err(ManagedError::Conflicts(list));
        }
        for (id, set) in conflicts.iter().chain(removed.iter()) {
            if let Some(owned) = managers.get_mut(id) {
                owned.set = owned.set.difference(set);
            }
        }
        managers.retain(|_, owned| !owned.set.is_empty());
        Ok(mine)
    }

    /// The ownership after a non-apply write from `live` to `new` by
    /// `manager` (structured-merge-diff's `Update`, then kube-apiserver's
    /// bookkeeping: the manager's fields merge with what it owned before,
    /// its time moves only when it took fields, metadata is stripped).
    pub fn update(
        &self,
        live: &Value,
        new: &Value,
        mut managed: Managed,
        manager: &str,
    ) -> Result<Managed, ManagedError> {
        let id = ManagerId::new(
            manager,
            Operation::Update,
            &self.api_version,
            self.subresource,
        );
        let current = ManagerId::new(
            "\u{0}current-operation",
            Operation::Update,
            &self.api_version,
            self.subresource,
        );
        let cmp = self.update_owners(live, new, &mut managed.fields, &current, true)?;
        if !cmp.is_same() {
            let set = cmp
                .modified
                .union(&cmp.added)
                .recursive_difference(&self.reset_fields)
                .difference(stripped_fields());
            if !set.is_empty() {
                let merged = match managed.fields.remove(&id) {
                    Some(previous) => previous.set.union(&set),
                    None => set,
                };
                managed.fields.insert(
                    id.clone(),
                    VersionedSet {
                        set: merged,
                        api_version: self.api_version.clone(),
                        applied: false,
                    },
                );
                managed.times.insert(id, Time::now());
            }
        }
        cap_update_managers(&mut managed);
        managed.times.retain(|k, _| managed.fields.contains_key(k));
        Ok(managed)
    }

    /// Applies `config` over `live` for `manager` (structured-merge-diff's
    /// `Apply`): the merged object — None when nothing changed — and the
    /// new ownership, or the conflicts with other managers.
    pub fn apply(
        &self,
        live: &Value,
        config: &Value,
        mut managed: Managed,
        manager: &str,
        force: bool,
    ) -> Result<(Option<Value>, Managed), ManagedError> {
        let schema = self
            .schema(&self.api_version)
            .ok_or_else(|| ManagedError::Invalid(format!("no schema for {}", self.api_version)))?;
        let root = schema.root();
        let errs = structured::validate(config, &root);
        if !errs.is_empty() {
            return Err(ManagedError::Invalid(validation_message(&errs)));
        }
        let id = ManagerId::new(
            manager,
            Operation::Apply,
            &self.api_version,
            self.subresource,
        );
        let merged = structured::merge(live, config, &root);
        let last = managed.fields.get(&id).cloned();
        // Metadata is stripped from the applier's fields only at the end:
        // while pruning, the name and type meta the configuration carries
        // keep `metadata` itself from being pruned.
        let set = structured::to_field_set(config, &root).recursive_difference(&self.reset_fields);
        managed.fields.insert(
            id.clone(),
            VersionedSet {
                set,
                api_version: self.api_version.clone(),
                applied: true,
            },
        );
        let new = match &last {
            Some(last) if !last.set.is_empty() => self.prune(&merged, &managed, last),
            _ => merged,
        };
        self.update_owners(live, &new, &mut managed.fields, &id, force)?;
        if let Some(owned) = managed.fields.get_mut(&id) {
            owned.set = owned.set.difference(stripped_fields());
            if owned.set.is_empty() {
                managed.fields.remove(&id);
            }
        }
        let changed = new != *live;
        if changed {
            managed.times.insert(id, Time::now());
        }
        managed.times.retain(|k, _| managed.fields.contains_key(k));
        Ok((changed.then_some(new), managed))
    }

    /// Removes from `merged` what `applier` applied last time and no
    /// longer applies, unless another manager owns it (structured-merge-
    /// diff's `prune`).
    fn prune(&self, merged: &Value, managed: &Managed, last: &VersionedSet) -> Value {
        let version = &last.api_version;
        let (Some(schema), Some(converted)) = (self.schema(version), self.convert(merged, version))
        else {
            return merged.clone();
        };
        let root = schema.root();
        let ensure = |set: &Set| structured::ensure_named_fields_are_members(set, &root);
        let fields_of = |v: &Value| ensure(&structured::to_field_set(v, &root));
        let last_set = ensure(&last.set);
        // Everything the applier applied last time goes...
        let pruned = structured::remove_items(&converted, &last_set, &root);
        // ...except what someone (the applier's new configuration
        // included) still owns...
        let mut owned = Set::new();
        for set in managed.fields.values() {
            owned = owned.union(&set.set);
        }
        let merged_set = fields_of(&converted);
        let keep = fields_of(&pruned).union(&ensure(&owned));
        let pruned = structured::remove_items(&converted, &merged_set.difference(&keep), &root);
        // ...and only what the last configuration named is removed.
        let gone = merged_set
            .difference(&fields_of(&pruned))
            .intersection(&last_set);
        let pruned = structured::remove_items(&converted, &gone, &root);
        if *version == self.api_version {
            pruned
        } else {
            self.versions
                .convert(&pruned, version, &self.api_version)
                .unwrap_or_else(|| merged.clone())
        }
    }
}

/// structured-merge-diff's wording of validation errors.
fn validation_message(errs: &[String]) -> String {
    if let [only] = errs {
        return only.clone();
    }
    let mut out = String::from("errors:\n");
    for e in errs {
        out.push_str("  ");
        out.push_str(e);
        out.push('\n');
    }
    out
}

/// Merges the oldest update managers into `ancient-changes` while there
/// are more than [`MAX_UPDATE_MANAGERS`].
fn cap_update_managers(managed: &mut Managed) {
    let mut updaters: Vec<(Option<Time>, ManagerId)> = managed
        .fields
        .iter()
        .filter(|(id, s)| id.operation == Operation::Update && !s.applied)
        .map(|(id, _)| (managed.times.get(id).copied(), id.clone()))
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort();
    let excess = updaters.len() - MAX_UPDATE_MANAGERS;
    for (time, id) in updaters.into_iter().take(excess) {
        let Some(owned) = managed.fields.remove(&id) else {
            continue;
        };
        managed.times.remove(&id);
        let bucket = ManagerId::new(
            ANCIENT_CHANGES_MANAGER,
            Operation::Update,
            &owned.api_version,
            "",
        );
        let set = match managed.fields.remove(&bucket) {
            Some(prev) => prev.set.union(&owned.set),
            None => owned.set,
        };
        managed.fields.insert(
            bucket.clone(),
            VersionedSet {
                set,
                api_version: owned.api_version,
                applied: false,
            },
        );
        if let Some(t) = time {
            let newest = managed.times.get(&bucket).map_or(t, |b| (*b).max(t));
            managed.times.insert(bucket, newest);
        }
    }
}

/// Whether `managedFields` as sent asks for a reset: `[]` or `[{}]`.
pub fn is_reset(managed_fields: Option<&Value>) -> bool {
    match managed_fields.and_then(Value::as_array) {
        Some(list) if list.is_empty() => true,
        Some(list) => list.len() == 1 && list[0].as_object().is_some_and(Map::is_empty),
        None => false,
    }
}

/// Reads `metadata.managedFields` entries.
pub fn decode(entries: Option<&Value>) -> Result<Managed, ManagedError> {
    let mut managed = Managed::default();
    let Some(list) = entries else {
        return Ok(managed);
    };
    let list = list
        .as_array()
        .ok_or_else(|| ManagedError::Decode("managedFields is not a list".into()))?;
    for entry in list {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
        let operation = match text("operation") {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            other => {
                return Err(ManagedError::Decode(format!(
                    "unknown operation {other:?} in managedFields"
                )));
            }
        };
        if !matches!(text("fieldsType"), "FieldsV1") {
            return Err(ManagedError::Decode(format!(
                "invalid fieldsType {:?} in managedFields",
                text("fieldsType")
            )));
        }
        let set = Set::from_fields_v1(entry.get("fieldsV1").unwrap_or(&json!({})))
            .map_err(ManagedError::Decode)?;
        let api_version = text("apiVersion");
        let id = ManagerId::new(text("manager"), operation, api_version, text("subresource"));
        if let Some(t) = entry
            .get("time")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        {
            managed.times.insert(id.clone(), Time(t));
        }
        managed.fields.insert(
            id,
            VersionedSet {
                set,
                api_version: api_version.to_string(),
                applied: operation == Operation::Apply,
            },
        );
    }
    Ok(managed)
}

/// Writes ownership as `metadata.managedFields` entries, in upstream's
/// order (operation, time, manager, apiVersion, subresource).
pub fn encode(managed: &Managed) -> Value {
    let mut entries: Vec<(&ManagerId, &VersionedSet, Option<Time>)> = managed
        .fields
        .iter()
        .filter(|(_, s)| !s.set.is_empty())
        .map(|(id, s)| (id, s, managed.times.get(id).copied()))
        .collect();
    entries.sort_by(|a, b| {
        let secs = |t: Option<Time>| t.map_or(0, |t| t.0.as_second());
        a.0.operation
            .cmp(&b.0.operation)
            .then(secs(a.2).cmp(&secs(b.2)))
            .then(a.0.manager.cmp(&b.0.manager))
            .then(a.1.api_version.cmp(&b.1.api_version))
            .then(a.0.subresource.cmp(&b.0.subresource))
    });
    Value::Array(
        entries
            .into_iter()
            .map(|(id, set, time)| {
                let mut e = Map::new();
                e.insert("manager".into(), Value::String(id.manager.clone()));
                e.insert(
                    "operation".into(),
                    Value::String(id.operation.as_str().into()),
                );
                e.insert("apiVersion".into(), Value::String(set.api_version.clone()));
                if let Some(t) = time {
                    e.insert("time".into(), Value::String(t.to_string()));
                }
                e.insert("fieldsType".into(), Value::String("FieldsV1".into()));
                e.insert("fieldsV1".into(), set.set.to_fields_v1());
                if !id.subresource.is_empty() {
                    e.insert("subresource".into(), Value::String(id.subresource.clone()));
                }
                Value::Object(e)
            })
            .collect(),
    )
}

/// The fields of the last-applied configuration whose values the object
/// still has: an apply by `kubectl` may take them from other managers
/// (the upgrade from client-side apply).
pub fn allowed_conflicts_from_last_applied(live: &Value, schema: &KindSchema) -> Option<Set> {
    let text = live
        .get("metadata")?
        .get("annotations")?
        .get(LAST_APPLIED_ANNOTATION)?
        .as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    if !last.is_object() {
        return None;
    }
    let root = schema.root();
    let last_set = structured::to_field_set(&last, &root);
    let cmp = structured::compare(&last, live, &root);
    Some(last_set.difference(&cmp.modified))
}

/// The last-applied annotation's new value after an apply by `kubectl`:
/// the applied configuration without the annotation itself.
pub fn last_applied_value(config: &Value) -> String {
    let mut config = config.clone();
    if let Some(annotations) = config
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED_ANNOTATION);
        if annotations.is_empty()
            && let Some(meta) = config.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.remove("annotations");
        }
    }
    config.to_string()
}
