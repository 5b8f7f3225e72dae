//! `wardle.example.com/v1beta1`.

use apiforge_runtime::Resource;
use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::resource::Strategy;
use apiforge_runtime::validation::{ErrorList, FieldError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Flunder is an example namespaced resource of the sample apiserver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(group = "wardle.example.com", version = "v1beta1", namespaced)]
pub struct Flunder {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state of the Flunder.
    #[serde(default)]
    pub spec: FlunderSpec,
    /// The observed state of the Flunder.
    #[serde(default)]
    pub status: FlunderStatus,
}

/// The reference type of a Flunder: `Flunder` or `Fischer`.
pub const REFERENCE_TYPES: [&str; 2] = ["Flunder", "Fischer"];

/// The desired state of a Flunder.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlunderSpec {
    /// A name of another flunder, mutually exclusive to the FischerReference.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub flunder_reference: String,
    /// A name of a fischer, mutually exclusive to the FlunderReference.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fischer_reference: String,
    /// The reference type.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reference_type: String,
}

/// The observed state of a Flunder (no fields).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlunderStatus {}

impl Strategy for Flunder {
    /// The sample apiserver's `ValidateFlunder`: the first matching rule of
    /// the reference checks, plus the independent reference-type check.
    fn validate_create(&self) -> ErrorList {
        let s = &self.spec;
        let mut errs = ErrorList::default();
        if !s.flunder_reference.is_empty() && !s.fischer_reference.is_empty() {
            errs.push(FieldError::invalid(
                "spec.fischerReference",
                s.fischer_reference.clone(),
                "cannot be set with flunderReference at the same time",
            ));
        } else if !s.flunder_reference.is_empty() && s.reference_type != "Flunder" {
            errs.push(FieldError::invalid(
                "spec.flunderReference",
                s.flunder_reference.clone(),
                "cannot be set if referenceType is not Flunder",
            ));
        } else if !s.fischer_reference.is_empty() && s.reference_type != "Fischer" {
            errs.push(FieldError::invalid(
                "spec.fischerReference",
                s.fischer_reference.clone(),
                "cannot be set if referenceType is not Fischer",
            ));
        } else if s.fischer_reference.is_empty() && s.reference_type == "Fischer" {
            errs.push(FieldError::invalid(
                "spec.fischerReference",
                "",
                "cannot be empty if referenceType is Fischer",
            ));
        } else if s.flunder_reference.is_empty() && s.reference_type == "Flunder" {
            errs.push(FieldError::invalid(
                "spec.flunderReference",
                "",
                "cannot be empty if referenceType is Flunder",
            ));
        }
        if !s.reference_type.is_empty() && !REFERENCE_TYPES.contains(&s.reference_type.as_str()) {
            errs.push(FieldError::invalid(
                "spec.referenceType",
                s.reference_type.clone(),
                "must be Flunder or Fischer",
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flunder(flunder_ref: &str, fischer_ref: &str, ty: &str) -> Flunder {
        Flunder {
            spec: FlunderSpec {
                flunder_reference: flunder_ref.into(),
                fischer_reference: fischer_ref.into(),
                reference_type: ty.into(),
            },
            ..Default::default()
        }
    }

    #[test]
    fn validation_matches_the_sample_apiserver() {
        assert!(flunder("", "", "").validate_create().is_empty());
        assert!(flunder("a", "", "Flunder").validate_create().is_empty());
        let e = flunder("a", "b", "Flunder").validate_create();
        assert_eq!(e.0[0].field, "spec.fischerReference");
        let e = flunder("", "", "Flunder").validate_create();
        assert_eq!(
            e.0[0].to_string(),
            "spec.flunderReference: Invalid value: \"\": cannot be empty if referenceType is Flunder"
        );
        let e = flunder("", "", "Foo").validate_create();
        assert_eq!(e.0[0].field, "spec.referenceType");
    }

    #[test]
    fn empty_spec_and_status_serialize_as_objects() {
        let v = serde_json::to_value(Flunder::default()).unwrap();
        assert_eq!(v["spec"], serde_json::json!({}));
        assert_eq!(v["status"], serde_json::json!({}));
    }
}
