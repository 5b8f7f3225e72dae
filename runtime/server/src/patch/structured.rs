//! Structured merge: the schema-driven walks of server-side apply
//! (structured-merge-diff's `typed` package) over JSON objects.
//!
//! The schema is the kind's published OpenAPI schema ([`Node`]):
//! `x-kubernetes-list-type` (`atomic`, `set`, `map` with
//! `x-kubernetes-list-map-keys`), `x-kubernetes-map-type` (`granular`,
//! `atomic`), and — where no list type is declared — the strategic merge
//! extensions (`x-kubernetes-patch-strategy: merge` with a merge key is an
//! associative list, without one a set), as kube-openapi's conversion
//! derives them. Where the schema says nothing (no schema, or
//! `x-kubernetes-preserve-unknown-fields`), objects are granular maps and
//! lists are atomic.
//!
//! The walks: [`validate`] (is an applied configuration well-formed for the
//! schema), [`to_field_set`] (the fields a configuration sets),
//! [`compare`] (what changed between two objects), [`merge`] (a
//! configuration over a live object), [`remove_items`] and
//! [`ensure_named_fields_are_members`].

use serde_json::{Map, Value};

use super::fieldpath::{OrdValue, Path, PathElement, Set};
use super::schema::{Node, Shape};

/// How a list's items relate.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// What the schema says of one position.
enum Ty<'a> {
    Scalar,
    /// A struct (`fields`) or a map; `atomic` when it is replaced whole.
    Map {
        atomic: bool,
    },
    List {
        items: Node<'a>,
        list_type: ListType,
    },
    /// Nothing is known: deduced from the value.
    Untyped,
}

fn ty<'a>(node: &Node<'a>) -> Ty<'a> {
    match node.shape() {
        Shape::Any => Ty::Untyped,
        Shape::Scalar => Ty::Scalar,
        Shape::Struct | Shape::Map => Ty::Map {
            atomic: node.extension("x-kubernetes-map-type") == Some("atomic"),
        },
        Shape::List => {
            let list_type = match node.extension("x-kubernetes-list-type") {
                Some("atomic") => ListType::Atomic,
                Some("set") => ListType::Set,
                Some("map") => ListType::Map(
                    node.extension_value("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|keys| {
                            keys.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default(),
                ),
                _ if node.patch_strategies().contains(&"merge") => match node.patch_merge_key() {
                    Some(key) => ListType::Map(vec![key.to_string()]),
                    None => ListType::Set,
                },
                _ => ListType::Atomic,
            };
            Ty::List {
                items: node.items(),
                list_type,
            }
        }
    }
}

/// The type of a position, with an untyped position deduced from the
/// value found there (objects are granular maps, lists atomic).
fn resolve<'a>(node: &Node<'a>, sample: Option<&Value>) -> Ty<'a> {
    match ty(node) {
        Ty::Untyped => match sample {
            Some(Value::Object(_)) => Ty::Map { atomic: false },
            Some(Value::Array(_)) => Ty::List {
                items: Node::unknown_like(node),
                list_type: ListType::Atomic,
            },
            _ => Ty::Scalar,
        },
        t => t,
    }
}

/// The schema of field `name` of a map or struct (unknown for a struct's
/// undeclared field).
fn child<'a>(node: &Node<'a>, name: &str) -> Node<'a> {
    node.field(name)
}

/// The path element of a list item, or why there is none.
fn item_element(
    list_type: &ListType,
    items: &Node<'_>,
    item: &Value,
    index: usize,
) -> Result<PathElement, String> {
    match list_type {
        ListType::Atomic => Ok(PathElement::Index(index)),
        ListType::Set => Ok(PathElement::Value(OrdValue(item.clone()))),
        ListType::Map(keys) => {
            let Value::Object(obj) = item else {
                return Err(format!(
                    "element {index}: associative list with keys may not have non-map elements"
                ));
            };
            let mut fields = Vec::with_capacity(keys.len());
            for key in keys {
                match obj.get(key) {
                    Some(v) => fields.push((key.clone(), OrdValue(v.clone()))),
                    None => match items.field(key).extension_value("default") {
                        Some(d) => fields.push((key.clone(), OrdValue(d.clone()))),
                        None => {
                            return Err(format!(
                                "element {index}: associative list with keys has an element that omits key field {key:?} (and doesn't have default value)"
                            ));
                        }
                    },
                }
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(fields))
        }
    }
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// Checks that `value` is well-formed for the schema: types as declared,
/// no undeclared struct fields, associative list items with their keys
/// and without duplicates. Errors are `<path>: <message>`, as
/// structured-merge-diff words them.
pub fn validate(value: &Value, node: &Node<'_>) -> Vec<String> {
    let mut errs = Vec::new();
    let mut path = Path::default();
    validate_at(value, node, &mut path, &mut errs);
    errs
}

fn validate_at(value: &Value, node: &Node<'_>, path: &mut Path, errs: &mut Vec<String>) {
    if value.is_null() {
        return;
    }
    match resolve(node, Some(value)) {
        Ty::Untyped => {}
        Ty::Scalar => {
            let expected = node.extension("type").unwrap_or_default();
            // `IntOrString` is published as a string of format
            // `int-or-string`; structured-merge-diff types it as an
            // untyped scalar.
            let int_or_string = node.extension("format") == Some("int-or-string");
            let fits = match expected {
                _ if int_or_string => value.is_string() || value.is_i64() || value.is_u64(),
                "string" => value.is_string(),
                "integer" => value.is_i64() || value.is_u64(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                _ => !(value.is_object() || value.is_array()),
            };
            if !fits {
                let expected = match expected {
                    "string" | "boolean" => expected,
                    "integer" | "number" => "numeric",
                    _ => "scalar",
                };
                errs.push(format!(
                    "{path}: expected {expected}, got {}",
                    kind_name(value)
                ));
            }
        }
        Ty::Map { .. } => {
            let Value::Object(map) = value else {
                errs.push(format!("{path}: expected map, got {}", kind_name(value)));
                return;
            };
            let is_struct = node.shape() == Shape::Struct;
            let root = path.0.is_empty();
            for (k, v) in map {
                // Every object has its type meta, whether its schema
                // lists it or not.
                if root && (k == "apiVersion" || k == "kind") {
                    continue;
                }
                path.0.push(PathElement::Field(k.clone()));
                if is_struct && !node.has_property(k) {
                    errs.push(format!("{path}: field not declared in schema"));
                } else {
                    validate_at(v, &child(node, k), path, errs);
                }
                path.0.pop();
            }
        }
        Ty::List { items, list_type } => {
            let Value::Array(list) = value else {
                errs.push(format!("{path}: expected list, got {}", kind_name(value)));
                return;
            };
            if list_type == ListType::Atomic {
                return;
            }
            let mut seen = std::collections::BTreeSet::new();
            for (i, item) in list.iter().enumerate() {
                match item_element(&list_type, &items, item, i) {
                    Ok(pe) => {
                        if !seen.insert(pe.clone()) {
                            errs.push(format!("{path}: duplicate entries for key {pe}"));
                            continue;
                        }
                        path.0.push(pe);
                        validate_at(item, &items, path, errs);
                        path.0.pop();
                    }
                    Err(e) => errs.push(format!("{path}: {e}")),
                }
            }
        }
    }
}

/// The fields a configuration sets: every scalar, atomic list or map,
/// associative list item, map entry, and empty or null value.
pub fn to_field_set(value: &Value, node: &Node<'_>) -> Set {
    let mut set = Set::new();
    let mut path = Path::default();
    field_set_at(value, node, &mut path, &mut set);
    set
}

fn field_set_at(value: &Value, node: &Node<'_>, path: &mut Path, set: &mut Set) {
    match resolve(node, Some(value)) {
        Ty::Scalar | Ty::Untyped => set.insert(&path.0),
        Ty::Map { atomic } => {
            if atomic {
                set.insert(&path.0);
                return;
            }
            let Value::Object(map) = value else {
                return;
            };
            let is_struct = node.shape() == Shape::Struct;
            for (k, v) in map {
                path.0.push(PathElement::Field(k.clone()));
                field_set_at(v, &child(node, k), path, set);
                let empty_map = matches!(v, Value::Object(m) if m.is_empty());
                if v.is_null() || empty_map || !is_struct || !node.has_property(k) {
                    set.insert(&path.0);
                }
                path.0.pop();
            }
        }
        Ty::List { items, list_type } => {
            if list_type == ListType::Atomic {
                set.insert(&path.0);
                return;
            }
            let Value::Array(list) = value else {
                return;
            };
            for (i, item) in list.iter().enumerate() {
                let Ok(pe) = item_element(&list_type, &items, item, i) else {
                    continue;
                };
                path.0.push(pe);
                field_set_at(item, &items, path, set);
                set.insert(&path.0);
                path.0.pop();
            }
        }
    }
}

/// What changed from `lhs` to `rhs`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Paths only in `lhs`.
    pub removed: Set,
    /// Leaves whose value changed.
    pub modified: Set,
    /// Paths only in `rhs`.
    pub added: Set,
}

impl Comparison {
    /// Whether nothing changed.
    pub fn is_same(&self) -> bool {
        self.removed.is_empty() && self.modified.is_empty() && self.added.is_empty()
    }

    /// The comparison without `fields` and everything below them.
    pub fn exclude(&self, fields: &Set) -> Comparison {
        Comparison {
            removed: self.removed.recursive_difference(fields),
            modified: self.modified.recursive_difference(fields),
            added: self.added.recursive_difference(fields),
        }
    }
}

/// Compares two versions of an object.
pub fn compare(lhs: &Value, rhs: &Value, node: &Node<'_>) -> Comparison {
    let mut c = Comparison::default();
    let mut path = Path::default();
    compare_at(Some(lhs), Some(rhs), node, &mut path, &mut c);
    c
}

fn is_empty_container(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(l)) => l.is_empty(),
        _ => false,
    }
}

fn compare_leaf(lhs: Option<&Value>, rhs: Option<&Value>, path: &Path, c: &mut Comparison) {
    match (lhs, rhs) {
        (None, Some(_)) => c.added.insert(&path.0),
        (Some(_), None) => c.removed.insert(&path.0),
        (Some(l), Some(r)) if l != r => c.modified.insert(&path.0),
        _ => {}
    }
}

fn compare_at(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    node: &Node<'_>,
    path: &mut Path,
    c: &mut Comparison,
) {
    let sample = rhs.or(lhs);
    let leaf = match resolve(node, sample) {
        Ty::Scalar | Ty::Untyped => true,
        Ty::Map { atomic } => {
            let both_empty = is_empty_container(lhs) && is_empty_container(rhs);
            if atomic || both_empty || !sample.is_some_and(Value::is_object) {
                true
            } else {
                let empty = Map::new();
                let l = lhs.and_then(Value::as_object).unwrap_or(&empty);
                let r = rhs.and_then(Value::as_object).unwrap_or(&empty);
                for (k, lv) in l {
                    path.0.push(PathElement::Field(k.clone()));
                    compare_at(Some(lv), r.get(k), &child(node, k), path, c);
                    path.0.pop();
                }
                for (k, rv) in r {
                    if !l.contains_key(k) {
                        path.0.push(PathElement::Field(k.clone()));
                        compare_at(None, Some(rv), &child(node, k), path, c);
                        path.0.pop();
                    }
                }
                false
            }
        }
        Ty::List { items, list_type } => {
            let both_empty = is_empty_container(lhs) && is_empty_container(rhs);
            if list_type == ListType::Atomic || both_empty || !sample.is_some_and(Value::is_array) {
                true
            } else {
                compare_list(lhs, rhs, &items, &list_type, path, c);
                false
            }
        }
    };
    if leaf {
        compare_leaf(lhs, rhs, path, c);
    } else if lhs.is_none() {
        c.added.insert(&path.0);
    } else if rhs.is_none() {
        c.removed.insert(&path.0);
    }
}

/// Indexes a list's items by path element: each element with every item
/// that has it, in first-seen order.
fn index_items<'v>(
    list: Option<&'v Value>,
    items: &Node<'_>,
    list_type: &ListType,
) -> Vec<(PathElement, Vec<&'v Value>)> {
    let mut out: Vec<(PathElement, Vec<&'v Value>)> = Vec::new();
    let mut at: std::collections::BTreeMap<PathElement, usize> = Default::default();
    for (i, item) in list
        .and_then(Value::as_array)
        .map(|l| l.iter())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Ok(pe) = item_element(list_type, items, item, i) else {
            continue;
        };
        match at.get(&pe) {
            Some(&j) => out[j].1.push(item),
            None => {
                at.insert(pe.clone(), out.len());
                out.push((pe, vec![item]));
            }
        }
    }
    out
}

fn compare_list(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    items: &Node<'_>,
    list_type: &ListType,
    path: &mut Path,
    c: &mut Comparison,
) {
    let left = index_items(lhs, items, list_type);
    let right = index_items(rhs, items, list_type);
    fn find<'v>(side: &[(PathElement, Vec<&'v Value>)], pe: &PathElement) -> Vec<&'v Value> {
        side.iter()
            .find(|(p, _)| p == pe)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }
    let mut all: Vec<PathElement> = left.iter().map(|(pe, _)| pe.clone()).collect();
    for (pe, _) in &right {
        if !left.iter().any(|(p, _)| p == pe) {
            all.push(pe.clone());
        }
    }
    for pe in all {
        let l = find(&left, &pe);
        let r = find(&right, &pe);
        path.0.push(pe);
        match (l.len(), r.len()) {
            (0, 0) => {}
            (a, b) if a <= 1 && b <= 1 => {
                compare_at(l.first().copied(), r.first().copied(), items, path, c);
            }
            (a, b) if a >= 2 && b >= 2 => {
                if l != r {
                    c.modified.insert(&path.0);
                }
            }
            (a, _) if a >= 2 => {
                if let Some(first) = r.first() {
                    compare_at(None, Some(first), items, path, c);
                }
                c.removed.insert(&path.0);
            }
            _ => {
                if let Some(first) = l.first() {
                    compare_at(Some(first), None, items, path, c);
                }
                c.added.insert(&path.0);
            }
        }
        path.0.pop();
    }
}

/// The paths (`.spec.items`, `.a[0].b`) of the atomic lists, maps and
/// structs `value` sets, as upstream's MutatingAdmissionPolicy
/// `findAtomics` finds them: a struct's declared fields are followed, a
/// map's values are not (an apply configuration may not set an atomic
/// value: it would drop the fields it leaves out).
pub fn atomic_paths(value: &Value, node: &Node<'_>) -> Vec<String> {
    let mut out = Vec::new();
    atomics_at(value, node, &mut String::new(), &mut out);
    out
}

fn atomics_at(value: &Value, node: &Node<'_>, path: &mut String, out: &mut Vec<String>) {
    match (resolve(node, Some(value)), value) {
        (Ty::Map { atomic }, Value::Object(fields)) => {
            if atomic {
                out.push(path.clone());
            }
            for (k, v) in fields {
                if node.has_property(k) {
                    let len = path.len();
                    path.push('.');
                    path.push_str(k);
                    atomics_at(v, &child(node, k), path, out);
                    path.truncate(len);
                }
            }
        }
        (Ty::List { items, list_type }, Value::Array(elements)) => {
            if list_type == ListType::Atomic {
                out.push(path.clone());
            }
            for (i, v) in elements.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                atomics_at(v, &items, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// Merges a configuration (`rhs`) over a live object (`lhs`): leaves from
/// `rhs` win, maps merge key by key, associative lists item by item (in
/// the configuration's order where both have an item), atomic values are
/// replaced whole.
pub fn merge(lhs: &Value, rhs: &Value, node: &Node<'_>) -> Value {
    merge_at(Some(lhs), Some(rhs), node).unwrap_or(Value::Null)
}

fn merge_at(lhs: Option<&Value>, rhs: Option<&Value>, node: &Node<'_>) -> Option<Value> {
    let sample = rhs.or(lhs);
    // Two empty (or null) sides merge as a leaf: the empty/null
    // distinction of the configuration is kept.
    let both_empty = is_empty_container(lhs) && is_empty_container(rhs);
    match resolve(node, sample) {
        Ty::Map { atomic }
            if !atomic
                && !both_empty
                && lhs.is_none_or(Value::is_object)
                && rhs.is_none_or(Value::is_object) =>
        {
            let empty = Map::new();
            let l = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let r = rhs.and_then(Value::as_object).unwrap_or(&empty);
            let mut out = Map::new();
            for (k, lv) in l {
                if let Some(v) = merge_at(Some(lv), r.get(k), &child(node, k)) {
                    out.insert(k.clone(), v);
                }
            }
            for (k, rv) in r {
                if !l.contains_key(k)
                    && let Some(v) = merge_at(None, Some(rv), &child(node, k))
                {
                    out.insert(k.clone(), v);
                }
            }
            Some(Value::Object(out))
        }
        Ty::List { items, list_type }
            if list_type != ListType::Atomic
                && !both_empty
                && lhs.is_none_or(Value::is_array)
                && rhs.is_none_or(Value::is_array) =>
        {
            Some(Value::Array(merge_list(lhs, rhs, &items, &list_type)))
        }
        _ => rhs.or(lhs).cloned(),
    }
}

fn merge_list(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    items: &Node<'_>,
    list_type: &ListType,
) -> Vec<Value> {
    let elements = |list: Option<&Value>| -> Vec<(PathElement, Value)> {
        list.and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .enumerate()
                    .filter_map(|(i, item)| {
                        item_element(list_type, items, item, i)
                            .ok()
                            .map(|pe| (pe, item.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let left = elements(lhs);
    let right = elements(rhs);
    let in_right = |pe: &PathElement| right.iter().find(|(p, _)| p == pe).map(|(_, v)| v);
    let in_left = |pe: &PathElement| left.iter().find(|(p, _)| p == pe).map(|(_, v)| v);
    // Items both sides have, in the configuration's order.
    let mut shared: std::collections::VecDeque<&PathElement> = right
        .iter()
        .map(|(pe, _)| pe)
        .filter(|pe| in_left(pe).is_some())
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged: std::collections::BTreeSet<PathElement> = Default::default();
    let mut out = Vec::with_capacity(left.len().max(right.len()));
    let (mut li, mut ri) = (0, 0);
    while li < left.len() || ri < right.len() {
        if li < left.len() && ri < right.len() {
            let pe = &left[li].0;
            if *pe == right[ri].0 {
                merged.insert(pe.clone());
                if let Some(v) = merge_at(in_left(pe), in_right(pe), items) {
                    out.push(v);
                }
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if in_right(pe).is_some() && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < left.len() {
            let pe = &left[li].0;
            if in_right(pe).is_none() {
                if let Some(v) = merge_at(Some(&left[li].1), None, items) {
                    out.push(v);
                }
                li += 1;
                continue;
            } else if merged.contains(pe) {
                li += 1;
            }
        }
        if ri < right.len() {
            let pe = &right[ri].0;
            merged.insert(pe.clone());
            if let Some(v) = merge_at(in_left(pe), in_right(pe), items) {
                out.push(v);
            }
            ri += 1;
            if next_shared.is_some_and(|n| n == pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}

/// `value` without the paths in `set` (a path removes everything below
/// it). Containers emptied by the removal stay, empty.
pub fn remove_items(value: &Value, set: &Set, node: &Node<'_>) -> Value {
    match (resolve(node, Some(value)), value) {
        (Ty::Map { atomic: false }, Value::Object(map)) => {
            let mut out = Map::new();
            for (k, v) in map {
                let pe = PathElement::Field(k.clone());
                if set.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                match set.with_prefix(&pe) {
                    Some(sub) => {
                        out.insert(k.clone(), remove_items(v, sub, &child(node, k)));
                    }
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            Value::Object(out)
        }
        (Ty::List { items, list_type }, Value::Array(list)) if list_type != ListType::Atomic => {
            let mut out = Vec::with_capacity(list.len());
            for (i, item) in list.iter().enumerate() {
                let Ok(pe) = item_element(&list_type, &items, item, i) else {
                    out.push(item.clone());
                    continue;
                };
                if set.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                match set.with_prefix(&pe) {
                    Some(sub) => out.push(remove_items(item, sub, &items)),
                    None => out.push(item.clone()),
                }
            }
            Value::Array(out)
        }
        _ => value.clone(),
    }
}

/// `set` with every struct field that has paths below it made a member
/// too (so removing the set removes those fields whole).
pub fn ensure_named_fields_are_members(set: &Set, node: &Node<'_>) -> Set {
    let mut out = Set::new();
    ensure_at(set, node, &mut Path::default(), &mut out);
    out
}

fn ensure_at(set: &Set, node: &Node<'_>, path: &mut Path, out: &mut Set) {
    for pe in set.members() {
        path.0.push(pe.clone());
        out.insert(&path.0);
        path.0.pop();
    }
    let is_struct = node.shape() == Shape::Struct;
    for (pe, sub) in set.children() {
        path.0.push(pe.clone());
        let sub_node = match pe {
            PathElement::Field(name) => {
                if is_struct && node.has_property(name) {
                    out.insert(&path.0);
                }
                child(node, name)
            }
            _ => node.items(),
        };
        ensure_at(sub, &sub_node, path, out);
        path.0.pop();
    }
}
