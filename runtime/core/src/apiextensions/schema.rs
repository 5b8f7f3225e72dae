//! Parsing of an `openAPIV3Schema` into the tree the other passes walk.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value};

use super::rules::CompiledRule;

/// Schemas deeper than this are refused (no CRD schema comes near it).
const MAX_SCHEMA_DEPTH: usize = 100;

/// One node of a structural schema, with its value validations.
#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    /// `type`, empty when unset.
    pub(crate) type_: String,
    pub(crate) nullable: bool,
    pub(crate) int_or_string: bool,
    pub(crate) preserve_unknown: bool,
    pub(crate) embedded: bool,
    pub(crate) format: Option<String>,
    pub(crate) default: Option<Value>,
    pub(crate) properties: BTreeMap<String, Node>,
    pub(crate) additional: Additional,
    pub(crate) items: Option<Box<Node>>,
    pub(crate) list_type: Option<String>,
    pub(crate) list_map_keys: Vec<String>,
    pub(crate) checks: Checks,
    pub(crate) rules: Vec<CompiledRule>,
}

/// `additionalProperties`.
#[derive(Clone, Debug, Default)]
pub(crate) enum Additional {
    /// Not set.
    #[default]
    None,
    /// `true` or `false` (structural schemas only allow `true` with
    /// unknown fields preserved; `false` is treated as unset).
    Bool(bool),
    /// A schema for every value.
    Schema(Box<Node>),
}

impl Additional {
    pub(crate) fn schema(&self) -> Option<&Node> {
        match self {
            Additional::Schema(s) => Some(s),
            _ => None,
        }
    }
}

/// The value validations of a node (kube-openapi's validators).
#[derive(Clone, Debug, Default)]
pub(crate) struct Checks {
    pub(crate) enum_: Option<Vec<Value>>,
    pub(crate) pattern: Option<(String, Regex)>,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_maximum: bool,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) multiple_of: Option<f64>,
    pub(crate) max_length: Option<i64>,
    pub(crate) min_length: Option<i64>,
    pub(crate) max_items: Option<i64>,
    pub(crate) min_items: Option<i64>,
    pub(crate) unique_items: bool,
    pub(crate) max_properties: Option<i64>,
    pub(crate) min_properties: Option<i64>,
    pub(crate) required: Vec<String>,
    pub(crate) all_of: Vec<Node>,
    pub(crate) any_of: Vec<Node>,
    pub(crate) one_of: Vec<Node>,
    pub(crate) not: Option<Box<Node>>,
}

fn int_field(m: &Map<String, Value>, key: &str) -> Result<Option<i64>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .map(Some)
            .ok_or_else(|| format!("{key} must be an integer")),
    }
}

fn num_field(m: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| format!("{key} must be a number")),
    }
}

fn bool_field(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn str_list(m: &Map<String, Value>, key: &str) -> Vec<String> {
    m.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Parses one schema node at `path` (for messages) and `depth`. The work
/// is split so that the recursive frames stay small (deep schemas in debug
/// builds would otherwise exhaust a thread's stack).
pub(crate) fn parse(v: &Value, path: &str, depth: usize) -> Result<Node, String> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!("{path}: schema nested too deeply"));
    }
    let m = v
        .as_object()
        .ok_or_else(|| format!("{path}: must be an object"))?;
    let mut node = leaf(m, path)?;
    children(&mut node, m, path, depth)?;
    Ok(node)
}

#[inline(never)]
fn boxed(v: &Value, path: String, depth: usize) -> Result<Box<Node>, String> {
    parse(v, &path, depth).map(Box::new)
}

#[inline(never)]
fn children(
    node: &mut Node,
    m: &Map<String, Value>,
    path: &str,
    depth: usize,
) -> Result<(), String> {
    if let Some(props) = m.get("properties") {
        let props = props
            .as_object()
            .ok_or_else(|| format!("{path}: properties must be an object"))?;
        for (k, s) in props {
            let child = boxed(s, format!("{path}.properties[{k}]"), depth + 1)?;
            node.properties.insert(k.clone(), *child);
        }
    }
    node.additional = match m.get("additionalProperties") {
        None | Some(Value::Null) => Additional::None,
        Some(Value::Bool(b)) => Additional::Bool(*b),
        Some(s) => Additional::Schema(boxed(s, format!("{path}.additionalProperties"), depth + 1)?),
    };
    if let Some(items) = m.get("items") {
        if items.is_array() {
            return Err(format!(
                "{path}.items: must be a schema instead of an array"
            ));
        }
        node.items = Some(boxed(items, format!("{path}.items"), depth + 1)?);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(arr) = m.get(key).and_then(Value::as_array) {
            let mut parsed = Vec::with_capacity(arr.len());
            for (i, s) in arr.iter().enumerate() {
                parsed.push(*boxed(s, format!("{path}.{key}[{i}]"), depth + 1)?);
            }
            match key {
                "allOf" => node.checks.all_of = parsed,
                "anyOf" => node.checks.any_of = parsed,
                _ => node.checks.one_of = parsed,
            }
        }
    }
    if let Some(n) = m.get("not") {
        node.checks.not = Some(boxed(n, format!("{path}.not"), depth + 1)?);
    }
    Ok(())
}

/// Everything of a node but its sub-schemas.
#[inline(never)]
fn leaf(m: &Map<String, Value>, path: &str) -> Result<Node, String> {
    let err = |e: String| format!("{path}: {e}");
    if m.contains_key("$ref") {
        return Err(format!("{path}.$ref: $ref is not supported"));
    }
    let type_ = match m.get("type") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(t)) => match t.as_str() {
            "object" | "array" | "string" | "integer" | "number" | "boolean" => t.clone(),
            other => return Err(format!("{path}.type: unsupported type {other:?}")),
        },
        Some(_) => return Err(format!("{path}.type: must be a string")),
    };
    let mut node = Node {
        type_,
        nullable: bool_field(m, "nullable"),
        int_or_string: bool_field(m, "x-kubernetes-int-or-string"),
        preserve_unknown: bool_field(m, "x-kubernetes-preserve-unknown-fields"),
        embedded: bool_field(m, "x-kubernetes-embedded-resource"),
        format: m.get("format").and_then(Value::as_str).map(str::to_string),
        default: m.get("default").cloned(),
        list_type: m
            .get("x-kubernetes-list-type")
            .and_then(Value::as_str)
            .map(str::to_string),
        list_map_keys: str_list(m, "x-kubernetes-list-map-keys"),
        ..Node::default()
    };
    let c = &mut node.checks;
    c.enum_ = m.get("enum").and_then(Value::as_array).cloned();
    if let Some(p) = m.get("pattern").and_then(Value::as_str) {
        let re = Regex::new(p).map_err(|e| format!("{path}.pattern: {e}"))?;
        c.pattern = Some((p.to_string(), re));
    }
    c.maximum = num_field(m, "maximum").map_err(err)?;
    c.minimum = num_field(m, "minimum").map_err(err)?;
    c.exclusive_maximum = bool_field(m, "exclusiveMaximum");
    c.exclusive_minimum = bool_field(m, "exclusiveMinimum");
    c.multiple_of = num_field(m, "multipleOf").map_err(err)?;
    c.max_length = int_field(m, "maxLength").map_err(err)?;
    c.min_length = int_field(m, "minLength").map_err(err)?;
    c.max_items = int_field(m, "maxItems").map_err(err)?;
    c.min_items = int_field(m, "minItems").map_err(err)?;
    c.unique_items = bool_field(m, "uniqueItems");
    c.max_properties = int_field(m, "maxProperties").map_err(err)?;
    c.min_properties = int_field(m, "minProperties").map_err(err)?;
    c.required = str_list(m, "required");
    if let Some(rules) = m.get("x-kubernetes-validations") {
        let rules = rules
            .as_array()
            .ok_or_else(|| format!("{path}.x-kubernetes-validations: must be a list"))?;
        for (i, r) in rules.iter().enumerate() {
            node.rules.push(CompiledRule::parse(
                r,
                &format!("{path}.x-kubernetes-validations[{i}]"),
            )?);
        }
    }
    Ok(node)
}
