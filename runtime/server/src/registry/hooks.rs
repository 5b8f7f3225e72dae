//! The strategy hooks the generic store applies around validation:
//! the status-subresource rules (what a write through the main resource or
//! through `/status` may change), `metadata.generation` for kinds that bump
//! it, and the strategy's warnings (recorded for the response's `Warning`
//! headers), and managedFields times kept when an update changes nothing
//! else (upstream's `IgnoreManagedFieldsTimestampsTransformer`).

use serde_json::Value;

use super::{Store, metadata_mut};
use crate::error::ApiResult;

/// Whether two hub objects differ outside `metadata`, `status`,
/// `apiVersion` and `kind`.
pub(super) fn spec_changed(new: &Value, old: &Value) -> bool {
    // `apiVersion` and `kind` are not the object's content (a custom
    // resource keeps the version it was written in until it is stored).
    const NOT_SPEC: [&str; 4] = ["metadata", "status", "apiVersion", "kind"];
    match (new, old) {
        (Value::Object(n), Value::Object(o)) => {
            let fields = |m: &'_ serde_json::Map<String, Value>| {
                m.iter()
                    .filter(|(k, _)| !NOT_SPEC.contains(&k.as_str()))
                    .count()
            };
            fields(n) != fields(o)
                || n.iter()
                    .filter(|(k, _)| !NOT_SPEC.contains(&k.as_str()))
                    .any(|(k, v)| o.get(k) != Some(v))
        }
        _ => new != old,
    }
}

/// Whether two `managedFields` lists are the same entries, in the same
/// order, apart from their `time`.
fn same_managers_apart_from_time(new: &[Value], old: &[Value]) -> bool {
    let without_time = |e: &Value| -> Option<serde_json::Map<String, Value>> {
        let mut m = e.as_object()?.clone();
        m.remove("time");
        Some(m)
    };
    new.len() == old.len()
        && new
            .iter()
            .zip(old)
            .all(|(n, o)| n == o || without_time(n) == without_time(o))
}

/// A cheap first test for [`Store::keep_managed_times`]: whether `new` and
/// `old` may be the same object apart from `metadata.managedFields` and
/// `metadata.resourceVersion`. Empty maps, empty lists, `null` and absent
/// members count as equal (serialization may drop any of them); anything
/// else that differs means the objects differ.
fn may_be_same_outside_managed(new: &Value, old: &Value) -> bool {
    fn empty(v: Option<&Value>) -> bool {
        match v {
            None | Some(Value::Null) => true,
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            Some(_) => false,
        }
    }
    fn loosely_equal(new: Option<&Value>, old: Option<&Value>, skip: &[&str]) -> bool {
        match (new, old) {
            (Some(Value::Object(n)), Some(Value::Object(o))) => {
                n.iter()
                    .filter(|(k, _)| !skip.contains(&k.as_str()))
                    .all(|(k, v)| loosely_equal(Some(v), o.get(k), &[]))
                    && o.iter()
                        .filter(|(k, _)| !skip.contains(&k.as_str()) && !n.contains_key(*k))
                        .all(|(_, v)| empty(Some(v)))
            }
            (Some(Value::Array(n)), Some(Value::Array(o))) => {
                n.len() == o.len()
                    && n.iter()
                        .zip(o)
                        .all(|(n, o)| loosely_equal(Some(n), Some(o), &[]))
            }
            (n, o) if empty(n) && empty(o) => true,
            (n, o) => n == o,
        }
    }
    let (Some(n), Some(o)) = (new.as_object(), old.as_object()) else {
        return new == old;
    };
    n.iter()
        .chain(o)
        .filter(|(k, _)| *k != "metadata")
        .all(|(k, _)| loosely_equal(n.get(k), o.get(k), &[]))
        && loosely_equal(
            n.get("metadata"),
            o.get("metadata"),
            &["managedFields", "resourceVersion"],
        )
}

impl Store {
    /// Keeps the stored `managedFields` times when an update would change
    /// nothing but them, as kube-apiserver's
    /// `IgnoreManagedFieldsTimestampsTransformer` does: an apply that
    /// re-applies what is already there (say `labels: {}` on an object
    /// whose empty labels are not stored) then writes nothing and keeps
    /// its resourceVersion, whichever second it runs in.
    pub(super) fn keep_managed_times(&self, new: &mut Value, old: &Value) -> ApiResult<()> {
        let managed = |v: &Value| {
            v.pointer("/metadata/managedFields")
                .and_then(Value::as_array)
                .cloned()
        };
        let (Some(now), Some(before)) = (managed(new), managed(old)) else {
            return Ok(());
        };
        if now == before
            || !same_managers_apart_from_time(&now, &before)
            || !may_be_same_outside_managed(new, old)
        {
            return Ok(());
        }
        let mut kept = new.clone();
        metadata_mut(&mut kept)?.insert("managedFields".into(), Value::Array(before));
        if self.encode(&kept)?.stored == self.encode(old)?.stored {
            *new = kept;
        }
        Ok(())
    }

    /// This store writing through `subresource`: `"status"` (updates change
    /// only `status`, as the CRD status strategy: everything else, metadata
    /// included, comes from the stored object) or `"scale"` (the main
    /// resource's rules; only the admission attributes differ). Any other
    /// value is the main resource. Subresource writes never create.
    pub fn subresource(&self, subresource: &str) -> Store {
        let mut store = self.clone();
        store.subresource = match subresource {
            "status" => "status",
            "scale" => "scale",
            _ => "",
        };
        store
    }

    /// The update preparation of this store's target. On the main resource
    /// of a kind with the status subresource the stored status is kept
    /// (status changes are ignored) before the strategy's
    /// `prepare_for_update`; through `/status`, the strategy's
    /// `prepare_status_update` keeps everything but status.
    pub(super) fn prepare_write(&self, new: &mut Value, old: &Value) -> ApiResult<()> {
        if self.subresource == "status" {
            // The strategy keeps everything but status from the stored
            // object; the ownership this write recorded stays (as
            // upstream's `ResetObjectMetaForStatus` keeps managedFields).
            let managed = new.pointer("/metadata/managedFields").cloned();
            self.kind
                .prepare_status_update(new, old)
                .map_err(Self::decode_err)?;
            let meta = metadata_mut(new)?;
            match managed {
                Some(m) => meta.insert("managedFields".into(), m),
                None => meta.remove("managedFields"),
            };
            return Ok(());
        }
        if self.info.subresources.status
            && let Some(map) = new.as_object_mut()
        {
            match old.get("status") {
                Some(status) => {
                    map.insert("status".into(), status.clone());
                }
                None => {
                    map.remove("status");
                }
            }
        }
        self.kind
            .prepare_for_update(new, old)
            .map_err(Self::decode_err)
    }

    /// After update preparation (`new` already carries the old
    /// generation): one more when anything outside metadata and status
    /// changed, for kinds that bump it.
    pub(super) fn next_generation(&self, new: &mut Value, old: &Value) -> ApiResult<()> {
        if !self.kind.bump_generation_on_spec_change() {
            return Ok(());
        }
        let current = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let next = if spec_changed(new, old) {
            current + 1
        } else {
            current
        };
        metadata_mut(new)?.insert("generation".into(), Value::from(next.max(1)));
        Ok(())
    }

    /// Records the strategy's update warnings for the response.
    pub(super) fn warn_update(&self, new: &Value, old: &Value) -> ApiResult<()> {
        for w in self
            .kind
            .warnings_on_update(new, old)
            .map_err(Self::decode_err)?
        {
            crate::request::warning::add(w);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{may_be_same_outside_managed, same_managers_apart_from_time, spec_changed};

    #[test]
    fn only_changes_outside_metadata_and_status_count() {
        let old = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"x": 1}, "status": {"y": 1}});
        let relabelled =
            json!({"metadata": {"labels": {"a": "c"}}, "spec": {"x": 1}, "status": {"y": 2}});
        let respecced =
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"x": 2}, "status": {"y": 1}});
        assert!(!spec_changed(&relabelled, &old));
        assert!(spec_changed(&respecced, &old));
    }

    #[test]
    fn empty_members_and_managed_fields_do_not_count_as_changes() {
        let old = json!({"metadata": {"name": "a", "resourceVersion": "3",
            "managedFields": [{"manager": "x"}]}, "spec": {"n": 1}});
        let new = json!({"metadata": {"name": "a", "labels": {}, "finalizers": [],
            "managedFields": []}, "spec": {"n": 1, "o": null}});
        assert!(may_be_same_outside_managed(&new, &old));
        assert!(may_be_same_outside_managed(&old, &new));
        let changed = json!({"metadata": {"name": "a"}, "spec": {"n": 2}});
        assert!(!may_be_same_outside_managed(&changed, &old));
        let extra = json!({"metadata": {"name": "a"}, "spec": {"n": 1, "o": 0}});
        assert!(!may_be_same_outside_managed(&extra, &old));
        let list = json!({"metadata": {"name": "a"}, "spec": {"n": 1}, "l": [1]});
        assert!(!may_be_same_outside_managed(&list, &old));
    }

    #[test]
    fn managers_compare_apart_from_time_in_order() {
        let a = json!({"manager": "a", "time": "2026-01-01T00:00:00Z"});
        let a_later = json!({"manager": "a", "time": "2026-01-01T00:00:09Z"});
        let b = json!({"manager": "b", "time": "2026-01-01T00:00:00Z"});
        assert!(same_managers_apart_from_time(
            &[a_later.clone(), b.clone()],
            &[a.clone(), b.clone()]
        ));
        assert!(!same_managers_apart_from_time(
            &[b.clone(), a_later],
            &[a.clone(), b.clone()]
        ));
        assert!(!same_managers_apart_from_time(&[a], &[b]));
    }
}
