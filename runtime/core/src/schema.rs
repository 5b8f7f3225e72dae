//! Publication of declarative rules into `schemars` schemas: the second use
//! of each `#[validate(...)]` declaration.
//!
//! Generated [`Validate::publish_schema`](crate::validation::Validate::publish_schema)
//! implementations find their type's definition in the generator and merge
//! the rules into it: `minimum`, `maxLength`, `pattern`, `format`, `enum`,
//! `x-kubernetes-list-type`, `x-kubernetes-validations`, `default`,
//! `x-kubernetes-patch-strategy`, ... on the field's property, `required`
//! on the object, and struct-level CEL rules on the object itself.
//!
//! [`patch_fields`] reads the strategic-merge-patch metadata back from a
//! published schema, for the REST layer.

use std::cell::RefCell;

use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value};

thread_local! {
    static PUBLISHING: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Marks a definition as being published, so that recursive types stop.
/// Dropping it ends the publication.
pub struct Publishing {
    name: String,
}

impl Publishing {
    /// The definition's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Publishing {
    fn drop(&mut self) {
        PUBLISHING.with(|p| {
            let mut p = p.borrow_mut();
            if let Some(pos) = p.iter().rposition(|n| n == &self.name) {
                p.remove(pos);
            }
        });
    }
}

/// The definition name a `$ref` schema (from `subschema_for`) points at.
pub fn definition_name(reference: &Schema) -> Option<String> {
    let r = reference.as_object()?.get("$ref")?.as_str()?;
    Some(r.rsplit('/').next()?.to_string())
}

/// Starts publishing into the definition `reference` points at; `None` if
/// the schema is inlined (nothing to patch) or already being published.
pub fn begin(reference: &Schema) -> Option<Publishing> {
    let name = definition_name(reference)?;
    PUBLISHING.with(|p| {
        let mut p = p.borrow_mut();
        if p.contains(&name) {
            None
        } else {
            p.push(name.clone());
            Some(Publishing { name })
        }
    })
}

/// The definition being published, as a JSON object.
pub fn definition<'g>(
    generator: &'g mut SchemaGenerator,
    publishing: &Publishing,
) -> Option<&'g mut Map<String, Value>> {
    generator
        .definitions_mut()
        .get_mut(&publishing.name)?
        .as_object_mut()
}

/// Merges `rules` (an object) into the property `field` of `def`. A
/// `$ref` property is wrapped in `allOf` first, as Kubernetes publishes
/// references with siblings.
pub fn merge_field(def: &mut Map<String, Value>, field: &str, rules: Value) {
    let Value::Object(rules) = rules else { return };
    if rules.is_empty() {
        return;
    }
    let props = def
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(props) = props.as_object_mut() else {
        return;
    };
    let prop = props
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(prop) = prop.as_object_mut() else {
        return;
    };
    if let Some(reference) = prop.remove("$ref") {
        let mut wrapped = Map::new();
        wrapped.insert("$ref".into(), reference);
        prop.insert("allOf".into(), Value::Array(vec![Value::Object(wrapped)]));
    }
    merge(prop, rules);
}

/// Merges `rules` into the object schema itself (struct-level rules).
pub fn merge_object(def: &mut Map<String, Value>, rules: Value) {
    if let Value::Object(rules) = rules {
        merge(def, rules);
    }
}

fn merge(target: &mut Map<String, Value>, rules: Map<String, Value>) {
    for (k, v) in rules {
        match (target.get_mut(&k), v) {
            (Some(Value::Array(existing)), Value::Array(new))
                if k == "x-kubernetes-validations" =>
            {
                for rule in new {
                    if !existing.contains(&rule) {
                        existing.push(rule);
                    }
                }
            }
            (_, v) => {
                target.insert(k, v);
            }
        }
    }
}

/// Adds (`required = true`) or removes `field` from the object's
/// `required` list.
pub fn set_required(def: &mut Map<String, Value>, field: &str, required: bool) {
    let list = def
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = list {
        let present = list.iter().any(|v| v.as_str() == Some(field));
        if required && !present {
            list.push(Value::String(field.into()));
        } else if !required {
            list.retain(|v| v.as_str() != Some(field));
        }
        if list.is_empty() {
            def.remove("required");
        }
    }
}

/// Strategic-merge-patch metadata of one field, read from a schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchField {
    /// Dotted JSON path of the field from the object root, e.g.
    /// `spec.ports` (list items are not indexed).
    pub path: String,
    /// `x-kubernetes-patch-strategy`, e.g. `merge` or `retainKeys,merge`.
    pub strategy: String,
    /// `x-kubernetes-patch-merge-key`, e.g. `name` (empty if none).
    pub merge_key: String,
}

/// Every field with a patch strategy under `root`, following `$ref`s into
/// `definitions` (keyed by name), `allOf`/`anyOf`/`oneOf`, and array
/// `items`.
pub fn patch_fields(root: &Value, definitions: &Map<String, Value>) -> Vec<PatchField> {
    let mut out = Vec::new();
    walk(root, definitions, "", &mut out, &mut Vec::new());
    out
}

fn resolve<'a>(
    schema: &'a Value,
    definitions: &'a Map<String, Value>,
) -> (&'a Value, Option<String>) {
    if let Some(name) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        && let Some(def) = definitions.get(name)
    {
        return (def, Some(name.to_string()));
    }
    (schema, None)
}

fn walk(
    schema: &Value,
    definitions: &Map<String, Value>,
    path: &str,
    out: &mut Vec<PatchField>,
    seen: &mut Vec<String>,
) {
    let (schema, name) = resolve(schema, definitions);
    if let Some(name) = &name {
        if seen.contains(name) {
            return;
        }
        seen.push(name.clone());
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(all) = schema.get(key).and_then(Value::as_array) {
            for s in all {
                walk(s, definitions, path, out, seen);
            }
        }
    }
    if let Some(items) = schema.get("items") {
        walk(items, definitions, path, out, seen);
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (field, prop) in props {
            let child = if path.is_empty() {
                field.clone()
            } else {
                format!("{path}.{field}")
            };
            if let Some(strategy) = prop
                .get("x-kubernetes-patch-strategy")
                .and_then(Value::as_str)
            {
                out.push(PatchField {
                    path: child.clone(),
                    strategy: strategy.to_string(),
                    merge_key: prop
                        .get("x-kubernetes-patch-merge-key")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                });
            }
            walk(prop, definitions, &child, out, seen);
        }
    }
    if name.is_some() {
        seen.pop();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_wraps_refs_and_appends_rules() {
        let mut def = json!({"properties": {"spec": {"$ref": "#/components/schemas/Spec"}}})
            .as_object()
            .cloned()
            .unwrap_or_default();
        merge_field(
            &mut def,
            "spec",
            json!({"x-kubernetes-validations": [{"rule": "a"}]}),
        );
        merge_field(
            &mut def,
            "spec",
            json!({"x-kubernetes-validations": [{"rule": "a"}, {"rule": "b"}]}),
        );
        assert_eq!(
            Value::Object(def.clone()),
            json!({"properties": {"spec": {"allOf": [{"$ref": "#/components/schemas/Spec"}], "x-kubernetes-validations": [{"rule": "a"}, {"rule": "b"}]}}})
        );
        set_required(&mut def, "spec", true);
        set_required(&mut def, "spec", true);
        assert_eq!(def["required"], json!(["spec"]));
        set_required(&mut def, "spec", false);
        assert!(!def.contains_key("required"));
    }

    #[test]
    fn patch_fields_follow_refs() {
        let defs = json!({
            "Spec": {"properties": {"ports": {"type": "array", "items": {"$ref": "#/components/schemas/Port"}, "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"}}},
            "Port": {"properties": {"name": {"type": "string"}}},
        });
        let root =
            json!({"properties": {"spec": {"allOf": [{"$ref": "#/components/schemas/Spec"}]}}});
        let fields = patch_fields(&root, defs.as_object().unwrap_or(&Map::new()));
        assert_eq!(
            fields,
            vec![PatchField {
                path: "spec.ports".into(),
                strategy: "merge".into(),
                merge_key: "name".into()
            }]
        );
    }
}
