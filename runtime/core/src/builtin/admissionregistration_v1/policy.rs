//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding
//! (`admissionregistration.k8s.io/v1`): upstream's types, the defaults of
//! `SetDefaults_ValidatingAdmissionPolicySpec`, `SetDefaults_MatchResources`
//! and `SetDefaults_Rule` (v1 has no `SetDefaults_ParamRef`: only v1alpha1
//! defaults `parameterNotFoundAction`, v1 requires it; the plugin treats an
//! absent one as `Deny`, as upstream's `CollectParams`), and the checks of
//! upstream's `ValidateValidatingAdmissionPolicy` and
//! `ValidateValidatingAdmissionPolicyBinding` (see [`super::validation`]).
//! The policies are enforced by the server's `ValidatingAdmissionPolicy`
//! admission plugin; their `status` (`observedGeneration`, `typeChecking`)
//! is written by the server's type-checking controller with
//! [`super::type_checking::type_check`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{LabelSelector, MatchCondition, RuleWithOperations, validation};
use crate::Resource;
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::validation::ErrorList;

/// ValidatingAdmissionPolicy describes the definition of an admission
/// validation policy that accepts or rejects an object without changing
/// it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "admissionregistration.k8s.io",
    version = "v1",
    cluster,
    plural = "validatingadmissionpolicies",
    subresource_status,
    openapi_name = "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicy"
)]
pub struct ValidatingAdmissionPolicy {
    /// Standard object metadata; More info:
    /// https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Specification of the desired behavior of the ValidatingAdmissionPolicy.
    #[serde(default)]
    pub spec: ValidatingAdmissionPolicySpec,
    /// The status of the ValidatingAdmissionPolicy, including warnings that
    /// are useful to determine if the policy behaves in the expected way.
    /// Populated by the system. Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ValidatingAdmissionPolicyStatus>,
}

/// ValidatingAdmissionPolicySpec is the specification of the desired
/// behavior of the AdmissionPolicy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidatingAdmissionPolicySpec {
    /// ParamKind specifies the kind of resources used to parameterize this
    /// policy. If absent, there are no parameters for this policy and the
    /// param CEL variable will not be provided to validation expressions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_kind: Option<ParamKind>,
    /// MatchConstraints specifies what resources this policy is designed to
    /// validate. The AdmissionPolicy cares about a request if it matches
    /// _all_ Constraints. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_constraints: Option<MatchResources>,
    /// Validations contain CEL expressions which is used to apply the
    /// validation. Validations and AuditAnnotations may not both be empty;
    /// a minimum of one Validations or AuditAnnotations is required.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validations: Vec<Validation>,
    /// failurePolicy defines how to handle failures for the admission
    /// policy. Allowed values are Ignore or Fail. Defaults to Fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    /// auditAnnotations contains CEL expressions which are used to produce
    /// audit annotations for the audit event of the API request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audit_annotations: Vec<AuditAnnotation>,
    /// MatchConditions is a list of conditions that must be met for a
    /// request to be validated. An empty list of matchConditions matches
    /// all requests. There are a maximum of 64 match conditions allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_conditions: Vec<MatchCondition>,
    /// Variables contain definitions of variables that can be used in
    /// composition of other expressions, available as `variables.<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<Variable>,
}

/// ParamKind is a tuple of Group Kind and Version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParamKind {
    /// APIVersion is the API group version the resources belong to. In
    /// format of "group/version". Required.
    #[serde(default)]
    pub api_version: String,
    /// Kind is the API kind the resources belong to. Required.
    #[serde(default)]
    pub kind: String,
}

/// MatchResources decides whether to run the admission control policy on
/// an object based on whether it meets the match criteria. The exclude
/// rules take precedence over include rules.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchResources {
    /// NamespaceSelector decides whether to run the admission control
    /// policy on an object based on whether the namespace for that object
    /// matches the selector. Default to the empty LabelSelector, which
    /// matches everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// ObjectSelector decides whether to run the validation based on if the
    /// object has matching labels. Default to the empty LabelSelector,
    /// which matches everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// ResourceRules describes what operations on what
    /// resources/subresources the ValidatingAdmissionPolicy matches. The
    /// policy cares about an operation if it matches _any_ Rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_rules: Vec<NamedRuleWithOperations>,
    /// ExcludeResourceRules describes what operations on what
    /// resources/subresources the ValidatingAdmissionPolicy should not
    /// care about. The exclude rules take precedence over include rules
    /// (if a resource matches both, it is excluded)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_resource_rules: Vec<NamedRuleWithOperations>,
    /// matchPolicy defines how the "MatchResources" list is used to match
    /// incoming requests. Allowed values are "Exact" or "Equivalent".
    /// Defaults to "Equivalent".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
}

/// NamedRuleWithOperations is a tuple of Operations and Resources with
/// ResourceNames.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedRuleWithOperations {
    /// ResourceNames is an optional white list of names that the rule
    /// applies to. An empty set means that everything is allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Operations is the operations the admission hook cares about -
    /// CREATE, UPDATE, DELETE, CONNECT or * for all of those operations
    /// and any future admission operations that are added. If '*' is
    /// present, the length of the slice must be one. Required.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<String>,
    /// APIGroups is the API groups the resources belong to. '*' is all
    /// groups. If '*' is present, the length of the slice must be one.
    /// Required.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// APIVersions is the API versions the resources belong to. '*' is all
    /// versions. If '*' is present, the length of the slice must be one.
    /// Required.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_versions: Vec<String>,
    /// Resources is a list of resources this rule applies to. '*' means
    /// all resources, but not subresources; '*/*' means all resources and
    /// their subresources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// scope specifies the scope of this rule. Valid values are "Cluster",
    /// "Namespaced", and "*". Default is "*".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl NamedRuleWithOperations {
    /// The rule without its resource names.
    pub fn rule(&self) -> RuleWithOperations {
        RuleWithOperations {
            operations: self.operations.clone(),
            api_groups: self.api_groups.clone(),
            api_versions: self.api_versions.clone(),
            resources: self.resources.clone(),
            scope: self.scope.clone(),
        }
    }
}

/// Validation specifies the CEL expression which is used to apply the
/// validation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Validation {
    /// Expression represents the expression which will be evaluated by
    /// CEL. Required.
    #[serde(default)]
    pub expression: String,
    /// Message represents the message displayed when validation fails.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Reason represents a machine-readable description of why this
    /// validation failed. Supported values: "Unauthorized", "Forbidden",
    /// "Invalid", "RequestEntityTooLarge". Defaults to Invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// messageExpression declares a CEL expression that evaluates to the
    /// validation failure message that is returned when this rule fails.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message_expression: String,
}

/// AuditAnnotation describes how to produce an audit annotation for an API
/// request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditAnnotation {
    /// key specifies the audit annotation key. The audit annotation keys
    /// of a ValidatingAdmissionPolicy must be unique. Required.
    #[serde(default)]
    pub key: String,
    /// valueExpression represents the expression which is evaluated by CEL
    /// to produce an audit annotation value. Required.
    #[serde(default)]
    pub value_expression: String,
}

/// Variable is the definition of a variable that is used for composition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Variable {
    /// Name is the name of the variable. The name must be a valid CEL
    /// identifier and unique among all variables.
    #[serde(default)]
    pub name: String,
    /// Expression is the expression that will be evaluated as the value of
    /// the variable.
    #[serde(default)]
    pub expression: String,
}

/// ValidatingAdmissionPolicyStatus represents the status of an admission
/// validation policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidatingAdmissionPolicyStatus {
    /// The generation observed by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The results of type checking for each expression. Presence of this
    /// field indicates the completion of the type checking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_checking: Option<TypeChecking>,
    /// The conditions represent the latest available observations of a
    /// policy's current state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// TypeChecking contains results of type checking the expressions in the
/// ValidatingAdmissionPolicy
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypeChecking {
    /// The type checking warnings for each expression.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expression_warnings: Vec<ExpressionWarning>,
}

/// ExpressionWarning is a warning information that targets a specific
/// expression.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionWarning {
    /// The path to the field that refers the expression.
    #[serde(default)]
    pub field_ref: String,
    /// The content of type checking information in a human-readable form.
    #[serde(default)]
    pub warning: String,
}

/// Condition contains details for one aspect of the current state of this
/// API Resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.apimachinery.pkg.apis.meta.v1.Condition")]
pub struct Condition {
    /// type of condition in CamelCase or in foo.example.com/CamelCase.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// status of the condition, one of True, False, Unknown.
    #[serde(default)]
    pub status: String,
    /// observedGeneration represents the .metadata.generation that the
    /// condition was set based upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// lastTransitionTime is the last time the condition transitioned from
    /// one status to another.
    #[serde(default)]
    pub last_transition_time: String,
    /// reason contains a programmatic identifier indicating the reason for
    /// the condition's last transition.
    #[serde(default)]
    pub reason: String,
    /// message is a human readable message indicating details about the
    /// transition. This may be an empty string.
    #[serde(default)]
    pub message: String,
}

/// ValidatingAdmissionPolicyBinding binds the ValidatingAdmissionPolicy
/// with paramerized resources.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "admissionregistration.k8s.io",
    version = "v1",
    cluster,
    openapi_name = "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding"
)]
pub struct ValidatingAdmissionPolicyBinding {
    /// Standard object metadata; More info:
    /// https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Specification of the desired behavior of the
    /// ValidatingAdmissionPolicyBinding.
    #[serde(default)]
    pub spec: ValidatingAdmissionPolicyBindingSpec,
}

/// ValidatingAdmissionPolicyBindingSpec is the specification of the
/// ValidatingAdmissionPolicyBinding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidatingAdmissionPolicyBindingSpec {
    /// PolicyName references a ValidatingAdmissionPolicy name which the
    /// ValidatingAdmissionPolicyBinding binds to. Required.
    #[serde(default)]
    pub policy_name: String,
    /// paramRef specifies the parameter resource used to configure the
    /// admission control policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_ref: Option<ParamRef>,
    /// MatchResources declares what resources match this binding and will
    /// be validated by it. Note that this is intersected with the policy's
    /// matchConstraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_resources: Option<MatchResources>,
    /// validationActions declares how Validations of the referenced
    /// ValidatingAdmissionPolicy are enforced: Deny, Warn or Audit.
    /// Required.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validation_actions: Vec<String>,
}

/// ParamRef describes how to locate the params to be used as input to
/// expressions of rules applied by a policy binding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParamRef {
    /// name is the name of the resource being referenced. One of `name` or
    /// `selector` must be set, but `name` and `selector` are mutually
    /// exclusive properties.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// namespace is the namespace of the referenced resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// selector can be used to match multiple param objects based on their
    /// labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// `parameterNotFoundAction` controls the behavior of the binding when
    /// the resource exists, and name or selector is valid, but there are no
    /// parameters matched by the binding. Allowed values are `Allow` or
    /// `Deny`. Defaults to `Deny`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter_not_found_action: Option<String>,
}

impl MatchResources {
    /// `SetDefaults_MatchResources` (and `SetDefaults_Rule` of its rules).
    pub fn set_defaults(&mut self) {
        self.match_policy.get_or_insert_with(|| "Equivalent".into());
        self.namespace_selector
            .get_or_insert_with(LabelSelector::default);
        self.object_selector
            .get_or_insert_with(LabelSelector::default);
        for rule in self
            .resource_rules
            .iter_mut()
            .chain(self.exclude_resource_rules.iter_mut())
        {
            rule.scope.get_or_insert_with(|| "*".into());
        }
    }
}

impl Strategy for ValidatingAdmissionPolicy {
    fn default_fields(&mut self) {
        self.spec
            .failure_policy
            .get_or_insert_with(|| "Fail".into());
        if let Some(m) = &mut self.spec.match_constraints {
            m.set_defaults();
        }
    }

    /// A new policy starts with an empty status (upstream's
    /// `PrepareForCreate`): `observedGeneration` and `typeChecking` are
    /// written by the type-checking controller once it has checked the
    /// policy (`type_checking`).
    fn prepare_for_create(&mut self) {
        self.status = Some(ValidatingAdmissionPolicyStatus::default());
    }

    /// The status stays (it is written through `/status`); a spec change
    /// bumps the generation, which the controller then observes.
    fn prepare_for_update(&mut self, old: &Self) {
        self.status = old.status.clone();
    }

    fn validate_create(&self) -> ErrorList {
        validation::validate_policy(self, false)
    }

    /// Also `ValidateValidatingAdmissionPolicyStatusUpdate`'s checks: a
    /// write through `/status` is validated here too.
    fn validate_update(&self, old: &Self) -> ErrorList {
        let mut errs = validation::validate_policy(
            self,
            self.spec.match_conditions == old.spec.match_conditions,
        );
        if let Some(status) = &self.status {
            errs.extend(validation::validate_policy_status(status));
        }
        errs
    }

    fn allow_unconditional_update() -> bool {
        true
    }

    fn bump_generation_on_spec_change() -> bool {
        true
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&super::super::printers::VALIDATING_ADMISSION_POLICY)
    }
}

impl Strategy for ValidatingAdmissionPolicyBinding {
    fn default_fields(&mut self) {
        if let Some(m) = &mut self.spec.match_resources {
            m.set_defaults();
        }
    }

    fn validate_create(&self) -> ErrorList {
        validation::validate_binding(self)
    }

    fn validate_update(&self, _old: &Self) -> ErrorList {
        validation::validate_binding(self)
    }

    fn allow_unconditional_update() -> bool {
        true
    }

    fn bump_generation_on_spec_change() -> bool {
        true
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&super::super::printers::VALIDATING_ADMISSION_POLICY_BINDING)
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
