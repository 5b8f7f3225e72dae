//! `admissionregistration.k8s.io/v1`: MutatingWebhookConfiguration and
//! ValidatingWebhookConfiguration, stored and validated as Kubernetes does
//! (defaults of `SetDefaults_*Webhook`, `SetDefaults_Rule` and
//! `SetDefaults_ServiceReference`; the checks of upstream's
//! `ValidateMutatingWebhookConfiguration` and
//! `ValidateValidatingWebhookConfiguration`, see [`validation`]). Calling
//! the webhooks is not done here. ValidatingAdmissionPolicy and its binding
//! are in [`policy`], MutatingAdmissionPolicy and its binding in
//! [`mutating_policy`].

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Resource;
use crate::builtin::core_v1::ByteString;
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::scheme::{Group, KindBuilder, Scheme};
use crate::validation::ErrorList;

pub mod cel_mutation;
pub mod mutating_policy;
pub mod policy;
pub mod type_checking;
pub mod validation;

pub use mutating_policy::{
    ApplyConfiguration, JsonPatch, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
    MutatingAdmissionPolicyBindingSpec, MutatingAdmissionPolicySpec, Mutation,
};

pub use policy::{
    AuditAnnotation, MatchResources, NamedRuleWithOperations, ParamKind, ParamRef,
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicyBindingSpec, ValidatingAdmissionPolicySpec,
    ValidatingAdmissionPolicyStatus, Validation, Variable,
};

#[cfg(test)]
mod tests;

/// The group name.
pub const GROUP: &str = "admissionregistration.k8s.io";

/// Installs the group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(
        Group::new(GROUP, &["v1"])
            .model_prefix("io.k8s.api.admissionregistration")
            .title("Kubernetes")
            .kind(
                KindBuilder::<MutatingWebhookConfiguration>::new()
                    .version::<MutatingWebhookConfiguration>()
                    .build(),
            )
            .kind(
                KindBuilder::<ValidatingWebhookConfiguration>::new()
                    .version::<ValidatingWebhookConfiguration>()
                    .build(),
            )
            .kind(
                KindBuilder::<ValidatingAdmissionPolicy>::new()
                    .version::<ValidatingAdmissionPolicy>()
                    .build(),
            )
            .kind(
                KindBuilder::<ValidatingAdmissionPolicyBinding>::new()
                    .version::<ValidatingAdmissionPolicyBinding>()
                    .build(),
            )
            .kind(
                KindBuilder::<MutatingAdmissionPolicy>::new()
                    .version::<MutatingAdmissionPolicy>()
                    .build(),
            )
            .kind(
                KindBuilder::<MutatingAdmissionPolicyBinding>::new()
                    .version::<MutatingAdmissionPolicyBinding>()
                    .build(),
            ),
    );
}

/// MutatingWebhookConfiguration describes the configuration of an admission
/// webhook that accepts or rejects and may change the object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "admissionregistration.k8s.io",
    version = "v1",
    cluster,
    openapi_name = "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration"
)]
pub struct MutatingWebhookConfiguration {
    /// Standard object metadata; More info:
    /// https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Webhooks is a list of webhooks and the affected resources and
    /// operations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<MutatingWebhook>,
}

/// ValidatingWebhookConfiguration describes the configuration of an
/// admission webhook that accepts or rejects an object without changing
/// it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "admissionregistration.k8s.io",
    version = "v1",
    cluster,
    openapi_name = "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration"
)]
pub struct ValidatingWebhookConfiguration {
    /// Standard object metadata; More info:
    /// https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Webhooks is a list of webhooks and the affected resources and
    /// operations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<ValidatingWebhook>,
}

/// MutatingWebhook describes an admission webhook and the resources and
/// operations it applies to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MutatingWebhook {
    /// The name of the admission webhook. Name should be fully qualified,
    /// e.g., imagepolicy.kubernetes.io, where "imagepolicy" is the name of
    /// the webhook, and kubernetes.io is the name of the organization.
    /// Required.
    #[serde(default)]
    pub name: String,
    /// ClientConfig defines how to communicate with the hook. Required.
    #[serde(default)]
    pub client_config: WebhookClientConfig,
    /// Rules describes what operations on what resources/subresources the
    /// webhook cares about. The webhook cares about an operation if it
    /// matches _any_ Rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleWithOperations>,
    /// FailurePolicy defines how unrecognized errors from the admission
    /// endpoint are handled - allowed values are Ignore or Fail. Defaults
    /// to Fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    /// matchPolicy defines how the "rules" list is used to match incoming
    /// requests. Allowed values are "Exact" or "Equivalent". Defaults to
    /// "Equivalent".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
    /// NamespaceSelector decides whether to run the webhook on an object
    /// based on whether the namespace for that object matches the
    /// selector. Default to the empty LabelSelector, which matches
    /// everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// ObjectSelector decides whether to run the webhook based on if the
    /// object has matching labels. Default to the empty LabelSelector,
    /// which matches everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// SideEffects states whether this webhook has side effects. Acceptable
    /// values are: None, NoneOnDryRun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<String>,
    /// TimeoutSeconds specifies the timeout for this webhook. The timeout
    /// value must be between 1 and 30 seconds. Default to 10 seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// AdmissionReviewVersions is an ordered list of preferred
    /// `AdmissionReview` versions the Webhook expects.
    #[serde(default)]
    pub admission_review_versions: Vec<String>,
    /// reinvocationPolicy indicates whether this webhook should be called
    /// multiple times as part of a single admission evaluation. Allowed
    /// values are "Never" and "IfNeeded". Defaults to "Never".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
    /// MatchConditions is a list of conditions that must be met for a
    /// request to be sent to this webhook. Match conditions filter requests
    /// that have already been matched by the rules, namespaceSelector, and
    /// objectSelector. An empty list of matchConditions matches all
    /// requests. There are a maximum of 64 match conditions allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_conditions: Vec<MatchCondition>,
}

/// ValidatingWebhook describes an admission webhook and the resources and
/// operations it applies to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidatingWebhook {
    /// The name of the admission webhook. Name should be fully qualified,
    /// e.g., imagepolicy.kubernetes.io, where "imagepolicy" is the name of
    /// the webhook, and kubernetes.io is the name of the organization.
    /// Required.
    #[serde(default)]
    pub name: String,
    /// ClientConfig defines how to communicate with the hook. Required.
    #[serde(default)]
    pub client_config: WebhookClientConfig,
    /// Rules describes what operations on what resources/subresources the
    /// webhook cares about. The webhook cares about an operation if it
    /// matches _any_ Rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleWithOperations>,
    /// FailurePolicy defines how unrecognized errors from the admission
    /// endpoint are handled - allowed values are Ignore or Fail. Defaults
    /// to Fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    /// matchPolicy defines how the "rules" list is used to match incoming
    /// requests. Allowed values are "Exact" or "Equivalent". Defaults to
    /// "Equivalent".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
    /// NamespaceSelector decides whether to run the webhook on an object
    /// based on whether the namespace for that object matches the
    /// selector. Default to the empty LabelSelector, which matches
    /// everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// ObjectSelector decides whether to run the webhook based on if the
    /// object has matching labels. Default to the empty LabelSelector,
    /// which matches everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// SideEffects states whether this webhook has side effects. Acceptable
    /// values are: None, NoneOnDryRun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<String>,
    /// TimeoutSeconds specifies the timeout for this webhook. The timeout
    /// value must be between 1 and 30 seconds. Default to 10 seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// AdmissionReviewVersions is an ordered list of preferred
    /// `AdmissionReview` versions the Webhook expects.
    #[serde(default)]
    pub admission_review_versions: Vec<String>,
    /// MatchConditions is a list of conditions that must be met for a
    /// request to be sent to this webhook. Match conditions filter requests
    /// that have already been matched by the rules, namespaceSelector, and
    /// objectSelector. An empty list of matchConditions matches all
    /// requests. There are a maximum of 64 match conditions allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_conditions: Vec<MatchCondition>,
}

/// RuleWithOperations is a tuple of Operations and Resources. It is
/// recommended to make sure that all the tuple expansions are valid.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleWithOperations {
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
    /// Resources is a list of resources this rule applies to. For example:
    /// 'pods' means pods. 'pods/log' means the log subresource of pods.
    /// '*' means all resources, but not subresources. 'pods/*' means all
    /// subresources of pods. '*/scale' means all scale subresources. '*/*'
    /// means all resources and their subresources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// scope specifies the scope of this rule. Valid values are "Cluster",
    /// "Namespaced", and "*". Default is "*".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// WebhookClientConfig contains the information to make a TLS connection
/// with the webhook.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookClientConfig {
    /// `url` gives the location of the webhook, in standard URL form
    /// (`scheme://host:port/path`). Exactly one of `url` or `service` must
    /// be specified. The scheme must be "https"; fragments ("#...") and
    /// query parameters ("?...") are not allowed, nor is user information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `service` is a reference to the service for this webhook. Either
    /// `service` or `url` must be specified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    /// `caBundle` is a PEM encoded CA bundle which will be used to validate
    /// the webhook's server certificate. If unspecified, system trust roots
    /// on the apiserver are used.
    #[serde(default, skip_serializing_if = "bytes_empty")]
    pub ca_bundle: ByteString,
}

fn bytes_empty(b: &ByteString) -> bool {
    b.0.is_empty()
}

/// ServiceReference holds a reference to Service.legacy.k8s.io
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// `namespace` is the namespace of the service. Required
    #[serde(default)]
    pub namespace: String,
    /// `name` is the name of the service. Required
    #[serde(default)]
    pub name: String,
    /// `path` is an optional URL path which will be sent in any request to
    /// this service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// If specified, the port on the service that hosting webhook. Default
    /// to 443 for backward compatibility. `port` should be a valid port
    /// number (1-65535, inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// MatchCondition represents a condition which must by fulfilled for a
/// request to be sent to a webhook.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MatchCondition {
    /// Name is an identifier for this match condition, used for strategic
    /// merging of MatchConditions, as well as providing an identifier for
    /// logging purposes. Must be a qualified name. Required.
    #[serde(default)]
    pub name: String,
    /// Expression represents the expression which will be evaluated by
    /// CEL. Must evaluate to bool. Required.
    #[serde(default)]
    pub expression: String,
}

/// A label selector is a label query over a set of resources. The result
/// of matchLabels and matchExpressions are ANDed. An empty label selector
/// matches all objects. A null label selector matches no objects.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")]
pub struct LabelSelector {
    /// matchLabels is a map of {key,value} pairs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// matchExpressions is a list of label selector requirements. The
    /// requirements are ANDed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector (`metav1.LabelSelectorAsSelector`
    /// then `Matches`): every `matchLabels` pair and every requirement
    /// holds; the empty selector matches everything. An unknown operator
    /// matches nothing (validation refuses such selectors on write).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_by(|k| labels.get(k).map(String::as_str))
    }

    /// [`matches`](Self::matches) with the labels read through `label`
    /// (the value of a key, `None` when the key is absent), so that labels
    /// need not be collected into a map first.
    pub fn matches_by<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| label(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|r| {
                let value = label(&r.key);
                match r.operator.as_str() {
                    "In" => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                    "NotIn" => value.is_none_or(|v| !r.values.iter().any(|x| x == v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }

    /// True for the empty selector (matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

/// A label selector requirement is a selector that contains values, a key,
/// and an operator that relates the key and values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement")]
pub struct LabelSelectorRequirement {
    /// key is the label key that the selector applies to.
    #[serde(default)]
    pub key: String,
    /// operator represents a key's relationship to a set of values. Valid
    /// operators are In, NotIn, Exists and DoesNotExist.
    #[serde(default)]
    pub operator: String,
    /// values is an array of string values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// `SetDefaults_Rule` and `SetDefaults_ServiceReference`, and the defaults
/// both webhook kinds share (`failurePolicy`, `matchPolicy`, the selectors
/// and `timeoutSeconds`).
fn default_common(
    rules: &mut [RuleWithOperations],
    client_config: &mut WebhookClientConfig,
    failure_policy: &mut Option<String>,
    match_policy: &mut Option<String>,
    namespace_selector: &mut Option<LabelSelector>,
    object_selector: &mut Option<LabelSelector>,
    timeout_seconds: &mut Option<i32>,
) {
    failure_policy.get_or_insert_with(|| "Fail".into());
    match_policy.get_or_insert_with(|| "Equivalent".into());
    namespace_selector.get_or_insert_with(LabelSelector::default);
    object_selector.get_or_insert_with(LabelSelector::default);
    timeout_seconds.get_or_insert(10);
    for rule in rules {
        rule.scope.get_or_insert_with(|| "*".into());
    }
    if let Some(service) = &mut client_config.service {
        service.port.get_or_insert(443);
    }
}

impl MutatingWebhook {
    /// `SetDefaults_MutatingWebhook` (and the rule and service defaults).
    pub fn set_defaults(&mut self) {
        default_common(
            &mut self.rules,
            &mut self.client_config,
            &mut self.failure_policy,
            &mut self.match_policy,
            &mut self.namespace_selector,
            &mut self.object_selector,
            &mut self.timeout_seconds,
        );
        self.reinvocation_policy
            .get_or_insert_with(|| "Never".into());
    }
}

impl ValidatingWebhook {
    /// `SetDefaults_ValidatingWebhook` (and the rule and service defaults).
    pub fn set_defaults(&mut self) {
        default_common(
            &mut self.rules,
            &mut self.client_config,
            &mut self.failure_policy,
            &mut self.match_policy,
            &mut self.namespace_selector,
            &mut self.object_selector,
            &mut self.timeout_seconds,
        );
    }
}

impl Strategy for MutatingWebhookConfiguration {
    fn default_fields(&mut self) {
        self.webhooks
            .iter_mut()
            .for_each(MutatingWebhook::set_defaults);
    }

    fn validate_create(&self) -> ErrorList {
        validation::validate_mutating(self, &validation::Options::CREATE)
    }

    fn validate_update(&self, old: &Self) -> ErrorList {
        validation::validate_mutating(self, &validation::Options::mutating_update(self, old))
    }

    fn allow_unconditional_update() -> bool {
        true
    }

    /// Upstream's strategies set `generation` 1 on create and bump it when
    /// the webhooks change.
    fn bump_generation_on_spec_change() -> bool {
        true
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&super::printers::WEBHOOK_CONFIGURATION)
    }
}

impl Strategy for ValidatingWebhookConfiguration {
    fn default_fields(&mut self) {
        self.webhooks
            .iter_mut()
            .for_each(ValidatingWebhook::set_defaults);
    }

    fn validate_create(&self) -> ErrorList {
        validation::validate_validating(self, &validation::Options::CREATE)
    }

    fn validate_update(&self, old: &Self) -> ErrorList {
        validation::validate_validating(self, &validation::Options::validating_update(self, old))
    }

    fn allow_unconditional_update() -> bool {
        true
    }

    /// Upstream's strategies set `generation` 1 on create and bump it when
    /// the webhooks change.
    fn bump_generation_on_spec_change() -> bool {
        true
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&super::printers::WEBHOOK_CONFIGURATION)
    }
}
