//! The generated discovery and OpenAPI documents, served from memory.
//!
//! `build.rs` of the binary writes them as one JSON bundle
//! ([`apiforge_core::bundle::build`]); [`Documents::from_bundle`] turns it into
//! ready-to-send bytes with their ETags. [`Documents::from_scheme`] does
//! both at run time, for programs that assemble their scheme themselves.
//!
//! Discovery is ready at once; the OpenAPI documents ([`LazyOpenApi`]) are
//! built on first use or by [`LazyOpenApi::prepare`] in the background, as
//! kube-apiserver builds its OpenAPI v3 documents lazily: they are the bulk
//! of the work (most of an in-process test server's first start) and only
//! clients that fetch them wait for them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use sha2::{Digest, Sha512};

/// One ready-to-send document.
#[derive(Clone, Debug)]
pub struct Document {
    /// The JSON bytes.
    pub body: Bytes,
    /// Upper-case hex SHA-512 of the body (ETag and `?hash=`).
    pub hash: String,
}

impl Document {
    fn new(value: &Value) -> Self {
        let body = Bytes::from(serde_json::to_vec(value).unwrap_or_default());
        let hash = hex_upper(&Sha512::digest(&body));
        Document { body, hash }
    }
}

fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// Every generated document.
#[derive(Clone, Debug, Default)]
pub struct Documents {
    /// `/api` legacy.
    pub api: Option<Document>,
    /// `/apis` legacy.
    pub apis: Option<Document>,
    /// `/apis/<group>` by group.
    pub groups: HashMap<String, Document>,
    /// `/apis/<g>/<v>` and `/api/v1` by `apis/<g>/<v>` / `api/v1`.
    pub resource_lists: HashMap<String, Document>,
    /// Aggregated discovery by (`api`|`apis`, `v2`|`v2beta1`).
    pub aggregated: HashMap<(String, String), Document>,
    /// The OpenAPI documents, built on first use.
    pub openapi: LazyOpenApi,
}

/// The OpenAPI documents.
#[derive(Clone, Debug, Default)]
pub struct OpenApiDocuments {
    /// `/openapi/v3/<path>` by path (`apis/<g>/<v>`).
    pub v3: HashMap<String, Document>,
    /// `/openapi/v3` index.
    pub v3_index: Option<Document>,
    /// `/openapi/v2` (Swagger 2.0, JSON).
    pub v2: Option<Document>,
    /// `/openapi/v2` in gnostic protobuf form (served with the JSON form's
    /// ETag, as kube-apiserver does).
    pub v2_protobuf: Option<Bytes>,
}

impl OpenApiDocuments {
    /// The documents of a bundle's `openapi_v2` and `openapi_v3` members.
    fn from_values(v2: Option<&Value>, v3: &Value) -> Self {
        let mut docs = OpenApiDocuments {
            v3: v3
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), Document::new(v)))
                        .collect()
                })
                .unwrap_or_default(),
            ..Default::default()
        };
        if let Some(v2) = v2 {
            docs.set_v2(v2);
        }
        docs.index_v3();
        docs
    }

    /// Sets the v2 document, in JSON and protobuf.
    fn set_v2(&mut self, v2: &Value) {
        self.v2_protobuf = Some(Bytes::from(
            apiforge_core::protobuf::gnostic::encode_document(v2),
        ));
        self.v2 = Some(Document::new(v2));
    }

    /// Rebuilds the `/openapi/v3` index from the documents.
    fn index_v3(&mut self) {
        let mut keys: Vec<&String> = self.v3.keys().collect();
        keys.sort();
        let mut paths = serde_json::Map::new();
        for k in keys {
            let hash = &self.v3[k].hash;
            paths.insert(
                k.clone(),
                serde_json::json!({"serverRelativeURL": format!("/openapi/v3/{k}?hash={hash}")}),
            );
        }
        self.v3_index = Some(Document::new(&serde_json::json!({"paths": paths})));
    }
}

/// How [`LazyOpenApi`] builds its documents.
type Build = Box<dyn FnOnce() -> OpenApiDocuments + Send>;

/// OpenAPI documents built once, on first use; clones share them.
#[derive(Clone)]
pub struct LazyOpenApi(Arc<LazyState>);

struct LazyState {
    built: OnceLock<Arc<OpenApiDocuments>>,
    build: Mutex<Option<Build>>,
}

impl Default for LazyOpenApi {
    fn default() -> Self {
        LazyOpenApi::ready(OpenApiDocuments::default())
    }
}

impl std::fmt::Debug for LazyOpenApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.built.get() {
            Some(docs) => f.debug_tuple("LazyOpenApi").field(docs).finish(),
            None => f.write_str("LazyOpenApi(not built yet)"),
        }
    }
}

impl LazyOpenApi {
    /// Documents built already.
    pub fn ready(docs: OpenApiDocuments) -> Self {
        let state = LazyState {
            built: OnceLock::new(),
            build: Mutex::new(None),
        };
        let _ = state.built.set(Arc::new(docs));
        LazyOpenApi(Arc::new(state))
    }

    /// Documents that `build` makes on first use.
    pub fn deferred(build: impl FnOnce() -> OpenApiDocuments + Send + 'static) -> Self {
        LazyOpenApi(Arc::new(LazyState {
            built: OnceLock::new(),
            build: Mutex::new(Some(Box::new(build))),
        }))
    }

    /// The documents, built now on this thread if they were not yet (one
    /// caller builds; the others wait for it).
    pub fn force(&self) -> Arc<OpenApiDocuments> {
        self.0
            .built
            .get_or_init(|| {
                let build = self
                    .0
                    .build
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                match build {
                    Some(build) => Arc::new(build()),
                    // Only after a build that panicked.
                    None => Arc::default(),
                }
            })
            .clone()
    }

    /// The documents, built on the blocking pool if they were not yet, so
    /// that a request waiting for them holds no runtime thread.
    pub async fn get(&self) -> Arc<OpenApiDocuments> {
        if let Some(docs) = self.0.built.get() {
            return docs.clone();
        }
        let lazy = self.clone();
        match tokio::task::spawn_blocking(move || lazy.force()).await {
            Ok(docs) => docs,
            Err(_) => self.force(),
        }
    }

    /// Starts building the documents on the blocking pool (when called
    /// inside a Tokio runtime and they are not built yet), so that the
    /// first request for them seldom waits.
    pub fn prepare(&self) {
        if self.0.built.get().is_some() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let lazy = self.clone();
            runtime.spawn_blocking(move || lazy.force());
        }
    }

    /// [`prepare`](Self::prepare) after `delay`, unless these documents
    /// were dropped by then (replaced by newer ones): a burst of changes
    /// (a hundred definitions applied at once) builds the documents once
    /// rather than once per change.
    pub fn prepare_after(&self, delay: std::time::Duration) {
        if self.0.built.get().is_some() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let state = Arc::downgrade(&self.0);
            runtime.spawn(async move {
                tokio::time::sleep(delay).await;
                if let Some(state) = state.upgrade() {
                    LazyOpenApi(state).prepare();
                }
            });
        }
    }

    /// Whether the documents are built.
    pub fn is_built(&self) -> bool {
        self.0.built.get().is_some()
    }
}

/// The bundle was not what `build.rs` writes.
#[derive(Debug, thiserror::Error)]
#[error("invalid generated documents bundle: {0}")]
pub struct BundleError(String);

impl Documents {
    /// Parses the bundle written by `build.rs`: the discovery documents
    /// now; the OpenAPI documents (97 % of the bundle) are only checked to
    /// be well-formed JSON now, and parsed when first built (on the
    /// blocking pool, off the start-up path).
    pub fn from_bundle(bundle: &str) -> Result<Self, BundleError> {
        /// The bundle's members, the OpenAPI ones left as text.
        #[derive(serde::Deserialize)]
        struct Parts<'a> {
            #[serde(borrow)]
            openapi_v2: Option<&'a serde_json::value::RawValue>,
            #[serde(borrow)]
            openapi_v3: Option<&'a serde_json::value::RawValue>,
            #[serde(default)]
            discovery: Value,
        }
        let parts: Parts<'_> =
            serde_json::from_str(bundle).map_err(|e| BundleError(e.to_string()))?;
        let v2 = parts.openapi_v2.map(|raw| raw.get().to_owned());
        let v3 = parts.openapi_v3.map(|raw| raw.get().to_owned());
        let openapi = LazyOpenApi::deferred(move || {
            // Well-formed JSON (checked above) always parses into a value.
            let parse = |text: &str| serde_json::from_str::<Value>(text).unwrap_or_default();
            let v2 = v2.as_deref().map(parse);
            let v3 = v3.as_deref().map(parse).unwrap_or_default();
            OpenApiDocuments::from_values(v2.as_ref(), &v3)
        });
        Self::from_discovery(&parts.discovery, openapi)
    }

    /// The documents of `scheme`: discovery now, OpenAPI on first use
    /// (what `build.rs` makes at build time for the `apiforge` binary).
    pub fn from_scheme(scheme: &apiforge_core::scheme::Scheme) -> Result<Self, BundleError> {
        let for_openapi = scheme.clone();
        let openapi = LazyOpenApi::deferred(move || {
            let (v2, v3) = apiforge_core::bundle::openapi_documents(&for_openapi);
            OpenApiDocuments::from_values(Some(&v2), &v3)
        });
        Self::from_discovery(&apiforge_core::bundle::discovery_documents(scheme), openapi)
    }

    /// Reads a bundle value ([`apiforge_core::bundle::build`]), OpenAPI
    /// included.
    pub fn from_value(v: &Value) -> Result<Self, BundleError> {
        let openapi = LazyOpenApi::ready(OpenApiDocuments::from_values(
            v.get("openapi_v2"),
            &v["openapi_v3"],
        ));
        Self::from_discovery(&v["discovery"], openapi)
    }

    /// The discovery documents of a bundle's `discovery` member, with
    /// `openapi`.
    fn from_discovery(d: &Value, openapi: LazyOpenApi) -> Result<Self, BundleError> {
        let map_of = |v: &Value| -> HashMap<String, Document> {
            v.as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), Document::new(v)))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut docs = Documents {
            api: Some(Document::new(&d["api"])),
            apis: Some(Document::new(&d["apis"])),
            groups: map_of(&d["groups"]),
            resource_lists: map_of(&d["resource_lists"]),
            aggregated: HashMap::new(),
            openapi,
        };
        for root in ["api", "apis"] {
            for version in ["v2", "v2beta1"] {
                let doc = &d[format!("aggregated_{root}_{version}")];
                if doc.is_null() {
                    return Err(BundleError(format!(
                        "missing aggregated discovery for /{root} {version}"
                    )));
                }
                docs.aggregated
                    .insert((root.into(), version.into()), Document::new(doc));
            }
        }
        Ok(docs)
    }

    /// These documents with the remote group versions of the aggregator
    /// added, as kube-aggregator merges its backends' documents:
    ///
    /// - `/apis` and `/apis/<group>` list the remote versions (a group this
    ///   server does not serve is appended; remote groups are ordered by
    ///   `groupPriorityMinimum`, highest first, then by name, and the
    ///   versions of a remote group by `versionPriority`, then as
    ///   Kubernetes orders versions; the first is preferred);
    /// - aggregated discovery (`/apis`, v2 and v2beta1) carries each
    ///   backend's entry of its version (`Stale` when the last read
    ///   failed); a version never read is left out;
    /// - OpenAPI v3 serves the backends' group version documents, OpenAPI v2
    ///   their paths and the definitions this server does not have.
    ///
    /// A group version served both here and remotely is the backend's.
    pub fn with_remote(&self, remote: &[crate::aggregator::RemoteVersion]) -> Documents {
        if remote.is_empty() {
            return self.clone();
        }
        let mut docs = self.clone();
        // Remote groups: versions by priority.
        let mut groups: Vec<(&str, i32, Vec<&crate::aggregator::RemoteVersion>)> = Vec::new();
        for r in remote {
            match groups.iter_mut().find(|(g, _, _)| *g == r.group) {
                Some((_, priority, versions)) => {
                    *priority = (*priority).max(r.group_priority_minimum);
                    versions.push(r);
                }
                None => groups.push((&r.group, r.group_priority_minimum, vec![r])),
            }
        }
        for (_, _, versions) in &mut groups {
            versions.sort_by(|a, b| {
                b.version_priority
                    .cmp(&a.version_priority)
                    .then_with(|| super::kube_version_order(&a.version, &b.version))
            });
        }
        groups.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));

        // Legacy discovery: `/apis` and `/apis/<group>`.
        let mut list: Value = docs
            .apis
            .as_ref()
            .and_then(|d| serde_json::from_slice(&d.body).ok())
            .unwrap_or_else(
                || serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
            );
        if let Some(entries) = list.get_mut("groups").and_then(Value::as_array_mut) {
            for (group, _, versions) in &groups {
                let local: Vec<Value> = entries
                    .iter()
                    .find(|e| e.get("name").and_then(Value::as_str) == Some(group))
                    .and_then(|e| e.get("versions"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut listed: Vec<Value> = versions
                    .iter()
                    .map(|r| {
                        serde_json::json!({"groupVersion": format!("{}/{}", r.group, r.version), "version": r.version})
                    })
                    .collect();
                for v in local {
                    if !listed.iter().any(|l| l.get("version") == v.get("version")) {
                        listed.push(v);
                    }
                }
                let entry = serde_json::json!({
                    "name": group,
                    "versions": listed,
                    "preferredVersion": listed.first().cloned().unwrap_or(Value::Null),
                });
                let mut doc = serde_json::json!({"kind": "APIGroup", "apiVersion": "v1"});
                if let (Some(d), Some(e)) = (doc.as_object_mut(), entry.as_object()) {
                    d.extend(e.clone());
                }
                docs.groups.insert(group.to_string(), Document::new(&doc));
                match entries
                    .iter_mut()
                    .find(|e| e.get("name").and_then(Value::as_str) == Some(group))
                {
                    Some(existing) => *existing = entry,
                    None => entries.push(entry),
                }
            }
        }
        docs.apis = Some(Document::new(&list));

        // Aggregated discovery.
        for version in ["v2", "v2beta1"] {
            let key = ("apis".to_string(), version.to_string());
            let Some(mut doc) = docs
                .aggregated
                .get(&key)
                .and_then(|d| serde_json::from_slice::<Value>(&d.body).ok())
            else {
                continue;
            };
            if let Some(items) = doc.get_mut("items").and_then(Value::as_array_mut) {
                for (group, _, versions) in &groups {
                    let mut entries: Vec<Value> = versions
                        .iter()
                        .filter_map(|r| {
                            let mut entry = r.discovery.clone()?;
                            if let Some(map) = entry.as_object_mut() {
                                map.insert(
                                    "freshness".into(),
                                    Value::from(if r.stale { "Stale" } else { "Current" }),
                                );
                            }
                            Some(entry)
                        })
                        .collect();
                    let existing = items.iter().position(|i| {
                        i.pointer("/metadata/name").and_then(Value::as_str) == Some(group)
                    });
                    if let Some(i) = existing {
                        let local = items[i]
                            .get("versions")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                        for v in local {
                            if !entries.iter().any(|e| e.get("version") == v.get("version")) {
                                entries.push(v);
                            }
                        }
                        items.remove(i);
                    }
                    if entries.is_empty() {
                        continue;
                    }
                    items.push(
                        serde_json::json!({"metadata": {"name": group}, "versions": entries}),
                    );
                }
            }
            docs.aggregated.insert(key, Document::new(&doc));
        }

        // OpenAPI: merged on first use.
        let local = self.openapi.clone();
        let remote = remote.to_vec();
        docs.openapi = LazyOpenApi::deferred(move || merge_openapi(&local.force(), &remote));
        docs
    }
}

/// `local` with the OpenAPI documents of the `remote` group versions (see
/// [`Documents::with_remote`]).
fn merge_openapi(
    local: &OpenApiDocuments,
    remote: &[crate::aggregator::RemoteVersion],
) -> OpenApiDocuments {
    let mut docs = local.clone();
    let mut v2: Option<Value> = docs
        .v2
        .as_ref()
        .and_then(|d| serde_json::from_slice(&d.body).ok());
    for r in remote {
        let path = format!("apis/{}/{}", r.group, r.version);
        match &r.openapi_v3 {
            Some(doc) => {
                docs.v3.insert(path.clone(), Document::new(doc));
            }
            None => {
                docs.v3.remove(&path);
            }
        }
        if let Some(v2) = v2.as_mut() {
            if let Some(paths) = v2.get_mut("paths").and_then(Value::as_object_mut) {
                let prefix = format!("/{path}/");
                paths.retain(|p, _| !p.starts_with(&prefix));
                paths.extend(r.openapi_v2_paths.clone());
            }
            if let Some(defs) = v2.get_mut("definitions").and_then(Value::as_object_mut) {
                for (name, def) in &r.openapi_v2_definitions {
                    if !defs.contains_key(name) {
                        defs.insert(name.clone(), def.clone());
                    }
                }
            }
        }
    }
    if let Some(v2) = v2 {
        docs.set_v2(&v2);
    }
    docs.index_v3();
    docs
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::aggregator::RemoteVersion;

    fn local_openapi() -> OpenApiDocuments {
        OpenApiDocuments::from_values(
            Some(
                &json!({"swagger": "2.0", "paths": {"/apis/a.example/v1/things": {}}, "definitions": {"a": {}}}),
            ),
            &json!({"apis/a.example/v1": {"openapi": "3.0.0"}}),
        )
    }

    #[test]
    fn deferred_documents_are_built_once_and_shared_by_clones() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counted = builds.clone();
        let lazy = LazyOpenApi::deferred(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            local_openapi()
        });
        let clone = lazy.clone();
        assert!(!lazy.is_built());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lazy = clone.clone();
                std::thread::spawn(move || lazy.force())
            })
            .collect();
        for t in threads {
            let docs = t.join().expect("thread");
            assert!(docs.v3.contains_key("apis/a.example/v1"));
        }
        assert!(lazy.is_built());
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        assert!(Arc::ptr_eq(&lazy.force(), &clone.force()));
    }

    #[tokio::test]
    async fn a_request_builds_them_on_the_blocking_pool() {
        let lazy = LazyOpenApi::deferred(local_openapi);
        let docs = lazy.get().await;
        assert!(docs.v2.is_some() && docs.v2_protobuf.is_some());
        let index: Value =
            serde_json::from_slice(&docs.v3_index.as_ref().expect("index").body).expect("json");
        let hash = &docs.v3["apis/a.example/v1"].hash;
        assert_eq!(
            index["paths"]["apis/a.example/v1"]["serverRelativeURL"],
            json!(format!("/openapi/v3/apis/a.example/v1?hash={hash}"))
        );
    }

    #[test]
    fn remote_versions_are_merged_when_first_used() {
        let local = Documents {
            openapi: LazyOpenApi::ready(local_openapi()),
            ..Default::default()
        };
        let remote = RemoteVersion {
            group: "b.example".into(),
            version: "v1".into(),
            group_priority_minimum: 1000,
            version_priority: 15,
            discovery: None,
            stale: false,
            openapi_v3: Some(json!({"openapi": "3.0.0", "info": {"title": "b"}})),
            openapi_v2_paths: json!({"/apis/b.example/v1/others": {}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            openapi_v2_definitions: json!({"a": {"replaced": true}, "b": {}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        };
        let merged = local.with_remote(std::slice::from_ref(&remote));
        assert!(!merged.openapi.is_built());
        let docs = merged.openapi.force();
        assert!(docs.v3.contains_key("apis/a.example/v1"));
        assert!(docs.v3.contains_key("apis/b.example/v1"));
        let v2: Value = serde_json::from_slice(&docs.v2.as_ref().expect("v2").body).expect("json");
        assert!(v2["paths"].get("/apis/a.example/v1/things").is_some());
        assert!(v2["paths"].get("/apis/b.example/v1/others").is_some());
        // A definition this server has stays its own.
        assert_eq!(v2["definitions"]["a"], json!({}));
        assert_eq!(v2["definitions"]["b"], json!({}));
        // The local documents are unchanged.
        assert!(!local.openapi.force().v3.contains_key("apis/b.example/v1"));
    }
}
