//! The backends' discovery and OpenAPI documents, read for the server to
//! publish beside its own (kube-aggregator's discovery manager and OpenAPI
//! aggregation controllers): for every remote APIService, the entry of its
//! group version in the backend's aggregated discovery (`/apis`,
//! `apidiscovery.k8s.io/v2`), its OpenAPI v3 document
//! (`/openapi/v3/apis/<group>/<version>`) and the paths and definitions of
//! its OpenAPI v2 document under `/apis/<group>/<version>/`.
//!
//! Documents are read again after a change of APIServices and every 60 s.
//! A backend that does not answer keeps what was last read, marked
//! `Stale` in aggregated discovery, as upstream; one never read is left
//! out, so a broken backend never hides the other groups.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{Aggregator, Backend};

/// How often the documents are read again without a change.
const REFRESH: Duration = Duration::from_secs(60);

/// The Accept header of aggregated discovery.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// A remote group version and what its backend publishes.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteVersion {
    /// The group.
    pub group: String,
    /// The version.
    pub version: String,
    /// `spec.groupPriorityMinimum` of its APIService.
    pub group_priority_minimum: i32,
    /// `spec.versionPriority` of its APIService.
    pub version_priority: i32,
    /// The version's entry of the backend's aggregated discovery
    /// (`APIVersionDiscovery`), if it was ever read.
    pub discovery: Option<Value>,
    /// Whether `discovery` is from an earlier read (the last one failed).
    pub stale: bool,
    /// The backend's OpenAPI v3 document of the group version.
    pub openapi_v3: Option<Value>,
    /// The backend's OpenAPI v2 `paths` under the group version.
    pub openapi_v2_paths: Map<String, Value>,
    /// The backend's OpenAPI v2 `definitions`.
    pub openapi_v2_definitions: Map<String, Value>,
}

/// Runs until `stop` turns true (see the module documentation).
pub async fn run(aggregator: Arc<Aggregator>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut known: HashMap<(String, String), RemoteVersion> = HashMap::new();
    let mut table_changes = aggregator.table_changes();
    loop {
        let table = aggregator.table();
        let mut next = HashMap::new();
        let mut fetches = Vec::new();
        for backend in table.backends() {
            fetches.push(read(&aggregator, backend.clone()));
        }
        for mut fresh in futures::future::join_all(fetches).await {
            let key = (fresh.group.clone(), fresh.version.clone());
            if fresh.discovery.is_none()
                && let Some(old) = known.get(&key)
            {
                fresh.discovery = old.discovery.clone();
                fresh.stale = fresh.discovery.is_some();
                if fresh.openapi_v3.is_none() {
                    fresh.openapi_v3 = old.openapi_v3.clone();
                }
                if fresh.openapi_v2_paths.is_empty() {
                    fresh.openapi_v2_paths = old.openapi_v2_paths.clone();
                    fresh.openapi_v2_definitions = old.openapi_v2_definitions.clone();
                }
            }
            next.insert(key, fresh);
        }
        known = next;
        let mut list: Vec<RemoteVersion> = known.values().cloned().collect();
        list.sort_by(|a, b| (&a.group, &a.version).cmp(&(&b.group, &b.version)));
        aggregator.remote.send_if_modified(|current| {
            if **current == list {
                return false;
            }
            *current = Arc::new(list);
            true
        });
        let changed = tokio::select! {
            changed = table_changes.changed() => {
                if changed.is_err() { return }
                true
            }
            () = tokio::time::sleep(REFRESH) => false,
            _ = stop.wait_for(|s| *s) => return,
        };
        if changed {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Reads what `backend` publishes about its group version (nothing while
/// it is not available).
async fn read(aggregator: &Aggregator, backend: Arc<Backend>) -> RemoteVersion {
    let mut out = RemoteVersion {
        group: backend.group.clone(),
        version: backend.version.clone(),
        group_priority_minimum: backend.group_priority_minimum,
        version_priority: backend.version_priority,
        discovery: None,
        stale: false,
        openapi_v3: None,
        openapi_v2_paths: Map::new(),
        openapi_v2_definitions: Map::new(),
    };
    if !backend.available {
        return out;
    }
    let limit = Duration::from_secs(5);
    let json = |r: Result<(http::StatusCode, bytes::Bytes), String>| -> Option<Value> {
        match r {
            Ok((status, body)) if status.is_success() => serde_json::from_slice(&body).ok(),
            Ok((status, _)) => {
                tracing::debug!(apiservice = %backend.name, %status, "document not read");
                None
            }
            Err(e) => {
                tracing::debug!(apiservice = %backend.name, error = %e, "document not read");
                None
            }
        }
    };
    let discovery = json(
        aggregator
            .get(&backend, "/apis", AGGREGATED, limit, true)
            .await,
    );
    out.discovery = discovery.as_ref().and_then(|doc| {
        doc.get("items")?
            .as_array()?
            .iter()
            .find(|g| g.pointer("/metadata/name").and_then(Value::as_str) == Some(&backend.group))?
            .get("versions")?
            .as_array()?
            .iter()
            .find(|v| v.get("version").and_then(Value::as_str) == Some(&backend.version))
            .cloned()
    });
    if out.discovery.is_none() {
        // A backend without aggregated discovery: its group version's
        // resource list, converted as kube-aggregator converts it.
        let path = format!("/apis/{}/{}", backend.group, backend.version);
        out.discovery = json(
            aggregator
                .get(&backend, &path, "application/json", limit, true)
                .await,
        )
        .and_then(|list| version_from_resource_list(&backend.version, &list));
    }
    let v3_path = format!("/openapi/v3/apis/{}/{}", backend.group, backend.version);
    out.openapi_v3 = json(
        aggregator
            .get(&backend, &v3_path, "application/json", limit, true)
            .await,
    );
    if let Some(v2) = json(
        aggregator
            .get(&backend, "/openapi/v2", "application/json", limit, true)
            .await,
    ) {
        let prefix = format!("/apis/{}/{}/", backend.group, backend.version);
        if let Some(paths) = v2.get("paths").and_then(Value::as_object) {
            out.openapi_v2_paths = paths
                .iter()
                .filter(|(p, _)| p.starts_with(&prefix))
                .map(|(p, v)| (p.clone(), v.clone()))
                .collect();
        }
        if let Some(defs) = v2.get("definitions").and_then(Value::as_object) {
            out.openapi_v2_definitions = defs.clone();
        }
    }
    out
}

/// The aggregated discovery entry (`APIVersionDiscovery`) of a legacy
/// `APIResourceList`, as upstream's `ConvertGroupVersionIntoToDiscovery`
/// builds it: top-level resources first, then each subresource under its
/// parent (a parent made up when missing); `None` when `list` is not a
/// resource list or a subresource's scope differs from its parent's.
pub fn version_from_resource_list(version: &str, list: &Value) -> Option<Value> {
    let resources = list.get("resources")?.as_array()?;
    let text = |r: &Value, key: &str| r.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let scope = |r: &Value| {
        if r.get("namespaced").and_then(Value::as_bool) == Some(true) {
            "Namespaced"
        } else {
            "Cluster"
        }
    };
    let kind = |r: &Value| serde_json::json!({"group": text(r, "group"), "version": text(r, "version"), "kind": text(r, "kind")});
    let mut out: Vec<Value> = Vec::new();
    let mut parents: HashMap<String, usize> = HashMap::new();
    for r in resources {
        let name = text(r, "name");
        if name.contains('/') {
            continue;
        }
        let mut entry = serde_json::json!({
            "resource": name,
            "responseKind": kind(r),
            "scope": scope(r),
            "singularResource": text(r, "singularName"),
            "verbs": r.get("verbs").cloned().unwrap_or(Value::Array(Vec::new())),
        });
        for key in ["shortNames", "categories"] {
            if let Some(values) = r
                .get(key)
                .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
            {
                entry[key] = values.clone();
            }
        }
        parents.insert(name, out.len());
        out.push(entry);
    }
    for r in resources {
        let name = text(r, "name");
        let Some((parent, sub)) = name.split_once('/') else {
            continue;
        };
        let index = match parents.get(parent) {
            Some(&index) => index,
            None => {
                parents.insert(parent.to_string(), out.len());
                out.push(
                    serde_json::json!({"resource": parent, "responseKind": {}, "scope": scope(r)}),
                );
                out.len() - 1
            }
        };
        if out[index]["scope"] != scope(r) {
            return None;
        }
        let response_kind = if text(r, "kind").is_empty() {
            serde_json::json!({})
        } else {
            kind(r)
        };
        let subresource = serde_json::json!({
            "subresource": sub,
            "responseKind": response_kind,
            "verbs": r.get("verbs").cloned().unwrap_or(Value::Array(Vec::new())),
        });
        match out[index]
            .get_mut("subresources")
            .and_then(Value::as_array_mut)
        {
            Some(subresources) => subresources.push(subresource),
            None => out[index]["subresources"] = Value::Array(vec![subresource]),
        }
    }
    Some(serde_json::json!({"version": version, "resources": out, "freshness": "Current"}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What upstream's conversion gives for sample-apiserver's legacy list.
    #[test]
    fn legacy_resource_lists_convert_as_upstream() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "wardle.example.com/v1beta1",
        "resources": [
            {"name": "flunders", "singularName": "flunder", "namespaced": true, "kind": "Flunder",
             "verbs": ["create", "get", "list"], "shortNames": ["fl"], "categories": ["all"]},
            {"name": "flunders/status", "singularName": "", "namespaced": true, "kind": "Flunder",
             "verbs": ["get", "patch"]},
            {"name": "orphans/scale", "singularName": "", "namespaced": false, "kind": "",
             "verbs": ["get"]},
        ]});
        let v = version_from_resource_list("v1beta1", &list).expect("converted");
        assert_eq!(
            v,
            json!({"version": "v1beta1", "freshness": "Current", "resources": [
                {"resource": "flunders", "singularResource": "flunder", "scope": "Namespaced",
                 "responseKind": {"group": "", "version": "", "kind": "Flunder"},
                 "verbs": ["create", "get", "list"], "shortNames": ["fl"], "categories": ["all"],
                 "subresources": [{"subresource": "status", "verbs": ["get", "patch"],
                    "responseKind": {"group": "", "version": "", "kind": "Flunder"}}]},
                {"resource": "orphans", "scope": "Cluster", "responseKind": {},
                 "subresources": [{"subresource": "scale", "verbs": ["get"], "responseKind": {}}]},
            ]})
        );
        // A subresource scoped unlike its parent is refused, as upstream.
        let mismatched = json!({"resources": [
            {"name": "a", "namespaced": true, "kind": "A", "verbs": []},
            {"name": "a/status", "namespaced": false, "kind": "A", "verbs": []}]});
        assert!(version_from_resource_list("v1", &mismatched).is_none());
        assert!(version_from_resource_list("v1", &json!({"groups": []})).is_none());
    }
}
