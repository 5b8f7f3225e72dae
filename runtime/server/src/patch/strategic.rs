//! Kubernetes strategic merge patch (`application/strategic-merge-patch+json`),
//! driven by the kind's OpenAPI schema.
//!
//! Behaviour follows apimachinery's `strategicpatch.StrategicMergeMapPatch`
//! (merging with `MergeParallelList` and `IgnoreUnmatchedNulls`):
//!
//! - maps merge recursively; `null` deletes a key;
//! - lists are replaced unless the field's `x-kubernetes-patch-strategy`
//!   contains `merge`: lists of scalars then become the union (deduplicated),
//!   lists of objects merge element-wise by `x-kubernetes-patch-merge-key`;
//! - directives: `$patch: replace | delete` on maps, `$patch: delete |
//!   replace` elements in merging lists, `$retainKeys`,
//!   `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`;
//! - element order follows `$setElementOrder`, then the patch, then the live
//!   list.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::PatchError;
use super::schema::Node;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

const ERR_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const ERR_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const ERR_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";
const ERR_LIST_OF_LISTS: &str = "lists of lists are not supported";

type Object = Map<String, Value>;
type Result<T> = std::result::Result<T, PatchError>;

/// Applies strategic merge patch `patch` to `original`; `node` is the
/// schema of the object.
pub fn apply(original: Value, patch: Value, node: &Node<'_>) -> Result<Value> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_type(&patch)
        )));
    };
    let original = match original {
        Value::Object(m) => m,
        _ => Object::new(),
    };
    merge_map(original, patch, node).map(Value::Object)
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn render(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn no_merge_key(item: &Object, key: &str) -> PatchError {
    PatchError::Internal(format!(
        "map: {} does not contain declared merge key: {key}",
        render(&Value::Object(item.clone()))
    ))
}

/// The patch strategy of a field without `retainKeys` (`""`, `merge` or
/// `replace`).
fn strategy<'a>(node: &Node<'a>) -> Result<&'a str> {
    let strategies = node.patch_strategies();
    match strategies.as_slice() {
        [] => Ok(""),
        ["retainKeys"] => Ok(""),
        [one] => Ok(one),
        ["retainKeys", other] | [other, "retainKeys"] => Ok(other),
        _ => Err(PatchError::Internal(format!(
            "unexpected patch strategy: {strategies:?}"
        ))),
    }
}

fn merge_map(mut original: Object, mut patch: Object, node: &Node<'_>) -> Result<Object> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Object::new()),
            _ => Err(PatchError::Internal(format!(
                "unknown patch type: {} in map: {}",
                directive
                    .as_str()
                    .map_or_else(|| render(directive), str::to_string),
                render(&Value::Object(patch.clone()))
            ))),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_set_element_order(&mut original, &mut patch, node)?;

    for (key, patch_value) in patch {
        let (key, delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
            (strip_directive(&key, DELETE_FROM_PRIMITIVE_LIST)?, true)
        } else {
            (key, false)
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let field = node.field(&key);
        let Some(current) = original.get_mut(&key) else {
            if !delete_list {
                let fresh = fresh_value(patch_value, &field)?;
                original.insert(key, fresh);
            }
            continue;
        };
        match (current, patch_value) {
            (Value::Object(current), Value::Object(p)) => {
                if strategy(&field)? == "replace" {
                    *current = p;
                } else {
                    *current = merge_map(std::mem::take(current), p, &field)?;
                }
            }
            (Value::Array(current), Value::Array(p)) => {
                if delete_list {
                    *current = delete_from_slice(std::mem::take(current), &p);
                } else if strategy(&field)? == "merge" {
                    *current = merge_slice(
                        std::mem::take(current),
                        p,
                        &field.items(),
                        field.patch_merge_key().unwrap_or_default(),
                    )?;
                } else {
                    *current = p;
                }
            }
            (current, p) => {
                if !delete_list {
                    *current = p;
                }
            }
        }
    }
    Ok(original)
}

/// The value a patch adds where the original has nothing: directives are
/// applied against an empty value and nulls dropped.
fn fresh_value(value: Value, node: &Node<'_>) -> Result<Value> {
    match value {
        Value::Object(p) => {
            if strategy(node)? == "replace" {
                Ok(Value::Object(p))
            } else {
                merge_map(Object::new(), p, node).map(Value::Object)
            }
        }
        Value::Array(items) => {
            if strategy(node)? == "merge" {
                merge_slice(
                    Vec::new(),
                    items,
                    &node.items(),
                    node.patch_merge_key().unwrap_or_default(),
                )
                .map(Value::Array)
            } else {
                Ok(Value::Array(items.into_iter().map(drop_nulls).collect()))
            }
        }
        other => Ok(other),
    }
}

fn drop_nulls(value: Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, drop_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(drop_nulls).collect()),
        other => other,
    }
}

/// `$deleteFromPrimitiveList/<field>` → `<field>` (and the same for
/// `$setElementOrder`).
fn strip_directive(key: &str, prefix: &str) -> Result<String> {
    match key.split_once('/') {
        Some((head, rest)) if head == prefix => Ok(rest.to_string()),
        _ => Err(PatchError::BadRequest(
            if prefix == DELETE_FROM_PRIMITIVE_LIST {
                ERR_PRIMITIVE_LIST
            } else {
                ERR_SET_ELEMENT_ORDER
            }
            .into(),
        )),
    }
}

fn apply_retain_keys(original: &mut Object, patch: &mut Object) -> Result<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::BadRequest(ERR_RETAIN_KEYS.into()));
    };
    let keep: HashSet<&str> = retain.iter().filter_map(Value::as_str).collect();
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || k.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !keep.contains(k.as_str()) {
            return Err(PatchError::BadRequest(ERR_RETAIN_KEYS.into()));
        }
    }
    original.retain(|k, _| keep.contains(k.as_str()));
    Ok(())
}

/// Processes every `$setElementOrder/<field>` of `patch`: merges the list
/// with its patch list (removed from `patch`) and orders the result.
fn merge_set_element_order(
    original: &mut Object,
    patch: &mut Object,
    node: &Node<'_>,
) -> Result<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for directive_key in keys {
        let Some(order) = patch.remove(&directive_key) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(PatchError::BadRequest(ERR_SET_ELEMENT_ORDER.into()));
        };
        let key = strip_directive(&directive_key, SET_ELEMENT_ORDER)?;
        let original_list = match original.get(&key) {
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => {
                return Err(PatchError::Internal(format!(
                    "expected a list for {key}, but received {}",
                    render(other)
                )));
            }
            None => None,
        };
        let patch_list = match patch.remove(&key) {
            Some(Value::Array(items)) => Some(items),
            Some(Value::Null) | None => None,
            Some(other) => {
                return Err(PatchError::Internal(format!(
                    "expected a list for {key}, but received {}",
                    render(&other)
                )));
            }
        };
        let field = node.field(&key);
        let strategy = strategy(&field)?;
        let merge_key = field.patch_merge_key().unwrap_or_default();
        validate_with_order(patch_list.as_deref().unwrap_or_default(), &order, merge_key)?;
        let original_items = original_list.clone().unwrap_or_default();
        let merged = match (original_list, patch_list) {
            (Some(o), None) => o,
            (None, Some(p)) => {
                if strategy == "merge" {
                    merge_slice(Vec::new(), p, &field.items(), merge_key)?
                } else {
                    p
                }
            }
            (Some(o), Some(p)) => {
                if strategy == "merge" {
                    merge_slice(o, p, &field.items(), merge_key)?
                } else {
                    p
                }
            }
            (None, None) => continue,
        };
        if merged.is_empty() {
            original.insert(key, Value::Array(merged));
            continue;
        }
        let is_map = merged.first().is_some_and(Value::is_object);
        let merge_key = if is_map { merge_key } else { "" };
        let (patch_items, server_only) = partition(merged, &order, merge_key)?;
        let ordered =
            normalize_element_order(patch_items, server_only, &order, &original_items, merge_key)?;
        original.insert(key, Value::Array(ordered));
    }
    Ok(())
}

/// The patch list's items (less deletions) must appear in the
/// `$setElementOrder` list in the same relative order.
fn validate_with_order(patch_list: &[Value], order: &[Value], merge_key: &str) -> Result<()> {
    if patch_list.is_empty() || order.is_empty() {
        return Ok(());
    }
    let non_delete: Vec<&Value> = if merge_key.is_empty() {
        patch_list.iter().collect()
    } else {
        patch_list.iter().filter(|v| !is_delete_item(v)).collect()
    };
    let (mut p, mut o) = (0, 0);
    while p < non_delete.len() && o < order.len() {
        if non_delete[p].get(DIRECTIVE).is_some() && non_delete[p].is_object() {
            p += 1;
            continue;
        }
        if merge_key_equal(non_delete[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < non_delete.len() {
        return Err(PatchError::Internal(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            render(&Value::Array(patch_list.to_vec())),
            render(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

fn is_delete_item(v: &Value) -> bool {
    v.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
}

fn merge_key_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    let key_of = |v: &Value| -> Result<Value> {
        let Value::Object(m) = v else {
            return Err(PatchError::Internal(format!(
                "expected a map, but received {}",
                render(v)
            )));
        };
        m.get(merge_key)
            .cloned()
            .ok_or_else(|| no_merge_key(m, merge_key))
    };
    Ok(key_of(left)? == key_of(right)?)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ElementKind {
    Map,
    Scalar,
}

/// The common kind of the elements of the lists: all objects or all
/// scalars of one JSON type; lists of lists are refused.
fn element_kind(lists: &[&[Value]]) -> Result<Option<ElementKind>> {
    let mut seen: Option<&'static str> = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        if v.is_array() {
            return Err(PatchError::Invalid(ERR_LIST_OF_LISTS.into()));
        }
        let t = json_type(v);
        match seen {
            None => seen = Some(t),
            Some(prev) if prev != t => {
                return Err(PatchError::Internal(format!(
                    "list element types are not identical: {}",
                    render(&Value::Array(
                        lists.iter().flat_map(|l| l.iter()).cloned().collect()
                    ))
                )));
            }
            Some(_) => {}
        }
    }
    Ok(seen.map(|t| {
        if t == "object" {
            ElementKind::Map
        } else {
            ElementKind::Scalar
        }
    }))
}

/// Merges two lists of a field with strategy `merge`.
fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    item: &Node<'_>,
    merge_key: &str,
) -> Result<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let Some(kind) = element_kind(&[&original, &patch])? else {
        return Ok(original);
    };
    match kind {
        ElementKind::Scalar => {
            let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            for v in original.iter().chain(patch.iter()) {
                if !merged.contains(v) {
                    merged.push(v.clone());
                }
            }
            let (patch_items, server_only) = partition(merged, &patch, "")?;
            normalize_element_order(patch_items, server_only, &patch, &original, "")
        }
        ElementKind::Map => {
            if merge_key.is_empty() {
                return Err(PatchError::Internal(
                    "cannot merge lists without merge key for type struct".into(),
                ));
            }
            let (original, patch) = merge_special_elements(original, patch, merge_key)?;
            let merged = merge_without_special(original.clone(), &patch, item, merge_key)?;
            let (patch_items, server_only) = partition(merged, &patch, merge_key)?;
            normalize_element_order(patch_items, server_only, &patch, &original, merge_key)
        }
    }
}

/// Applies `$patch` elements of a merging list of objects: `delete`
/// removes the matching originals, `replace` makes the patch's other
/// elements the whole list.
fn merge_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for v in patch {
        let Value::Object(m) = &v else {
            plain.push(v);
            continue;
        };
        let Some(directive) = m.get(DIRECTIVE) else {
            plain.push(v);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let key_value = m.get(merge_key).ok_or_else(|| no_merge_key(m, merge_key))?;
                for o in &original {
                    if !o.is_object() {
                        return Err(PatchError::Internal(format!(
                            "value {} is not a map",
                            render(o)
                        )));
                    }
                }
                original.retain(|o| o.get(merge_key) != Some(key_value));
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(PatchError::Internal(
                    "merging lists cannot yet be specified in the patch".into(),
                ));
            }
            _ => {
                return Err(PatchError::Internal(format!(
                    "unknown patch type: {} in map: {}",
                    directive
                        .as_str()
                        .map_or_else(|| render(directive), str::to_string),
                    render(&v)
                )));
            }
        }
    }
    if replace {
        return Ok((plain, Vec::new()));
    }
    Ok((original, plain))
}

fn merge_without_special(
    mut original: Vec<Value>,
    patch: &[Value],
    item: &Node<'_>,
    merge_key: &str,
) -> Result<Vec<Value>> {
    for v in patch {
        let Value::Object(p) = v else {
            return Err(PatchError::Internal(format!(
                "expected a map, but received {}",
                render(v)
            )));
        };
        let key_value = p.get(merge_key).ok_or_else(|| no_merge_key(p, merge_key))?;
        let mut found = None;
        for (i, o) in original.iter().enumerate() {
            let Value::Object(o) = o else {
                return Err(PatchError::Internal(format!(
                    "value for key {i} is not a map."
                )));
            };
            if o.get(merge_key) == Some(key_value) {
                found = Some(i);
                break;
            }
        }
        match found {
            Some(i) => {
                let current = match std::mem::take(&mut original[i]) {
                    Value::Object(m) => m,
                    _ => Object::new(),
                };
                original[i] = Value::Object(merge_map(current, p.clone(), item)?);
            }
            None => original.push(Value::Object(merge_map(Object::new(), p.clone(), item)?)),
        }
    }
    Ok(original)
}

fn delete_from_slice(current: Vec<Value>, to_delete: &[Value]) -> Vec<Value> {
    current
        .into_iter()
        .filter(|v| !to_delete.contains(v))
        .collect()
}

/// The identity of a list element: its merge key's value for objects, the
/// value itself for scalars.
fn identity<'v>(v: &'v Value, merge_key: &str) -> Option<&'v Value> {
    if merge_key.is_empty() {
        Some(v)
    } else {
        v.get(merge_key)
    }
}

fn position(list: &[Value], v: &Value, merge_key: &str) -> Option<usize> {
    let id = identity(v, merge_key)?;
    list.iter().position(|x| identity(x, merge_key) == Some(id))
}

/// Splits `items` into those present in `by` and the others.
fn partition(items: Vec<Value>, by: &[Value], merge_key: &str) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut present = Vec::new();
    let mut absent = Vec::new();
    for v in items {
        if !merge_key.is_empty() {
            let Value::Object(m) = &v else {
                return Err(PatchError::Internal(format!(
                    "expected a map, but received {}",
                    render(&v)
                )));
            };
            if !m.contains_key(merge_key) {
                return Err(no_merge_key(m, merge_key));
            }
        }
        if position(by, &v, merge_key).is_some() {
            present.push(v);
        } else {
            absent.push(v);
        }
    }
    Ok((present, absent))
}

/// Orders patch items by `patch_order` and server-only items by
/// `server_order`, then interleaves them keeping both relative orders
/// (apimachinery's `normalizeElementOrder`).
fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
) -> Result<Vec<Value>> {
    let patch = sort_by_order(patch, patch_order, merge_key)?;
    let server_only = sort_by_order(server_only, server_order, merge_key)?;
    Ok(merge_sorted(server_only, patch, server_order, merge_key))
}

fn sort_by_order(items: Vec<Value>, order: &[Value], merge_key: &str) -> Result<Vec<Value>> {
    let (mut keep, deletes): (Vec<Value>, Vec<Value>) = if merge_key.is_empty() {
        (items, Vec::new())
    } else {
        for v in items.iter().chain(order.iter()) {
            if let Value::Object(m) = v
                && !m.contains_key(merge_key)
            {
                return Err(no_merge_key(m, merge_key));
            }
        }
        items.into_iter().partition(|v| !is_delete_item(v))
    };
    keep.sort_by_key(|v| position(order, v, merge_key).unwrap_or(usize::MAX));
    keep.extend(deletes);
    Ok(keep)
}

/// Inserts the `left` items into `right`: a left item goes before the
/// first right item that comes after it in `server_order`.
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => out.extend(left.by_ref()),
            (None, Some(_)) => out.extend(right.by_ref()),
            (Some(l), Some(r)) => {
                let li = position(server_order, l, merge_key);
                let ri = position(server_order, r, merge_key);
                let take_left = matches!((li, ri), (Some(a), Some(b)) if a < b);
                let next = if take_left { left.next() } else { right.next() };
                out.extend(next);
            }
        }
    }
    out
}
