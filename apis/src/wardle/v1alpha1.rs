//! `wardle.example.com/v1alpha1`: the storage version. Flunder has one
//! `reference` plus an optional `referenceType` (defaulted), converted to
//! and from the internal version by hand (lossy, as upstream); Fischer is
//! cluster-scoped and only exists here.

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::resource::{Resource as _, Strategy};
use apiforge_runtime::scheme::Convert;
use apiforge_runtime::{Convert, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::internal;

/// A Flunder in v1alpha1.
#[derive(
    Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource, Convert,
)]
#[resource(
    group = "wardle.example.com",
    version = "v1alpha1",
    namespaced,
    openapi_name = "io.k8s.sample-apiserver.pkg.apis.wardle.v1alpha1.Flunder"
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

/// The desired state of a v1alpha1 Flunder.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlunderSpec {
    /// A name of another flunder or fischer, depending on the reference type.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reference: String,
    /// The reference type, defaults to "Flunder" if reference is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_type: Option<String>,
}

/// The observed state of a Flunder (no fields).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Convert)]
#[convert(hub = internal::FlunderStatus)]
pub struct FlunderStatus {}

impl Strategy for Flunder {
    /// `SetDefaults_FlunderSpec`: a reference without a type refers to a
    /// Flunder. (Then the generated defaulting, of which there is none.)
    fn default_fields(&mut self) {
        let s = &mut self.spec;
        if s.reference_type.as_deref().unwrap_or("").is_empty() && !s.reference.is_empty() {
            s.reference_type = Some("Flunder".into());
        }
        self.generated_default_fields();
    }
}

impl Convert<internal::FlunderSpec> for FlunderSpec {
    /// `reference` goes to the field its type names; any other type (or
    /// none) leaves the internal spec empty.
    fn into_hub(self) -> internal::FlunderSpec {
        match self.reference_type.as_deref() {
            Some("Flunder") => internal::FlunderSpec {
                flunder_reference: self.reference,
                reference_type: "Flunder".into(),
                ..Default::default()
            },
            Some("Fischer") => internal::FlunderSpec {
                fischer_reference: self.reference,
                reference_type: "Fischer".into(),
                ..Default::default()
            },
            _ => internal::FlunderSpec::default(),
        }
    }

    /// Only the reference the type names survives.
    fn from_hub(hub: &internal::FlunderSpec) -> Self {
        match hub.reference_type.as_str() {
            "Flunder" => FlunderSpec {
                reference: hub.flunder_reference.clone(),
                reference_type: Some("Flunder".into()),
            },
            "Fischer" => FlunderSpec {
                reference: hub.fischer_reference.clone(),
                reference_type: Some("Fischer".into()),
            },
            _ => FlunderSpec::default(),
        }
    }
}

/// A Fischer: a cluster-scoped list of disallowed flunder names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "wardle.example.com",
    version = "v1alpha1",
    cluster,
    openapi_name = "io.k8s.sample-apiserver.pkg.apis.wardle.v1alpha1.Fischer",
    default_strategy
)]
pub struct Fischer {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// DisallowedFlunders holds a list of Flunder.Names that are disallowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(list_type = "atomic")]
    pub disallowed_flunders: Vec<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decoded(body: serde_json::Value) -> Flunder {
        let mut f: Flunder = serde_json::from_value(body).unwrap_or_default();
        f.default_fields();
        f
    }

    #[test]
    fn reference_type_defaults_to_flunder() {
        let f = decoded(json!({"spec": {"reference": "x"}}));
        assert_eq!(f.spec.reference_type.as_deref(), Some("Flunder"));
        let f = decoded(json!({"spec": {"reference": "x", "referenceType": ""}}));
        assert_eq!(f.spec.reference_type.as_deref(), Some("Flunder"));
        let f = decoded(json!({"spec": {}}));
        assert_eq!(f.spec.reference_type, None);
        let f = decoded(json!({"spec": {"reference": "x", "referenceType": "Fischer"}}));
        assert_eq!(f.spec.reference_type.as_deref(), Some("Fischer"));
    }

    #[test]
    fn conversion_to_internal_follows_the_type() {
        let hub: internal::Flunder = decoded(json!({"spec": {"reference": "x"}})).into_hub();
        assert_eq!(
            hub.spec,
            internal::FlunderSpec {
                flunder_reference: "x".into(),
                reference_type: "Flunder".into(),
                ..Default::default()
            }
        );
        let hub: internal::Flunder =
            decoded(json!({"spec": {"reference": "f", "referenceType": "Fischer"}})).into_hub();
        assert_eq!(
            hub.spec,
            internal::FlunderSpec {
                fischer_reference: "f".into(),
                reference_type: "Fischer".into(),
                ..Default::default()
            }
        );
        let hub: internal::Flunder =
            decoded(json!({"spec": {"reference": "f", "referenceType": "Foo"}})).into_hub();
        assert_eq!(hub.spec, internal::FlunderSpec::default());
    }

    #[test]
    fn conversion_from_internal_is_lossy() {
        let both = internal::FlunderSpec {
            flunder_reference: "a".into(),
            fischer_reference: "b".into(),
            reference_type: "Flunder".into(),
        };
        assert_eq!(
            FlunderSpec::from_hub(&both),
            FlunderSpec {
                reference: "a".into(),
                reference_type: Some("Flunder".into())
            }
        );
        let untyped = internal::FlunderSpec {
            flunder_reference: "a".into(),
            ..Default::default()
        };
        assert_eq!(FlunderSpec::from_hub(&untyped), FlunderSpec::default());
        let v = serde_json::to_value(Flunder::from_hub(&internal::Flunder::default()))
            .unwrap_or_default();
        assert_eq!(v["spec"], json!({}));
        assert_eq!(v["status"], json!({}));
    }

    #[test]
    fn round_trips() {
        for spec in [
            FlunderSpec {
                reference: "x".into(),
                reference_type: Some("Flunder".into()),
            },
            FlunderSpec {
                reference: "y".into(),
                reference_type: Some("Fischer".into()),
            },
            FlunderSpec::default(),
        ] {
            let f = Flunder {
                spec: spec.clone(),
                ..Default::default()
            };
            let hub: internal::Flunder = f.clone().into_hub();
            assert_eq!(Flunder::from_hub(&hub), f);
        }
    }

    #[test]
    fn fischer_serializes_top_level_list() {
        let f = Fischer {
            disallowed_flunders: vec!["bad".into()],
            ..Default::default()
        };
        let v = serde_json::to_value(&f).unwrap_or_default();
        assert_eq!(v["disallowedFlunders"], json!(["bad"]));
        assert!(f.validate_create().is_empty());
    }
}
