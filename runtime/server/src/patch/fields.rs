//! Strict field checks (`fieldValidation=Strict|Warn`): unknown fields
//! (not in the kind's schema) and duplicate JSON keys, reported in
//! kube-apiserver's words (`unknown field "spec.foo"`,
//! `duplicate field "metadata.name"`) in document order.
//!
//! `serde_json::Value` keeps only the last of duplicate keys, so the check
//! runs as a visitor over the raw bytes; YAML bodies (which cannot carry
//! duplicates past the parser) are checked on their parsed value.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::{self, Write as _};

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
    let mut path = String::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Walk {
        at: At::Ref(node),
        path: &mut path,
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
    let mut path = String::new();
    let _ = Walk {
        at: At::Ref(node),
        path: &mut path,
        root,
        out: &mut out,
    }
    .deserialize(value);
    out
}

/// The schema position of the value a [`Walk`] visits. A field's node is
/// worked out only when its value is an object or a list: scalars, most of
/// a document, need none.
enum At<'n, 'a> {
    /// This node.
    Ref(&'n Node<'a>),
    /// Field `key` of this node.
    Field(&'n Node<'a>, &'n str),
    /// Somewhere nothing is known about, in this node's schema.
    Unknown(&'n Node<'a>),
}

impl<'a> At<'_, 'a> {
    fn node(&self) -> Node<'a> {
        match *self {
            At::Ref(node) => node.clone(),
            At::Field(node, key) => node.field(key),
            At::Unknown(node) => Node::unknown_like(node),
        }
    }
}

struct Walk<'o, 'n, 'a> {
    at: At<'n, 'a>,
    /// The path of the visited value (`spec.items[2]`): grown on the way
    /// down, cut back on the way up.
    path: &'o mut String,
    root: bool,
    out: &'o mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_, '_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// A map key, borrowed from the input when it has no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// The keys of one object seen so far: a list while short, a set beyond.
#[derive(Default)]
struct Seen<'de> {
    few: Vec<Cow<'de, str>>,
    many: HashSet<Cow<'de, str>>,
}

impl<'de> Seen<'de> {
    const FEW: usize = 32;

    fn contains(&self, key: &str) -> bool {
        if self.many.is_empty() {
            self.few.iter().any(|k| k == key)
        } else {
            self.many.contains(key)
        }
    }

    fn insert(&mut self, key: Cow<'de, str>) {
        if !self.many.is_empty() {
            self.many.insert(key);
        } else if self.few.len() < Self::FEW {
            self.few.push(key);
        } else {
            self.many.extend(self.few.drain(..));
            self.many.insert(key);
        }
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let node = self.at.node();
        let shape = node.shape();
        let mut seen = Seen::default();
        while let Some(key) = map.next_key_seed(Key)? {
            let len = self.path.len();
            if len > 0 {
                self.path.push('.');
            }
            self.path.push_str(&key);
            if seen.contains(&key) {
                self.out.push(format!("duplicate field {:?}", self.path));
            }
            let at = match shape {
                Shape::Struct => {
                    let type_meta = self.root && (key == "apiVersion" || key == "kind");
                    if !type_meta && !node.has_property(&key) {
                        self.out.push(format!("unknown field {:?}", self.path));
                        map.next_value::<IgnoredAny>()?;
                        self.path.truncate(len);
                        seen.insert(key);
                        continue;
                    }
                    At::Field(&node, &key)
                }
                Shape::Map => At::Field(&node, &key),
                _ => At::Unknown(&node),
            };
            map.next_value_seed(Walk {
                at,
                path: &mut *self.path,
                root: false,
                out: &mut *self.out,
            })?;
            self.path.truncate(len);
            seen.insert(key);
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let node = self.at.node();
        let items = if node.shape() == Shape::List {
            node.items()
        } else {
            Node::unknown_like(&node)
        };
        let mut i = 0usize;
        loop {
            let len = self.path.len();
            let _ = write!(self.path, "[{i}]");
            let seed = Walk {
                at: At::Ref(&items),
                path: &mut *self.path,
                root: false,
                out: &mut *self.out,
            };
            let more = seq.next_element_seed(seed)?.is_some();
            self.path.truncate(len);
            if !more {
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
