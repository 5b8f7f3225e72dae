//! The internal (hub) version of wardle: v1beta1-shaped, never served.
//! Validation runs here, so error paths use the internal/v1beta1 field
//! names even for v1alpha1 requests (`spec.flunderReference`).

use apiforge_runtime::Resource;
use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::resource::{Resource as _, Strategy};
use apiforge_runtime::validation::{ErrorList, FieldError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The reference types of a Flunder: `Flunder` or `Fischer`.
pub const REFERENCE_TYPES: [&str; 2] = ["Flunder", "Fischer"];

/// The internal Flunder (`wardle.example.com/__internal`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(
    group = "wardle.example.com",
    version = "__internal",
    namespaced,
    openapi_name = "io.k8s.sample-apiserver.pkg.apis.wardle.Flunder"
)]
pub struct Flunder {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state.
    #[serde(default)]
    pub spec: FlunderSpec,
    /// The observed state.
    #[serde(default)]
    pub status: FlunderStatus,
}

/// The internal Flunder spec.
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

/// The internal Flunder status (no fields).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlunderStatus {}

impl Strategy for Flunder {
    /// The sample apiserver's `ValidateFlunder`: the first matching rule of
    /// the reference checks, plus the independent reference-type check,
    /// then the generated (declarative) part.
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
        errs.extend(self.generated_validate());
        errs
    }

    /// The sample apiserver does not validate the spec on update.
    fn validate_update(&self, _old: &Self) -> ErrorList {
        ErrorList::default()
    }
}
