//! `rbac.authorization.k8s.io/v1`: Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding, with Kubernetes' validation (rules need verbs,
//! resource rules need groups and resources, namespaced rules cannot name
//! URLs, a binding's `roleRef` is immutable). The RBAC authorizer
//! (the server's `authz` module) evaluates them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Resource;
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::scheme::{Group, KindBuilder, Scheme};
use crate::validation::{ErrorList, FieldError, FieldPath};

/// The group name.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// Installs the group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(
        Group::new(GROUP, &["v1"])
            .model_prefix("io.k8s.api.rbac")
            .title("Kubernetes")
            .kind(
                KindBuilder::<ClusterRole>::new()
                    .version::<ClusterRole>()
                    .build(),
            )
            .kind(
                KindBuilder::<ClusterRoleBinding>::new()
                    .version::<ClusterRoleBinding>()
                    .build(),
            )
            .kind(KindBuilder::<Role>::new().version::<Role>().build())
            .kind(
                KindBuilder::<RoleBinding>::new()
                    .version::<RoleBinding>()
                    .build(),
            ),
    );
}

/// PolicyRule holds information that describes a policy rule, but does not
/// contain information about who the rule applies to or which namespace
/// the rule applies to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// Verbs is a list of Verbs that apply to ALL the ResourceKinds
    /// contained in this rule. '*' represents all verbs.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// APIGroups is the name of the APIGroup that contains the resources.
    /// If multiple API groups are specified, any action requested against
    /// one of the enumerated resources in any API group will be allowed.
    /// "" represents the core API group and "*" represents all API groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources is a list of resources this rule applies to. '*'
    /// represents all resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// ResourceNames is an optional white list of names that the rule
    /// applies to. An empty set means that everything is allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// NonResourceURLs is a set of partial urls that a user should have
    /// access to. *s are allowed, but only as the full, final step in the
    /// path. Rules can either apply to API resources (such as "pods" or
    /// "secrets") or non-resource URL paths (such as "/api"), but not both.
    #[serde(
        rename = "nonResourceURLs",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

/// Subject contains a reference to the object or user identities a role
/// binding applies to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// Kind of object being referenced: "User", "Group" or
    /// "ServiceAccount".
    #[serde(default)]
    pub kind: String,
    /// APIGroup holds the API group of the referenced subject. Defaults to
    /// "" for ServiceAccount subjects and "rbac.authorization.k8s.io" for
    /// User and Group subjects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// Name of the object being referenced.
    #[serde(default)]
    pub name: String,
    /// Namespace of the referenced object (ServiceAccount subjects).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// RoleRef contains information that points to the role being used.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    /// APIGroup is the group for the resource being referenced.
    #[serde(default)]
    pub api_group: String,
    /// Kind is the type of resource being referenced.
    #[serde(default)]
    pub kind: String,
    /// Name is the name of resource being referenced.
    #[serde(default)]
    pub name: String,
}

/// A label selector (`matchLabels` and `matchExpressions`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// matchLabels is a map of {key,value} pairs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// matchExpressions is a list of label selector requirements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// A selector requirement: a key, an operator and values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    /// key is the label key that the selector applies to.
    pub key: String,
    /// operator is In, NotIn, Exists or DoesNotExist.
    pub operator: String,
    /// values is an array of string values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// AggregationRule describes how to locate ClusterRoles to aggregate into
/// the ClusterRole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AggregationRule {
    /// ClusterRoleSelectors holds a list of selectors which will be used to
    /// find ClusterRoles and create the rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_role_selectors: Vec<LabelSelector>,
}

/// Role is a namespaced, logical grouping of PolicyRules that can be
/// referenced as a unit by a RoleBinding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "rbac.authorization.k8s.io",
    version = "v1",
    namespaced,
    openapi_name = "io.k8s.api.rbac.v1.Role"
)]
pub struct Role {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Rules holds all the PolicyRules for this Role.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// ClusterRole is a cluster level, logical grouping of PolicyRules that can
/// be referenced as a unit by a RoleBinding or ClusterRoleBinding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "rbac.authorization.k8s.io",
    version = "v1",
    cluster,
    openapi_name = "io.k8s.api.rbac.v1.ClusterRole"
)]
pub struct ClusterRole {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Rules holds all the PolicyRules for this ClusterRole.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    /// AggregationRule is an optional field that describes how to build the
    /// Rules for this ClusterRole. If set, the rules are computed from the
    /// ClusterRoles the selectors match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregation_rule: Option<AggregationRule>,
}

/// RoleBinding references a role, but does not contain it. It adds who
/// information via Subjects and namespace information by which namespace
/// it exists in.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "rbac.authorization.k8s.io",
    version = "v1",
    namespaced,
    openapi_name = "io.k8s.api.rbac.v1.RoleBinding"
)]
pub struct RoleBinding {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Subjects holds references to the objects the role applies to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<Subject>,
    /// RoleRef can reference a Role in the current namespace or a
    /// ClusterRole in the global namespace. It cannot be updated.
    #[serde(default)]
    pub role_ref: RoleRef,
}

/// ClusterRoleBinding references a ClusterRole, but not contain it. It can
/// reference a ClusterRole in the global namespace, and adds who
/// information via Subject.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "rbac.authorization.k8s.io",
    version = "v1",
    cluster,
    openapi_name = "io.k8s.api.rbac.v1.ClusterRoleBinding"
)]
pub struct ClusterRoleBinding {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Subjects holds references to the objects the role applies to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<Subject>,
    /// RoleRef can only reference a ClusterRole in the global namespace.
    /// It cannot be updated.
    #[serde(default)]
    pub role_ref: RoleRef,
}

fn validate_rules(rules: &[PolicyRule], namespaced: bool) -> ErrorList {
    let mut errs = ErrorList::default();
    for (i, rule) in rules.iter().enumerate() {
        let path = FieldPath::new("rules").index(i);
        if rule.verbs.is_empty() {
            errs.push(FieldError::required(
                path.child("verbs").as_str(),
                "verbs must contain at least one value",
            ));
        }
        if !rule.non_resource_urls.is_empty() {
            let urls = serde_json::to_value(&rule.non_resource_urls).unwrap_or_default();
            if namespaced {
                errs.push(FieldError::invalid(
                    path.child("nonResourceURLs").as_str(),
                    urls.clone(),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if !rule.api_groups.is_empty()
                || !rule.resources.is_empty()
                || !rule.resource_names.is_empty()
            {
                errs.push(FieldError::invalid(
                    path.child("nonResourceURLs").as_str(),
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if rule.api_groups.is_empty() {
            errs.push(FieldError::required(
                path.child("apiGroups").as_str(),
                "resource rules must supply at least one api group",
            ));
        }
        if rule.resources.is_empty() {
            errs.push(FieldError::required(
                path.child("resources").as_str(),
                "resource rules must supply at least one resource",
            ));
        }
    }
    errs
}

fn validate_binding(subjects: &[Subject], role_ref: &RoleRef, kinds: &[&str]) -> ErrorList {
    let mut errs = ErrorList::default();
    if role_ref.api_group != GROUP {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            role_ref.api_group.clone(),
            &[GROUP],
        ));
    }
    if !kinds.contains(&role_ref.kind.as_str()) {
        errs.push(FieldError::not_supported(
            "roleRef.kind",
            role_ref.kind.clone(),
            kinds,
        ));
    }
    if role_ref.name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    }
    for (i, s) in subjects.iter().enumerate() {
        let path = FieldPath::new("subjects").index(i);
        if s.name.is_empty() {
            errs.push(FieldError::required(path.child("name").as_str(), ""));
        }
        match s.kind.as_str() {
            "ServiceAccount" => {
                if !s.api_group.is_empty() {
                    errs.push(FieldError::not_supported(
                        path.child("apiGroup").as_str(),
                        s.api_group.clone(),
                        &[""],
                    ));
                }
            }
            "User" | "Group" => {
                if s.api_group != GROUP {
                    errs.push(FieldError::not_supported(
                        path.child("apiGroup").as_str(),
                        s.api_group.clone(),
                        &[GROUP],
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                path.child("kind").as_str(),
                other.to_string(),
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
    errs
}

fn role_ref_unchanged(new: &RoleRef, old: &RoleRef) -> ErrorList {
    let mut errs = ErrorList::default();
    if new != old {
        errs.push(FieldError::invalid(
            "roleRef",
            serde_json::to_value(new).unwrap_or_default(),
            "cannot change roleRef",
        ));
    }
    errs
}

/// Defaults a subject's apiGroup as Kubernetes does (`rbac.authorization.k8s.io`
/// for users and groups).
fn default_subjects(subjects: &mut [Subject]) {
    for s in subjects {
        if s.api_group.is_empty() && (s.kind == "User" || s.kind == "Group") {
            s.api_group = GROUP.into();
        }
    }
}

fn default_role_ref(role_ref: &mut RoleRef) {
    if role_ref.api_group.is_empty() {
        role_ref.api_group = GROUP.into();
    }
}

impl Strategy for Role {
    fn validate_create(&self) -> ErrorList {
        validate_rules(&self.rules, true)
    }

    fn validate_update(&self, _old: &Self) -> ErrorList {
        validate_rules(&self.rules, true)
    }

    fn allow_unconditional_update() -> bool {
        true
    }
}

impl Strategy for ClusterRole {
    fn validate_create(&self) -> ErrorList {
        validate_rules(&self.rules, false)
    }

    fn validate_update(&self, _old: &Self) -> ErrorList {
        validate_rules(&self.rules, false)
    }

    fn allow_unconditional_update() -> bool {
        true
    }
}

impl Strategy for RoleBinding {
    fn prepare_for_create(&mut self) {
        default_subjects(&mut self.subjects);
        default_role_ref(&mut self.role_ref);
    }

    fn prepare_for_update(&mut self, _old: &Self) {
        default_subjects(&mut self.subjects);
        default_role_ref(&mut self.role_ref);
    }

    fn validate_create(&self) -> ErrorList {
        validate_binding(&self.subjects, &self.role_ref, &["Role", "ClusterRole"])
    }

    fn validate_update(&self, old: &Self) -> ErrorList {
        let mut errs = validate_binding(&self.subjects, &self.role_ref, &["Role", "ClusterRole"]);
        errs.extend(role_ref_unchanged(&self.role_ref, &old.role_ref));
        errs
    }

    fn allow_unconditional_update() -> bool {
        true
    }
}

impl Strategy for ClusterRoleBinding {
    fn prepare_for_create(&mut self) {
        default_subjects(&mut self.subjects);
        default_role_ref(&mut self.role_ref);
    }

    fn prepare_for_update(&mut self, _old: &Self) {
        default_subjects(&mut self.subjects);
        default_role_ref(&mut self.role_ref);
    }

    fn validate_create(&self) -> ErrorList {
        validate_binding(&self.subjects, &self.role_ref, &["ClusterRole"])
    }

    fn validate_update(&self, old: &Self) -> ErrorList {
        let mut errs = validate_binding(&self.subjects, &self.role_ref, &["ClusterRole"]);
        errs.extend(role_ref_unchanged(&self.role_ref, &old.role_ref));
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

    #[test]
    fn facts_and_validation() {
        assert_eq!(ClusterRole::INFO.plural, "clusterroles");
        assert_eq!(RoleBinding::INFO.plural, "rolebindings");
        assert!(Role::INFO.namespaced());
        assert!(!ClusterRoleBinding::INFO.namespaced());
        let role: Role = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "r"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}, {"verbs": [], "apiGroups": [""], "resources": ["pods"]}]
        }))
        .unwrap_or_default();
        let fields: Vec<String> = role
            .validate_create()
            .iter()
            .map(|e| e.field.clone())
            .collect();
        assert_eq!(fields, ["rules[0].nonResourceURLs", "rules[1].verbs"]);
    }
}
