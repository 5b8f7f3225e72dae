//! The OpenAPI v2 (Swagger 2.0) document of all compiled-in groups, as
//! kube-apiserver serves it at `/openapi/v2`.
//!
//! It is derived from the v3 documents ([`super::v3_documents`]), so the two
//! can never disagree: definitions keep the v3 component names (and their
//! `x-kubernetes-group-version-kind`, validation and patch extensions),
//! operations keep their ids and `x-kubernetes-*` extensions. What Swagger
//! 2.0 cannot say is rewritten the way Kubernetes' own v2 document says it:
//!
//! - `$ref`s point at `#/definitions/...`; a single-element `allOf` around a
//!   `$ref` becomes the `$ref` itself (with its description);
//! - `nullable` disappears, and `anyOf`/`oneOf` with a `null` alternative
//!   (an `Option`) collapses to the other alternative; string-enum `oneOf`s
//!   merge into one `enum`;
//! - a request body becomes an `in: body` parameter, response `content`
//!   becomes `schema`, parameter `schema`s become `type`s, and the media
//!   types move to `consumes`/`produces`.

use serde_json::{Map, Value, json};

use crate::scheme::Scheme;

const V3_REF: &str = "#/components/schemas/";
const V2_REF: &str = "#/definitions/";

/// The Swagger 2.0 document of every group-version in `scheme`.
pub fn document(scheme: &Scheme) -> Value {
    let docs = super::v3_documents(scheme);
    from_v3(docs.iter().map(|(_, doc)| doc))
}

/// Merges OpenAPI v3 group-version documents into one Swagger 2.0
/// document. Definitions of the same name (the shared meta types) are kept
/// once, the first wins.
pub fn from_v3<'a>(documents: impl IntoIterator<Item = &'a Value>) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for doc in documents {
        if let Some(schemas) = doc
            .pointer("/components/schemas")
            .and_then(Value::as_object)
        {
            for (name, schema) in schemas {
                if !definitions.contains_key(name) {
                    definitions.insert(name.clone(), convert_schema(schema));
                }
            }
        }
        if let Some(doc_paths) = doc.get("paths").and_then(Value::as_object) {
            for (path, item) in doc_paths {
                paths.insert(path.clone(), convert_path_item(item));
            }
        }
    }
    let mut sorted_paths: Vec<(String, Value)> = paths.into_iter().collect();
    sorted_paths.sort_by(|a, b| a.0.cmp(&b.0));
    let mut sorted_defs: Vec<(String, Value)> = definitions.into_iter().collect();
    sorted_defs.sort_by(|a, b| a.0.cmp(&b.0));
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": Value::Object(sorted_paths.into_iter().collect()),
        "definitions": Value::Object(sorted_defs.into_iter().collect()),
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "in": "header",
                "name": "authorization",
                "type": "apiKey"
            }
        },
        "security": [{"BearerToken": []}],
    })
}

fn is_null_alternative(v: &Value) -> bool {
    v.get("enum")
        .and_then(Value::as_array)
        .is_some_and(|e| e.iter().all(Value::is_null))
        || v.get("type").and_then(Value::as_str) == Some("null")
}

/// Converts one v3 schema (recursively) to its Swagger 2.0 form.
pub fn convert_schema(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        match k.as_str() {
            "nullable" => {}
            "$ref" => {
                let r = v
                    .as_str()
                    .map(|s| s.replacen(V3_REF, V2_REF, 1))
                    .unwrap_or_default();
                out.insert(k.clone(), Value::String(r));
            }
            "enum" => {
                let items: Vec<Value> = v
                    .as_array()
                    .map(|a| a.iter().filter(|x| !x.is_null()).cloned().collect())
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Array(items));
            }
            "properties" | "definitions" => {
                let props = v
                    .as_object()
                    .map(|p| {
                        p.iter()
                            .map(|(name, s)| (name.clone(), convert_schema(s)))
                            .collect::<Map<_, _>>()
                    })
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" | "not" => {
                out.insert(k.clone(), convert_schema(v));
            }
            "allOf" | "anyOf" | "oneOf" => {
                let alts: Vec<Value> = v
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter(|x| !is_null_alternative(x))
                            .map(convert_schema)
                            .collect()
                    })
                    .unwrap_or_default();
                merge_alternatives(&mut out, k, alts);
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if out.contains_key("$ref") {
        // Swagger 2.0 ignores siblings of `$ref` but for documentation;
        // Kubernetes' document keeps only the description with it.
        out.remove("default");
        out.remove("type");
    }
    Value::Object(out)
}

fn merge_alternatives(out: &mut Map<String, Value>, key: &str, alts: Vec<Value>) {
    match alts.len() {
        0 => {}
        1 => {
            if let Some(Value::Object(single)) = alts.into_iter().next() {
                for (k, v) in single {
                    if k == "description" && out.contains_key("description") {
                        continue;
                    }
                    out.entry(k).or_insert(v);
                }
            }
        }
        _ if key != "allOf"
            && alts.iter().all(|a| {
                a.get("type").and_then(Value::as_str) == Some("string") && a.get("enum").is_some()
            }) =>
        {
            let values: Vec<Value> = alts
                .iter()
                .filter_map(|a| a.get("enum").and_then(Value::as_array))
                .flatten()
                .cloned()
                .collect();
            out.insert("type".into(), json!("string"));
            out.insert("enum".into(), Value::Array(values));
        }
        _ if key == "allOf" => {
            out.insert(key.into(), Value::Array(alts));
        }
        // Swagger 2.0 has no unions: leave the value unconstrained.
        _ => {}
    }
}

fn convert_path_item(item: &Value) -> Value {
    let Value::Object(map) = item else {
        return item.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        if k == "parameters" {
            out.insert(k.clone(), convert_parameters(v));
        } else if matches!(
            k.as_str(),
            "get" | "put" | "post" | "delete" | "patch" | "head" | "options"
        ) {
            out.insert(k.clone(), convert_operation(v));
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

fn convert_parameter(param: &Value) -> Value {
    let Value::Object(map) = param else {
        return param.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        if k == "schema" {
            if let Value::Object(schema) = convert_schema(v) {
                for (sk, sv) in schema {
                    out.entry(sk).or_insert(sv);
                }
            }
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

fn convert_parameters(params: &Value) -> Value {
    Value::Array(
        params
            .as_array()
            .map(|a| a.iter().map(convert_parameter).collect())
            .unwrap_or_default(),
    )
}

fn content_schema(content: &Value) -> Option<Value> {
    content
        .as_object()?
        .values()
        .find_map(|media| media.get("schema"))
        .map(convert_schema)
}

fn media_types(content: Option<&Value>) -> Vec<Value> {
    content
        .and_then(Value::as_object)
        .map(|m| m.keys().map(|k| Value::String(k.clone())).collect())
        .unwrap_or_default()
}

fn convert_operation(op: &Value) -> Value {
    let Value::Object(map) = op else {
        return op.clone();
    };
    let mut out = Map::new();
    let mut params = map
        .get("parameters")
        .map(convert_parameters)
        .and_then(|p| p.as_array().cloned())
        .unwrap_or_default();
    let body = map.get("requestBody");
    if let Some(body) = body {
        let mut param = json!({"name": "body", "in": "body", "required": true});
        if let (Some(schema), Value::Object(p)) =
            (body.get("content").and_then(content_schema), &mut param)
        {
            p.insert("schema".into(), schema);
        }
        params.insert(0, param);
    }
    let mut produces = Vec::new();
    let mut responses = Map::new();
    if let Some(resp) = map.get("responses").and_then(Value::as_object) {
        for (code, r) in resp {
            let mut converted = Map::new();
            converted.insert(
                "description".into(),
                r.get("description").cloned().unwrap_or(json!("")),
            );
            if let Some(schema) = r.get("content").and_then(content_schema) {
                converted.insert("schema".into(), schema);
            }
            for media in media_types(r.get("content")) {
                if !produces.contains(&media) {
                    produces.push(media);
                }
            }
            responses.insert(code.clone(), Value::Object(converted));
        }
    }
    responses
        .entry("401")
        .or_insert_with(|| json!({"description": "Unauthorized"}));
    for (k, v) in map {
        match k.as_str() {
            "parameters" | "requestBody" | "responses" => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    let consumes = body
        .map(|b| media_types(b.get("content")))
        .unwrap_or_default();
    if !consumes.is_empty() {
        out.insert("consumes".into(), Value::Array(consumes));
    }
    if !produces.is_empty() {
        out.insert("produces".into(), Value::Array(produces));
    }
    out.insert("schemes".into(), json!(["https"]));
    out.insert("parameters".into(), Value::Array(params));
    out.insert("responses".into(), Value::Object(responses));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_and_allof_refs_collapse() {
        let s = json!({"properties": {
            "a": {"anyOf": [{"$ref": "#/components/schemas/X"}, {"nullable": true, "enum": [null]}], "description": "A."},
            "b": {"allOf": [{"$ref": "#/components/schemas/Y"}], "default": {}, "description": "B."},
            "c": {"oneOf": [{"type": "string", "enum": ["x"]}, {"type": "string", "enum": ["y"]}]},
            "d": {"type": "integer", "nullable": true, "minimum": 1},
        }});
        assert_eq!(
            convert_schema(&s),
            json!({"properties": {
                "a": {"$ref": "#/definitions/X", "description": "A."},
                "b": {"$ref": "#/definitions/Y", "description": "B."},
                "c": {"type": "string", "enum": ["x", "y"]},
                "d": {"type": "integer", "minimum": 1},
            }})
        );
    }

    #[test]
    fn operations_get_body_parameters_and_schemas() {
        let op = json!({
            "operationId": "createX",
            "description": "create an X",
            "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}, "uniqueItems": true}],
            "requestBody": {"content": {"*/*": {"schema": {"$ref": "#/components/schemas/X"}}}, "required": true},
            "responses": {"201": {"description": "Created", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/X"}}}}},
            "x-kubernetes-action": "post",
        });
        let v2 = convert_operation(&op);
        assert_eq!(v2["consumes"], json!(["*/*"]));
        assert_eq!(v2["produces"], json!(["application/json"]));
        assert_eq!(
            v2["parameters"][0],
            json!({"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/X"}})
        );
        assert_eq!(
            v2["parameters"][1],
            json!({"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true})
        );
        assert_eq!(
            v2["responses"]["201"]["schema"]["$ref"],
            json!("#/definitions/X")
        );
        assert_eq!(v2["x-kubernetes-action"], json!("post"));
    }
}
