//! Structural checks of the generated OpenAPI documents (the checked-in
//! copies under `openapi/`, which `openapi_golden` keeps current): every v3
//! document deserializes with the `openapiv3` crate, the v2 document with a
//! small serde model of Swagger 2.0; in both every `$ref` resolves, every
//! operation has responses and operation ids are unique. Plus the
//! `/openapi/v2` endpoint of the real server.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

fn openapi_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `$ref` string anywhere in `value`, with its JSON pointer.
fn refs(value: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    if let Some(r) = v.as_str() {
                        out.push((at.to_string(), r.to_string()));
                    }
                } else {
                    refs(v, &format!("{at}/{k}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                refs(v, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Every `$ref` must be a local reference that resolves in `doc`.
fn assert_refs_resolve(name: &str, doc: &Value) {
    let mut found = Vec::new();
    refs(doc, "", &mut found);
    assert!(!found.is_empty(), "{name}: no $ref at all");
    for (at, r) in found {
        let pointer = r
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{name}{at}: non-local $ref {r}"));
        assert!(
            doc.pointer(pointer).is_some(),
            "{name}{at}: $ref {r} does not resolve"
        );
    }
}

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];

#[test]
fn v3_documents_are_valid_openapi() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(openapi_dir().join("v3"))
        .expect("openapi/v3")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no v3 documents");
    for file in files {
        let name = file.display().to_string();
        let raw = read_json(&file);
        let doc: openapiv3::OpenAPI = serde_json::from_value(raw.clone())
            .unwrap_or_else(|e| panic!("{name} is not OpenAPI 3.0: {e}"));
        assert!(
            doc.openapi.starts_with("3.0"),
            "{name}: openapi {}",
            doc.openapi
        );
        let schemas = doc
            .components
            .as_ref()
            .map(|c| c.schemas.len())
            .unwrap_or(0);
        assert!(schemas > 0, "{name}: no components.schemas");
        assert_refs_resolve(&name, &raw);
        let mut ids = BTreeSet::new();
        let mut gvk_ops = 0;
        for (path, item) in &doc.paths.paths {
            let item = item
                .as_item()
                .unwrap_or_else(|| panic!("{name} {path}: path item is a reference"));
            for (method, op) in item.iter() {
                assert!(
                    !op.responses.responses.is_empty() || op.responses.default.is_some(),
                    "{name} {method} {path}: no responses"
                );
                let id = op
                    .operation_id
                    .clone()
                    .unwrap_or_else(|| panic!("{name} {method} {path}: no operationId"));
                assert!(ids.insert(id.clone()), "{name}: duplicate operationId {id}");
                let ext = &op.extensions;
                assert!(
                    ext.contains_key("x-kubernetes-action"),
                    "{name} {method} {path}: no x-kubernetes-action"
                );
                if ext.contains_key("x-kubernetes-group-version-kind") {
                    gvk_ops += 1;
                }
                if method == "patch" {
                    assert!(
                        op.parameters.iter().any(|p| p
                            .as_item()
                            .is_some_and(|p| p.parameter_data_ref().name == "fieldValidation")),
                        "{name} patch {path}: no fieldValidation parameter (kubectl's probe)"
                    );
                }
            }
        }
        assert!(gvk_ops > 0, "{name}: no operation names its GVK");
        // every kind schema carries its GVK (kubectl explain finds it so)
        let gvk_schemas = raw["components"]["schemas"]
            .as_object()
            .map(|s| {
                s.values()
                    .filter(|s| s.get("x-kubernetes-group-version-kind").is_some())
                    .count()
            })
            .unwrap_or(0);
        assert!(
            gvk_schemas > 0,
            "{name}: no schema with x-kubernetes-group-version-kind"
        );
    }
}

/// The part of Swagger 2.0 we check (unknown fields are errors, so that a
/// v3-only keyword such as `components` or `requestBody` fails).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Swagger {
    swagger: String,
    info: Info,
    paths: BTreeMap<String, BTreeMap<String, Value>>,
    definitions: BTreeMap<String, Value>,
    #[serde(rename = "securityDefinitions", default)]
    _security_definitions: Value,
    #[serde(rename = "security", default)]
    _security: Value,
}

#[derive(Deserialize)]
struct Info {
    title: String,
    version: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Operation {
    #[serde(rename = "operationId")]
    operation_id: String,
    #[serde(default)]
    parameters: Vec<Parameter>,
    responses: BTreeMap<String, Response>,
    #[serde(default)]
    consumes: Vec<String>,
    #[serde(default)]
    produces: Vec<String>,
    #[serde(default)]
    schemes: Vec<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    description: String,
    #[serde(rename = "x-kubernetes-action")]
    action: String,
    #[serde(rename = "x-kubernetes-group-version-kind")]
    gvk: Option<Value>,
}

#[derive(Deserialize)]
struct Parameter {
    name: String,
    #[serde(rename = "in")]
    location: String,
    #[serde(rename = "type")]
    type_: Option<String>,
    schema: Option<Value>,
    #[serde(default)]
    required: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Response {
    description: String,
    schema: Option<Value>,
}

#[test]
fn v2_document_is_valid_swagger() {
    let raw = read_json(&openapi_dir().join("swagger.json"));
    let doc: Swagger = serde_json::from_value(raw.clone())
        .unwrap_or_else(|e| panic!("openapi/swagger.json is not Swagger 2.0: {e}"));
    assert_eq!(doc.swagger, "2.0");
    assert!(!doc.info.title.is_empty() && !doc.info.version.is_empty());
    assert!(!doc.definitions.is_empty());
    assert_refs_resolve("swagger.json", &raw);
    let text = raw.to_string();
    assert!(
        !text.contains("#/components/"),
        "swagger.json contains #/components/"
    );
    // OpenAPI 3 keywords, wherever they would be keywords (the names of a
    // model's properties are data: JSONSchemaProps has properties named
    // `nullable`, `anyOf` and `oneOf`, as upstream's).
    fn v3_keywords(value: &serde_json::Value, at: &str, found: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    if ["nullable", "requestBody", "anyOf", "oneOf"].contains(&k.as_str()) {
                        found.push(format!("{at}/{k}"));
                    }
                    if k == "properties" {
                        if let serde_json::Value::Object(props) = v {
                            for (name, schema) in props {
                                v3_keywords(schema, &format!("{at}/properties/{name}"), found);
                            }
                        }
                    } else {
                        v3_keywords(v, &format!("{at}/{k}"), found);
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    v3_keywords(v, &format!("{at}/{i}"), found);
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    v3_keywords(&raw, "", &mut found);
    assert!(
        found.is_empty(),
        "swagger.json has OpenAPI 3 keywords: {found:?}"
    );
    let mut ids = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    for (path, item) in &doc.paths {
        for (method, op) in item {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            let op: Operation = serde_json::from_value(op.clone())
                .unwrap_or_else(|e| panic!("{method} {path}: not a Swagger 2.0 operation: {e}"));
            assert!(!op.responses.is_empty(), "{method} {path}: no responses");
            assert!(
                op.responses.get("200").is_none_or(|r| r.schema.is_some()),
                "{method} {path}: 200 without schema"
            );
            assert!(
                op.responses.values().all(|r| !r.description.is_empty()),
                "{method} {path}: response without description"
            );
            assert!(
                ids.insert(op.operation_id.clone()),
                "duplicate operationId {}",
                op.operation_id
            );
            assert!(!op.action.is_empty() && !op.schemes.is_empty() && !op.tags.is_empty());
            assert!(!op.description.is_empty() && !op.produces.is_empty());
            for p in &op.parameters {
                match p.location.as_str() {
                    "body" => assert!(
                        p.schema.is_some() && p.required,
                        "{path}: body without schema"
                    ),
                    "query" | "path" => {
                        assert!(p.type_.is_some(), "{path}: {} without type", p.name)
                    }
                    other => panic!("{path}: parameter in {other}"),
                }
            }
            if matches!(method.as_str(), "post" | "put" | "patch") {
                assert!(!op.consumes.is_empty(), "{method} {path}: no consumes");
                assert!(op.parameters.iter().any(|p| p.location == "body"));
                assert!(
                    op.parameters.iter().any(|p| p.name == "fieldValidation"),
                    "{method} {path}: no fieldValidation"
                );
            }
            if let Some(gvk) = op.gvk {
                kinds.insert(gvk["kind"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    for kind in ["Flunder", "Fischer", "Database", "Namespace"] {
        assert!(kinds.contains(kind), "no operation for {kind}");
    }
    // definitions keep the v3 names, GVKs and extensions
    let spec = &doc.definitions["dev.apiforge.showcase.v1.DatabaseSpec"];
    assert_eq!(
        spec["properties"]["users"]["x-kubernetes-patch-merge-key"],
        "name"
    );
    assert_eq!(
        spec["properties"]["users"]["x-kubernetes-patch-strategy"],
        "merge"
    );
    assert!(spec["properties"]["engine"]["x-kubernetes-validations"].is_array());
    let db = &doc.definitions["dev.apiforge.showcase.v1.Database"];
    assert_eq!(
        db["x-kubernetes-group-version-kind"][0]["kind"], "Database",
        "kind definitions carry their GVK"
    );
    assert!(db["x-kubernetes-validations"].is_array());
    for file in std::fs::read_dir(openapi_dir().join("v3"))
        .expect("v3")
        .flatten()
    {
        let v3 = read_json(&file.path());
        for name in v3["components"]["schemas"]
            .as_object()
            .expect("schemas")
            .keys()
        {
            assert!(
                doc.definitions.contains_key(name),
                "v2 lacks definition {name}"
            );
        }
    }
}

#[tokio::test]
async fn openapi_v2_endpoint() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let get = |accept: &'static str, etag: Option<String>| {
        let mut req = http::Request::get("/openapi/v2").header("Accept", accept);
        if let Some(etag) = etag {
            req = req.header("If-None-Match", etag);
        }
        req.body(Vec::new()).expect("request")
    };
    let resp = client
        .send(get("application/json", None).map(Into::into))
        .await
        .expect("GET /openapi/v2");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let etag = resp.headers()["etag"].to_str().expect("etag").to_string();
    assert!(etag.len() == 130 && etag.starts_with('"'), "etag {etag}");
    let body = resp.into_body().collect_bytes().await.expect("body");
    let served: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(served, read_json(&openapi_dir().join("swagger.json")));

    let resp = client
        .send(get("application/json", Some(etag.clone())).map(Into::into))
        .await
        .expect("conditional GET");
    assert_eq!(resp.status(), 304);

    // The gnostic protobuf form, under both media types kubectl uses, with
    // the JSON form's ETag.
    for accept in [
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
    ] {
        let resp = client
            .send(get(accept, None).map(Into::into))
            .await
            .expect("protobuf GET");
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.headers()["content-type"],
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        );
        assert_eq!(resp.headers()["etag"], etag.as_str());
        let body = resp.into_body().collect_bytes().await.expect("body");
        // Field 1 (`swagger`, a string): tag 0x0a, length 3, "2.0".
        assert_eq!(&body[..5], b"\x0a\x032.0");
        assert!(body.len() > 1000, "{} bytes", body.len());
        let resp = client
            .send(get(accept, Some(etag.clone())).map(Into::into))
            .await
            .expect("conditional protobuf GET");
        assert_eq!(resp.status(), 304);
    }
    let resp = client
        .send(get("application/yaml", None).map(Into::into))
        .await
        .expect("yaml GET");
    assert_eq!(resp.status(), 406);
}
