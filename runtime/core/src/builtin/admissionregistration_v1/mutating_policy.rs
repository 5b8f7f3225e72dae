//! MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding
//! (`admissionregistration.k8s.io/v1`, GA in Kubernetes 1.36): upstream's
//! types, the defaults of `SetDefaults_MutatingAdmissionPolicySpec`
//! (`failurePolicy: Fail`; `reinvocationPolicy` has no default, it is
//! required) with `SetDefaults_MatchResources` on the constraints and the
//! binding's `matchResources`, and the checks of upstream's
//! `ValidateMutatingAdmissionPolicy` and
//! `ValidateMutatingAdmissionPolicyBinding` (see [`super::validation`]).
//! The policies are enforced by the server's `MutatingAdmissionPolicy`
//! admission plugin. Neither kind has a status.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::policy::{MatchResources, ParamKind, ParamRef, Variable};
use super::{MatchCondition, validation};
use crate::Resource;
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::validation::ErrorList;

/// MutatingAdmissionPolicy describes the definition of an admission
/// mutation policy that mutates the object coming into admission chain.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "admissionregistration.k8s.io",
    version = "v1",
    cluster,
    plural = "mutatingadmissionpolicies",
    openapi_name = "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicy"
)]
pub struct MutatingAdmissionPolicy {
    /// Standard object metadata; More info:
    /// https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Specification of the desired behavior of the
    /// MutatingAdmissionPolicy.
    #[serde(default)]
    pub spec: MutatingAdmissionPolicySpec,
}

/// MutatingAdmissionPolicySpec is the specification of the desired
/// behavior of the admission policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MutatingAdmissionPolicySpec {
    /// paramKind specifies the kind of resources used to parameterize this
    /// policy. If absent, there are no parameters for this policy and the
    /// param CEL variable will not be provided to validation expressions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_kind: Option<ParamKind>,
    /// matchConstraints specifies what resources this policy is designed
    /// to validate. The MutatingAdmissionPolicy cares about a request if
    /// it matches _all_ Constraints. The only operations allowed are
    /// CREATE, UPDATE and CONNECT. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_constraints: Option<MatchResources>,
    /// variables contain definitions of variables that can be used in
    /// composition of other expressions, available as `variables.<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<Variable>,
    /// mutations contain operations to perform on matching objects.
    /// mutations may not be empty; a minimum of one mutation is required.
    /// mutations are evaluated in order, and are reinvoked according to
    /// the reinvocationPolicy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mutations: Vec<Mutation>,
    /// failurePolicy defines how to handle failures for the admission
    /// policy. Allowed values are Ignore or Fail. Defaults to Fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    /// matchConditions is a list of conditions that must be met for a
    /// request to be validated. An empty list of matchConditions matches
    /// all requests. There are a maximum of 64 match conditions allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_conditions: Vec<MatchCondition>,
    /// reinvocationPolicy indicates whether mutations may be called
    /// multiple times per MutatingAdmissionPolicyBinding as part of a
    /// single admission evaluation. Allowed values are "Never" and
    /// "IfNeeded". Required.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reinvocation_policy: String,
}

/// Mutation specifies the CEL expression which is used to apply the
/// Mutation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Mutation {
    /// patchType indicates the patch strategy used. Allowed values are
    /// "ApplyConfiguration" and "JSONPatch". Required.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub patch_type: String,
    /// applyConfiguration defines the desired configuration values of an
    /// object, as a CEL expression evaluating to an `Object{...}` apply
    /// configuration, merged into the object with server-side-apply-like
    /// semantics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_configuration: Option<ApplyConfiguration>,
    /// jsonPatch defines a [JSON patch](https://jsonpatch.com/) operation
    /// to perform a mutation to the object, as a CEL expression evaluating
    /// to a list of `JSONPatch{...}` operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_patch: Option<JsonPatch>,
}

/// ApplyConfiguration defines the desired configuration values of an
/// object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyConfiguration {
    /// expression will be evaluated by CEL to create an apply
    /// configuration.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expression: String,
}

/// JSONPatch defines a JSON Patch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "JSONPatch")]
pub struct JsonPatch {
    /// expression will be evaluated by CEL to create a
    /// [JSON patch](https://jsonpatch.com/).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expression: String,
}

/// MutatingAdmissionPolicyBinding binds the MutatingAdmissionPolicy with
/// parametrized resources.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "admissionregistration.k8s.io",
    version = "v1",
    cluster,
    openapi_name = "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicyBinding"
)]
pub struct MutatingAdmissionPolicyBinding {
    /// Standard object metadata; More info:
    /// https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Specification of the desired behavior of the
    /// MutatingAdmissionPolicyBinding.
    #[serde(default)]
    pub spec: MutatingAdmissionPolicyBindingSpec,
}

/// MutatingAdmissionPolicyBindingSpec is the specification of the
/// MutatingAdmissionPolicyBinding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MutatingAdmissionPolicyBindingSpec {
    /// policyName references a MutatingAdmissionPolicy name which the
    /// MutatingAdmissionPolicyBinding binds to. Required.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub policy_name: String,
    /// paramRef specifies the parameter resource used to configure the
    /// admission control policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_ref: Option<ParamRef>,
    /// matchResources limits what resources match this binding and may be
    /// mutated by it. Note that if matchResources matches a resource, the
    /// resource must also match a policy's matchConstraints and
    /// matchConditions before the resource may be mutated. The only
    /// operations allowed are CREATE, UPDATE and CONNECT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_resources: Option<MatchResources>,
}

impl Strategy for MutatingAdmissionPolicy {
    fn default_fields(&mut self) {
        self.spec
            .failure_policy
            .get_or_insert_with(|| "Fail".into());
        if let Some(m) = &mut self.spec.match_constraints {
            m.set_defaults();
        }
    }

    fn validate_create(&self) -> ErrorList {
        validation::validate_mutating_policy(self, false)
    }

    fn validate_update(&self, old: &Self) -> ErrorList {
        validation::validate_mutating_policy(
            self,
            self.spec.match_conditions == old.spec.match_conditions,
        )
    }

    fn allow_unconditional_update() -> bool {
        true
    }

    fn bump_generation_on_spec_change() -> bool {
        true
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&super::super::printers::MUTATING_ADMISSION_POLICY)
    }
}

impl Strategy for MutatingAdmissionPolicyBinding {
    fn default_fields(&mut self) {
        if let Some(m) = &mut self.spec.match_resources {
            m.set_defaults();
        }
    }

    fn validate_create(&self) -> ErrorList {
        validation::validate_mutating_binding(self)
    }

    fn validate_update(&self, _old: &Self) -> ErrorList {
        validation::validate_mutating_binding(self)
    }

    fn allow_unconditional_update() -> bool {
        true
    }

    fn bump_generation_on_spec_change() -> bool {
        true
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&super::super::printers::MUTATING_ADMISSION_POLICY_BINDING)
    }
}

#[cfg(test)]
#[path = "mutating_policy_tests.rs"]
mod tests;
