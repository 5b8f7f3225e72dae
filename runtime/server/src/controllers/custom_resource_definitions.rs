//! The controllers of apiextensions-apiserver, in one loop over the
//! CustomResourceDefinitions: the naming controller (`NamesAccepted`,
//! `status.acceptedNames`), the establishing controller (`Established`
//! once the kind is served), serving (a store per definition, rebuilt when
//! its spec changes, through [`Stores::add_kind`]) and the finalizer
//! (`customresourcecleanup.apiextensions.k8s.io`: every custom resource is
//! deleted, their own finalizers honoured, before the definition goes;
//! meanwhile the definition is `Terminating` and creates are refused).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::registry::{ListParams, Preconditions, Store, Stores};
use apiforge_core::meta::Time;
use apiforge_core::scheme::custom::kind_from_definition;

/// The group of CustomResourceDefinitions.
const GROUP: &str = "apiextensions.k8s.io";
use apiforge_core::builtin::apiextensions_v1::FINALIZER_CLEANUP;
/// How often definitions whose resources are being deleted are looked at.
const RETRY: Duration = Duration::from_secs(1);

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
}

/// Starts the controller when the server serves CustomResourceDefinitions,
/// after serving every stored definition (so they are served before the
/// server reports ready).
pub async fn start(stores: &Stores, shutdown: tokio::sync::watch::Receiver<bool>) {
    let Some(definitions) = stores.find(GROUP, "customresourcedefinitions") else {
        return;
    };
    let mut controller = DefinitionController {
        definitions,
        stores: stores.clone(),
        served: HashMap::new(),
    };
    controller.reconcile().await;
    tokio::spawn(controller.run(shutdown));
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// The names a definition asks for, with upstream's defaults
/// (`singular`: the lower-case kind; `listKind`: kind + `List`).
fn requested_names(crd: &Value) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let mut names = match names {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if names
        .get("singular")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        names.insert("singular".into(), Value::String(kind.to_lowercase()));
    }
    if names
        .get("listKind")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        names.insert("listKind".into(), Value::String(format!("{kind}List")));
    }
    Value::Object(names)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A `NamesAccepted` false: upstream's reason and message.
type Conflict = (&'static str, String);

/// The naming controller's verdict on `crd` given every definition (its
/// own included, as upstream reads them back): the names it is granted
/// (the requested ones that are free or already its own), and the conflict
/// if one of them is not.
fn accept_names(crd: &Value, all: &[&Value]) -> (Value, Option<Conflict>) {
    let requested = requested_names(crd);
    let accepted = crd
        .pointer("/status/acceptedNames")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut resources: Vec<String> = Vec::new();
    let mut kinds: Vec<String> = Vec::new();
    for other in all {
        if other.pointer("/spec/group").and_then(Value::as_str) != Some(group) {
            continue;
        }
        let taken = other.pointer("/status/acceptedNames");
        let get = |k: &str| {
            taken
                .and_then(|t| t.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        resources.push(get("plural"));
        resources.push(get("singular"));
        resources.extend(strings(taken.and_then(|t| t.get("shortNames"))));
        kinds.push(get("kind"));
        kinds.push(get("listKind"));
    }
    let text = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let fresh = |requested: &str, accepted: &str, used: &[String]| -> Result<(), String> {
        if requested == accepted || !used.iter().any(|u| u == requested) {
            Ok(())
        } else {
            Err(format!("{requested:?} is already in use"))
        }
    };
    let mut names = accepted.as_object().cloned().unwrap_or_default();
    let mut conflict: Option<Conflict> = None;
    for (field, reason, used) in [
        ("plural", "PluralConflict", &resources),
        ("singular", "SingularConflict", &resources),
    ] {
        match fresh(&text(&requested, field), &text(&accepted, field), used) {
            Ok(()) => {
                names.insert(field.into(), Value::String(text(&requested, field)));
            }
            Err(message) => conflict = Some((reason, message)),
        }
    }
    let wanted_short = strings(requested.get("shortNames"));
    let own_short = strings(accepted.get("shortNames"));
    if wanted_short != own_short {
        let (own_plural, own_singular) = (text(&accepted, "plural"), text(&accepted, "singular"));
        let errors: Vec<String> = wanted_short
            .iter()
            .filter(|s| !own_short.contains(s) && **s != own_plural && **s != own_singular)
            .filter_map(|s| fresh(s, "", &resources).err())
            .collect();
        match errors.len() {
            0 => {
                names.insert("shortNames".into(), json!(wanted_short));
            }
            1 => conflict = Some(("ShortNamesConflict", errors[0].clone())),
            _ => conflict = Some(("ShortNamesConflict", format!("[{}]", errors.join(", ")))),
        }
    }
    for (field, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
        match fresh(&text(&requested, field), &text(&accepted, field), &kinds) {
            Ok(()) => {
                names.insert(field.into(), Value::String(text(&requested, field)));
            }
            Err(message) => conflict = Some((reason, message)),
        }
    }
    match requested.get("categories") {
        Some(c) => {
            names.insert("categories".into(), c.clone());
        }
        None => {
            names.remove("categories");
        }
    }
    (Value::Object(names), conflict)
}

/// Sets condition `type_` in `status`, keeping `lastTransitionTime` when
/// its status does not change. Returns whether anything changed.
fn set_condition(
    status: &mut Value,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
) -> bool {
    if !status.is_object() {
        *status = json!({});
    }
    let conditions = status
        .as_object_mut()
        .map(|m| m.entry("conditions").or_insert_with(|| json!([])));
    let Some(Value::Array(conditions)) = conditions else {
        return false;
    };
    let now = Time::now().to_string();
    let wanted = |time: &str| {
        json!({
            "type": type_,
            "status": value,
            "lastTransitionTime": time,
            "reason": reason,
            "message": message,
        })
    };
    match conditions
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
    {
        Some(existing) => {
            let same_status = existing.get("status").and_then(Value::as_str) == Some(value);
            let time = if same_status {
                existing
                    .get("lastTransitionTime")
                    .and_then(Value::as_str)
                    .unwrap_or(&now)
                    .to_string()
            } else {
                now.clone()
            };
            let new = wanted(&time);
            if *existing == new {
                return false;
            }
            *existing = new;
            true
        }
        None => {
            conditions.push(wanted(&now));
            true
        }
    }
}

impl DefinitionController {
    async fn run(mut self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
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
                let busy = self.served.is_empty()
                    || self.stores.iter().any(|(s, _)| {
                        self.stores.is_terminating(
                            s.kind().storage_info().group,
                            s.kind().storage_info().plural,
                        )
                    });
                let wait = if busy { RETRY } else { Duration::from_secs(30) };
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
        let mut current: Vec<Value> = ordered.into_iter().cloned().collect();
        let mut live: Vec<String> = Vec::new();
        for i in 0..current.len() {
            let name = name_of(&current[i]).to_string();
            live.push(name.clone());
            if is_deleting(&current[i]) {
                let crd = current[i].clone();
                self.finalize(&crd).await;
                continue;
            }
            let all: Vec<&Value> = current.iter().collect();
            let (names, conflict) = accept_names(&current[i], &all);
            if conflict.is_none() {
                let crd = current[i].clone();
                self.serve(&crd);
            }
            self.write_status(&name, &names, conflict.as_ref()).await;
            if let Some(map) = current[i].as_object_mut() {
                let status = map.entry("status").or_insert_with(|| json!({}));
                if let Some(status) = status.as_object_mut() {
                    status.insert("acceptedNames".into(), names);
                }
            }
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
                self.stores
                    .set_terminating(&served.group, &served.plural, false);
            }
        }
    }

    /// Serves `crd`'s kind (again, if its spec changed).
    fn serve(&mut self, crd: &Value) {
        let name = name_of(crd).to_string();
        let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
        if self.served.get(&name).is_some_and(|s| s.spec == spec) {
            return;
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
                        return;
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
            }
            Err(e) => {
                tracing::warn!(definition = %name, error = %e, "custom resource definition not served");
            }
        }
    }

    /// Writes the naming and establishing verdicts into the definition.
    async fn write_status(&self, name: &str, names: &Value, conflict: Option<&Conflict>) {
        let served = self.served.contains_key(name);
        let result = self
            .definitions
            .update_internal("", name, |obj| {
                let mut changed = false;
                let Some(map) = obj.as_object_mut() else {
                    return changed;
                };
                let status = map.entry("status").or_insert_with(|| json!({}));
                if status.get("acceptedNames") != Some(names)
                    && let Some(s) = status.as_object_mut()
                {
                    s.insert("acceptedNames".into(), names.clone());
                    changed = true;
                }
                match conflict {
                    None => {
                        changed |= set_condition(
                            status,
                            "NamesAccepted",
                            "True",
                            "NoConflicts",
                            "no conflicts found",
                        );
                        if served {
                            changed |= set_condition(
                                status,
                                "Established",
                                "True",
                                "InitialNamesAccepted",
                                "the initial names have been accepted",
                            );
                        }
                    }
                    Some((reason, message)) => {
                        changed |= set_condition(status, "NamesAccepted", "False", reason, message);
                        if !served {
                            changed |= set_condition(
                                status,
                                "Established",
                                "False",
                                "NotAccepted",
                                "not all names are accepted",
                            );
                        }
                    }
                }
                changed
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
        let has_finalizer = strings(crd.pointer("/metadata/finalizers"))
            .iter()
            .any(|f| f == FINALIZER_CLEANUP);
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
        self.stores.set_terminating(&group, &plural, true);
        let _ = self
            .definitions
            .update_internal("", &name, |obj| {
                let Some(map) = obj.as_object_mut() else {
                    return false;
                };
                let status = map.entry("status").or_insert_with(|| json!({}));
                set_condition(
                    status,
                    "Terminating",
                    "True",
                    "InstanceDeletionInProgress",
                    "CustomResource deletion is in progress",
                )
            })
            .await;
        let remaining = match self.stores.find(&group, &plural) {
            Some(store) => delete_all(&store).await,
            None => Ok(0),
        };
        match remaining {
            Ok(0) => {
                self.stores.remove_kind(&group, &plural);
                self.served.remove(&name);
                let _ = self
                    .definitions
                    .update_internal("", &name, |obj| {
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
                self.stores.set_terminating(&group, &plural, false);
            }
            Ok(_) => {}
            Err(message) => {
                let _ = self
                    .definitions
                    .update_internal("", &name, |obj| {
                        let Some(map) = obj.as_object_mut() else {
                            return false;
                        };
                        let status = map.entry("status").or_insert_with(|| json!({}));
                        set_condition(
                            status,
                            "Terminating",
                            "True",
                            "InstanceDeletionFailed",
                            &format!("could not list instances: {message}"),
                        )
                    })
                    .await;
            }
        }
    }
}

/// Deletes every object of `store` (their finalizers decide when they go);
/// returns how many were still there.
async fn delete_all(store: &Store) -> Result<usize, String> {
    let params = ListParams::default();
    let page = store.list(None, &params).await.map_err(|e| e.to_string())?;
    let count = page.items.len();
    for item in &page.items {
        let meta = apiforge_core::scheme::object_meta(item);
        if is_deleting(item) {
            continue;
        }
        if let Err(e) = store
            .delete(
                &meta.namespace,
                &meta.name,
                &Preconditions::default(),
                false,
            )
            .await
            && e.code() != 404
        {
            return Err(e.to_string());
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, plural: &str, kind: &str, short: &[&str]) -> Value {
        json!({"metadata": {"name": name}, "spec": {"group": "example.com",
            "names": {"plural": plural, "kind": kind, "shortNames": short}}})
    }

    #[test]
    fn names_taken_by_an_older_definition_are_refused() {
        // Upstream's calculateNamesAndConditions: names claimed by any
        // definition of the group (its accepted names) conflict.
        let mut first = crd("widgets.example.com", "widgets", "Widget", &["wd"]);
        let (accepted, conflict) = accept_names(&first, &[&first]);
        assert!(conflict.is_none());
        assert_eq!(accepted["singular"], "widget");
        assert_eq!(accepted["listKind"], "WidgetList");
        first["status"] = json!({"acceptedNames": accepted});
        // Its own names are not a conflict with itself.
        assert!(accept_names(&first, &[&first]).1.is_none());
        // The kind and its list kind are taken: as upstream, the last
        // check's conflict is the one reported.
        let second = crd("gadgets.example.com", "gadgets", "Widget", &[]);
        let (names, conflict) = accept_names(&second, &[&first, &second]);
        assert_eq!(
            conflict,
            Some((
                "ListKindConflict",
                "\"WidgetList\" is already in use".to_string()
            ))
        );
        assert_eq!(names["plural"], "gadgets");
        // Plural and (defaulted) singular `wd` are a short name taken.
        let third = crd("wd.example.com", "wd", "Wd", &[]);
        let (names, conflict) = accept_names(&third, &[&first, &third]);
        assert_eq!(
            conflict,
            Some(("SingularConflict", "\"wd\" is already in use".to_string()))
        );
        assert!(
            names.get("plural").is_none(),
            "a conflicting name is not granted"
        );
        assert_eq!(names["kind"], "Wd");
    }

    #[test]
    fn conditions_keep_their_transition_time() {
        let mut status = json!({});
        assert!(set_condition(&mut status, "Established", "True", "R", "m"));
        let time = status["conditions"][0]["lastTransitionTime"].clone();
        assert!(!set_condition(&mut status, "Established", "True", "R", "m"));
        assert_eq!(status["conditions"][0]["lastTransitionTime"], time);
    }
}
