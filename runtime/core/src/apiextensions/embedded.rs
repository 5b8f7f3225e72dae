//! Embedded resources (`x-kubernetes-embedded-resource: true`): the
//! `apiVersion`, `kind` and `metadata` of objects nested in a custom
//! resource, as upstream's `schema/objectmeta` coerces (`Coerce`) and
//! validates (`Validate`) them. Kubernetes 1.33 wording.
//!
//! Both walks follow the schema (properties by name, `additionalProperties`
//! by key, `items` by index) from below the resource root: the root's own
//! metadata is the server's.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::schema::Node;
use super::validate::{go_float, go_syntax};
use crate::meta::ObjectMeta;
use crate::validation::{
    ErrorList, ErrorType, FieldError, FieldPath, is_dns1035_label, is_valid_path_segment_name,
    is_valid_path_segment_prefix, validate_object_meta,
};

/// `field.Invalid(path, value, detail)` with the value shown as Go's
/// `field.Error` shows an `interface{}` of decoded JSON: numbers and
/// booleans with `%v`, strings quoted, `nil` as `"null"`, maps and lists
/// with `%#v`.
fn invalid(path: &FieldPath, value: &Value, detail: &str) -> FieldError {
    let shown = match value {
        Value::String(s) => return FieldError::invalid(path, s.clone(), detail),
        Value::Null => return FieldError::invalid(path, "null", detail),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) => go_float(f),
            _ => n.to_string(),
        },
        other => go_syntax(other),
    };
    FieldError {
        type_: ErrorType::Invalid,
        field: path.into(),
        bad_value: None,
        detail: format!("{shown}: {detail}"),
    }
}

/// `path.ValidatePathSegmentName`, the name function of embedded metadata.
fn path_segment_name(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_valid_path_segment_prefix(name)
    } else {
        is_valid_path_segment_name(name)
    }
}

/// Whether a node, or any node the walks reach from it, is an embedded
/// resource.
pub(crate) fn any_below(node: &Node) -> bool {
    node.embedded
        || node.properties.values().any(any_below)
        || node.additional.schema().is_some_and(any_below)
        || node.items.as_deref().is_some_and(any_below)
}

/// Upstream `objectmeta.Validate` below the root: every embedded resource
/// the schema reaches.
pub(crate) fn validate(node: &Node, value: &Value, path: &FieldPath, errs: &mut ErrorList) {
    match value {
        Value::Object(map) => {
            if node.embedded {
                validate_resource(map, path, errs);
            }
            for (k, item) in map {
                if let Some(prop) = node.properties.get(k) {
                    validate(prop, item, &path.child(k), errs);
                } else if let Some(add) = node.additional.schema() {
                    validate(add, item, &path.key(k), errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = node.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    validate(item_node, item, &path.index(i), errs);
                }
            }
        }
        _ => {}
    }
}

/// Upstream `validateEmbeddedResource`.
fn validate_resource(map: &Map<String, Value>, path: &FieldPath, errs: &mut ErrorList) {
    // apiVersion and kind are required, metadata is not.
    for key in ["apiVersion", "kind"] {
        if !map.contains_key(key) {
            errs.push(FieldError::required(path.child(key), "must not be empty"));
        }
    }
    for (k, v) in map {
        match k.as_str() {
            "apiVersion" => match v {
                Value::String(s) if s.is_empty() => {
                    errs.push(FieldError::invalid(path.child(k), "", "must not be empty"))
                }
                Value::String(s) => {
                    // `schema.ParseGroupVersion`: at most one `/`.
                    if s != "/" && s.matches('/').count() > 1 {
                        errs.push(FieldError::invalid(
                            path.child(k),
                            s.clone(),
                            format!("unexpected GroupVersion string: {s}"),
                        ));
                    }
                }
                _ => errs.push(invalid(&path.child(k), v, "must be a string")),
            },
            "kind" => match v {
                Value::String(s) if s.is_empty() => {
                    errs.push(FieldError::invalid(path.child(k), "", "must not be empty"))
                }
                Value::String(s) => {
                    let msgs = is_dns1035_label(&s.to_lowercase());
                    if !msgs.is_empty() {
                        errs.push(FieldError::invalid(
                            path.child(k),
                            s.clone(),
                            format!(
                                "may have mixed case, but should otherwise match: {}",
                                msgs.join(",")
                            ),
                        ));
                    }
                }
                _ => errs.push(invalid(&path.child(k), v, "must be a string")),
            },
            "metadata" => match object_meta(v, false) {
                Err(e) => errs.push(invalid(&path.child(k), v, &e)),
                Ok(mut meta) => {
                    if meta.name.is_empty() {
                        // as upstream, which sets a name "to avoid an error"
                        meta.name = "fakename".into();
                    }
                    let requires_namespace = !meta.namespace.is_empty();
                    errs.extend(validate_object_meta(
                        &meta,
                        requires_namespace,
                        path_segment_name,
                        &path.child(k),
                    ));
                }
            },
            _ => {}
        }
    }
}

/// Upstream `objectmeta.Coerce` below the root: in every embedded
/// resource, `apiVersion` and `kind` that are not strings are dropped
/// (`drop_invalid`) or refused, and `metadata` is rewritten as the
/// ObjectMeta it decodes to (unknown fields gone, no `creationTimestamp`
/// when unset); a metadata that does not decode is refused, or, with
/// `drop_invalid`, loses the fields that do not decode (and is left as it
/// is when it is not an object). Returns the first refusal.
pub(crate) fn coerce(
    node: &Node,
    value: &mut Value,
    path: &FieldPath,
    drop_invalid: bool,
) -> Result<(), Box<FieldError>> {
    match value {
        Value::Object(map) => {
            if node.embedded {
                coerce_resource(map, path, drop_invalid)?;
            }
            for (k, item) in map.iter_mut() {
                if let Some(prop) = node.properties.get(k) {
                    coerce(prop, item, &path.child(k), drop_invalid)?;
                } else if let Some(add) = node.additional.schema() {
                    coerce(add, item, &path.key(k), drop_invalid)?;
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = node.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    coerce(item_node, item, &path.index(i), drop_invalid)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn coerce_resource(
    map: &mut Map<String, Value>,
    path: &FieldPath,
    drop_invalid: bool,
) -> Result<(), Box<FieldError>> {
    for key in ["apiVersion", "kind"] {
        match map.get(key) {
            Some(Value::String(_)) | None => {}
            Some(_) if drop_invalid => {
                map.shift_remove(key);
            }
            Some(v) => return Err(Box::new(invalid(&path.child(key), v, "must be a string"))),
        }
    }
    if let Some(v) = map.get_mut("metadata") {
        match object_meta(v, drop_invalid) {
            Ok(meta) => {
                *v = serde_json::to_value(&meta)
                    .map_err(|e| Box::new(invalid(&path.child("metadata"), v, &e.to_string())))?;
            }
            // a metadata that is not an object passes through
            Err(_) if drop_invalid => {}
            Err(e) => return Err(Box::new(invalid(&path.child("metadata"), v, &e))),
        }
    }
    Ok(())
}

/// The ObjectMeta a JSON metadata decodes to, as upstream's `GetObjectMeta`
/// (Go's `encoding/json` into `metav1.ObjectMeta`): unknown fields are
/// ignored, `null`s leave fields unset, a value of the wrong type is an
/// error in Go's words (`json: cannot unmarshal number into Go struct field
/// ObjectMeta.name of type string`). With `drop_malformed`, the fields that
/// do not decode are left out instead (the metadata must be an object).
pub(crate) fn object_meta(value: &Value, drop_malformed: bool) -> Result<ObjectMeta, String> {
    let map = match value {
        Value::Null => return Ok(ObjectMeta::default()),
        Value::Object(map) => map,
        other if drop_malformed => {
            return Err(format!(
                "invalid metadata: expected object, got {}",
                go_type_name(other)
            ));
        }
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type v1.ObjectMeta",
                json_kind(other)
            ));
        }
    };
    if drop_malformed {
        let mut kept = Map::new();
        for (k, v) in map {
            let mut one = Map::new();
            one.insert(k.clone(), v.clone());
            if decode_meta(&one).is_ok() {
                kept.insert(k.clone(), v.clone());
            }
        }
        decode_meta(&kept)
    } else {
        decode_meta(map)
    }
}

/// Go's `%T` of a decoded JSON value.
fn go_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The JSON kind Go's `UnmarshalTypeError` names.
fn json_kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

/// The Go type of a field, for the type checks of [`decode_meta`].
#[derive(Clone, Copy)]
enum GoType {
    Str,
    Int,
    Bool,
    /// `metav1.Time`: a string (Go reports its inner `string`).
    Time,
    StrMap,
    StrList,
    Owners,
    Managed,
    Any,
}

impl GoType {
    fn name(self) -> &'static str {
        match self {
            GoType::Str | GoType::Time => "string",
            GoType::Int => "int64",
            GoType::Bool => "bool",
            GoType::StrMap => "map[string]string",
            GoType::StrList => "[]string",
            GoType::Owners => "[]v1.OwnerReference",
            GoType::Managed => "[]v1.ManagedFieldsEntry",
            GoType::Any => "interface {}",
        }
    }
}

fn meta_field(key: &str) -> Option<GoType> {
    Some(match key {
        "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion" => {
            GoType::Str
        }
        "generation" | "deletionGracePeriodSeconds" => GoType::Int,
        "creationTimestamp" | "deletionTimestamp" => GoType::Time,
        "labels" | "annotations" => GoType::StrMap,
        "finalizers" => GoType::StrList,
        "ownerReferences" => GoType::Owners,
        "managedFields" => GoType::Managed,
        _ => return None,
    })
}

fn owner_field(key: &str) -> Option<GoType> {
    Some(match key {
        "apiVersion" | "kind" | "name" | "uid" => GoType::Str,
        "controller" | "blockOwnerDeletion" => GoType::Bool,
        _ => return None,
    })
}

fn managed_field(key: &str) -> Option<GoType> {
    Some(match key {
        "manager" | "operation" | "apiVersion" | "fieldsType" | "subresource" => GoType::Str,
        "time" => GoType::Time,
        "fieldsV1" => GoType::Any,
        _ => return None,
    })
}

/// A struct in a list of ObjectMeta: its Go name, the Go types of its
/// fields, and the string fields serde needs present.
type ListStruct = (
    &'static str,
    fn(&str) -> Option<GoType>,
    &'static [&'static str],
);

const OWNER: ListStruct = (
    "OwnerReference",
    owner_field,
    &["apiVersion", "kind", "name", "uid"],
);
const MANAGED: ListStruct = ("ManagedFieldsEntry", managed_field, &[]);

/// A type error in Go's words: the innermost struct, the field path from
/// the root and the Go type.
fn type_error(v: &Value, strukt: &str, fields: &str, ty: GoType) -> String {
    let what = match v {
        Value::Number(n) if matches!(ty, GoType::Int) && !n.is_i64() => {
            format!("number {}", n.as_f64().map(go_float).unwrap_or_default())
        }
        other => json_kind(other),
    };
    format!(
        "json: cannot unmarshal {what} into Go struct field {strukt}.{fields} of type {}",
        ty.name()
    )
}

/// Checks `v` against `ty` as Go's decoder does (`null` always fits), and
/// returns it normalized for serde: `null`s removed from objects, and
/// `null` map values and list items as Go leaves them (`""`).
fn check(v: &Value, strukt: &str, fields: &str, ty: GoType) -> Result<Option<Value>, String> {
    if v.is_null() {
        return Ok(None);
    }
    let fail = || Err(type_error(v, strukt, fields, ty));
    let ok = |v: &Value| Ok(Some(v.clone()));
    match ty {
        GoType::Any => ok(v),
        GoType::Str | GoType::Time => match v {
            Value::String(_) => ok(v),
            _ => fail(),
        },
        GoType::Bool => match v {
            Value::Bool(_) => ok(v),
            _ => fail(),
        },
        GoType::Int => match v {
            Value::Number(n) if n.is_i64() => ok(v),
            _ => fail(),
        },
        GoType::StrMap => {
            let Value::Object(m) = v else { return fail() };
            let mut out = Map::new();
            for (k, item) in m {
                let item = check(item, strukt, fields, GoType::Str)?
                    .unwrap_or_else(|| Value::String(String::new()));
                out.insert(k.clone(), item);
            }
            Ok(Some(Value::Object(out)))
        }
        GoType::StrList => {
            let Value::Array(items) = v else {
                return fail();
            };
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(
                    check(item, strukt, fields, GoType::Str)?
                        .unwrap_or_else(|| Value::String(String::new())),
                );
            }
            Ok(Some(Value::Array(out)))
        }
        GoType::Owners | GoType::Managed => {
            let Value::Array(items) = v else {
                return fail();
            };
            let (inner, lookup, required) = match ty {
                GoType::Owners => OWNER,
                _ => MANAGED,
            };
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let Value::Object(m) = item else {
                    if item.is_null() {
                        out.push(Value::Object(Map::new()));
                        continue;
                    }
                    return Err(format!(
                        "json: cannot unmarshal {} into Go struct field {strukt}.{fields} of type v1.{inner}",
                        json_kind(item)
                    ));
                };
                let mut entry = Map::new();
                for (k, field) in m {
                    let Some(ft) = lookup(k) else { continue };
                    if let Some(f) = check(field, inner, &format!("{fields}.{k}"), ft)? {
                        entry.insert(k.clone(), f);
                    }
                }
                // Go leaves absent strings empty; serde needs them.
                for k in required {
                    entry
                        .entry(k.to_string())
                        .or_insert_with(|| Value::String(String::new()));
                }
                out.push(Value::Object(entry));
            }
            Ok(Some(Value::Array(out)))
        }
    }
}

/// Decodes an ObjectMeta from a JSON object as Go would (see
/// [`object_meta`]).
fn decode_meta(map: &Map<String, Value>) -> Result<ObjectMeta, String> {
    let mut normalized = Map::new();
    let mut first_err = None;
    for (k, v) in map {
        let Some(ty) = meta_field(k) else { continue };
        match check(v, "ObjectMeta", k, ty) {
            Ok(Some(v)) => {
                normalized.insert(k.clone(), v);
            }
            Ok(None) => {}
            // Go's decoder goes on and reports the first type error.
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    ObjectMeta::deserialize(Value::Object(normalized)).map_err(|e| e.to_string())
}
