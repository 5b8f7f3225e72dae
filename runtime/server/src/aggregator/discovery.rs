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
