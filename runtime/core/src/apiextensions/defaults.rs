//! Structural defaulting (upstream `schema/defaulting`): nulls that a
//! non-nullable field without default cannot hold are dropped, then
//! `default`s are applied to absent fields and to nulls of non-nullable
//! fields, in objects, list items and map values.

use serde_json::Value;

use super::schema::Node;

fn non_nullable_null(v: &Value, node: &Node) -> bool {
    v.is_null() && !node.nullable
}

/// upstream `PruneNonNullableNullsWithoutDefaults`.
pub(crate) fn drop_nulls(node: &Node, v: &mut Value) {
    match v {
        Value::Object(map) => {
            let mut drop = Vec::new();
            for (k, item) in map.iter_mut() {
                let child = node.properties.get(k).or_else(|| node.additional.schema());
                let Some(child) = child else {
                    continue;
                };
                if non_nullable_null(item, child) && child.default.is_none() {
                    drop.push(k.clone());
                } else {
                    drop_nulls(child, item);
                }
            }
            for k in drop {
                map.remove(&k);
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = node.items.as_deref() {
                for item in items {
                    drop_nulls(item_node, item);
                }
            }
        }
        _ => {}
    }
}

/// upstream `Default`.
pub(crate) fn apply(node: &Node, v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, prop) in &node.properties {
                let Some(def) = &prop.default else {
                    continue;
                };
                match map.get(k) {
                    Some(item) if !non_nullable_null(item, prop) => {}
                    _ => {
                        map.insert(k.clone(), def.clone());
                    }
                }
            }
            for (k, item) in map.iter_mut() {
                if let Some(prop) = node.properties.get(k) {
                    apply(prop, item);
                } else if let Some(add) = node.additional.schema() {
                    if non_nullable_null(item, add)
                        && let Some(def) = &add.default
                    {
                        *item = def.clone();
                    }
                    apply(add, item);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = node.items.as_deref() {
                for item in items {
                    if non_nullable_null(item, item_node)
                        && let Some(def) = &item_node.default
                    {
                        *item = def.clone();
                    }
                    apply(item_node, item);
                }
            }
        }
        _ => {}
    }
}
