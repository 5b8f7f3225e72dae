//! The generated discovery and OpenAPI documents, served from memory.
//!
//! `build.rs` of the binary writes them as one JSON bundle
//! ([`apiforge_core::bundle::build`]); [`Documents::from_bundle`] turns it into
//! ready-to-send bytes with their ETags. [`Documents::from_scheme`] does
//! both at run time, for programs that assemble their scheme themselves.

use std::collections::HashMap;

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
    /// `/openapi/v3/<path>` by path (`apis/<g>/<v>`).
    pub openapi_v3: HashMap<String, Document>,
    /// `/openapi/v3` index.
    pub openapi_v3_index: Option<Document>,
    /// `/openapi/v2` (Swagger 2.0, JSON).
    pub openapi_v2: Option<Document>,
    /// `/openapi/v2` in gnostic protobuf form (served with the JSON form's
    /// ETag, as kube-apiserver does).
    pub openapi_v2_protobuf: Option<Bytes>,
}

/// The bundle was not what `build.rs` writes.
#[derive(Debug, thiserror::Error)]
#[error("invalid generated documents bundle: {0}")]
pub struct BundleError(String);

impl Documents {
    /// Parses the bundle written by `build.rs`.
    pub fn from_bundle(bundle: &str) -> Result<Self, BundleError> {
        let v: Value = serde_json::from_str(bundle).map_err(|e| BundleError(e.to_string()))?;
        Self::from_value(&v)
    }

    /// Generates every document of `scheme` now (what `build.rs` does at
    /// build time for the `apiforge` binary).
    pub fn from_scheme(scheme: &apiforge_core::scheme::Scheme) -> Result<Self, BundleError> {
        Self::from_value(&apiforge_core::bundle::build(scheme))
    }

    /// Reads a bundle value ([`apiforge_core::bundle::build`]).
    pub fn from_value(v: &Value) -> Result<Self, BundleError> {
        let d = &v["discovery"];
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
            openapi_v3: map_of(&v["openapi_v3"]),
            openapi_v2: v.get("openapi_v2").map(Document::new),
            openapi_v2_protobuf: v
                .get("openapi_v2")
                .map(|doc| Bytes::from(apiforge_core::protobuf::gnostic::encode_document(doc))),
            ..Default::default()
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
        docs.index_openapi_v3();
        Ok(docs)
    }

    /// Rebuilds the `/openapi/v3` index from the documents.
    fn index_openapi_v3(&mut self) {
        let mut keys: Vec<&String> = self.openapi_v3.keys().collect();
        keys.sort();
        let mut paths = serde_json::Map::new();
        for k in keys {
            let hash = &self.openapi_v3[k].hash;
            paths.insert(
                k.clone(),
                serde_json::json!({"serverRelativeURL": format!("/openapi/v3/{k}?hash={hash}")}),
            );
        }
        self.openapi_v3_index = Some(Document::new(&serde_json::json!({"paths": paths})));
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

        // OpenAPI.
        let mut v2: Option<Value> = docs
            .openapi_v2
            .as_ref()
            .and_then(|d| serde_json::from_slice(&d.body).ok());
        for r in remote {
            let path = format!("apis/{}/{}", r.group, r.version);
            match &r.openapi_v3 {
                Some(doc) => {
                    docs.openapi_v3.insert(path.clone(), Document::new(doc));
                }
                None => {
                    docs.openapi_v3.remove(&path);
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
            docs.openapi_v2_protobuf = Some(Bytes::from(
                apiforge_core::protobuf::gnostic::encode_document(&v2),
            ));
            docs.openapi_v2 = Some(Document::new(&v2));
        }
        docs.index_openapi_v3();
        docs
    }
}
