//! Binary values of core `v1` kinds (`ConfigMap.binaryData`, `Secret.data`):
//! Go `[]byte`, which JSON carries as standard base64.

use std::collections::BTreeMap;

use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bytes serialized as a standard base64 string (`format: byte`), like a Go
/// `[]byte` field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ByteString(pub Vec<u8>);

impl Serialize for ByteString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for ByteString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Option::<String>::deserialize(d)?.unwrap_or_default();
        // Go's decoder ignores embedded line breaks.
        let cleaned: String = s.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        base64::engine::general_purpose::STANDARD
            .decode(cleaned.as_bytes())
            .map(ByteString)
            .map_err(|e| serde::de::Error::custom(format!("illegal base64 data: {e}")))
    }
}

impl JsonSchema for ByteString {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteString".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "format": "byte"})
    }
}

/// Deserializes a map that may be JSON `null` (Go decodes it as a nil map).
pub(crate) fn nullable_map<'de, D, V>(d: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    Ok(Option::<BTreeMap<String, V>>::deserialize(d)?.unwrap_or_default())
}

/// Kubernetes' `MaxSecretSize`: the total size limit of a ConfigMap's or a
/// Secret's data (1 MiB).
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

const CONFIG_MAP_KEY_MAX: usize = 253;

/// Errors of a ConfigMap or Secret key (`IsConfigMapKey`):
/// `[-._a-zA-Z0-9]+`, at most 253 characters, not `.`, `..` or `..*`.
pub fn is_config_map_key(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > CONFIG_MAP_KEY_MAX {
        errs.push(format!(
            "must be no more than {CONFIG_MAP_KEY_MAX} characters"
        ));
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
    {
        errs.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".into());
    }
    if key == "." {
        errs.push("must not be '.'".into());
    } else if key == ".." {
        errs.push("must not be '..'".into());
    } else if key.starts_with("..") {
        errs.push("must not start with '..'".into());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert!(is_config_map_key("a.b-c_D9").is_empty());
        assert_eq!(is_config_map_key(".").len(), 1);
        assert_eq!(is_config_map_key("..x").len(), 1);
        assert_eq!(is_config_map_key("a/b").len(), 1);
        assert_eq!(is_config_map_key("").len(), 1);
        assert_eq!(is_config_map_key(&"a".repeat(254)).len(), 1);
    }

    #[test]
    fn base64_round_trip() {
        let b = ByteString(b"hi\0".to_vec());
        let v = serde_json::to_value(&b).unwrap_or_default();
        assert_eq!(v, serde_json::json!("aGkA"));
        let back: Result<ByteString, _> = serde_json::from_value(v);
        assert_eq!(back.ok(), Some(b));
        assert!(serde_json::from_value::<ByteString>(serde_json::json!("!!")).is_err());
    }
}
