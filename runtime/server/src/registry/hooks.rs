//! The strategy hooks the generic store applies around validation:
//! the status-subresource rules (what a write through the main resource or
//! through `/status` may change), `metadata.generation` for kinds that bump
//! it, and the strategy's warnings (recorded for the response's `Warning`
//! headers).

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

impl Store {
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

    use super::spec_changed;

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
}
