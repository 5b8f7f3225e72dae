//! Pruning of unknown fields (upstream `schema/pruning`).

use serde_json::Value;

use super::schema::{Additional, Node};

/// Prunes `v` below `node`, recording removed fields as `.a.b[0].c` in
/// `out`. `resource` is set at the root and at embedded resources, whose
/// `apiVersion`, `kind` and `metadata` are kept.
pub(crate) fn prune(
    node: &Node,
    v: &mut Value,
    resource: bool,
    path: &mut String,
    out: &mut Vec<String>,
) {
    match v {
        Value::Object(map) => {
            let keep_meta = resource || node.embedded;
            let mut removed = Vec::new();
            for (k, item) in map.iter_mut() {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                if keep_meta && (k == "apiVersion" || k == "kind") {
                    // kept whatever the schema says
                } else if keep_meta && k == "metadata" {
                    // ObjectMeta is pruned by the caller, not by the schema.
                } else if let Some(prop) = node.properties.get(k) {
                    prune(prop, item, false, path, out);
                } else {
                    match &node.additional {
                        Additional::Schema(add) => prune(add, item, false, path, out),
                        Additional::Bool(true) => {}
                        _ if node.preserve_unknown => {}
                        _ => {
                            removed.push(k.clone());
                            out.push(path.clone());
                        }
                    }
                }
                path.truncate(len);
            }
            for k in removed {
                map.remove(&k);
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = node.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    prune(item_node, item, false, path, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}
