//! JSON read by CEL in place: a request's object bound as a CEL variable
//! without converting it first.
//!
//! Converting a whole object into the interpreter's values (a map per
//! JSON object, a copy of every string) costs more than most expressions
//! that read it, and most read a few fields. [`val`] wraps the JSON
//! instead: a JSON object or array becomes a node that is converted one
//! level at a time, when an expression first uses it — into the
//! interpreter's own map or list, whose objects and arrays are nodes in
//! turn and whose strings borrow the JSON's. A node keeps what it
//! converted, so every expression of a request that shares the variable
//! shares the work; the fields nobody reads (`managedFields`, most of
//! `status`) are never converted.
//!
//! Once converted, a node is the interpreter's map or list in every
//! respect (it hands that out wherever the interpreter asks a value for
//! its built-in form: equality, conversion to [`cel::Value`], `+`, the
//! comprehensions), so an expression sees the same values, and fails with
//! the same errors, as over the JSON converted first
//! ([`crate::cel::to_cel`]). Only `size()`, `in` with a string and the
//! zero-value test are answered from the JSON without converting it.

use std::sync::OnceLock;

use cel::ExecutionError;
use cel::common::traits::{
    Adder, Comparer, Container, Divider, Indexer, Iterable, Modder, Multiplier, Negator, Sizer,
    Subtractor, Zeroer,
};
use cel::common::types::{
    self, CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt, Type,
};
use cel::common::value::{Builtin, BuiltinRef, CowVal, Val};
use serde_json::Value;

/// `value` as a CEL value that reads it in place: scalars as the
/// interpreter's own (strings borrowed), objects and arrays as nodes
/// converted one level at a time, on first use.
pub fn val(value: &Value) -> Box<dyn Val + '_> {
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        // As `to_cel` converts numbers: `int` when it fits, else `uint`,
        // else `double`.
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Box::new(CelInt::from(i))
            } else if let Some(u) = n.as_u64() {
                Box::new(CelUInt::from(u))
            } else {
                Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN)))
            }
        }
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(_) | Value::Object(_) => Box::new(Node::new(value)),
    }
}

/// A JSON object (`map`) or array (`list`), converted on first use.
struct Node<'a> {
    json: &'a Value,
    /// The interpreter's map or list of this node's children (each made by
    /// [`val`]).
    level: OnceLock<Box<dyn Val + 'a>>,
}

impl<'a> Node<'a> {
    fn new(json: &'a Value) -> Self {
        Node {
            json,
            level: OnceLock::new(),
        }
    }

    fn len(&self) -> usize {
        match self.json {
            Value::Array(items) => items.len(),
            Value::Object(map) => map.len(),
            _ => 0,
        }
    }

    /// The node converted one level deep.
    fn level(&self) -> &(dyn Val + 'a) {
        self.level.get_or_init(|| convert(self.json)).as_ref()
    }
}

/// One level of `json`: an array as a list, an object as a map, of
/// [`val`]s.
fn convert(json: &Value) -> Box<dyn Val + '_> {
    match json {
        Value::Array(items) => Box::new(CelList::from(items.iter().map(val).collect::<Vec<_>>())),
        Value::Object(map) => Box::new(CelMap::from(
            map.iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), val(v)))
                .collect::<std::collections::HashMap<_, _>>(),
        )),
        scalar => val(scalar),
    }
}

/// The `Val` accessors a node answers with its converted level's.
macro_rules! level_accessors {
    ($($method:ident: $capability:ident),* $(,)?) => {$(
        fn $method<'b, 'v>(&'b self) -> Option<&'b (dyn $capability + 'v)>
        where
            Self: 'v,
        {
            self.level().$method()
        }
    )*};
}

impl std::fmt::Debug for Node<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("JsonNode").field(self.json).finish()
    }
}

impl Val for Node<'_> {
    level_accessors! {
        as_adder: Adder,
        as_divider: Divider,
        as_iterable: Iterable,
        as_modder: Modder,
        as_multiplier: Multiplier,
        as_negator: Negator,
        as_subtractor: Subtractor,
    }

    fn get_type(&self) -> &Type {
        match self.json {
            Value::Array(_) => &types::LIST_TYPE,
            _ => &types::MAP_TYPE,
        }
    }

    fn cel_type() -> &'static Type
    where
        Self: Sized,
    {
        // A node is a map or a list, depending on its JSON: no type fits
        // every node (and no overload is declared on the Rust type).
        &types::DYN_TYPE
    }

    fn as_comparer(&self) -> Option<&dyn Comparer> {
        self.level().as_comparer()
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        self.level().as_indexer()
    }

    fn into_indexer<'v>(self: Box<Self>) -> Option<Box<dyn Indexer + 'v>>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(self)
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.level().equals(other)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(Node::new(self.json))
    }

    /// The converted level: the interpreter recognizes its own map and
    /// list through this (`downcast_ref`, which it also uses to tell
    /// whether a value is an optional before selecting a field of it).
    fn as_builtin<'b, 'v>(&'b self) -> BuiltinRef<'b, 'v>
    where
        Self: 'v,
    {
        self.level().as_builtin()
    }

    fn into_builtin<'v>(self: Box<Self>) -> Option<Builtin<'v>>
    where
        Self: 'v,
    {
        match self.level.into_inner() {
            Some(level) => level.into_builtin(),
            None => convert(self.json).into_builtin(),
        }
    }
}

/// A node the interpreter owns indexes as its level does (it asks for
/// this only after [`Val::as_builtin`] told it the node is a built-in
/// container).
impl Indexer for Node<'_> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match self.level().as_indexer() {
            Some(indexer) => indexer.get(idx),
            None => Err(ExecutionError::NoSuchKey(
                std::sync::Arc::new(String::new()),
            )),
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl Container for Node<'_> {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        match (self.json, value.downcast_ref::<CelString>()) {
            (Value::Object(map), Some(key)) => Ok(map.contains_key(key.inner())),
            _ => match self.level().as_container() {
                Some(c) => c.contains(value),
                None => Ok(false),
            },
        }
    }
}

impl Sizer for Node<'_> {
    fn size(&self) -> CelInt {
        CelInt::from(i64::try_from(self.len()).unwrap_or(i64::MAX))
    }
}

impl Zeroer for Node<'_> {
    fn is_zero_value(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every expression gives the same value, or the same error, over the
    /// JSON read in place as over the JSON converted first and bound.
    #[test]
    fn reads_as_the_converted_json() {
        let object = json!({
            "metadata": {"name": "a", "labels": {"app": "web", "tier": ""}, "annotations": {}},
            "spec": {"replicas": 3, "ports": [80, 443], "big": 18446744073709551615u64,
                     "ratio": 1.5, "items": [{"n": "x"}, {"n": "y"}], "none": null, "on": true},
        });
        let other = json!({"app": "web", "tier": ""});
        let env = crate::cel_authorizer::admission_env();
        let mut lazy = cel::Context::with_env(env.clone());
        lazy.add_variable_as_val("object", val(&object));
        lazy.add_variable_as_val("other", val(&other));
        let mut bound = cel::Context::with_env(env.clone());
        bound.add_variable_from_value("object", crate::cel::to_cel(&object));
        bound.add_variable_from_value("other", crate::cel::to_cel(&other));
        for e in [
            "object",
            "object.metadata",
            "object.metadata.name.size() < 200 && !has(object.spec.flunderReference)",
            "has(object.metadata.labels.app) && object.metadata.labels.app == 'web'",
            "object.metadata.labels == other",
            "other == object.metadata.labels",
            "{'app': 'web', 'tier': ''} == object.metadata.labels",
            "object.metadata.labels == {'app': 'web', 'tier': ''}",
            "[80, 443] == object.spec.ports",
            "object.spec.ports == [80, 443]",
            "'app' in object.metadata.labels",
            "'nope' in object.metadata.labels",
            "443 in object.spec.ports",
            "object.spec.ports[1] + object.spec.replicas",
            "object.spec.ports[2]",
            "object.spec.ports[-1]",
            "object.spec.ports['x']",
            "object.spec.missing",
            "object.metadata.labels[1]",
            "object['spec']['items'][0].n",
            "object.spec.items.all(i, i.n.size() == 1)",
            "object.spec.items.map(i, i.n)",
            "object.metadata.labels.filter(k, k.startsWith('t'))",
            "object.spec.ports + [8080]",
            "[1] + object.spec.ports",
            "size(object.spec.items) == 2 && object.metadata.annotations.size() == 0",
            "object.spec.big == 18446744073709551615u",
            "type(object.spec.ratio)",
            "type(object.spec)",
            "type(object.spec.ports)",
            "object.spec.none == null",
            "object.spec.on",
            "object.?spec.?replicas.orValue(0)",
            "object.?spec.?gone.orValue('d')",
            "object.spec.items[1]",
            "[object.spec.items[0], object.metadata.labels]",
            "{'x': object.spec.ports}",
            "object.metadata.labels.exists(k, k == 'tier')",
            "object.spec.items.exists_one(i, i.n == 'y')",
            "object.spec.ports.size() > object.metadata.labels.size()",
            "object.spec.ports < [1]",
            "-object.spec",
            "object.spec.ports * 2",
            "optional.ofNonZeroValue(object.metadata.annotations).hasValue()",
            "optional.ofNonZeroValue(object.metadata.labels).hasValue()",
            "object.spec.items.sortBy(i, i.n)",
            "string(object.spec.ports)",
        ] {
            let p = env.compile(e).expect("compiles");
            let got = p.execute(&lazy).map_err(|e| e.to_string());
            let want = p.execute(&bound).map_err(|e| e.to_string());
            assert_eq!(got, want, "{e}");
        }
    }

    /// Reading one field converts only the nodes on its path; `size()`,
    /// `in` and the zero test convert nothing.
    #[test]
    fn converts_only_what_is_read() {
        let object = json!({"metadata": {"name": "a"}, "spec": {"x": [1, 2]}, "status": {}});
        let root = Node::new(&object);
        let metadata = root
            .as_indexer()
            .expect("indexer")
            .get(&CelString::from("metadata"))
            .expect("metadata");
        let name = metadata
            .as_indexer()
            .expect("indexer")
            .get(&CelString::from("name"))
            .expect("name");
        assert_eq!(
            name.downcast_ref::<CelString>().map(|s| s.inner()),
            Some("a")
        );
        assert!(root.level.get().is_some());
        let spec = Node::new(&object["spec"]);
        assert_eq!(spec.as_sizer().map(|s| s.size()), Some(CelInt::from(1)));
        assert_eq!(
            spec.as_container()
                .map(|c| c.contains(&CelString::from("x"))),
            Some(Ok(true))
        );
        assert_eq!(spec.as_zeroer().map(|z| z.is_zero_value()), Some(false));
        assert!(spec.level.get().is_none());
        assert!(matches!(spec.as_builtin(), BuiltinRef::Map(_)));
        assert!(spec.level.get().is_some());
    }
}
