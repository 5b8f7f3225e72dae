//! Pruning of unknown fields (upstream `schema/pruning`).

use serde_json::Value;

use super::schema::{Additional, Node};

/// The fields a resource keeps whatever its schema says.
fn is_meta(k: &str) -> bool {
    matches!(k, "apiVersion" | "kind" | "metadata")
}

/// The recorded path of a key below `path`: `spec`, `spec.foo`,
/// `spec.items[0].bar`.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The schema of an object's values that no property names: `None` for
/// `additionalProperties: true` (upstream prunes below it as below no
/// schema), `Some(None)` when unset.
fn additional(node: &Node) -> Option<Option<&Node>> {
    match &node.additional {
        Additional::Schema(s) => Some(Some(s)),
        Additional::Bool(true) => Some(None),
        _ => None,
    }
}

/// Prunes `v` below `node` (`None`: no schema, everything in objects goes),
/// recording removed fields in `out`. `resource` marks the root, which,
/// like embedded resources, keeps `apiVersion`, `kind` and `metadata`.
pub(crate) fn prune(
    node: Option<&Node>,
    v: &mut Value,
    resource: bool,
    path: &str,
    out: &mut Vec<String>,
) {
    if let Some(n) = node
        && n.preserve_unknown
    {
        return skip(n, v, resource, path, out);
    }
    match v {
        Value::Object(map) => {
            let Some(n) = node else {
                for k in map.keys() {
                    out.push(join(path, k));
                }
                map.clear();
                return;
            };
            let embedded = resource || n.embedded;
            let mut removed = Vec::new();
            for (k, item) in map.iter_mut() {
                if embedded && is_meta(k) {
                    continue;
                }
                if let Some(prop) = n.properties.get(k) {
                    prune(Some(prop), item, false, &join(path, k), out);
                } else if let Some(add) = additional(n) {
                    prune(add, item, false, &join(path, k), out);
                } else {
                    out.push(join(path, k));
                    removed.push(k.clone());
                }
            }
            for k in removed {
                map.remove(&k);
            }
        }
        Value::Array(items) => {
            let item_node = node.and_then(|n| n.items.as_deref());
            for (i, item) in items.iter_mut().enumerate() {
                prune(item_node, item, false, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Below `x-kubernetes-preserve-unknown-fields`: unknown fields stay, known
/// ones are pruned by their schema.
fn skip(n: &Node, v: &mut Value, resource: bool, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let embedded = resource || n.embedded;
            for (k, item) in map.iter_mut() {
                if embedded && is_meta(k) {
                    continue;
                }
                if let Some(prop) = n.properties.get(k) {
                    prune(Some(prop), item, false, &join(path, k), out);
                } else if let Some(add) = additional(n) {
                    prune(add, item, false, &join(path, k), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                prune(
                    n.items.as_deref(),
                    item,
                    false,
                    &format!("{path}[{i}]"),
                    out,
                );
            }
        }
        _ => {}
    }
}
