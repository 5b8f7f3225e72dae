//! The controllers of apiextensions-apiserver, in one loop over the
//! CustomResourceDefinitions: the naming controller (`NamesAccepted`,
//! `status.acceptedNames`), the establishing controller (`Established`
//! once the kind is served), serving (a store per definition, rebuilt when
//! its spec changes, through [`Stores::add_kind`]) and the finalizer
//! (`customresourcecleanup.apiextensions.k8s.io`: every custom resource is
//! deleted, their own finalizers honoured, before the definition goes;
//! meanwhile the definition is `Terminating` and creates are refused).
//!
//! Every replica serves the definitions and writes the naming and
//! establishing verdicts (the same on every replica, written only when they
//! change), as every kube-apiserver runs these controllers; the finalizer
//! runs only on the replica holding the controllers' lease
//! ([`super::Leading`]), and guards its writes with the definition's uid: it
//! lists the resources, reads the definition again, and deletes only while
//! it is still the deleted definition with that uid, each resource with its
//! own uid as precondition, so that a late finalizer never touches a
//! definition re-created under the same name, nor its resources.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::registry::{ListParams, Preconditions, Store, Stores};
use apiforge_core::builtin::apiextensions_v1::{
    CONDITION_TRUE, CustomResourceDefinition, CustomResourceDefinitionStatus, ESTABLISHED,
    FINALIZER_CLEANUP, NamingDecision, TERMINATING, calculate_names, set_condition,
};
use apiforge_core::scheme::custom::kind_from_definition;

/// The group of CustomResourceDefinitions.
const GROUP: &str = "apiextensions.k8s.io";
/// How often definitions whose resources are being deleted are looked at.
const RETRY: Duration = Duration::from_secs(1);
/// How long a newly served kind waits for discovery to list it before its
/// definition is `Established` anyway.
const PUBLISH_WAIT: Duration = Duration::from_secs(2);

/// What is served for one definition.
struct Served {
    /// The definition's `spec` the kind was built from.
    spec: Value,
    group: String,
    plural: String,
}

/// The controller's state.
pub struct DefinitionController {
    definitions: Store,
    stores: Stores,
    served: HashMap<String, Served>,
    /// Whether a definition was being deleted at the last reconcile.
    finalizing: bool,
    /// Whether the server publishes documents after changes (not yet
    /// during the start-up reconcile, which the post-start hook follows
    /// with one publication of everything).
    publishing: bool,
    /// Whether this replica finalizes deleted definitions.
    leading: super::Leading,
}

/// Starts the controller when the server serves CustomResourceDefinitions,
/// after serving every stored definition (so they are served before the
/// server reports ready).
pub async fn start(
    stores: &Stores,
    leading: super::Leading,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let Some(definitions) = stores.find(GROUP, "customresourcedefinitions") else {
        return;
    };
    let mut controller = DefinitionController {
        definitions,
        stores: stores.clone(),
        served: HashMap::new(),
        finalizing: false,
        publishing: false,
        leading,
    };
    controller.reconcile().await;
    tokio::spawn(controller.run(shutdown));
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn uid_of(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// A definition's JSON as the typed kind (`None` for what does not read
/// as one).
fn typed(obj: &Value) -> Option<CustomResourceDefinition> {
    serde_json::from_value(obj.clone()).ok()
}

/// Edits the status of a definition's JSON through the typed kind;
/// whether anything changed.
fn edit_status(obj: &mut Value, edit: impl FnOnce(&mut CustomResourceDefinitionStatus)) -> bool {
    let Some(mut crd) = typed(obj) else {
        return false;
    };
    let before = crd.status.clone();
    edit(crd.status.get_or_insert_with(Default::default));
    if crd.status == before {
        return false;
    }
    match (serde_json::to_value(&crd.status), obj.as_object_mut()) {
        (Ok(status), Some(map)) => {
            map.insert("status".into(), status);
            true
        }
        _ => false,
    }
}

impl DefinitionController {
    async fn run(mut self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        self.publishing = true;
        loop {
            let params = ListParams {
                send_initial_events: Some(false),
                ..Default::default()
            };
            let mut events = match self.definitions.watch(None, &params, false).await {
                Ok(events) => Some(events),
                Err(e) => {
                    tracing::warn!(error = %e, "custom resource definitions: watch failed");
                    None
                }
            };
            self.reconcile().await;
            loop {
                // Definitions being deleted are looked at again every
                // second (their resources go meanwhile); otherwise events
                // wake the loop.
                let wait = if self.finalizing {
                    RETRY
                } else {
                    Duration::from_secs(30)
                };
                let event = async {
                    match events.as_mut() {
                        Some(events) => futures::StreamExt::next(events).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    ev = event => {
                        match ev {
                            Some(crate::registry::WatchEvent::Error(_)) | None => break,
                            Some(_) => {}
                        }
                    }
                    () = tokio::time::sleep(wait) => {}
                    _ = shutdown.wait_for(|stop| *stop) => return,
                }
                self.reconcile().await;
            }
            tokio::select! {
                () = tokio::time::sleep(RETRY) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// Brings every definition's serving and status up to date.
    async fn reconcile(&mut self) {
        let params = ListParams {
            resource_version: Some(0),
            ..Default::default()
        };
        let definitions = match self.definitions.list(None, &params).await {
            Ok(page) => page.items,
            Err(e) => {
                tracing::warn!(error = %e, "custom resource definitions: list failed");
                return;
            }
        };
        // Older definitions keep their names: look at them in creation order.
        let mut ordered: Vec<&Value> = definitions.iter().collect();
        ordered.sort_by_key(|d| {
            (
                d.pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                name_of(d).to_string(),
            )
        });
        // Each verdict is seen by the next (as upstream's mutation cache).
        let mut current: Vec<CustomResourceDefinition> =
            ordered.into_iter().filter_map(typed).collect();
        let mut live: Vec<String> = Vec::new();
        self.finalizing = false;
        for i in 0..current.len() {
            let name = current[i].metadata.name.clone();
            live.push(name.clone());
            let Ok(json) = serde_json::to_value(&current[i]) else {
                continue;
            };
            if is_deleting(&json) {
                self.finalizing = true;
                if self.leading.is_leading() {
                    self.finalize(&json).await;
                }
                continue;
            }
            let all: Vec<&CustomResourceDefinition> = current.iter().collect();
            let decision = calculate_names(&current[i], &all);
            if decision.names_accepted.status == CONDITION_TRUE
                && self.serve(&json)
                && self.publishing
            {
                // Established once clients can discover the kind.
                self.stores.documents_published(PUBLISH_WAIT).await;
            }
            self.write_status(&name, &decision).await;
            current[i]
                .status
                .get_or_insert_with(Default::default)
                .accepted_names = decision.accepted_names;
        }
        // Definitions gone: stop serving them.
        let gone: Vec<String> = self
            .served
            .keys()
            .filter(|name| !live.contains(name))
            .cloned()
            .collect();
        for name in gone {
            if let Some(served) = self.served.remove(&name) {
                self.stores.remove_kind(&served.group, &served.plural);
            }
        }
    }

    /// Serves `crd`'s kind (again, if its spec changed); whether it
    /// changed what is served.
    fn serve(&mut self, crd: &Value) -> bool {
        let name = name_of(crd).to_string();
        let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
        if self.served.get(&name).is_some_and(|s| s.spec == spec) {
            return false;
        }
        let converter: Option<Arc<dyn apiforge_core::scheme::custom::Converter>> = match crd
            .pointer("/spec/conversion/strategy")
            .and_then(Value::as_str)
        {
            Some("Webhook") => {
                match super::conversion_webhook::WebhookConverter::for_definition(crd) {
                    Ok(c) => Some(Arc::new(c)),
                    Err(e) => {
                        tracing::warn!(definition = %name, error = %e, "custom resource definition not served");
                        return false;
                    }
                }
            }
            _ => None,
        };
        match kind_from_definition(crd, converter) {
            Ok(kind) => {
                let info = kind.storage_info();
                let (group, plural) = (info.group.to_string(), info.plural.to_string());
                if let Some(old) = self.served.get(&name)
                    && (old.group != group || old.plural != plural)
                {
                    self.stores.remove_kind(&old.group, &old.plural);
                }
                self.stores.add_kind(Arc::new(kind));
                self.served.insert(
                    name,
                    Served {
                        spec,
                        group,
                        plural,
                    },
                );
                true
            }
            Err(e) => {
                tracing::warn!(definition = %name, error = %e, "custom resource definition not served");
                false
            }
        }
    }

    /// Writes the naming and establishing verdicts into the definition.
    async fn write_status(&self, name: &str, decision: &NamingDecision) {
        let served = self.served.contains_key(name);
        let result = self
            .definitions
            .update_internal("", name, |obj| {
                edit_status(obj, |status| {
                    status.accepted_names = decision.accepted_names.clone();
                    let c = &decision.names_accepted;
                    set_condition(status, &c.type_, &c.status, &c.reason, &c.message);
                    if served && c.status == CONDITION_TRUE {
                        set_condition(
                            status,
                            ESTABLISHED,
                            CONDITION_TRUE,
                            "InitialNamesAccepted",
                            "the initial names have been accepted",
                        );
                    } else if !served {
                        let e = &decision.established;
                        set_condition(status, &e.type_, &e.status, &e.reason, &e.message);
                    }
                })
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(definition = %name, error = %e, "custom resource definition status not written");
        }
    }

    /// Sets the `Terminating` condition of definition `name` while it is
    /// the one with `uid`.
    async fn terminating(&self, name: &str, uid: &str, reason: &str, message: &str) {
        let result = self
            .definitions
            .update_internal("", name, |obj| {
                if uid_of(obj) != uid {
                    return false;
                }
                edit_status(obj, |status| {
                    set_condition(status, TERMINATING, CONDITION_TRUE, reason, message);
                })
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(definition = %name, error = %e, "custom resource definition status not written");
        }
    }

    /// The cleanup finalizer: deletes every resource of a deleted
    /// definition; once none is left, stops serving it and lets it go.
    async fn finalize(&mut self, crd: &Value) {
        let name = name_of(crd).to_string();
        let uid = uid_of(crd).to_string();
        let has_finalizer = crd
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|list| list.iter().any(|f| f == FINALIZER_CLEANUP));
        if !has_finalizer {
            return;
        }
        let (group, plural) = match self.served.get(&name) {
            Some(s) => (s.group.clone(), s.plural.clone()),
            None => (
                crd.pointer("/spec/group")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                crd.pointer("/spec/names/plural")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            ),
        };
        self.terminating(
            &name,
            &uid,
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        )
        .await;
        let remaining = match self.stores.find(&group, &plural) {
            Some(store) => delete_all(&store, &self.definitions, &name, &uid).await,
            None => Ok(Some(0)),
        };
        match remaining {
            // Gone or re-created meanwhile: the next reconcile looks at
            // what is there now.
            Ok(None) => {}
            Ok(Some(0)) => {
                self.stores.remove_kind(&group, &plural);
                self.served.remove(&name);
                let _ = self
                    .definitions
                    .update_internal("", &name, |obj| {
                        if uid_of(obj) != uid || !is_deleting(obj) {
                            return false;
                        }
                        let Some(list) = obj
                            .pointer_mut("/metadata/finalizers")
                            .and_then(Value::as_array_mut)
                        else {
                            return false;
                        };
                        let before = list.len();
                        list.retain(|f| f != FINALIZER_CLEANUP);
                        list.len() != before
                    })
                    .await;
            }
            Ok(Some(_)) => {}
            Err(message) => {
                self.terminating(
                    &name,
                    &uid,
                    "InstanceDeletionFailed",
                    &format!("could not list instances: {message}"),
                )
                .await;
            }
        }
    }
}

/// Deletes every object of `store` (their finalizers decide when they go)
/// while definition `name` is the deleted one with `uid`; returns how many
/// were still there, `None` when that definition is gone or re-created
/// (there is nothing left to do for it).
async fn delete_all(
    store: &Store,
    definitions: &Store,
    name: &str,
    uid: &str,
) -> Result<Option<usize>, String> {
    let params = ListParams::default();
    let page = store.list(None, &params).await.map_err(|e| e.to_string())?;
    let count = page.items.len();
    // Listed before this read: while the definition is still the deleted
    // one, every object listed is one of its resources.
    match definitions.get_live("", name).await {
        Ok(crd) if uid_of(&crd) == uid && is_deleting(&crd) => {}
        Ok(_) => return Ok(None),
        Err(e) if e.code() == 404 => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    for item in &page.items {
        let meta = apiforge_core::scheme::object_meta(item);
        if is_deleting(item) {
            continue;
        }
        let pre = Preconditions {
            uid: Some(meta.uid.clone()).filter(|u| !u.is_empty()),
            resource_version: None,
        };
        if let Err(e) = store.delete(&meta.namespace, &meta.name, &pre, false).await
            && e.code() != 404
            && e.code() != 409
        {
            return Err(e.to_string());
        }
    }
    Ok(Some(count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_edits_keep_transition_times_and_report_changes() {
        let mut obj = json!({"metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"}, "versions": []}});
        let established = |s: &mut CustomResourceDefinitionStatus| {
            set_condition(s, ESTABLISHED, CONDITION_TRUE, "R", "m");
        };
        assert!(edit_status(&mut obj, established));
        let time = obj["status"]["conditions"][0]["lastTransitionTime"].clone();
        assert!(
            !edit_status(&mut obj, established),
            "nothing changes the second time"
        );
        assert_eq!(obj["status"]["conditions"][0]["lastTransitionTime"], time);
    }
}
