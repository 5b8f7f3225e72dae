//! Core `v1` Secret: `stringData` is write-only (folded into `data` when a
//! body is decoded, never stored or returned), `type` defaults to `Opaque`
//! and is immutable, and Kubernetes' per-type and immutability rules apply.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bytes::{ByteString, MAX_DATA_SIZE, is_config_map_key, nullable_map};
use super::config_map::IMMUTABLE_WHEN_SET;
use crate::Resource;
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::validation::{self, ErrorList, FieldError, FieldPath};

/// The default secret type.
pub const SECRET_TYPE_OPAQUE: &str = "Opaque";

/// Secret holds secret data of a certain type. The total bytes of the
/// values in the Data field must be less than MaxSecretSize bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "",
    version = "v1",
    namespaced,
    openapi_name = "io.k8s.api.core.v1.Secret"
)]
pub struct Secret {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Data contains the secret data. Each key must consist of alphanumeric
    /// characters, '-', '_' or '.'. The serialized form of the secret data
    /// is a base64 encoded string, representing the arbitrary (possibly
    /// non-string) data value here.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "nullable_map"
    )]
    pub data: BTreeMap<String, ByteString>,
    /// stringData allows specifying non-binary secret data in string form.
    /// It is provided as a write-only input field for convenience. All keys
    /// and values are merged into the data field on write, overwriting any
    /// existing values. The stringData field is never output when reading
    /// from the API.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "nullable_map"
    )]
    pub string_data: BTreeMap<String, String>,
    /// Used to facilitate programmatic handling of secret data.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// Immutable, if set to true, ensures that data stored in the Secret
    /// cannot be updated (only object metadata can be modified).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
}

impl Secret {
    /// `ValidateSecret`: keys, total size, the keys each type requires.
    fn validate_fields(&self) -> ErrorList {
        let mut errs = ErrorList::default();
        if !self.metadata.name.is_empty() {
            for msg in validation::is_dns1123_subdomain(&self.metadata.name) {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    self.metadata.name.clone(),
                    msg,
                ));
            }
        }
        let data = FieldPath::new("data");
        let mut total = 0usize;
        for (key, value) in &self.data {
            for msg in is_config_map_key(key) {
                errs.push(FieldError::invalid(
                    data.key(key).as_str(),
                    key.clone(),
                    msg,
                ));
            }
            total += value.0.len();
        }
        if total > MAX_DATA_SIZE {
            errs.push(FieldError::too_long("data", MAX_DATA_SIZE));
        }
        let required = |errs: &mut ErrorList, key: &str| {
            errs.push(FieldError::required(data.key(key).as_str(), ""));
        };
        let json_key = |errs: &mut ErrorList, key: &str| match self.data.get(key) {
            None => required(errs, key),
            Some(v) => {
                if let Err(e) =
                    serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&v.0)
                {
                    errs.push(FieldError::invalid(
                        data.key(key).as_str(),
                        "<secret contents redacted>",
                        e.to_string(),
                    ));
                }
            }
        };
        match self.type_.as_str() {
            "kubernetes.io/service-account-token" => {
                let key = "kubernetes.io/service-account.name";
                if self
                    .metadata
                    .annotations
                    .get(key)
                    .is_none_or(String::is_empty)
                {
                    errs.push(FieldError::required(
                        FieldPath::new("metadata")
                            .child("annotations")
                            .key(key)
                            .as_str(),
                        "",
                    ));
                }
            }
            "kubernetes.io/dockercfg" => json_key(&mut errs, ".dockercfg"),
            "kubernetes.io/dockerconfigjson" => json_key(&mut errs, ".dockerconfigjson"),
            "kubernetes.io/basic-auth"
                if !self.data.contains_key("username") && !self.data.contains_key("password") =>
            {
                required(&mut errs, "username");
                required(&mut errs, "password");
            }
            "kubernetes.io/ssh-auth"
                if self
                    .data
                    .get("ssh-privatekey")
                    .is_none_or(|v| v.0.is_empty()) =>
            {
                required(&mut errs, "ssh-privatekey");
            }
            "kubernetes.io/tls" => {
                for key in ["tls.crt", "tls.key"] {
                    if !self.data.contains_key(key) {
                        required(&mut errs, key);
                    }
                }
            }
            _ => {}
        }
        errs
    }
}

impl Strategy for Secret {
    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&crate::builtin::printers::SECRET)
    }

    /// Defaults `type` to `Opaque` and folds the write-only `stringData`
    /// into `data` (string values win), as the v1 conversion does.
    fn default_fields(&mut self) {
        if self.type_.is_empty() {
            self.type_ = SECRET_TYPE_OPAQUE.into();
        }
        for (k, v) in std::mem::take(&mut self.string_data) {
            self.data.insert(k, ByteString(v.into_bytes()));
        }
    }

    fn validate_create(&self) -> ErrorList {
        self.validate_fields()
    }

    fn validate_update(&self, old: &Self) -> ErrorList {
        let mut errs = ErrorList::default();
        if self.type_ != old.type_ {
            errs.push(FieldError::invalid(
                "type",
                self.type_.clone(),
                "field is immutable",
            ));
        }
        if old.immutable == Some(true) {
            if self.immutable != Some(true) {
                errs.push(FieldError::forbidden("immutable", IMMUTABLE_WHEN_SET));
            }
            if self.data != old.data {
                errs.push(FieldError::forbidden("data", IMMUTABLE_WHEN_SET));
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
    use serde_json::json;

    fn decoded(v: serde_json::Value) -> Secret {
        let mut s: Secret = serde_json::from_value(v).unwrap_or_default();
        s.default_fields();
        s
    }

    #[test]
    fn string_data_is_folded_and_never_output() {
        let s = decoded(
            json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eA=="}, "stringData": {"b": "y", "c": "z"}}),
        );
        assert_eq!(s.type_, "Opaque");
        assert!(s.string_data.is_empty());
        let v = serde_json::to_value(&s).unwrap_or_default();
        assert_eq!(v["data"], json!({"a": "eA==", "b": "eQ==", "c": "eg=="}));
        assert!(v.get("stringData").is_none());
        assert_eq!(v["type"], "Opaque");
    }

    #[test]
    fn type_rules() {
        let tls = decoded(
            json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "stringData": {"tls.crt": "x"}}),
        );
        let errs = tls.validate_create();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs.0[0].to_string(), "data[tls.key]: Required value");
        let mut changed = tls.clone();
        changed.type_ = "Opaque".into();
        assert!(
            changed
                .validate_update(&tls)
                .iter()
                .any(|e| e.to_string() == "type: Invalid value: \"Opaque\": field is immutable")
        );
    }

    #[test]
    fn immutable() {
        let old = decoded(
            json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}, "immutable": true}),
        );
        let new = decoded(
            json!({"metadata": {"name": "s"}, "stringData": {"a": "c"}, "immutable": true}),
        );
        let msgs: Vec<String> = new
            .validate_update(&old)
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            msgs,
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
    }
}
