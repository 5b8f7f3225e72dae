//! The structural view of a kind's OpenAPI schema that patching and field
//! validation walk: properties, list items, map values, and the
//! `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key` extensions.
//!
//! The schema is generated at run time from [`VersionOps::schema`] with
//! schemars' OpenAPI 3 settings (the same generator the published documents
//! come from), so `$ref`s point into `#/components/schemas`. One
//! [`KindSchema`] is built per served kind and version and cached for the
//! life of the process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

use apiforge_core::scheme::VersionOps;

/// How deep `$ref`/`allOf` chains are followed (guards recursive types).
const MAX_DEPTH: usize = 32;

/// The resolved schema of one kind in one version.
#[derive(Debug, Clone)]
pub struct KindSchema {
    root: Value,
    defs: Map<String, Value>,
    /// [`KindSchema::zero_object`], made on first use.
    zero: OnceLock<Value>,
}

impl KindSchema {
    /// Generates the schema of a served version.
    pub fn generate(ops: &VersionOps) -> Self {
        let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
        let root = ops.schema(&mut generator).to_value();
        let defs = generator.take_definitions(true);
        KindSchema::from_parts(root, defs)
    }

    /// A schema from a root value and its `#/components/schemas` map (tests
    /// and hand-written schemas).
    pub fn from_parts(root: Value, defs: Map<String, Value>) -> Self {
        KindSchema {
            root,
            defs,
            zero: OnceLock::new(),
        }
    }

    /// A schema that knows nothing: every field is accepted, lists replace
    /// and maps merge.
    pub fn unknown() -> Self {
        KindSchema::from_parts(Value::Bool(true), Map::new())
    }

    /// The object a create is compared with (Go's zero value: the
    /// top-level structs `metadata`, `spec` and `status` present and
    /// empty, where the schema has them).
    pub fn zero_object(&self) -> &Value {
        self.zero.get_or_init(|| {
            let root = self.root();
            let mut out = Map::new();
            for name in ["metadata", "spec", "status"] {
                if root.has_property(name) && root.field(name).shape() == Shape::Struct {
                    out.insert(name.into(), Value::Object(Map::new()));
                }
            }
            Value::Object(out)
        })
    }

    /// The cached schema of `ops` (generated on first use).
    pub fn cached(ops: &VersionOps) -> Arc<KindSchema> {
        // Keyed by the version's static `KindInfo` (one per kind and
        // version for the life of the process): no key to build per call.
        static CACHE: OnceLock<Mutex<HashMap<usize, Arc<KindSchema>>>> = OnceLock::new();
        let key = std::ptr::from_ref(ops.info) as usize;
        let cache = CACHE.get_or_init(Default::default);
        if let Ok(map) = cache.lock()
            && let Some(found) = map.get(&key)
        {
            return found.clone();
        }
        let schema = Arc::new(KindSchema::generate(ops));
        if let Ok(mut map) = cache.lock() {
            map.entry(key).or_insert_with(|| schema.clone());
        }
        schema
    }

    /// The root schema and the `#/components/schemas` map its `$ref`s
    /// point into.
    pub fn parts(&self) -> (&Value, &Map<String, Value>) {
        (&self.root, &self.defs)
    }

    /// The node of the whole object.
    pub fn root(&self) -> Node<'_> {
        Node::new(self, Some(&self.root))
    }

    fn lookup(&self, reference: &str) -> Option<&Value> {
        let name = reference.rsplit('/').next()?;
        self.defs.get(name)
    }
}

/// What a schema node says about the values it describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Nothing is known: any value, any field.
    Any,
    /// An object with a fixed set of properties (a struct).
    Struct,
    /// An object whose values all follow one schema (a map).
    Map,
    /// An array.
    List,
    /// A scalar.
    Scalar,
}

/// One position in a [`KindSchema`]; `None` inside means "unknown".
#[derive(Clone)]
pub struct Node<'a> {
    schema: &'a KindSchema,
    /// The schema as written at this position followed by everything it
    /// refers to (`$ref`, `allOf`, `anyOf`, `oneOf`), outermost first.
    layers: Vec<&'a Value>,
}

fn is_null_schema(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("null")
        || v.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.len() == 1 && e[0].is_null())
}

impl<'a> Node<'a> {
    fn new(schema: &'a KindSchema, at: Option<&'a Value>) -> Self {
        let mut layers = Vec::new();
        if let Some(v) = at {
            collect_layers(schema, v, &mut layers, 0);
        }
        Node { schema, layers }
    }

    /// A node nothing is known about.
    pub fn unknown(schema: &'a KindSchema) -> Self {
        Node {
            schema,
            layers: Vec::new(),
        }
    }

    /// A node nothing is known about, in the same schema as `other`.
    pub fn unknown_like(other: &Node<'a>) -> Self {
        Node::unknown(other.schema)
    }

    fn first(&self, key: &str) -> Option<&'a Value> {
        self.layers.iter().find_map(|l| l.get(key))
    }

    /// Any extension (`x-kubernetes-...`) of this node, as written.
    pub fn extension_value(&self, key: &str) -> Option<&'a Value> {
        self.first(key)
    }

    /// A string extension (`x-kubernetes-...`) of this node.
    pub fn extension(&self, key: &str) -> Option<&'a str> {
        self.first(key).and_then(Value::as_str)
    }

    /// The shape of the values this node describes.
    pub fn shape(&self) -> Shape {
        if self.layers.is_empty()
            || self
                .first("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true)
        {
            return Shape::Any;
        }
        if self.first("properties").is_some() {
            return Shape::Struct;
        }
        match self.first("type").and_then(Value::as_str) {
            Some("object") => match self.first("additionalProperties") {
                None | Some(Value::Bool(false)) => Shape::Struct,
                Some(Value::Bool(true)) => Shape::Any,
                Some(_) => Shape::Map,
            },
            Some("array") => Shape::List,
            Some(_) => Shape::Scalar,
            None => Shape::Any,
        }
    }

    /// Whether `name` is a declared property of this struct node.
    pub fn has_property(&self, name: &str) -> bool {
        self.layers.iter().any(|l| {
            l.get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.contains_key(name))
        })
    }

    /// The node of field `name`: a struct's property or a map's value.
    pub fn field(&self, name: &str) -> Node<'a> {
        for l in &self.layers {
            if let Some(p) = l
                .get("properties")
                .and_then(Value::as_object)
                .and_then(|p| p.get(name))
            {
                return Node::new(self.schema, Some(p));
            }
        }
        match self.first("additionalProperties") {
            Some(v @ Value::Object(_)) => Node::new(self.schema, Some(v)),
            _ => Node::unknown(self.schema),
        }
    }

    /// The node of a list's items.
    pub fn items(&self) -> Node<'a> {
        Node::new(self.schema, self.first("items"))
    }

    /// The patch strategies of this (list or map) field, e.g.
    /// `["merge", "retainKeys"]`.
    pub fn patch_strategies(&self) -> Vec<&'a str> {
        self.extension("x-kubernetes-patch-strategy")
            .map(|s| {
                s.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The merge key of a list of objects patched with strategy `merge`.
    pub fn patch_merge_key(&self) -> Option<&'a str> {
        self.extension("x-kubernetes-patch-merge-key")
    }
}

fn collect_layers<'a>(
    schema: &'a KindSchema,
    v: &'a Value,
    out: &mut Vec<&'a Value>,
    depth: usize,
) {
    if depth > MAX_DEPTH || !v.is_object() {
        return;
    }
    out.push(v);
    if let Some(target) = v
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| schema.lookup(r))
    {
        collect_layers(schema, target, out, depth + 1);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(list) = v.get(key).and_then(Value::as_array) {
            for s in list.iter().filter(|s| !is_null_schema(s)) {
                collect_layers(schema, s, out, depth + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> KindSchema {
        let defs = json!({
            "Meta": {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-patch-strategy": "merge"},
            }},
            "Thing": {"type": "object", "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}], "default": {}},
                "spec": {"anyOf": [{"$ref": "#/components/schemas/Spec"}, {"nullable": true, "enum": [null]}]},
            }},
            "Spec": {"type": "object"},
        });
        KindSchema::from_parts(
            json!({"$ref": "#/components/schemas/Thing"}),
            defs.as_object().cloned().unwrap_or_default(),
        )
    }

    #[test]
    fn walks_refs_all_of_and_nullable_any_of() {
        let s = sample();
        let root = s.root();
        assert_eq!(root.shape(), Shape::Struct);
        let meta = root.field("metadata");
        assert_eq!(meta.shape(), Shape::Struct);
        assert_eq!(meta.field("labels").shape(), Shape::Map);
        assert_eq!(meta.field("labels").field("x").shape(), Shape::Scalar);
        assert_eq!(meta.field("finalizers").patch_strategies(), vec!["merge"]);
        assert_eq!(root.field("spec").shape(), Shape::Struct);
        assert!(!root.field("spec").has_property("x"));
        assert_eq!(root.field("nope").shape(), Shape::Any);
    }
}
