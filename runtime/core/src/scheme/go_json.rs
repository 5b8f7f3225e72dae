//! Decoding a JSON value into a typed object as Go's `encoding/json` does
//! with `null`: a `null` where the type expects a string, number, bool,
//! struct, map or list is the zero value (as if absent), where it expects
//! an `Option` it is `None`, and where the type holds free-form JSON (a
//! `serde_json::Value`) it stays `null`. kube-apiserver decodes bodies so,
//! so `{"metadata":{"labels":null},"spec":null}` is a valid object.

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Value};

/// Deserializes `T` from `value`, `null`s read as Go reads them.
pub fn from_value<T: de::DeserializeOwned>(value: Value) -> Result<T, serde_json::Error> {
    T::deserialize(GoValue(value))
}

/// A JSON value whose `null`s deserialize as Go's zero values.
struct GoValue(Value);

macro_rules! zero_or_delegate {
    ($($method:ident => $visit:ident($zero:expr)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                match self.0 {
                    Value::Null => visitor.$visit($zero),
                    Value::Object(map) => visit_map(map, visitor),
                    Value::Array(list) => visit_seq(list, visitor),
                    other => de::Deserializer::$method(other, visitor),
                }
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for GoValue {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(map) => visit_map(map, visitor),
            Value::Array(list) => visit_seq(list, visitor),
            other => other.deserialize_any(visitor),
        }
    }

    zero_or_delegate! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i64(0),
        deserialize_i16 => visit_i64(0),
        deserialize_i32 => visit_i64(0),
        deserialize_i64 => visit_i64(0),
        deserialize_u8 => visit_u64(0),
        deserialize_u16 => visit_u64(0),
        deserialize_u32 => visit_u64(0),
        deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f64(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_str => visit_str(""),
        deserialize_string => visit_str(""),
        deserialize_bytes => visit_bytes(&[]),
        deserialize_byte_buf => visit_bytes(&[]),
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visit_seq(Vec::new(), visitor),
            Value::Object(map) => visit_map(map, visitor),
            Value::Array(list) => visit_seq(list, visitor),
            other => other.deserialize_seq(visitor),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visit_map(Map::new(), visitor),
            Value::Object(map) => visit_map(map, visitor),
            Value::Array(list) => visit_seq(list, visitor),
            other => other.deserialize_map(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(GoValue(other)),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.0.deserialize_unit(visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    forward_to_deserialize_any! { char identifier ignored_any }
}

fn visit_map<'de, V: Visitor<'de>>(
    map: Map<String, Value>,
    visitor: V,
) -> Result<V::Value, serde_json::Error> {
    let len = map.len();
    let mut access = GoMap {
        iter: map.into_iter(),
        value: None,
    };
    let out = visitor.visit_map(&mut access)?;
    if access.iter.len() == 0 {
        Ok(out)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in map"))
    }
}

fn visit_seq<'de, V: Visitor<'de>>(
    list: Vec<Value>,
    visitor: V,
) -> Result<V::Value, serde_json::Error> {
    let len = list.len();
    let mut access = GoSeq {
        iter: list.into_iter(),
    };
    let out = visitor.visit_seq(&mut access)?;
    if access.iter.len() == 0 {
        Ok(out)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in array"))
    }
}

struct GoMap {
    iter: serde_json::map::IntoIter,
    value: Option<Value>,
}

impl<'de> MapAccess<'de> for GoMap {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        match self.iter.next() {
            Some((key, value)) => {
                self.value = Some(value);
                let key: de::value::StringDeserializer<serde_json::Error> = key.into_deserializer();
                seed.deserialize(key).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<T::Value, Self::Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(GoValue(value)),
            None => Err(de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

struct GoSeq {
    iter: std::vec::IntoIter<Value>,
}

impl<'de> SeqAccess<'de> for GoSeq {
    type Error = serde_json::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        match self.iter.next() {
            Some(value) => seed.deserialize(GoValue(value)).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::meta::ObjectMeta;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        #[serde(default)]
        name: String,
        #[serde(default)]
        count: i64,
        #[serde(default)]
        items: Vec<String>,
        #[serde(default)]
        free: Option<Value>,
        #[serde(default)]
        raw: Value,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Thing {
        #[serde(default)]
        metadata: ObjectMeta,
        #[serde(default)]
        spec: Spec,
        #[serde(default)]
        map: BTreeMap<String, String>,
    }

    // encoding/json: null unmarshals into a map, pointer or slice as nil
    // and leaves any other type unchanged (its zero value here).
    #[test]
    fn null_is_the_zero_value_of_typed_fields() {
        let t: Thing = from_value(json!({
            "metadata": {"name": "a", "labels": null, "annotations": null, "resourceVersion": null,
                         "finalizers": null, "ownerReferences": null, "generation": null},
            "spec": null,
            "map": {"k": null},
        }))
        .unwrap();
        assert_eq!(t.metadata.name, "a");
        assert!(t.metadata.labels.is_empty() && t.metadata.finalizers.is_empty());
        assert_eq!(t.spec, Spec::default());
        assert_eq!(t.map.get("k").map(String::as_str), Some(""));
    }

    #[test]
    fn free_form_json_keeps_its_nulls() {
        let t: Thing = from_value(json!({
            "spec": {"name": null, "items": ["a", null], "free": {"x": null}, "raw": [null]},
        }))
        .unwrap();
        assert_eq!(t.spec.items, ["a", ""]);
        assert_eq!(t.spec.free, Some(json!({"x": null})));
        assert_eq!(t.spec.raw, json!([null]));
    }

    #[test]
    fn type_errors_read_as_before() {
        let e = from_value::<Thing>(json!({"spec": {"count": "x"}})).unwrap_err();
        let before = serde_json::from_value::<Thing>(json!({"spec": {"count": "x"}})).unwrap_err();
        assert_eq!(e.to_string(), before.to_string());
        let e = from_value::<Thing>(json!({"spec": "x"})).unwrap_err();
        assert!(
            e.to_string().starts_with("invalid type: string \"x\""),
            "{e}"
        );
    }
}
