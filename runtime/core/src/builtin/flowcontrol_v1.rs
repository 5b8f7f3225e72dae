//! `flowcontrol.apiserver.k8s.io/v1`: FlowSchema and
//! PriorityLevelConfiguration, the configuration of API Priority and
//! Fairness (the server's `flowcontrol` module), with Kubernetes' defaults and
//! validation.

// Several `printcolumn(type = "string", ...)` arguments look like repeated
// attributes to clippy.
#![allow(clippy::duplicated_attributes)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Resource;
use crate::meta::{ObjectMeta, Time};
use crate::resource::Strategy;
use crate::scheme::{Group, KindBuilder, Scheme};
use crate::validation::{ErrorList, FieldError, FieldPath};

/// The group name.
pub const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// Installs the group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(
        Group::new(GROUP, &["v1"])
            .model_prefix("io.k8s.api.flowcontrol")
            .title("Kubernetes")
            .kind(
                KindBuilder::<FlowSchema>::new()
                    .version::<FlowSchema>()
                    .build(),
            )
            .kind(
                KindBuilder::<PriorityLevelConfiguration>::new()
                    .version::<PriorityLevelConfiguration>()
                    .build(),
            ),
    );
}

/// FlowSchema defines the schema of a group of flows. Note that a flow is
/// made up of a set of inbound API requests with similar attributes and is
/// identified by a pair of strings: the name of the FlowSchema and a "flow
/// distinguisher".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "flowcontrol.apiserver.k8s.io",
    version = "v1",
    cluster,
    openapi_name = "io.k8s.api.flowcontrol.v1.FlowSchema",
    printcolumn(
        name = "PriorityLevel",
        type = "string",
        json_path = ".spec.priorityLevelConfiguration.name"
    ),
    printcolumn(
        name = "MatchingPrecedence",
        type = "integer",
        json_path = ".spec.matchingPrecedence"
    ),
    printcolumn(
        name = "DistinguisherMethod",
        type = "string",
        json_path = ".spec.distinguisherMethod.type"
    ),
    printcolumn(name = "Age", type = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(
        name = "MissingPL",
        type = "string",
        json_path = ".status.conditions[?(@.type == \"Dangling\")].status"
    ),
    subresource_status
)]
pub struct FlowSchema {
    /// `metadata` is the standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` is the specification of the desired behavior of a FlowSchema.
    #[serde(default)]
    pub spec: FlowSchemaSpec,
    /// `status` is the current status of a FlowSchema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<FlowSchemaStatus>,
}

/// FlowSchemaSpec describes how the FlowSchema's specification looks like.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlowSchemaSpec {
    /// `priorityLevelConfiguration` should reference a
    /// PriorityLevelConfiguration in the cluster. If the reference cannot be
    /// resolved, the FlowSchema will be ignored and marked as invalid in its
    /// status. Required.
    #[serde(default)]
    pub priority_level_configuration: PriorityLevelConfigurationReference,
    /// `matchingPrecedence` is used to choose among the FlowSchemas that
    /// match a given request. The chosen FlowSchema is among those with the
    /// numerically lowest (which we take to be logically highest)
    /// MatchingPrecedence. Each MatchingPrecedence value must be ranged in
    /// [1,10000]. Note that if the precedence is not specified, it will be
    /// set to 1000 as default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matching_precedence: Option<i32>,
    /// `distinguisherMethod` defines how to compute the flow distinguisher
    /// for requests that match this schema. `nil` specifies that the
    /// distinguisher is disabled and thus will always be the empty string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinguisher_method: Option<FlowDistinguisherMethod>,
    /// `rules` describes which requests will match this flow schema. This
    /// FlowSchema matches a request if and only if at least one member of
    /// rules matches the request. if it is an empty slice, there will be no
    /// requests matching the FlowSchema.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<PolicyRulesWithSubjects>,
}

/// PriorityLevelConfigurationReference contains information that points to
/// the "request-priority" being used.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PriorityLevelConfigurationReference {
    /// `name` is the name of the priority level configuration being
    /// referenced Required.
    #[serde(default)]
    pub name: String,
}

/// FlowDistinguisherMethod specifies the method of a flow distinguisher.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlowDistinguisherMethod {
    /// `type` is the type of flow distinguisher method The supported types
    /// are "ByUser" and "ByNamespace". Required.
    #[serde(rename = "type", default)]
    pub type_: String,
}

/// PolicyRulesWithSubjects prescribes a test that applies to a request to
/// an apiserver. The test considers the subject making the request, the
/// verb being requested, and the resource to be acted upon. This
/// PolicyRulesWithSubjects matches a request if and only if both (a) at
/// least one member of subjects matches the request and (b) at least one
/// member of resourceRules or nonResourceRules matches the request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRulesWithSubjects {
    /// subjects is the list of normal user, serviceaccount, or group that
    /// this rule cares about. There must be at least one member in this
    /// slice. A slice that includes both the system:authenticated and
    /// system:unauthenticated user groups matches every request. Required.
    #[serde(default)]
    pub subjects: Vec<Subject>,
    /// `resourceRules` is a slice of ResourcePolicyRules that identify
    /// matching requests according to their verb and the target resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_rules: Vec<ResourcePolicyRule>,
    /// `nonResourceRules` is a list of NonResourcePolicyRules that identify
    /// matching requests according to their verb and the target
    /// non-resource URL.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub non_resource_rules: Vec<NonResourcePolicyRule>,
}

/// Subject matches the originator of a request, as identified by the
/// request authentication system. There are three ways of matching an
/// originator; by user, group, or service account.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `kind` indicates which one of the other fields is non-empty.
    /// Required
    #[serde(default)]
    pub kind: String,
    /// `user` matches based on username.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<UserSubject>,
    /// `group` matches based on user group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupSubject>,
    /// `serviceAccount` matches ServiceAccounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountSubject>,
}

/// UserSubject holds detailed information for user-kind subject.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UserSubject {
    /// `name` is the username that matches, or "*" to match all usernames.
    /// Required.
    #[serde(default)]
    pub name: String,
}

/// GroupSubject holds detailed information for group-kind subject.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupSubject {
    /// name is the user group that matches, or "*" to match all user
    /// groups. Required.
    #[serde(default)]
    pub name: String,
}

/// ServiceAccountSubject holds detailed information for service-account-kind
/// subject.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServiceAccountSubject {
    /// `namespace` is the namespace of matching ServiceAccount objects.
    /// Required.
    #[serde(default)]
    pub namespace: String,
    /// `name` is the name of matching ServiceAccount objects, or "*" to
    /// match regardless of name. Required.
    #[serde(default)]
    pub name: String,
}

/// ResourcePolicyRule is a predicate that matches some resource requests,
/// testing the request's verb and the target resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePolicyRule {
    /// `verbs` is a list of matching verbs and may not be empty. "*"
    /// matches all verbs and, if present, must be the only entry. Required.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// `apiGroups` is a list of matching API groups and may not be empty.
    /// "*" matches all API groups and, if present, must be the only entry.
    /// Required.
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// `resources` is a list of matching resources (i.e., lowercase and
    /// plural) with, if desired, subresource. For example, [ "services",
    /// "nodes/status" ]. This list may not be empty. "*" matches all
    /// resources and, if present, must be the only entry. Required.
    #[serde(default)]
    pub resources: Vec<String>,
    /// `clusterScope` indicates whether to match requests that do not
    /// specify a namespace (which happens either because the resource is
    /// not namespaced or the request targets all namespaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_scope: Option<bool>,
    /// `namespaces` is a list of target namespaces that restricts matches.
    /// A request that specifies a target namespace matches only if either
    /// (a) this list contains that target namespace or (b) this list
    /// contains "*".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
}

/// NonResourcePolicyRule is a predicate that matches non-resource requests
/// according to their verb and the target non-resource URL.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NonResourcePolicyRule {
    /// `verbs` is a list of matching verbs and may not be empty. "*"
    /// matches all verbs. If it is present, it must be the only entry.
    /// Required.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// `nonResourceURLs` is a set of url prefixes that a user should have
    /// access to and may not be empty. "*" matches everything; a trailing
    /// "/*" matches the prefix and everything below it. Required.
    #[serde(rename = "nonResourceURLs", default)]
    pub non_resource_urls: Vec<String>,
}

/// FlowSchemaStatus represents the current state of a FlowSchema.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlowSchemaStatus {
    /// `conditions` is a list of the current states of FlowSchema.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A condition of a FlowSchema or PriorityLevelConfiguration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `type` is the type of the condition. Required.
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// `status` is the status of the condition. Can be True, False,
    /// Unknown. Required.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// `lastTransitionTime` is the last time the condition transitioned
    /// from one status to another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// `reason` is a unique, one-word, CamelCase reason for the condition's
    /// last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// `message` is a human-readable message indicating details about last
    /// transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// PriorityLevelConfiguration represents the configuration of a priority
/// level.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "flowcontrol.apiserver.k8s.io",
    version = "v1",
    cluster,
    openapi_name = "io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration",
    printcolumn(name = "Type", type = "string", json_path = ".spec.type"),
    printcolumn(
        name = "NominalConcurrencyShares",
        type = "string",
        json_path = ".spec.limited.nominalConcurrencyShares"
    ),
    printcolumn(
        name = "Queues",
        type = "string",
        json_path = ".spec.limited.limitResponse.queuing.queues"
    ),
    printcolumn(
        name = "HandSize",
        type = "string",
        json_path = ".spec.limited.limitResponse.queuing.handSize"
    ),
    printcolumn(
        name = "QueueLengthLimit",
        type = "string",
        json_path = ".spec.limited.limitResponse.queuing.queueLengthLimit"
    ),
    printcolumn(name = "Age", type = "date", json_path = ".metadata.creationTimestamp"),
    subresource_status
)]
pub struct PriorityLevelConfiguration {
    /// `metadata` is the standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` is the specification of the desired behavior of a
    /// "request-priority".
    #[serde(default)]
    pub spec: PriorityLevelConfigurationSpec,
    /// `status` is the current status of a "request-priority".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PriorityLevelConfigurationStatus>,
}

/// PriorityLevelConfigurationSpec specifies the configuration of a priority
/// level.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PriorityLevelConfigurationSpec {
    /// `type` indicates whether this priority level is subject to
    /// limitation on request execution. A value of `"Exempt"` means that
    /// requests of this priority level are not subject to a limit (and thus
    /// are never queued) and do not detract from the capacity made
    /// available to other priority levels. A value of `"Limited"` means
    /// that (a) requests of this priority level _are_ subject to limits and
    /// (b) some of the server's limited capacity is made available
    /// exclusively to this priority level. Required.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `limited` specifies how requests are handled for a Limited priority
    /// level. This field must be non-empty if and only if `type` is
    /// `"Limited"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited: Option<LimitedPriorityLevelConfiguration>,
    /// `exempt` specifies how requests are handled for an exempt priority
    /// level. This field MUST be empty if `type` is `"Limited"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exempt: Option<ExemptPriorityLevelConfiguration>,
}

/// LimitedPriorityLevelConfiguration specifies how to handle requests that
/// are subject to limits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitedPriorityLevelConfiguration {
    /// `nominalConcurrencyShares` (NCS) contributes to the computation of
    /// the NominalConcurrencyLimit (NominalCL) of this level:
    /// NominalCL(i) = ceil( ServerCL * NCS(i) / sum_ncs ). If not
    /// specified, this field defaults to a value of 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominal_concurrency_shares: Option<i32>,
    /// `limitResponse` indicates what to do with requests that can not be
    /// executed right now
    #[serde(default)]
    pub limit_response: LimitResponse,
    /// `lendablePercent` prescribes the fraction of the level's NominalCL
    /// that can be borrowed by other priority levels. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lendable_percent: Option<i32>,
    /// `borrowingLimitPercent`, if present, configures a limit on how many
    /// seats this priority level can borrow from other priority levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit_percent: Option<i32>,
}

/// ExemptPriorityLevelConfiguration describes the configurable aspects of
/// the handling of exempt requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExemptPriorityLevelConfiguration {
    /// `nominalConcurrencyShares` (NCS) contributes to the computation of
    /// the NominalConcurrencyLimit (NominalCL) of this level. The default
    /// value is zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominal_concurrency_shares: Option<i32>,
    /// `lendablePercent` prescribes the fraction of the level's NominalCL
    /// that can be borrowed by other priority levels. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lendable_percent: Option<i32>,
}

/// LimitResponse defines how to handle requests that can not be executed
/// right now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LimitResponse {
    /// `type` is "Queue" or "Reject". "Queue" means that requests that can
    /// not be executed upon arrival are held in a queue until they can be
    /// executed or a queuing limit is reached. "Reject" means that requests
    /// that can not be executed upon arrival are rejected. Required.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `queuing` holds the configuration parameters for queuing. This field
    /// may be non-empty only if `type` is `"Queue"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queuing: Option<QueuingConfiguration>,
}

/// QueuingConfiguration holds the configuration parameters for queuing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueuingConfiguration {
    /// `queues` is the number of queues for this priority level. This
    /// field has a default value of 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<i32>,
    /// `handSize` is a small positive number that configures the shuffle
    /// sharding of requests into queues. This field has a default value of
    /// 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hand_size: Option<i32>,
    /// `queueLengthLimit` is the maximum number of requests allowed to be
    /// waiting in a given queue of this priority level at a time; excess
    /// requests are rejected. This value must be positive. If not
    /// specified, it will be defaulted to 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_length_limit: Option<i32>,
}

/// PriorityLevelConfigurationStatus represents the current state of a
/// "request-priority".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PriorityLevelConfigurationStatus {
    /// `conditions` is the current state of "request-priority".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The priority level types.
const PL_TYPES: [&str; 2] = ["Exempt", "Limited"];
/// The limit response types.
const LIMIT_RESPONSE_TYPES: [&str; 2] = ["Queue", "Reject"];
/// The distinguisher method types.
const DISTINGUISHER_TYPES: [&str; 2] = ["ByUser", "ByNamespace"];
/// The subject kinds.
const SUBJECT_KINDS: [&str; 3] = ["Group", "ServiceAccount", "User"];

fn default_flow_schema(spec: &mut FlowSchemaSpec) {
    spec.matching_precedence.get_or_insert(1000);
}

fn default_priority_level(spec: &mut PriorityLevelConfigurationSpec) {
    if let Some(limited) = &mut spec.limited {
        limited.nominal_concurrency_shares.get_or_insert(30);
        limited.lendable_percent.get_or_insert(0);
        if limited.limit_response.type_ == "Queue" {
            let q = limited
                .limit_response
                .queuing
                .get_or_insert_with(Default::default);
            q.queues.get_or_insert(64);
            q.hand_size.get_or_insert(8);
            q.queue_length_limit.get_or_insert(50);
        }
    }
    if let Some(exempt) = &mut spec.exempt {
        exempt.nominal_concurrency_shares.get_or_insert(0);
        exempt.lendable_percent.get_or_insert(0);
    }
}

fn required_list(errs: &mut ErrorList, path: &FieldPath, list: &[String], what: &str) {
    if list.is_empty() {
        errs.push(FieldError::required(
            path.as_str(),
            format!("{what} must contain at least one value"),
        ));
    } else if list.len() > 1 && list.iter().any(|v| v == "*") {
        errs.push(FieldError::invalid(
            path.as_str(),
            serde_json::to_value(list).unwrap_or_default(),
            format!("if '*' is present, must not specify other {what}"),
        ));
    }
}

fn validate_subject(errs: &mut ErrorList, path: &FieldPath, s: &Subject) {
    let name_required = |errs: &mut ErrorList, p: FieldPath, name: &str| {
        if name.is_empty() {
            errs.push(FieldError::required(p.child("name").as_str(), ""));
        }
    };
    match s.kind.as_str() {
        "User" => match &s.user {
            Some(u) => name_required(errs, path.child("user"), &u.name),
            None => errs.push(FieldError::required(
                path.child("user").as_str(),
                "user is required when subject kind is 'User'",
            )),
        },
        "Group" => match &s.group {
            Some(g) => name_required(errs, path.child("group"), &g.name),
            None => errs.push(FieldError::required(
                path.child("group").as_str(),
                "group is required when subject kind is 'Group'",
            )),
        },
        "ServiceAccount" => match &s.service_account {
            Some(sa) => {
                name_required(errs, path.child("serviceAccount"), &sa.name);
                if sa.namespace.is_empty() {
                    errs.push(FieldError::required(
                        path.child("serviceAccount").child("namespace").as_str(),
                        "",
                    ));
                }
            }
            None => errs.push(FieldError::required(
                path.child("serviceAccount").as_str(),
                "serviceAccount is required when subject kind is 'ServiceAccount'",
            )),
        },
        "" => errs.push(FieldError::required(path.child("kind").as_str(), "")),
        other => errs.push(FieldError::not_supported(
            path.child("kind").as_str(),
            other.to_string(),
            &SUBJECT_KINDS,
        )),
    }
}

fn validate_flow_schema(fs: &FlowSchema) -> ErrorList {
    let mut errs = ErrorList::default();
    let spec = FieldPath::new("spec");
    if fs.spec.priority_level_configuration.name.is_empty() {
        errs.push(FieldError::required(
            spec.child("priorityLevelConfiguration")
                .child("name")
                .as_str(),
            "must reference a priority level",
        ));
    }
    if let Some(p) = fs.spec.matching_precedence
        && !(1..=10000).contains(&p)
    {
        errs.push(FieldError::invalid(
            spec.child("matchingPrecedence").as_str(),
            p,
            "must be between 1 and 10000 inclusively",
        ));
    }
    if let Some(d) = &fs.spec.distinguisher_method
        && !DISTINGUISHER_TYPES.contains(&d.type_.as_str())
    {
        errs.push(FieldError::not_supported(
            spec.child("distinguisherMethod").child("type").as_str(),
            d.type_.clone(),
            &DISTINGUISHER_TYPES,
        ));
    }
    for (i, rule) in fs.spec.rules.iter().enumerate() {
        let path = spec.child("rules").index(i);
        if rule.subjects.is_empty() {
            errs.push(FieldError::required(
                path.child("subjects").as_str(),
                "subjects must contain at least one value",
            ));
        }
        for (j, s) in rule.subjects.iter().enumerate() {
            validate_subject(&mut errs, &path.child("subjects").index(j), s);
        }
        if rule.resource_rules.is_empty() && rule.non_resource_rules.is_empty() {
            errs.push(FieldError::required(
                path.as_str(),
                "at least one of resourceRules and nonResourceRules has to be non-empty",
            ));
        }
        for (j, r) in rule.resource_rules.iter().enumerate() {
            let p = path.child("resourceRules").index(j);
            required_list(&mut errs, &p.child("verbs"), &r.verbs, "verbs");
            required_list(
                &mut errs,
                &p.child("apiGroups"),
                &r.api_groups,
                "api groups",
            );
            required_list(&mut errs, &p.child("resources"), &r.resources, "resources");
            if r.namespaces.is_empty() && r.cluster_scope != Some(true) {
                errs.push(FieldError::required(
                    p.child("namespaces").as_str(),
                    "resource rules that are not cluster scoped must supply at least one namespace",
                ));
            }
        }
        for (j, r) in rule.non_resource_rules.iter().enumerate() {
            let p = path.child("nonResourceRules").index(j);
            required_list(&mut errs, &p.child("verbs"), &r.verbs, "verbs");
            required_list(
                &mut errs,
                &p.child("nonResourceURLs"),
                &r.non_resource_urls,
                "non-resource urls",
            );
        }
    }
    errs
}

fn validate_priority_level(pl: &PriorityLevelConfiguration) -> ErrorList {
    let mut errs = ErrorList::default();
    let spec = FieldPath::new("spec");
    let s = &pl.spec;
    match s.type_.as_str() {
        "Exempt" => {
            if s.limited.is_some() {
                errs.push(FieldError::forbidden(
                    spec.child("limited").as_str(),
                    "must be nil if the type is not Limited",
                ));
            }
        }
        "Limited" => {
            if s.exempt.is_some() {
                errs.push(FieldError::forbidden(
                    spec.child("exempt").as_str(),
                    "must be nil if the type is Limited",
                ));
            }
            match &s.limited {
                None => errs.push(FieldError::required(
                    spec.child("limited").as_str(),
                    "must not be empty when type is Limited",
                )),
                Some(l) => validate_limited(&mut errs, &spec.child("limited"), l),
            }
        }
        "" => errs.push(FieldError::required(spec.child("type").as_str(), "")),
        other => errs.push(FieldError::not_supported(
            spec.child("type").as_str(),
            other.to_string(),
            &PL_TYPES,
        )),
    }
    if let Some(e) = &s.exempt {
        let path = spec.child("exempt");
        if e.nominal_concurrency_shares.is_some_and(|v| v < 0) {
            errs.push(FieldError::invalid(
                path.child("nominalConcurrencyShares").as_str(),
                e.nominal_concurrency_shares.unwrap_or_default(),
                "must be a non-negative integer",
            ));
        }
    }
    errs
}

fn validate_limited(errs: &mut ErrorList, path: &FieldPath, l: &LimitedPriorityLevelConfiguration) {
    if let Some(v) = l.nominal_concurrency_shares
        && v < 0
    {
        errs.push(FieldError::invalid(
            path.child("nominalConcurrencyShares").as_str(),
            v,
            "must be a non-negative integer",
        ));
    }
    if let Some(v) = l.lendable_percent
        && !(0..=100).contains(&v)
    {
        errs.push(FieldError::invalid(
            path.child("lendablePercent").as_str(),
            v,
            "must be between 0 and 100, inclusive",
        ));
    }
    let lr = path.child("limitResponse");
    match l.limit_response.type_.as_str() {
        "Reject" => {
            if l.limit_response.queuing.is_some() {
                errs.push(FieldError::forbidden(
                    lr.child("queuing").as_str(),
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        "Queue" => {
            let q = l.limit_response.queuing.clone().unwrap_or_default();
            let qp = lr.child("queuing");
            let queues = q.queues.unwrap_or(64);
            let hand = q.hand_size.unwrap_or(8);
            let limit = q.queue_length_limit.unwrap_or(50);
            if limit <= 0 {
                errs.push(FieldError::invalid(
                    qp.child("queueLengthLimit").as_str(),
                    limit,
                    "must be positive",
                ));
            }
            if queues <= 0 {
                errs.push(FieldError::invalid(
                    qp.child("queues").as_str(),
                    queues,
                    "must be positive",
                ));
            }
            if hand <= 0 {
                errs.push(FieldError::invalid(
                    qp.child("handSize").as_str(),
                    hand,
                    "must be positive",
                ));
            } else if hand > queues {
                errs.push(FieldError::invalid(
                    qp.child("handSize").as_str(),
                    hand,
                    format!("should not be greater than queues ({queues})"),
                ));
            }
        }
        "" => errs.push(FieldError::required(lr.child("type").as_str(), "")),
        other => errs.push(FieldError::not_supported(
            lr.child("type").as_str(),
            other.to_string(),
            &LIMIT_RESPONSE_TYPES,
        )),
    }
}

impl Strategy for FlowSchema {
    fn default_fields(&mut self) {
        default_flow_schema(&mut self.spec);
    }

    fn validate_create(&self) -> ErrorList {
        validate_flow_schema(self)
    }

    fn validate_update(&self, _old: &Self) -> ErrorList {
        validate_flow_schema(self)
    }

    fn allow_unconditional_update() -> bool {
        true
    }
}

impl Strategy for PriorityLevelConfiguration {
    fn default_fields(&mut self) {
        default_priority_level(&mut self.spec);
    }

    fn validate_create(&self) -> ErrorList {
        validate_priority_level(self)
    }

    fn validate_update(&self, _old: &Self) -> ErrorList {
        validate_priority_level(self)
    }

    fn allow_unconditional_update() -> bool {
        true
    }
}
