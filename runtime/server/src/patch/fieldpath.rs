//! Field paths and sets of them, as server-side apply tracks ownership:
//! the data model of structured-merge-diff's `fieldpath` package, and its
//! `FieldsV1` JSON encoding (`f:<name>`, `k:{<key fields>}`, `v:<value>`,
//! `i:<index>`, and `.` for "this node itself").
//!
//! A [`Set`] is a tree: at each level, `members` are the paths that end
//! there and `children` the sets under each element.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// A JSON value with a total order (for set members and keys): by type
/// (null, bool, number, string, list, map), then by content.
#[derive(Clone, Debug)]
pub struct OrdValue(pub Value);

fn type_rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
    }
}

fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i.cmp(&j),
            _ => {
                let (f, g) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                f.partial_cmp(&g).unwrap_or(Ordering::Equal)
            }
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (i, j) in x.iter().zip(y) {
                let c = compare_values(i, j);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut xs: Vec<_> = x.iter().collect();
            let mut ys: Vec<_> = y.iter().collect();
            xs.sort_by(|p, q| p.0.cmp(q.0));
            ys.sort_by(|p, q| p.0.cmp(q.0));
            for ((k1, v1), (k2, v2)) in xs.iter().zip(&ys) {
                let c = k1.cmp(k2).then_with(|| compare_values(v1, v2));
                if c != Ordering::Equal {
                    return c;
                }
            }
            xs.len().cmp(&ys.len())
        }
        _ => type_rank(a).cmp(&type_rank(b)),
    }
}

impl PartialEq for OrdValue {
    fn eq(&self, other: &Self) -> bool {
        compare_values(&self.0, &other.0) == Ordering::Equal
    }
}
impl Eq for OrdValue {}
impl PartialOrd for OrdValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdValue {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(&self.0, &other.0)
    }
}

/// One step of a path: a struct field or map key, the key fields of an
/// associative list's item, a set item's value, or a list index.
/// Ordered as structured-merge-diff orders them: fields, keys, values,
/// indexes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathElement {
    /// `f:<name>`, printed `.<name>`.
    Field(String),
    /// `k:{"name":"x"}`, printed `[name="x"]`; fields sorted by name.
    Key(Vec<(String, OrdValue)>),
    /// `v:<json>`, printed `[=<json>]`.
    Value(OrdValue),
    /// `i:<n>`, printed `[<n>]`.
    Index(usize),
}

impl PathElement {
    /// A field element.
    pub fn field(name: &str) -> Self {
        PathElement::Field(name.to_string())
    }

    /// The `FieldsV1` key of this element.
    pub fn serialize(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let mut map = Map::new();
                for (name, value) in fields {
                    map.insert(name.clone(), value.0.clone());
                }
                format!("k:{}", Value::Object(map))
            }
            PathElement::Value(v) => format!("v:{}", v.0),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key.
    pub fn deserialize(s: &str) -> Result<Self, String> {
        let (tag, rest) = s
            .split_once(':')
            .filter(|(tag, _)| tag.len() == 1)
            .ok_or_else(|| format!("missing colon: {s}"))?;
        match tag {
            "f" => Ok(PathElement::Field(rest.to_string())),
            "v" => serde_json::from_str(rest)
                .map(|v| PathElement::Value(OrdValue(v)))
                .map_err(|e| e.to_string()),
            "k" => match serde_json::from_str(rest).map_err(|e| e.to_string())? {
                Value::Object(map) => {
                    let mut fields: Vec<(String, OrdValue)> =
                        map.into_iter().map(|(k, v)| (k, OrdValue(v))).collect();
                    fields.sort_by(|a, b| a.0.cmp(&b.0));
                    Ok(PathElement::Key(fields))
                }
                _ => Err(format!("key is not an object: {s}")),
            },
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|e: std::num::ParseIntError| e.to_string()),
            _ => Err("unknown path element type".into()),
        }
    }
}

/// Go's `%v` of a value inside a path (`value.ToString`): JSON.
fn value_text(v: &Value) -> String {
    v.to_string()
}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}={}", value_text(&v.0)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", value_text(&v.0)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the object's root.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    /// A path of field names (`Path::fields(&["metadata", "name"])`).
    pub fn fields(names: &[&str]) -> Self {
        Path(names.iter().map(|n| PathElement::field(n)).collect())
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in &self.0 {
            write!(f, "{pe}")?;
        }
        Ok(())
    }
}

/// A set of paths, as a tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Self {
        Set::default()
    }

    /// A set of the given paths.
    pub fn from_paths(paths: impl IntoIterator<Item = Path>) -> Self {
        let mut s = Set::new();
        for p in paths {
            s.insert(&p.0);
        }
        s
    }

    /// Whether no path is in the set.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// Adds a path (the empty path is ignored).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether the path is in the set.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// The set under `pe` (paths with that first element, without it).
    pub fn with_prefix(&self, pe: &PathElement) -> Option<&Set> {
        self.children.get(pe).filter(|c| !c.is_empty())
    }

    /// The paths that end at this level.
    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The sets below this level.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter()
    }

    fn prune(mut self) -> Self {
        self.children.retain(|_, c| !c.is_empty());
        self
    }

    /// Paths in either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out.prune()
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, c)| {
                other
                    .children
                    .get(pe)
                    .map(|o| (pe.clone(), c.intersection(o)))
            })
            .collect();
        Set { members, children }.prune()
    }

    /// Paths in `self` but not in `other`.
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .map(|(pe, c)| match other.children.get(pe) {
                Some(o) => (pe.clone(), c.difference(o)),
                None => (pe.clone(), c.clone()),
            })
            .collect();
        Set { members, children }.prune()
    }

    /// Paths in `self` that are neither in `other` nor below a member of
    /// `other`.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(pe, _)| !other.members.contains(pe))
            .map(|(pe, c)| match other.children.get(pe) {
                Some(o) => (pe.clone(), c.recursive_difference(o)),
                None => (pe.clone(), c.clone()),
            })
            .collect();
        Set { members, children }.prune()
    }

    /// Calls `f` with every path: this level's members first, then each
    /// child's paths, in order.
    pub fn iterate(&self, f: &mut impl FnMut(&Path)) {
        let mut prefix = Path::default();
        self.iterate_prefix(&mut prefix, f);
    }

    fn iterate_prefix(&self, prefix: &mut Path, f: &mut impl FnMut(&Path)) {
        for pe in &self.members {
            prefix.0.push(pe.clone());
            f(prefix);
            prefix.0.pop();
        }
        for (pe, child) in &self.children {
            prefix.0.push(pe.clone());
            child.iterate_prefix(prefix, f);
            prefix.0.pop();
        }
    }

    /// Every path, in iteration order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.iterate(&mut |p| out.push(p.clone()));
        out
    }

    /// The `FieldsV1` encoding: `{"f:spec":{".":{},"f:x":{}}}`.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.emit(false))
    }

    fn emit(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self && !(self.members.is_empty() && self.children.is_empty()) {
            out.insert(".".into(), Value::Object(Map::new()));
        }
        let mut keys: BTreeSet<&PathElement> = self.members.iter().collect();
        keys.extend(self.children.keys());
        for pe in keys {
            let member = self.members.contains(pe);
            let value = match self.children.get(pe) {
                Some(child) => Value::Object(child.emit(member)),
                None => Value::Object(Map::new()),
            };
            out.insert(pe.serialize(), value);
        }
        out
    }

    /// Parses the `FieldsV1` encoding.
    pub fn from_fields_v1(v: &Value) -> Result<Set, String> {
        let Value::Object(map) = v else {
            return Err("expected an object".into());
        };
        let mut out = Set::new();
        for (key, child) in map {
            if key == "." {
                continue;
            }
            let pe = PathElement::deserialize(key)?;
            let Value::Object(inner) = child else {
                return Err(format!("expected an object at {key}"));
            };
            if inner.is_empty() {
                out.members.insert(pe);
                continue;
            }
            if inner.contains_key(".") {
                out.members.insert(pe.clone());
            }
            let sub = Set::from_fields_v1(child)?;
            if !sub.is_empty() {
                out.children.insert(pe, sub);
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut result = Ok(());
        self.iterate(&mut |p| {
            if !first {
                result = result.and_then(|()| writeln!(f));
            }
            first = false;
            result = result.and_then(|()| write!(f, "{p}"));
        });
        result
    }
}
