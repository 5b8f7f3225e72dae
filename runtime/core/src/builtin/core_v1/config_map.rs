//! Core `v1` ConfigMap, with Kubernetes' validation and update rules.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bytes::{ByteString, MAX_DATA_SIZE, is_config_map_key, nullable_map};
use crate::Resource;
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::validation::{self, ErrorList, FieldError, FieldPath};

/// ConfigMap holds configuration data for pods to consume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(group = "", version = "v1", namespaced, short_names = ["cm"], openapi_name = "io.k8s.api.core.v1.ConfigMap")]
pub struct ConfigMap {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Data contains the configuration data. Each key must consist of
    /// alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte
    /// sequences must use the BinaryData field. The keys stored in Data
    /// must not overlap with the keys in the BinaryData field.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "nullable_map"
    )]
    pub data: BTreeMap<String, String>,
    /// BinaryData contains the binary data. Each key must consist of
    /// alphanumeric characters, '-', '_' or '.'. BinaryData can contain byte
    /// sequences that are not in the UTF-8 range.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "nullable_map"
    )]
    pub binary_data: BTreeMap<String, ByteString>,
    /// Immutable, if set to true, ensures that data stored in the ConfigMap
    /// cannot be updated (only object metadata can be modified).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
}

/// The immutability error Kubernetes reports for a field of an immutable
/// ConfigMap or Secret.
pub(crate) const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";

impl ConfigMap {
    /// `ValidateConfigMap`: keys, no key in both maps, total size.
    fn validate_fields(&self) -> ErrorList {
        let mut errs = ErrorList::default();
        for msg in validation::is_dns1123_subdomain(&self.metadata.name) {
            if !self.metadata.name.is_empty() {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    self.metadata.name.clone(),
                    msg,
                ));
            }
        }
        let data = FieldPath::new("data");
        let binary = FieldPath::new("binaryData");
        let mut total = 0usize;
        for (key, value) in &self.data {
            for msg in is_config_map_key(key) {
                errs.push(FieldError::invalid(
                    data.key(key).as_str(),
                    key.clone(),
                    msg,
                ));
            }
            if self.binary_data.contains_key(key) {
                errs.push(FieldError::invalid(
                    data.key(key).as_str(),
                    key.clone(),
                    "duplicate of key present in binaryData",
                ));
            }
            total += value.len();
        }
        for (key, value) in &self.binary_data {
            for msg in is_config_map_key(key) {
                errs.push(FieldError::invalid(
                    binary.key(key).as_str(),
                    key.clone(),
                    msg,
                ));
            }
            total += value.0.len();
        }
        if total > MAX_DATA_SIZE {
            errs.push(FieldError::too_long("", MAX_DATA_SIZE));
        }
        errs
    }
}

impl Strategy for ConfigMap {
    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&crate::builtin::printers::CONFIG_MAP)
    }

    fn validate_create(&self) -> ErrorList {
        self.validate_fields()
    }

    fn validate_update(&self, old: &Self) -> ErrorList {
        let mut errs = ErrorList::default();
        if old.immutable == Some(true) {
            if self.immutable != Some(true) {
                errs.push(FieldError::forbidden("immutable", IMMUTABLE_WHEN_SET));
            }
            if self.data != old.data {
                errs.push(FieldError::forbidden("data", IMMUTABLE_WHEN_SET));
            }
            if self.binary_data != old.binary_data {
                errs.push(FieldError::forbidden("binaryData", IMMUTABLE_WHEN_SET));
            }
        }
        errs.extend(self.validate_fields());
        errs
    }

    fn allow_unconditional_update() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource as _;
    use serde_json::json;

    fn cm(v: serde_json::Value) -> ConfigMap {
        serde_json::from_value(v).unwrap_or_default()
    }

    #[test]
    fn facts() {
        assert_eq!(ConfigMap::INFO.plural, "configmaps");
        assert_eq!(ConfigMap::INFO.short_names, &["cm"]);
        assert!(ConfigMap::INFO.namespaced());
        assert_eq!(ConfigMap::INFO.openapi_name, "io.k8s.api.core.v1.ConfigMap");
    }

    #[test]
    fn json_shape() {
        let c = cm(
            json!({"metadata": {"name": "c"}, "data": {"a": "b"}, "binaryData": {"x": "AAE="}, "immutable": true}),
        );
        assert_eq!(c.binary_data["x"].0, vec![0, 1]);
        let v = serde_json::to_value(&c).unwrap_or_default();
        assert_eq!(v["binaryData"], json!({"x": "AAE="}));
        assert_eq!(v["data"], json!({"a": "b"}));
        let empty = cm(json!({"metadata": {"name": "c"}, "data": null}));
        assert!(empty.data.is_empty());
    }

    #[test]
    fn validation() {
        let c = cm(
            json!({"metadata": {"name": "c"}, "data": {"a/b": "x", "k": "v"}, "binaryData": {"k": ""}}),
        );
        let errs = c.validate_create();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, vec!["data[a/b]", "data[k]"]);
        let big = ConfigMap {
            data: [("a".to_string(), "x".repeat(MAX_DATA_SIZE + 1))].into(),
            ..Default::default()
        };
        assert_eq!(
            big.validate_create().0[0].type_,
            validation::ErrorType::TooLong
        );
    }

    #[test]
    fn immutable() {
        let old = cm(json!({"metadata": {"name": "c"}, "data": {"a": "b"}, "immutable": true}));
        let mut new = old.clone();
        assert!(new.validate_update(&old).is_empty());
        new.data.insert("a".into(), "c".into());
        new.immutable = None;
        let errs = new.validate_update(&old);
        let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            msgs,
            vec![
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set"
            ]
        );
    }
}
