//! The other direction of custom resources: the CustomResourceDefinition
//! of a compiled-in kind, so one declaration can be served natively or
//! installed into any Kubernetes cluster.
//!
//! The schema is the version's published OpenAPI schema (every declared
//! validation rule, CEL rules, `one_of` / `at_most_one_of` unions as CEL
//! rules, list types, defaults) made structural: `$ref`s
//! inlined, `metadata` reduced to `type: object` as CRDs require,
//! `apiVersion` and `kind` as strings, nullable types spelled with
//! `nullable`, and a recursive type cut where it recurs (kept with
//! `x-kubernetes-preserve-unknown-fields`).

use serde_json::{Map, Value, json};

use super::{Group, Kind};
use crate::resource::Scope;

/// How deep `$ref`s are inlined before a (recursive) type is cut.
const MAX_DEPTH: usize = 32;

/// The definition of `kind` of `group`, served under `group_name` (the
/// group's own name, or another to install it beside the compiled-in one).
pub fn definition_of(group: &Group, kind: &Kind, group_name: Option<&str>) -> Value {
    let group_name = group_name.unwrap_or(group.name);
    let storage = kind.storage_info();
    let mut versions = Vec::new();
    // The group's preferred version first, as the group lists them.
    let mut ordered: Vec<_> = kind.versions().iter().collect();
    ordered.sort_by_key(|v| {
        group
            .versions
            .iter()
            .position(|g| *g == v.info.version)
            .unwrap_or(usize::MAX)
    });
    for ops in ordered {
        let info = ops.info;
        let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
        let root = ops.schema(&mut generator).to_value();
        let definitions = generator.take_definitions(true);
        let mut schema = structural(&root, &definitions, 0, &mut Vec::new());
        drop_defaults(&mut schema);
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert("apiVersion".into(), json!({"type": "string"}));
            props.insert("kind".into(), json!({"type": "string"}));
            props.insert("metadata".into(), json!({"type": "object"}));
        }
        if let Some(map) = schema.as_object_mut() {
            // A root `required` may name metadata (optional in CRDs).
            if let Some(Value::Array(required)) = map.get_mut("required") {
                required.retain(|r| r != "metadata" && r != "apiVersion" && r != "kind");
                if required.is_empty() {
                    map.remove("required");
                }
            }
        }
        let mut version = Map::new();
        version.insert("name".into(), json!(info.version));
        version.insert("served".into(), json!(true));
        version.insert("storage".into(), json!(info.version == storage.version));
        if info.deprecated {
            version.insert("deprecated".into(), json!(true));
            if let Some(w) = info.deprecation_warning {
                version.insert("deprecationWarning".into(), json!(w));
            }
        }
        version.insert("schema".into(), json!({"openAPIV3Schema": schema}));
        let mut subresources = Map::new();
        if info.subresources.status {
            subresources.insert("status".into(), json!({}));
        }
        if let Some(scale) = info.subresources.scale {
            let mut s = json!({
                "specReplicasPath": scale.spec_replicas_path,
                "statusReplicasPath": scale.status_replicas_path,
            });
            if !scale.label_selector_path.is_empty() {
                s["labelSelectorPath"] = json!(scale.label_selector_path);
            }
            subresources.insert("scale".into(), s);
        }
        if !subresources.is_empty() {
            version.insert("subresources".into(), Value::Object(subresources));
        }
        let columns: Vec<Value> = info
            .printer_columns
            .iter()
            .filter(|c| c.json_path != ".metadata.name")
            .map(|c| {
                let mut col = json!({"name": c.name, "type": c.type_, "jsonPath": c.json_path});
                if !c.description.is_empty() {
                    col["description"] = json!(c.description);
                }
                if !c.format.is_empty() {
                    col["format"] = json!(c.format);
                }
                if c.priority != 0 {
                    col["priority"] = json!(c.priority);
                }
                col
            })
            .collect();
        if !columns.is_empty() {
            version.insert("additionalPrinterColumns".into(), Value::Array(columns));
        }
        if !info.selectable_fields.is_empty() {
            let fields: Vec<Value> = info
                .selectable_fields
                .iter()
                .map(|f| json!({"jsonPath": f}))
                .collect();
            version.insert("selectableFields".into(), Value::Array(fields));
        }
        versions.push(Value::Object(version));
    }
    let mut names = json!({
        "plural": storage.plural,
        "singular": storage.singular,
        "kind": storage.kind,
        "listKind": storage.list_kind(),
    });
    if !storage.short_names.is_empty() {
        names["shortNames"] = json!(storage.short_names);
    }
    if !storage.categories.is_empty() {
        names["categories"] = json!(storage.categories);
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{group_name}", storage.plural)},
        "spec": {
            "group": group_name,
            "names": names,
            "scope": if storage.scope == Scope::Cluster { "Cluster" } else { "Namespaced" },
            "versions": versions,
        }
    })
}

/// The definitions of every kind of `group`.
pub fn definitions_of(group: &Group, group_name: Option<&str>) -> Vec<Value> {
    group
        .kinds
        .iter()
        .map(|k| definition_of(group, k, group_name))
        .collect()
}

/// Keywords a structural schema does not allow (or that mean nothing
/// there: JSONSchemaProps has no field for the patch extensions).
const DROPPED: [&str; 9] = [
    "$schema",
    "$id",
    "definitions",
    "$defs",
    "readOnly",
    "writeOnly",
    "title",
    "x-kubernetes-patch-strategy",
    "x-kubernetes-patch-merge-key",
];

/// Whether `schema` only admits `null` (the other half of an `Option`).
fn is_null_only(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
        || schema.get("enum") == Some(&json!([null]))
}

/// A `oneOf`/`anyOf` whose members are all enums of one type (a Rust enum
/// with documented variants): one enum of that type.
fn merged_enum(members: &[Value]) -> Option<Value> {
    let type_ = members.first()?.get("type")?.as_str()?;
    let mut values = Vec::new();
    for m in members {
        if m.get("type").and_then(Value::as_str) != Some(type_) {
            return None;
        }
        values.extend(m.get("enum")?.as_array()?.iter().cloned());
    }
    Some(json!({"type": type_, "enum": values}))
}

/// Whether a `default` is kept: scalars that are not Rust's empty
/// defaults (`serde(default)` publishes a default for every field;
/// structural schemas require defaults that validate, which `""` and
/// objects of zeroes rarely do).
fn keep_default(value: &Value) -> bool {
    match value {
        Value::String(s) => !s.is_empty(),
        Value::Number(_) | Value::Bool(_) => true,
        _ => false,
    }
}

/// Removes the defaults [`keep_default`] does not keep, everywhere.
fn drop_defaults(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("default").is_some_and(|d| !keep_default(d)) {
                map.remove("default");
            }
            for (k, v) in map.iter_mut() {
                // Inside `default`, `enum` and `example` values are data.
                if !matches!(k.as_str(), "default" | "enum" | "example") {
                    drop_defaults(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(drop_defaults),
        _ => {}
    }
}

/// `schema` made structural (see the module documentation); `seen` holds
/// the references being inlined (a recursion cuts there).
fn structural(
    schema: &Value,
    definitions: &Map<String, Value>,
    depth: usize,
    seen: &mut Vec<String>,
) -> Value {
    let Value::Object(map) = schema else {
        return json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    };
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or_default().to_string();
        if depth > MAX_DEPTH || seen.contains(&name) {
            return json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        }
        let Some(target) = definitions.get(&name) else {
            return json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        };
        seen.push(name);
        let mut inlined = structural(target, definitions, depth + 1, seen);
        seen.pop();
        // Keywords beside the `$ref` (a field's description, its rules)
        // win over the referenced type's.
        if let Value::Object(out) = &mut inlined {
            for (k, v) in map {
                if k != "$ref" && !DROPPED.contains(&k.as_str()) {
                    out.insert(k.clone(), structural_value(k, v, definitions, depth, seen));
                }
            }
        }
        return inlined;
    }
    // `allOf: [{$ref}]` (schemars' way of adding a description to a ref).
    if let Some(Value::Array(all)) = map.get("allOf")
        && all.len() == 1
        && all[0].get("$ref").is_some()
    {
        let mut merged = map.clone();
        merged.remove("allOf");
        if let Some(Value::Object(inner)) = all.first() {
            for (k, v) in inner {
                merged.insert(k.clone(), v.clone());
            }
        }
        return structural(&Value::Object(merged), definitions, depth, seen);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(members)) = map.get(key)
            && let Some(merged) = merged_enum(members)
        {
            let mut out = map.clone();
            out.remove(key);
            out.remove("x-kubernetes-preserve-unknown-fields");
            if let Value::Object(m) = merged {
                out.extend(m);
            }
            return structural(&Value::Object(out), definitions, depth, seen);
        }
    }
    // `anyOf: [X, {nullable/null}]` → X, nullable.
    if let Some(Value::Array(any)) = map.get("anyOf") {
        let non_null: Vec<&Value> = any.iter().filter(|s| !is_null_only(s)).collect();
        if non_null.len() == 1 && non_null.len() < any.len() {
            let mut out = structural(non_null[0], definitions, depth, seen);
            if let Value::Object(o) = &mut out {
                o.insert("nullable".into(), Value::Bool(true));
                for (k, v) in map {
                    if k == "x-kubernetes-preserve-unknown-fields" && o.contains_key("type") {
                        continue;
                    }
                    if k != "anyOf" && !DROPPED.contains(&k.as_str()) {
                        o.insert(k.clone(), structural_value(k, v, definitions, depth, seen));
                    }
                }
            }
            return out;
        }
    }
    let mut out = Map::new();
    for (k, v) in map {
        if DROPPED.contains(&k.as_str()) {
            continue;
        }
        if k == "type"
            && let Value::Array(types) = v
        {
            // `["string", "null"]` → `string` + nullable.
            let kinds: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
            if let Some(first) = kinds.first() {
                out.insert("type".into(), (*first).clone());
            }
            if kinds.len() < types.len() {
                out.insert("nullable".into(), Value::Bool(true));
            }
            continue;
        }
        if k == "additionalProperties" && v == &Value::Bool(false) {
            // Structural schemas prune instead.
            continue;
        }
        out.insert(k.clone(), structural_value(k, v, definitions, depth, seen));
    }
    if !out.contains_key("type")
        && !out.contains_key("x-kubernetes-int-or-string")
        && !out.contains_key("x-kubernetes-preserve-unknown-fields")
    {
        if out.contains_key("properties") || out.contains_key("additionalProperties") {
            out.insert("type".into(), json!("object"));
        } else {
            out.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
        }
    }
    Value::Object(out)
}

/// The structural form of keyword `key`'s value.
fn structural_value(
    key: &str,
    value: &Value,
    definitions: &Map<String, Value>,
    depth: usize,
    seen: &mut Vec<String>,
) -> Value {
    match key {
        "properties" | "patternProperties" => match value {
            Value::Object(props) => Value::Object(
                props
                    .iter()
                    .map(|(k, v)| (k.clone(), structural(v, definitions, depth + 1, seen)))
                    .collect(),
            ),
            other => other.clone(),
        },
        "items" | "additionalProperties" | "not" if value.is_object() => {
            structural(value, definitions, depth + 1, seen)
        }
        "allOf" | "anyOf" | "oneOf" => match value {
            Value::Array(list) => Value::Array(
                list.iter()
                    .map(|v| structural(v, definitions, depth + 1, seen))
                    .collect(),
            ),
            other => other.clone(),
        },
        _ => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::coordination_v1;
    use crate::scheme::Scheme;

    #[test]
    fn a_compiled_kind_becomes_a_structural_definition() {
        let mut scheme = Scheme::new();
        coordination_v1::install(&mut scheme);
        let group = scheme.group(coordination_v1::GROUP).expect("group");
        let defs = definitions_of(group, Some("leases.example.com"));
        assert_eq!(defs.len(), 1);
        let crd = &defs[0];
        assert_eq!(crd["metadata"]["name"], "leases.leases.example.com");
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        assert_eq!(crd["spec"]["names"]["listKind"], "LeaseList");
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert_eq!(schema["properties"]["metadata"], json!({"type": "object"}));
        let spec = &schema["properties"]["spec"];
        assert_eq!(spec["type"], "object");
        assert_eq!(
            spec["properties"]["leaseDurationSeconds"]["type"],
            "integer"
        );
        assert!(!schema.to_string().contains("$ref"), "{schema}");
    }
}
