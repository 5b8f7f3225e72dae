//! Strict field checks (`fieldValidation=Strict|Warn`): unknown fields
//! (not in the kind's schema) and duplicate JSON keys, reported in
//! kube-apiserver's words (`unknown field "spec.foo"`,
//! `duplicate field "metadata.name"`) in document order.
//!
//! `serde_json::Value` keeps only the last of duplicate keys, so the check
//! runs as a visitor over the raw bytes; YAML bodies (which cannot carry
//! duplicates past the parser) are checked on their parsed value.

use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::schema::{Node, Shape};

/// The `fieldValidation` query parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Unknown and duplicate fields are dropped silently.
    Ignore,
    /// Each problem becomes a `Warning` header (the default).
    #[default]
    Warn,
    /// Any problem fails the request.
    Strict,
}

impl FieldValidation {
    /// The values kube-apiserver accepts, as its error message lists them.
    pub const SUPPORTED: [&'static str; 4] = ["", "Ignore", "Strict", "Warn"];

    /// Parses the query value (`None` or empty = `Warn`).
    pub fn parse(value: Option<&str>) -> Option<Self> {
        match value.unwrap_or_default() {
            "" | "Warn" => Some(FieldValidation::Warn),
            "Ignore" => Some(FieldValidation::Ignore),
            "Strict" => Some(FieldValidation::Strict),
            _ => None,
        }
    }
}

/// Checks a JSON document: duplicate keys anywhere, unknown fields where
/// `node` knows the structure. `root` allows `apiVersion` and `kind` at the
/// top level. Fails only when the bytes are not JSON.
pub fn check_json(bytes: &[u8], node: &Node<'_>, root: bool) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Walk {
        node: node.clone(),
        path: String::new(),
        root,
        out: &mut out,
    }
    .deserialize(&mut de)
    .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(out)
}

/// Checks a parsed value for unknown fields.
pub fn check_value(value: &Value, node: &Node<'_>, root: bool) -> Vec<String> {
    let mut out = Vec::new();
    let _ = Walk {
        node: node.clone(),
        path: String::new(),
        root,
        out: &mut out,
    }
    .deserialize(value);
    out
}

struct Walk<'o, 'a> {
    node: Node<'a>,
    path: String,
    root: bool,
    out: &'o mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let shape = self.node.shape();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = join(&self.path, &key);
            if !seen.insert(key.clone()) {
                self.out.push(format!("duplicate field {path:?}"));
            }
            let child = match shape {
                Shape::Struct => {
                    let type_meta = self.root && (key == "apiVersion" || key == "kind");
                    if !type_meta && !self.node.has_property(&key) {
                        self.out.push(format!("unknown field {path:?}"));
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    self.node.field(&key)
                }
                Shape::Map => self.node.field(&key),
                _ => Node::unknown_like(&self.node),
            };
            map.next_value_seed(Walk {
                node: child,
                path,
                root: false,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let items = if self.node.shape() == Shape::List {
            self.node.items()
        } else {
            Node::unknown_like(&self.node)
        };
        let mut i = 0usize;
        loop {
            let seed = Walk {
                node: items.clone(),
                path: format!("{}[{i}]", self.path),
                root: false,
                out: &mut *self.out,
            };
            if seq.next_element_seed(seed)?.is_none() {
                break;
            }
            i += 1;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_i128<E>(self, _: i128) -> Result<(), E> {
        Ok(())
    }
    fn visit_u128<E>(self, _: u128) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}
