//! OpenAPI schema → CEL [`Type`], after upstream's `SchemaDeclType`
//! (`k8s.io/apiserver/pkg/cel/common/schemas.go`):
//!
//! - `x-kubernetes-int-or-string` (or the format `int-or-string`) is `dyn`;
//! - `string` is `bytes`, `google.protobuf.Duration` or
//!   `google.protobuf.Timestamp` for the formats `byte`, `duration`,
//!   `date`/`date-time`, else `string`; `boolean`, `number`, `integer` are
//!   `bool`, `double`, `int`;
//! - an `array` is `list(items)`, hidden without `items`;
//! - an `object` with an `additionalProperties` schema is
//!   `map(string, V)`; another object is an object type of its
//!   (CEL-escaped) properties; at a resource's root (and in embedded
//!   resources) `apiVersion`, `kind` and `metadata.name`/`generateName` are
//!   declared when missing;
//! - `$ref`s (into the `#/components/schemas` map given), `allOf` and a
//!   single non-null `anyOf`/`oneOf` branch are followed.
//!
//! Where upstream would hide a property or type it more strictly than our
//! generated schemas can be trusted to say, the type is `dyn` instead (so
//! it never causes a warning): a schema without `type` (upstream hides the
//! property), an object without properties that preserves unknown fields
//! or allows any additional property, several `anyOf`/`oneOf` branches,
//! and `$ref` chains deeper than 32 (upstream cuts cycles to an empty
//! object).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{ObjectType, Type};

const MAX_DEPTH: usize = 32;

/// The CEL type of the objects `root` describes, named `name` (the kind),
/// with `$ref`s resolved in `defs`. `None` when the schema gives no type.
pub fn from_openapi(root: &Value, defs: &Map<String, Value>, name: &str) -> Option<Type> {
    Converter { defs }.convert(root, name, true, 0)
}

struct Converter<'a> {
    defs: &'a Map<String, Value>,
}

/// The merged view of a schema node and everything it refers to.
#[derive(Default)]
struct Layers<'a> {
    nodes: Vec<&'a Value>,
    /// Several alternative branches: nothing certain.
    ambiguous: bool,
}

impl<'a> Layers<'a> {
    fn first(&self, key: &str) -> Option<&'a Value> {
        self.nodes.iter().find_map(|n| n.get(key))
    }

    fn flag(&self, key: &str) -> bool {
        self.nodes
            .iter()
            .any(|n| n.get(key).and_then(Value::as_bool) == Some(true))
    }

    fn type_name(&self) -> Option<&'a str> {
        self.nodes.iter().find_map(|n| match n.get("type") {
            Some(Value::String(s)) => Some(s.as_str()),
            Some(Value::Array(list)) => {
                list.iter().filter_map(Value::as_str).find(|t| *t != "null")
            }
            _ => None,
        })
    }

    fn properties(&self) -> Vec<(&'a String, &'a Value)> {
        let mut out: Vec<(&String, &Value)> = Vec::new();
        for n in &self.nodes {
            if let Some(props) = n.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    if !out.iter().any(|(name, _)| *name == k) {
                        out.push((k, v));
                    }
                }
            }
        }
        out
    }
}

fn is_null_schema(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("null")
        || v.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty() && e.iter().all(Value::is_null))
}

impl<'a> Converter<'a> {
    fn collect(&self, v: &'a Value, out: &mut Layers<'a>, depth: usize) {
        if depth > MAX_DEPTH {
            out.ambiguous = true;
            return;
        }
        if !v.is_object() {
            return;
        }
        out.nodes.push(v);
        if let Some(reference) = v.get("$ref").and_then(Value::as_str) {
            match reference.rsplit('/').next().and_then(|n| self.defs.get(n)) {
                Some(target) => self.collect(target, out, depth + 1),
                None => out.ambiguous = true,
            }
        }
        if let Some(list) = v.get("allOf").and_then(Value::as_array) {
            for s in list {
                self.collect(s, out, depth + 1);
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(list) = v.get(key).and_then(Value::as_array) {
                let branches: Vec<&Value> = list.iter().filter(|s| !is_null_schema(s)).collect();
                match branches.as_slice() {
                    [one] => self.collect(one, out, depth + 1),
                    [] => {}
                    _ => out.ambiguous = true,
                }
            }
        }
    }

    fn convert(&self, v: &Value, name: &str, resource_root: bool, depth: usize) -> Option<Type> {
        if depth > MAX_DEPTH {
            return Some(Type::Dyn);
        }
        let mut layers = Layers::default();
        self.collect(v, &mut layers, depth);
        // Built-in kinds mark int-or-string with the format, custom
        // resources with the extension (upstream checks both).
        if layers.ambiguous
            || layers.flag("x-kubernetes-int-or-string")
            || layers.first("format").and_then(Value::as_str) == Some("int-or-string")
        {
            return Some(Type::Dyn);
        }
        let embedded = layers.flag("x-kubernetes-embedded-resource");
        let properties = layers.properties();
        let ty = match layers.type_name() {
            Some(t) => t,
            None if !properties.is_empty() => "object",
            // Upstream hides a property without a type; our generated
            // schemas leave the type out for values of any shape.
            None => return Some(Type::Dyn),
        };
        match ty {
            "boolean" => Some(Type::Bool),
            "integer" => Some(Type::Int),
            "number" => Some(Type::Double),
            "string" => Some(match layers.first("format").and_then(Value::as_str) {
                Some("byte") => Type::Bytes,
                Some("duration") => Type::Duration,
                Some("date" | "date-time") => Type::Timestamp,
                _ => Type::String,
            }),
            "array" => {
                let items = layers.first("items")?;
                let item = self.convert(items, &format!("{name}.@idx"), false, depth + 1)?;
                Some(Type::list(item))
            }
            "object" => {
                if let Some(ap @ Value::Object(_)) = layers.first("additionalProperties") {
                    let value = self.convert(ap, &format!("{name}.@elem"), false, depth + 1)?;
                    // Declared properties next to the map's: their values
                    // need not have the map's value type.
                    let value = if properties.is_empty() {
                        value
                    } else {
                        Type::Dyn
                    };
                    return Some(Type::map(Type::String, value));
                }
                if properties.is_empty()
                    && (layers.flag("x-kubernetes-preserve-unknown-fields")
                        || matches!(
                            layers.first("additionalProperties"),
                            Some(Value::Bool(true))
                        ))
                {
                    return Some(Type::Dyn);
                }
                let mut fields = BTreeMap::new();
                for (prop, schema) in properties {
                    let Some(escaped) = escape(prop) else {
                        continue;
                    };
                    if let Some(t) =
                        self.convert(schema, &format!("{name}.{prop}"), false, depth + 1)
                    {
                        fields.insert(escaped, t);
                    }
                }
                if resource_root || embedded {
                    fields.entry("apiVersion".into()).or_insert(Type::String);
                    fields.entry("kind".into()).or_insert(Type::String);
                    let meta = fields.entry("metadata".into()).or_insert_with(|| {
                        Type::Object(Arc::new(ObjectType {
                            name: format!("{name}.metadata"),
                            fields: BTreeMap::new(),
                        }))
                    });
                    if let Type::Object(o) = meta {
                        let o = Arc::make_mut(o);
                        o.fields.entry("name".into()).or_insert(Type::String);
                        o.fields
                            .entry("generateName".into())
                            .or_insert(Type::String);
                    }
                }
                Some(Type::Object(Arc::new(ObjectType {
                    name: name.to_string(),
                    fields,
                })))
            }
            _ => None,
        }
    }
}

/// Whether `name` is one of CEL's reserved words (escaped as `__name__`).
pub fn is_reserved(name: &str) -> bool {
    crate::apiextensions::cost::RESERVED.contains(&name)
}

/// Upstream's `Escape` of a property name into a CEL field name (the
/// escaping CRD rules use).
pub(crate) use crate::apiextensions::cost::escape;
