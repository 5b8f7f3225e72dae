//! Admission hooks, finalizers and graceful deletion of the registry store
//! (the generic apiserver's `store.go` `Delete`/`finalizeDelete`/
//! `ShouldDeleteDuringUpdate`, and the namespace registry's special delete).
//!
//! * An object whose `metadata.finalizers` is non-empty is not removed by a
//!   DELETE: it gets `metadata.deletionTimestamp` and
//!   `deletionGracePeriodSeconds: 0` and stays until an update removes its
//!   last finalizer; that update removes it from storage.
//! * A Namespace also waits for its `spec.finalizers` (the `kubernetes`
//!   finalizer the namespace controller owns); its DELETE also sets
//!   `status.phase: Terminating`.
//! * The garbage-collection options of a DELETE ([`Propagation`]) put the
//!   `orphan` or `foregroundDeletion` finalizer on the object (the generic
//!   store's `deletionFinalizersForGarbageCollection`); the garbage
//!   collector removes them once it has orphaned or deleted the
//!   dependents.

use std::sync::Arc;

use serde_json::Value;

use super::{Store, metadata_mut};
use crate::admission::{self, Attributes, Operation};
use crate::error::{ApiError, ApiResult};
use apiforge_core::meta::{Status, Time};
use apiforge_core::resource::GarbageCollectionPolicy;
use apiforge_core::scheme::Object;
use apiforge_storage::{self as storage, KeyValue, Revision, WriteOutcome};

/// What a DELETE did.
#[derive(Clone, Debug, PartialEq)]
pub enum DeleteOutcome {
    /// The object is gone; its last state.
    Removed(Value),
    /// The object waits for finalizers; its current (terminating) state.
    Terminating(Value),
}

impl DeleteOutcome {
    /// The object, whatever happened.
    pub fn into_object(self) -> Value {
        match self {
            DeleteOutcome::Removed(v) | DeleteOutcome::Terminating(v) => v,
        }
    }
}

/// The finalizer that makes the garbage collector orphan an object's
/// dependents before the object goes (`metav1.FinalizerOrphanDependents`).
pub const FINALIZER_ORPHAN: &str = "orphan";
/// The finalizer that keeps an object until the garbage collector has
/// deleted its blocking dependents (`metav1.FinalizerDeleteDependents`).
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// `DeleteOptions.propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropagationPolicy {
    /// Dependents are orphaned: their owner reference is removed.
    Orphan,
    /// The object goes now, dependents after it.
    Background,
    /// Dependents go first; the object waits for the blocking ones.
    Foreground,
}

impl PropagationPolicy {
    /// The policy named `value` (`Orphan`, `Background`, `Foreground`).
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "Orphan" => Some(PropagationPolicy::Orphan),
            "Background" => Some(PropagationPolicy::Background),
            "Foreground" => Some(PropagationPolicy::Foreground),
            _ => None,
        }
    }

    /// The wire name of the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            PropagationPolicy::Orphan => "Orphan",
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Foreground => "Foreground",
        }
    }
}

/// The garbage-collection options of a DELETE (validated: at most one of
/// the two is set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Propagation {
    /// The deprecated `orphanDependents`.
    pub orphan_dependents: Option<bool>,
    /// `propagationPolicy`.
    pub policy: Option<PropagationPolicy>,
}

impl Propagation {
    /// Options asking for `policy`.
    pub fn policy(policy: PropagationPolicy) -> Self {
        Propagation {
            orphan_dependents: None,
            policy: Some(policy),
        }
    }

    /// Whether the dependents of `finalizers`' object are to be orphaned
    /// (the generic store's `shouldOrphanDependents`).
    fn orphans(&self, default: GarbageCollectionPolicy, finalizers: &[&str]) -> bool {
        if default == GarbageCollectionPolicy::Unsupported {
            return false;
        }
        if let Some(orphan) = self.orphan_dependents {
            return orphan;
        }
        if let Some(policy) = self.policy {
            return policy == PropagationPolicy::Orphan;
        }
        if finalizers.contains(&FINALIZER_ORPHAN) {
            return true;
        }
        if finalizers.contains(&FINALIZER_FOREGROUND) {
            return false;
        }
        default == GarbageCollectionPolicy::OrphanDependents
    }

    /// Whether the dependents are to be deleted before the object (the
    /// generic store's `shouldDeleteDependents`).
    fn deletes_dependents_first(
        &self,
        default: GarbageCollectionPolicy,
        finalizers: &[&str],
    ) -> bool {
        if default == GarbageCollectionPolicy::Unsupported || self.orphan_dependents.is_some() {
            return false;
        }
        if let Some(policy) = self.policy {
            return policy == PropagationPolicy::Foreground;
        }
        finalizers.contains(&FINALIZER_FOREGROUND)
    }

    /// The object's finalizers after a DELETE with these options, when
    /// they change (the generic store's
    /// `deletionFinalizersForGarbageCollection`).
    pub fn finalizers(
        &self,
        default: GarbageCollectionPolicy,
        finalizers: &[&str],
    ) -> Option<Vec<String>> {
        let orphan = self.orphans(default, finalizers);
        let foreground = self.deletes_dependents_first(default, finalizers);
        let has_orphan = finalizers.contains(&FINALIZER_ORPHAN);
        let has_foreground = finalizers.contains(&FINALIZER_FOREGROUND);
        let mut out: Vec<String> = finalizers.iter().map(|f| f.to_string()).collect();
        let mut changed = false;
        if orphan && !has_orphan {
            out.push(FINALIZER_ORPHAN.into());
            changed = true;
        }
        if foreground && !has_foreground {
            out.push(FINALIZER_FOREGROUND.into());
            changed = true;
        }
        if !orphan && has_orphan {
            out.retain(|f| f != FINALIZER_ORPHAN);
            changed = true;
        }
        if !foreground && has_foreground {
            out.retain(|f| f != FINALIZER_FOREGROUND);
            changed = true;
        }
        changed.then_some(out)
    }
}

/// Whether a delete has to wait, after [`Store::graceful_delete`].
pub(super) enum Graceful {
    /// Nothing pending: remove the object now.
    Immediate,
    /// The object is (now) terminating.
    Pending(Value),
    /// The object changed meanwhile; read it again.
    Retry,
}

fn string_list_non_empty(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array).is_some_and(|a| !a.is_empty())
}

impl Store {
    /// This store with the admission chain `chain` run by its writes.
    pub fn with_admission(mut self, chain: Arc<admission::Chain>) -> Self {
        self.admission = chain;
        self
    }

    /// The admission chain this store's writes run.
    pub fn admission(&self) -> &Arc<admission::Chain> {
        &self.admission
    }

    fn attributes(
        &self,
        operation: Operation,
        namespace: &str,
        name: &str,
        object: Option<Value>,
        old_object: Option<Value>,
        dry_run: bool,
    ) -> Attributes {
        Attributes {
            operation: Some(operation),
            group: self.info.group.into(),
            // The version the client wrote, as upstream's attributes carry
            // it; the storage version for internal writes.
            version: crate::request::info::requested_version(self.info.group, self.info.plural)
                .filter(|v| self.kind.version(v).is_some())
                .unwrap_or_else(|| self.info.version.into()),
            kind: self.info.kind.into(),
            resource: self.info.plural.into(),
            subresource: self.subresource.into(),
            namespace: if self.namespaced() {
                namespace.into()
            } else {
                String::new()
            },
            name: name.into(),
            object,
            old_object,
            dry_run,
            user: crate::request::user::current_user()
                .map(Into::into)
                .unwrap_or_default(),
            codec: Some(crate::admission::Codec(self.kind.clone())),
            reinvocation: Default::default(),
        }
    }

    /// Runs the mutating admission plugins on `object` (create or update)
    /// and returns the possibly changed object.
    pub(super) async fn admit_object(
        &self,
        operation: Operation,
        namespace: &str,
        name: &str,
        object: Value,
        old: Option<&Value>,
        dry_run: bool,
    ) -> ApiResult<Value> {
        if !self.admission.wants(operation, self.info.group) {
            return Ok(object);
        }
        let mut attrs = self.attributes(
            operation,
            namespace,
            name,
            Some(object),
            old.cloned(),
            dry_run,
        );
        self.admission.admit(&mut attrs).await?;
        let object = attrs.object.ok_or_else(|| {
            ApiError::from(Status::internal("an admission plugin removed the object"))
        })?;
        if !object.is_object() {
            return Err(
                Status::internal("an admission plugin made the object a non-object").into(),
            );
        }
        Ok(object)
    }

    /// [`Store::admit_object`] on a typed object: the plugins see its JSON
    /// form, and it is decoded again only when a plugin changed it.
    pub(super) async fn admit_typed(
        &self,
        operation: Operation,
        namespace: &str,
        name: &str,
        object: Object,
        dry_run: bool,
    ) -> ApiResult<Object> {
        if !self.admission.wants(operation, self.info.group) {
            return Ok(object);
        }
        let value = object.to_value().map_err(Self::decode_err)?;
        let admitted = self
            .admit_object(operation, namespace, name, value.clone(), None, dry_run)
            .await?;
        if admitted == value {
            return Ok(object);
        }
        self.kind.hub_object(&admitted).map_err(Self::decode_err)
    }

    /// Runs the mutating admission plugins of a delete (no objects, as the
    /// generic apiserver's delete handler).
    pub(super) async fn admit_delete(
        &self,
        namespace: &str,
        name: &str,
        dry_run: bool,
    ) -> ApiResult<()> {
        if !self.admission.wants(Operation::Delete, self.info.group) {
            return Ok(());
        }
        let mut attrs = self.attributes(Operation::Delete, namespace, name, None, None, dry_run);
        self.admission.admit(&mut attrs).await
    }

    /// Runs the validating admission plugins on the final object.
    pub(super) async fn validate_admission(
        &self,
        operation: Operation,
        namespace: &str,
        name: &str,
        object: Option<&Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> ApiResult<()> {
        if !self.admission.wants(operation, self.info.group) {
            return Ok(());
        }
        let attrs = self.attributes(
            operation,
            namespace,
            name,
            object.cloned(),
            old.cloned(),
            dry_run,
        );
        self.admission.validate(&attrs).await
    }

    /// Reads one object from storage, bypassing the watch cache (a quorum
    /// read, as kube's "live lookups").
    pub async fn get_live(&self, namespace: &str, name: &str) -> ApiResult<Value> {
        match self.storage.get(&self.key(namespace, name), 0).await? {
            Some(kv) => self.decode(&kv),
            None => Err(self.not_found(name)),
        }
    }

    /// Whether finalizers still hold `obj` in storage: its
    /// `metadata.finalizers`, or what the kind's strategy says
    /// ([`Strategy::finalizers_pending`](apiforge_core::resource::Strategy::finalizers_pending)).
    pub fn has_finalizers(&self, obj: &Value) -> bool {
        string_list_non_empty(obj.pointer("/metadata/finalizers"))
            || self.kind.finalizers_pending(obj).unwrap_or(false)
    }

    fn is_deleting(obj: &Value) -> bool {
        obj.pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
    }

    /// The finalizer step of a delete: the garbage-collection options
    /// update the deletion finalizers; an object that then has finalizers
    /// is marked terminating (once) instead of being removed.
    pub(super) async fn graceful_delete(
        &self,
        key: &str,
        current: &KeyValue,
        obj: &Value,
        dry_run: bool,
        propagation: &Propagation,
    ) -> ApiResult<Graceful> {
        let existing: Vec<&str> = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut finalizers =
            propagation.finalizers(self.kind.default_garbage_collection_policy(), &existing);
        if !Self::is_deleting(obj) {
            // The kind's own deletion finalizers join on the first DELETE.
            for f in self.kind.deletion_finalizers() {
                let list = finalizers
                    .get_or_insert_with(|| existing.iter().map(|e| e.to_string()).collect());
                if !list.iter().any(|e| e == f) {
                    list.push((*f).to_string());
                }
            }
        }
        let mut marked = obj.clone();
        if let Some(finalizers) = &finalizers {
            let meta = metadata_mut(&mut marked)?;
            if finalizers.is_empty() {
                meta.remove("finalizers");
            } else {
                meta.insert("finalizers".into(), Value::from(finalizers.clone()));
            }
        }
        if !self.has_finalizers(&marked) {
            return Ok(Graceful::Immediate);
        }
        let deleting = Self::is_deleting(obj);
        if deleting && finalizers.is_none() {
            return Ok(Graceful::Pending(marked));
        }
        if !deleting {
            let meta = metadata_mut(&mut marked)?;
            meta.insert(
                "deletionTimestamp".into(),
                Value::String(Time::now().to_string()),
            );
            meta.insert("deletionGracePeriodSeconds".into(), Value::from(0));
            if let Some(generation) = meta.get("generation").and_then(Value::as_i64)
                && generation > 0
            {
                meta.insert("generation".into(), Value::from(generation + 1));
            }
            self.kind
                .on_deletion_requested(&mut marked)
                .map_err(|e| ApiError::from(Status::internal(e.to_string())))?;
        }
        if dry_run {
            return Ok(Graceful::Pending(marked));
        }
        let encoded = self.encode(&marked)?;
        match self
            .storage
            .update(key, current.mod_revision, encoded.bytes.clone())
            .await?
        {
            WriteOutcome::Done(kv) => {
                Ok(Graceful::Pending(self.written(encoded, kv.mod_revision)?))
            }
            WriteOutcome::Conflict(_) => Ok(Graceful::Retry),
        }
    }

    /// Writes `encoded` over the object at `key` if it is still at
    /// `revision`. Returns the written object, or `None` when the object
    /// changed meanwhile (a failed compare-and-swap). An object being
    /// deleted whose last finalizer is gone then leaves storage.
    pub(super) async fn write_update(
        &self,
        key: &str,
        revision: Revision,
        encoded: super::Encoded,
    ) -> ApiResult<Option<Value>> {
        let kv = match self
            .storage
            .update(key, revision, encoded.bytes.clone())
            .await?
        {
            WriteOutcome::Done(kv) => kv,
            WriteOutcome::Conflict(_) => return Ok(None),
        };
        let obj = self.written(encoded, kv.mod_revision)?;
        if !Self::is_deleting(&obj) || self.has_finalizers(&obj) {
            return Ok(Some(obj));
        }
        match self.storage.delete(key, Some(kv.mod_revision)).await {
            // Changed or gone meanwhile: whoever changed it decides.
            Ok(_) | Err(storage::Error::NotFound(_)) => Ok(Some(obj)),
            Err(e) => Err(e.into()),
        }
    }

    /// Changes an object in place without the strategy or admission (for
    /// the server's own controllers, like kube's `/finalize` and `/status`
    /// writes): `change` edits the current object and returns whether to
    /// write it. Retries on conflicts; removes the object when it is being
    /// deleted and its last finalizer went. Returns the new state, or
    /// `None` when the object does not exist.
    pub async fn update_internal(
        &self,
        namespace: &str,
        name: &str,
        mut change: impl FnMut(&mut Value) -> bool + Send,
    ) -> ApiResult<Option<Value>> {
        let key = self.key(namespace, name);
        loop {
            let Some(current) = self.storage.get(&key, 0).await? else {
                return Ok(None);
            };
            let mut obj = self.decode(&current)?;
            if !change(&mut obj) {
                return Ok(Some(obj));
            }
            let encoded = self.encode(&obj)?;
            if let Some(written) = self
                .write_update(&key, current.mod_revision, encoded)
                .await?
            {
                return Ok(Some(written));
            }
        }
    }
}

#[cfg(test)]
mod propagation_tests {
    use super::*;

    fn fins(
        p: Propagation,
        default: GarbageCollectionPolicy,
        existing: &[&str],
    ) -> Option<Vec<String>> {
        p.finalizers(default, existing)
    }

    #[test]
    fn deletion_finalizers_follow_the_options() {
        use GarbageCollectionPolicy::*;
        use PropagationPolicy::*;
        let none = Propagation::default();
        // The default policy of every kind we have: background, nothing added.
        assert_eq!(fins(none, DeleteDependents, &[]), None);
        assert_eq!(
            fins(none, OrphanDependents, &[]),
            Some(vec!["orphan".into()])
        );
        assert_eq!(
            fins(Propagation::policy(Orphan), DeleteDependents, &["x"]),
            Some(vec!["x".into(), "orphan".into()])
        );
        assert_eq!(
            fins(Propagation::policy(Foreground), DeleteDependents, &[]),
            Some(vec!["foregroundDeletion".into()])
        );
        assert_eq!(
            fins(Propagation::policy(Background), DeleteDependents, &[]),
            None
        );
        // A second DELETE switches, or keeps what is there.
        assert_eq!(
            fins(
                Propagation::policy(Foreground),
                DeleteDependents,
                &["orphan"]
            ),
            Some(vec!["foregroundDeletion".into()])
        );
        assert_eq!(fins(none, DeleteDependents, &["orphan"]), None);
        assert_eq!(fins(none, DeleteDependents, &["foregroundDeletion"]), None);
        assert_eq!(
            fins(
                Propagation::policy(Background),
                DeleteDependents,
                &["orphan", "x"]
            ),
            Some(vec!["x".into()])
        );
        // The deprecated orphanDependents.
        let orphan = |o| Propagation {
            orphan_dependents: Some(o),
            policy: None,
        };
        assert_eq!(
            fins(orphan(true), DeleteDependents, &[]),
            Some(vec!["orphan".into()])
        );
        assert_eq!(fins(orphan(false), OrphanDependents, &[]), None);
        assert_eq!(
            fins(orphan(false), DeleteDependents, &["foregroundDeletion"]),
            Some(vec![])
        );
        // Kinds without garbage collection ignore the options.
        assert_eq!(fins(Propagation::policy(Orphan), Unsupported, &[]), None);
        assert_eq!(
            fins(Propagation::policy(Orphan), Unsupported, &["orphan"]),
            Some(vec![])
        );
        assert_eq!(PropagationPolicy::parse("Sideways"), None);
        assert_eq!(
            PropagationPolicy::parse("Orphan").map(PropagationPolicy::as_str),
            Some("Orphan")
        );
    }
}
