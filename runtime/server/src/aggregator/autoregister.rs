//! Local APIServices for every group version this server serves, as
//! kube-aggregator's autoregister controller keeps them (fed by
//! kube-apiserver's list of served paths and the crdregistration
//! controller):
//!
//! - a missing one is created, labelled
//!   `kube-aggregator.kubernetes.io/automanaged`: `onstart` for the
//!   compiled-in group versions, `true` for those of
//!   CustomResourceDefinitions;
//! - a labelled one whose spec differs is set back;
//! - a labelled one whose group version is no longer served goes: those
//!   managed continuously (`true`) whenever that happens, those managed
//!   `onstart` only at start-up;
//! - an unlabelled one (written by a user) is left alone.
//!
//! Priorities are upstream's for the built-in groups
//! (`DefaultGenericAPIServicePriorities`, `apiregistration.k8s.io` itself
//! is not an APIService), 1000/100 for CRD group versions (as the
//! crdregistration controller) and for compiled-in groups upstream does not
//! know (the group authors' groups).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Aggregator, LocalVersion, list_all};
use crate::registry::{Preconditions, Store};
use apiforge_core::builtin::apiregistration_v1::{APIService, GROUP};

/// The label of the APIServices this controller manages.
pub const MANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";
/// Managed while the server runs its start-up sync.
const ON_START: &str = "onstart";
/// Managed continuously.
const CONTINUOUSLY: &str = "true";

/// Upstream's priorities (group, version) → (groupPriorityMinimum,
/// versionPriority) for the built-in group versions this server has.
const PRIORITIES: [(&str, &str, i32, i32); 10] = [
    ("", "v1", 18000, 1),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("admissionregistration.k8s.io", "v1beta1", 16700, 12),
];

/// The APIService name of a group version (`v1.` for the core group).
pub fn name_of(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// The local APIService of `local`.
fn desired(local: &LocalVersion) -> APIService {
    let (group_priority_minimum, version_priority) = PRIORITIES
        .iter()
        .find(|(g, v, _, _)| *g == local.group && *v == local.version)
        .map_or((1000, 100), |(_, _, g, v)| (*g, *v));
    let mut api = APIService::default();
    api.metadata.name = name_of(&local.group, &local.version);
    api.metadata.labels = BTreeMap::from([(
        MANAGED_LABEL.to_string(),
        if local.custom { CONTINUOUSLY } else { ON_START }.to_string(),
    )]);
    api.spec.group = local.group.clone();
    api.spec.version = local.version.clone();
    api.spec.group_priority_minimum = group_priority_minimum;
    api.spec.version_priority = version_priority;
    api
}

/// The start-up sync (as upstream's `autoregister-completion` readiness
/// check, the server is ready once its local APIServices exist): the local
/// group versions known now.
pub async fn sync_once(aggregator: &Aggregator, store: &Store) -> Result<(), String> {
    let versions = aggregator.local.borrow().clone();
    if versions.is_empty() {
        return Ok(());
    }
    sync(store, &versions, true).await
}

/// Runs until `stop` turns true: syncs at every change of the local group
/// versions and every 30 s (an APIService deleted by a user comes back).
/// `first`: whether the start-up sync is still to be made.
pub async fn run(
    aggregator: Arc<Aggregator>,
    store: Store,
    mut first: bool,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut local = aggregator.local.subscribe();
    loop {
        let versions = local.borrow_and_update().clone();
        if !versions.is_empty() {
            if let Err(e) = sync(&store, &versions, first).await {
                tracing::warn!(error = %e, "local apiservices not synced");
            } else {
                first = false;
            }
        }
        tokio::select! {
            changed = local.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(Duration::from_secs(30)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Creates the APIService `want` (named `name`) when it is missing, or
/// updates the spec of the one this server manages (`have`).
async fn sync_one(
    store: &Store,
    have: Option<&APIService>,
    name: &str,
    want: &APIService,
) -> Result<(), String> {
    match have {
        None => {
            let mut obj = serde_json::to_value(want).map_err(|e| e.to_string())?;
            if let Some(map) = obj.as_object_mut() {
                map.insert("apiVersion".into(), json!(format!("{GROUP}/v1")));
                map.insert("kind".into(), json!("APIService"));
                map.remove("status");
            }
            store
                .ensure("", "v1", obj)
                .await
                .map_err(|e| format!("creating apiservice {name}: {e}"))?;
        }
        Some(have) if managed(have).is_some() && have.spec != want.spec => {
            let spec = serde_json::to_value(&want.spec).map_err(|e| e.to_string())?;
            store
                .update_internal("", name, |obj: &mut Value| {
                    if obj.get("spec") == Some(&spec) {
                        return false;
                    }
                    if let Some(map) = obj.as_object_mut() {
                        map.insert("spec".into(), spec.clone());
                    }
                    true
                })
                .await
                .map_err(|e| format!("updating apiservice {name}: {e}"))?;
        }
        Some(_) => {}
    }
    Ok(())
}

/// One pass (see the module documentation).
async fn sync(store: &Store, versions: &[LocalVersion], start: bool) -> Result<(), String> {
    let existing: BTreeMap<String, APIService> = list_all(store)
        .await?
        .into_iter()
        .map(|a| (a.metadata.name.clone(), a))
        .collect();
    let wanted: BTreeMap<String, APIService> = versions
        .iter()
        .map(|v| {
            let api = desired(v);
            (api.metadata.name.clone(), api)
        })
        .collect();
    // Each APIService on its own, all at once, so that their writes share
    // the store's commits (start-up waits for this).
    let results = futures::future::join_all(
        wanted
            .iter()
            .map(|(name, want)| sync_one(store, existing.get(name), name, want)),
    )
    .await;
    results.into_iter().collect::<Result<(), String>>()?;
    for (name, have) in &existing {
        if wanted.contains_key(name) {
            continue;
        }
        let remove = match managed(have) {
            Some(CONTINUOUSLY) => true,
            Some(ON_START) => start,
            _ => false,
        };
        if remove {
            match store
                .delete("", name, &Preconditions::default(), false)
                .await
            {
                Ok(_) => {}
                Err(e) if e.code() == 404 => {}
                Err(e) => return Err(format!("deleting apiservice {name}: {e}")),
            }
        }
    }
    Ok(())
}

/// The value of the managed label, if any.
fn managed(api: &APIService) -> Option<&str> {
    api.metadata.labels.get(MANAGED_LABEL).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_group_versions_get_upstreams_priorities() {
        let core = desired(&LocalVersion {
            group: String::new(),
            version: "v1".into(),
            custom: false,
        });
        assert_eq!(core.metadata.name, "v1.");
        assert_eq!(
            (core.spec.group_priority_minimum, core.spec.version_priority),
            (18000, 1)
        );
        assert_eq!(core.metadata.labels[MANAGED_LABEL], "onstart");
        let crd = desired(&LocalVersion {
            group: "stable.example.com".into(),
            version: "v1".into(),
            custom: true,
        });
        assert_eq!(crd.metadata.name, "v1.stable.example.com");
        assert_eq!(
            (crd.spec.group_priority_minimum, crd.spec.version_priority),
            (1000, 100)
        );
        assert_eq!(crd.metadata.labels[MANAGED_LABEL], "true");
        assert!(apiforge_core::builtin::apiregistration_v1::validate_api_service(&core).is_empty());
    }
}
