//! `wardle.example.com/v1beta1`: field-for-field the internal version
//! (derived conversion), no defaulting.

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::internal;

pub use super::internal::REFERENCE_TYPES;

/// A Flunder is an example namespaced resource of the sample apiserver.
#[derive(
    Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource, Convert,
)]
#[resource(
    group = "wardle.example.com",
    version = "v1beta1",
    namespaced,
    openapi_name = "io.k8s.sample-apiserver.pkg.apis.wardle.v1beta1.Flunder",
    default_strategy
)]
#[convert(hub = internal::Flunder)]
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

/// The desired state of a Flunder.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Convert)]
#[serde(rename_all = "camelCase")]
#[convert(hub = internal::FlunderSpec)]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Convert)]
#[convert(hub = internal::FlunderStatus)]
pub struct FlunderStatus {}

#[cfg(test)]
mod tests {
    use apiforge_runtime::resource::Strategy;
    use apiforge_runtime::scheme::Convert;

    use super::*;

    fn flunder(flunder_ref: &str, fischer_ref: &str, ty: &str) -> internal::Flunder {
        Flunder {
            spec: FlunderSpec {
                flunder_reference: flunder_ref.into(),
                fischer_reference: fischer_ref.into(),
                reference_type: ty.into(),
            },
            ..Default::default()
        }
        .into_hub()
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
        assert_eq!(
            e.0[0].to_string(),
            "spec.referenceType: Invalid value: \"Foo\": must be Flunder or Fischer"
        );
        let e = flunder("a", "", "Fischer").validate_create();
        assert_eq!(
            e.0[0].to_string(),
            "spec.flunderReference: Invalid value: \"a\": cannot be set if referenceType is not Flunder"
        );
        assert!(
            flunder("", "", "Foo")
                .validate_update(&flunder("", "", ""))
                .is_empty()
        );
    }

    #[test]
    fn empty_spec_and_status_serialize_as_objects() {
        let v = serde_json::to_value(Flunder::default()).unwrap_or_default();
        assert_eq!(v["spec"], serde_json::json!({}));
        assert_eq!(v["status"], serde_json::json!({}));
    }

    #[test]
    fn conversion_is_field_for_field() {
        let v = Flunder {
            spec: FlunderSpec {
                flunder_reference: "a".into(),
                fischer_reference: "b".into(),
                reference_type: "X".into(),
            },
            ..Default::default()
        };
        let hub: internal::Flunder = v.clone().into_hub();
        assert_eq!(hub.spec.flunder_reference, "a");
        assert_eq!(hub.spec.fischer_reference, "b");
        assert_eq!(hub.spec.reference_type, "X");
        assert_eq!(Flunder::from_hub(&hub), v);
    }
}
