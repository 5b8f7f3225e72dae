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
        let mut paths = serde_json::Map::new();
        let mut keys: Vec<&String> = docs.openapi_v3.keys().collect();
        keys.sort();
        for k in keys {
            let hash = &docs.openapi_v3[k].hash;
            paths.insert(
                k.clone(),
                serde_json::json!({"serverRelativeURL": format!("/openapi/v3/{k}?hash={hash}")}),
            );
        }
        docs.openapi_v3_index = Some(Document::new(&serde_json::json!({"paths": paths})));
        Ok(docs)
    }
}
