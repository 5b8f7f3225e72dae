//! RBAC (`--authorization-mode=RBAC`): Roles and ClusterRoles hold rules,
//! RoleBindings and ClusterRoleBindings grant them to subjects.
//!
//! Evaluation reads an in-memory [`Snapshot`] of the four kinds, replaced
//! whenever they change. Deny by default; the first rule that allows wins.
//! A request in namespace N sees every ClusterRoleBinding plus the
//! RoleBindings of N. ClusterRoles with an `aggregationRule` get the union
//! of the rules of the ClusterRoles its selectors match (written back to
//! the stored object, as kube-controller-manager's aggregation controller
//! does).
//! [`bootstrap_objects`] are the default roles and bindings
//! (kube-apiserver's bootstrap policy, for the kinds apiforge serves).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Attributes, Authorize, Decision};
use crate::error::ApiResult;
use crate::registry::Stores;
use crate::registry::{ListParams, Store};
use crate::request::user::{
    AUTHENTICATED_GROUP, MASTERS_GROUP, SERVICE_ACCOUNT_PREFIX, UNAUTHENTICATED_GROUP, UserInfo,
};

pub use apiforge_core::builtin::rbac_v1::{GROUP, PolicyRule, RoleRef, Subject};

#[derive(Clone, Debug, Default)]
struct Binding {
    name: String,
    namespace: String,
    subjects: Vec<Subject>,
    role_ref: RoleRef,
}

#[derive(Clone, Debug, Default)]
struct ClusterRole {
    labels: BTreeMap<String, String>,
    rules: Vec<PolicyRule>,
    /// The rules as stored (before aggregation).
    stored: Vec<PolicyRule>,
    /// matchLabels / matchExpressions selectors of the aggregation rule.
    aggregation: Option<Vec<Value>>,
}

/// The RBAC objects evaluation reads.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    cluster_roles: HashMap<String, ClusterRole>,
    roles: HashMap<(String, String), Vec<PolicyRule>>,
    cluster_role_bindings: Vec<Binding>,
    role_bindings: HashMap<String, Vec<Binding>>,
}

fn field<T: for<'de> Deserialize<'de> + Default>(obj: &Value, key: &str) -> T {
    obj.get(key)
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

fn meta_str(obj: &Value, key: &str) -> String {
    obj.pointer(&format!("/metadata/{key}"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl Snapshot {
    /// Builds a snapshot from objects of the four kinds (JSON, `kind` set);
    /// other objects are ignored. Aggregated ClusterRoles are resolved.
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut s = Snapshot::default();
        for obj in objects {
            let name = meta_str(obj, "name");
            let namespace = meta_str(obj, "namespace");
            let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
            let binding = || Binding {
                name: name.clone(),
                namespace: namespace.clone(),
                subjects: field(obj, "subjects"),
                role_ref: field(obj, "roleRef"),
            };
            match kind {
                "ClusterRole" => {
                    let aggregation = obj
                        .pointer("/aggregationRule/clusterRoleSelectors")
                        .and_then(Value::as_array)
                        .cloned();
                    let labels = obj
                        .pointer("/metadata/labels")
                        .cloned()
                        .and_then(|v| serde_json::from_value(v).ok())
                        .unwrap_or_default();
                    s.cluster_roles.insert(
                        name.clone(),
                        ClusterRole {
                            labels,
                            rules: field(obj, "rules"),
                            stored: field(obj, "rules"),
                            aggregation,
                        },
                    );
                }
                "Role" => {
                    s.roles
                        .insert((namespace.clone(), name.clone()), field(obj, "rules"));
                }
                "ClusterRoleBinding" => s.cluster_role_bindings.push(binding()),
                "RoleBinding" => s
                    .role_bindings
                    .entry(namespace.clone())
                    .or_default()
                    .push(binding()),
                _ => {}
            }
        }
        s.aggregate();
        s
    }

    /// Resolves aggregation rules to a fixed point (aggregated roles may
    /// themselves be aggregated into others).
    fn aggregate(&mut self) {
        for _ in 0..8 {
            let mut changed = false;
            let names: Vec<String> = self.cluster_roles.keys().cloned().collect();
            for name in &names {
                let Some(selectors) = self.cluster_roles[name].aggregation.clone() else {
                    continue;
                };
                let mut rules: Vec<PolicyRule> = Vec::new();
                let mut sources: Vec<&String> = names
                    .iter()
                    .filter(|n| *n != name)
                    .filter(|n| {
                        let labels = &self.cluster_roles[*n].labels;
                        selectors.iter().any(|sel| selector_matches(sel, labels))
                    })
                    .collect();
                sources.sort();
                for n in sources {
                    for r in &self.cluster_roles[n].rules {
                        if !rules.contains(r) {
                            rules.push(r.clone());
                        }
                    }
                }
                if let Some(role) = self.cluster_roles.get_mut(name)
                    && role.rules != rules
                {
                    role.rules = rules;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    fn rules_of(&self, role_ref: &RoleRef, namespace: &str) -> Result<&[PolicyRule], String> {
        match role_ref.kind.as_str() {
            "ClusterRole" => self
                .cluster_roles
                .get(&role_ref.name)
                .map(|r| r.rules.as_slice())
                .ok_or_else(|| format!("clusterrole.{GROUP} {:?} not found", role_ref.name)),
            "Role" => self
                .roles
                .get(&(namespace.to_string(), role_ref.name.clone()))
                .map(Vec::as_slice)
                .ok_or_else(|| format!("role.{GROUP} {:?} not found", role_ref.name)),
            other => Err(format!("unsupported role reference kind: {other:?}")),
        }
    }

    /// Calls `visit` with every rule that applies to `user` in `namespace`
    /// (cluster-wide rules first) and a description of where it comes from;
    /// stops when `visit` returns true. Returns the errors met (missing
    /// roles).
    fn visit_rules(
        &self,
        user: &UserInfo,
        namespace: &str,
        visit: &mut dyn FnMut(&str, &PolicyRule) -> bool,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        for b in &self.cluster_role_bindings {
            let Some(subject) = b.subjects.iter().find(|s| applies(s, user, "")) else {
                continue;
            };
            match self.rules_of(&b.role_ref, "") {
                Ok(rules) => {
                    for r in rules {
                        let source = format!(
                            "ClusterRoleBinding {:?} of {} {:?} to {}",
                            b.name,
                            b.role_ref.kind,
                            b.role_ref.name,
                            describe(subject)
                        );
                        if visit(&source, r) {
                            return errors;
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        if namespace.is_empty() {
            return errors;
        }
        for b in self.role_bindings.get(namespace).into_iter().flatten() {
            let Some(subject) = b.subjects.iter().find(|s| applies(s, user, &b.namespace)) else {
                continue;
            };
            match self.rules_of(&b.role_ref, namespace) {
                Ok(rules) => {
                    for r in rules {
                        let source = format!(
                            "RoleBinding \"{}/{}\" of {} {:?} to {}",
                            b.name,
                            b.namespace,
                            b.role_ref.kind,
                            b.role_ref.name,
                            describe(subject)
                        );
                        if visit(&source, r) {
                            return errors;
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        errors
    }

    /// The rules `user` holds in `namespace` (cluster-wide ones included).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> Vec<PolicyRule> {
        let mut out = Vec::new();
        self.visit_rules(user, namespace, &mut |_, r| {
            out.push(r.clone());
            false
        });
        out
    }

    /// The aggregated ClusterRoles whose stored rules differ from the
    /// aggregation's result, with that result (the aggregation controller
    /// writes it back).
    pub fn stale_aggregations(&self) -> Vec<(String, Vec<PolicyRule>)> {
        let mut out: Vec<(String, Vec<PolicyRule>)> = self
            .cluster_roles
            .iter()
            .filter(|(_, r)| r.aggregation.is_some() && r.rules != r.stored)
            .map(|(name, r)| (name.clone(), r.rules.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The rules of a role a binding refers to (for escalation checks).
    pub fn role_rules(&self, role_ref: &RoleRef, namespace: &str) -> Option<Vec<PolicyRule>> {
        self.rules_of(role_ref, namespace).ok().map(<[_]>::to_vec)
    }

    /// RBAC's decision on `attrs`.
    pub fn authorize(&self, attrs: &Attributes) -> (Decision, String) {
        let mut allowed_by = None;
        let errors = self.visit_rules(&attrs.user, &attrs.namespace, &mut |source, rule| {
            if rule_allows(rule, attrs) {
                allowed_by = Some(source.to_string());
                true
            } else {
                false
            }
        });
        if let Some(source) = allowed_by {
            return (Decision::Allow, format!("RBAC: allowed by {source}"));
        }
        let reason = if errors.is_empty() {
            String::new()
        } else {
            format!("RBAC: [{}]", errors.join(", "))
        };
        (Decision::NoOpinion, reason)
    }
}

/// Whether a `{matchLabels, matchExpressions}` selector matches `labels`
/// (an empty selector matches nothing here, as aggregation requires).
fn selector_matches(sel: &Value, labels: &BTreeMap<String, String>) -> bool {
    let match_labels: BTreeMap<String, String> = field(sel, "matchLabels");
    let exprs: Vec<Value> = field(sel, "matchExpressions");
    if match_labels.is_empty() && exprs.is_empty() {
        return false;
    }
    let labels_ok = match_labels.iter().all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = exprs.iter().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let values: Vec<String> = field(e, "values");
        let op = e
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match op {
            "In" => labels.get(key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(key),
            "DoesNotExist" => !labels.contains_key(key),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// Whether a binding subject designates `user`. `namespace` is the
/// binding's namespace (the default of service-account subjects).
fn applies(subject: &Subject, user: &UserInfo, namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => subject.name == user.name,
        "Group" => user.in_group(&subject.name),
        "ServiceAccount" => {
            let ns = if subject.namespace.is_empty() {
                namespace
            } else {
                &subject.namespace
            };
            !ns.is_empty() && user.name == format!("{SERVICE_ACCOUNT_PREFIX}{ns}:{}", subject.name)
        }
        _ => false,
    }
}

fn describe(subject: &Subject) -> String {
    if subject.namespace.is_empty() {
        format!("{} {:?}", subject.kind, subject.name)
    } else {
        format!(
            "{} \"{}/{}\"",
            subject.kind, subject.namespace, subject.name
        )
    }
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

/// Whether `rule` allows `attrs` (RBAC's `RuleAllows`).
pub fn rule_allows(rule: &PolicyRule, attrs: &Attributes) -> bool {
    if !has(&rule.verbs, &attrs.verb) {
        return false;
    }
    if !attrs.resource_request {
        return rule.non_resource_urls.iter().any(|u| {
            u == "*"
                || *u == attrs.path
                || (u.ends_with('*') && attrs.path.starts_with(u.trim_end_matches('*')))
        });
    }
    if !has(&rule.api_groups, &attrs.api_group) {
        return false;
    }
    let combined = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let resource_ok = rule.resources.iter().any(|r| {
        r == "*"
            || *r == combined
            || (!attrs.subresource.is_empty()
                && r.strip_prefix("*/") == Some(attrs.subresource.as_str()))
    });
    resource_ok && (rule.resource_names.is_empty() || rule.resource_names.contains(&attrs.name))
}

/// The requested rules some `owned` rule does not cover, broken down to
/// single verb/group/resource/name (or verb/URL) atoms — RBAC's
/// escalation check. Empty when `owned` covers everything.
pub fn uncovered(owned: &[PolicyRule], requested: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut missing = Vec::new();
    for rule in requested {
        for verb in &rule.verbs {
            for url in &rule.non_resource_urls {
                let covered = owned.iter().any(|o| {
                    has(&o.verbs, verb)
                        && o.non_resource_urls.iter().any(|ou| {
                            ou == url
                                || (ou.ends_with('*') && url.starts_with(ou.trim_end_matches('*')))
                        })
                });
                if !covered {
                    missing.push(PolicyRule {
                        verbs: vec![verb.clone()],
                        non_resource_urls: vec![url.clone()],
                        ..Default::default()
                    });
                }
            }
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let names: Vec<Option<&String>> = if rule.resource_names.is_empty() {
                        vec![None]
                    } else {
                        rule.resource_names.iter().map(Some).collect()
                    };
                    for name in names {
                        let covered = owned.iter().any(|o| {
                            has(&o.verbs, verb)
                                && has(&o.api_groups, group)
                                && (has(&o.resources, resource)
                                    || resource.split_once('/').is_some_and(|(_, sub)| {
                                        o.resources
                                            .iter()
                                            .any(|r| r.strip_prefix("*/") == Some(sub))
                                    }))
                                && (o.resource_names.is_empty()
                                    || name.is_some_and(|n| o.resource_names.contains(n)))
                        });
                        if !covered {
                            missing.push(PolicyRule {
                                verbs: vec![verb.clone()],
                                api_groups: vec![group.clone()],
                                resources: vec![resource.clone()],
                                resource_names: name.cloned().into_iter().collect(),
                                ..Default::default()
                            });
                        }
                    }
                }
            }
        }
    }
    missing
}

/// Formats a rule as Kubernetes' `PolicyRule.CompactString` does
/// (`{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}`).
pub fn compact(rule: &PolicyRule) -> String {
    let list = |items: &[String]| {
        items
            .iter()
            .map(|i| format!("{i:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut parts = Vec::new();
    if !rule.api_groups.is_empty() {
        parts.push(format!("APIGroups:[{}]", list(&rule.api_groups)));
    }
    if !rule.resources.is_empty() {
        parts.push(format!("Resources:[{}]", list(&rule.resources)));
    }
    if !rule.non_resource_urls.is_empty() {
        parts.push(format!(
            "NonResourceURLs:[{}]",
            list(&rule.non_resource_urls)
        ));
    }
    if !rule.resource_names.is_empty() {
        parts.push(format!("ResourceNames:[{}]", list(&rule.resource_names)));
    }
    parts.push(format!("Verbs:[{}]", list(&rule.verbs)));
    format!("{{{}}}", parts.join(", "))
}

/// The RBAC authorizer: evaluates the current snapshot.
#[derive(Debug)]
pub struct Rbac {
    snapshot: RwLock<Arc<Snapshot>>,
}

impl Default for Rbac {
    /// Starts with the bootstrap policy until the stored objects are read.
    fn default() -> Self {
        let objects = bootstrap_objects();
        Rbac {
            snapshot: RwLock::new(Arc::new(Snapshot::from_objects(&objects))),
        }
    }
}

impl Rbac {
    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        match self.snapshot.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the snapshot.
    pub fn replace(&self, snapshot: Snapshot) {
        let snapshot = Arc::new(snapshot);
        match self.snapshot.write() {
            Ok(mut s) => *s = snapshot,
            Err(poisoned) => *poisoned.into_inner() = snapshot,
        }
    }
}

#[async_trait::async_trait]
impl Authorize for Rbac {
    fn metric_type(&self) -> &'static str {
        "RBAC"
    }

    async fn authorize(
        &self,
        attrs: &Attributes,
    ) -> Result<(Decision, String), super::EvaluationError> {
        Ok(self.snapshot().authorize(attrs))
    }
}

const BOOTSTRAP_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");
const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";

fn cluster_role(
    name: &str,
    extra_labels: &[(&str, &str)],
    rules: Value,
    aggregate: Option<&str>,
) -> Value {
    let mut labels: BTreeMap<&str, &str> = extra_labels.iter().copied().collect();
    labels.insert(BOOTSTRAP_LABEL.0, BOOTSTRAP_LABEL.1);
    let mut obj = json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels, "annotations": {AUTOUPDATE_ANNOTATION: "true"}},
        "rules": rules,
    });
    if let Some(label) = aggregate {
        obj["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]});
    }
    obj
}

fn cluster_role_binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": {BOOTSTRAP_LABEL.0: BOOTSTRAP_LABEL.1}, "annotations": {AUTOUPDATE_ANNOTATION: "true"}},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// A bootstrap Role in `namespace`.
fn role(name: &str, namespace: &str, rules: Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace, "labels": {BOOTSTRAP_LABEL.0: BOOTSTRAP_LABEL.1}, "annotations": {AUTOUPDATE_ANNOTATION: "true"}},
        "rules": rules,
    })
}

/// The default ClusterRoles and ClusterRoleBindings (kube-apiserver's
/// bootstrap policy, reduced to what apiforge serves): `cluster-admin` for
/// `system:masters`; `system:discovery`, `system:basic-user` for every
/// authenticated user; `system:public-info-viewer` for everyone;
/// `system:monitoring` (health checks and `/metrics`) for the group of that
/// name; the
/// aggregated user-facing `admin`, `edit`, `view`; for aggregated API
/// servers, `system:auth-delegator` (TokenReviews and
/// SubjectAccessReviews) and the Role `extension-apiserver-authentication-reader`
/// in `kube-system` (the authentication ConfigMap), bound to nobody.
pub fn bootstrap_objects() -> Vec<Value> {
    let read = json!(["get", "list", "watch"]);
    let write = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let to_admin = "rbac.authorization.k8s.io/aggregate-to-admin";
    let to_edit = "rbac.authorization.k8s.io/aggregate-to-edit";
    let to_view = "rbac.authorization.k8s.io/aggregate-to-view";
    vec![
        cluster_role(
            "cluster-admin",
            &[],
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]}
            ]),
            None,
        ),
        cluster_role(
            "system:discovery",
            &[],
            json!([{"nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                "/openapi/*", "/readyz", "/version", "/version/"
            ], "verbs": ["get"]}]),
            None,
        ),
        cluster_role(
            "system:basic-user",
            &[],
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}
            ]),
            None,
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            None,
        ),
        cluster_role(
            "system:monitoring",
            &[],
            json!([{"nonResourceURLs": [
                "/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis",
                "/readyz", "/readyz/*"
            ], "verbs": ["get"]}]),
            None,
        ),
        cluster_role("admin", &[], json!([]), Some(to_admin)),
        cluster_role("edit", &[(to_admin, "true")], json!([]), Some(to_edit)),
        cluster_role("view", &[(to_edit, "true")], json!([]), Some(to_view)),
        cluster_role(
            "system:aggregate-to-admin",
            &[(to_admin, "true")],
            json!([
                {"apiGroups": [GROUP], "resources": ["rolebindings", "roles"], "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]}
            ]),
            None,
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[(to_edit, "true")],
            json!([
                {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": write},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": read}
            ]),
            None,
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[(to_view, "true")],
            json!([
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": read},
                {"apiGroups": [""], "resources": ["namespaces", "namespaces/status"], "verbs": read}
            ]),
            None,
        ),
        cluster_role(
            "system:auth-delegator",
            &[],
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
            ]),
            None,
        ),
        role(
            "extension-apiserver-authentication-reader",
            "kube-system",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["extension-apiserver-authentication"], "verbs": ["get", "list", "watch"]}]),
        ),
        cluster_role_binding("cluster-admin", "cluster-admin", &[MASTERS_GROUP]),
        cluster_role_binding(
            "system:discovery",
            "system:discovery",
            &[AUTHENTICATED_GROUP],
        ),
        cluster_role_binding(
            "system:basic-user",
            "system:basic-user",
            &[AUTHENTICATED_GROUP],
        ),
        cluster_role_binding(
            "system:monitoring",
            "system:monitoring",
            &["system:monitoring"],
        ),
        cluster_role_binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &[AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP],
        ),
    ]
}

/// The names of [`bootstrap_objects`] by kind, for reconciliation.
pub fn bootstrap_names() -> BTreeSet<(String, String)> {
    bootstrap_objects()
        .iter()
        .map(|o| {
            (
                o.get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                meta_str(o, "name"),
            )
        })
        .collect()
}

/// The RBAC kinds, by plural resource.
const KINDS: [(&str, &str); 4] = [
    ("clusterroles", "ClusterRole"),
    ("roles", "Role"),
    ("clusterrolebindings", "ClusterRoleBinding"),
    ("rolebindings", "RoleBinding"),
];

/// How many bootstrap objects [`start`] ensures at a time.
const BOOTSTRAP_CONCURRENCY: usize = 8;

/// Creates one of the [`bootstrap_objects`] if it is missing; a
/// namespaced one's namespace first, when `namespaces` (the Namespace
/// store) is served and it does not exist yet, as upstream's
/// reconciliation does (`tryEnsureNamespace`).
async fn ensure_bootstrap_object(
    stores: &[(Store, &'static str)],
    namespaces: Option<&(Store, &'static str)>,
    obj: Value,
) -> ApiResult<()> {
    let Some((store, kind)) = crate::registry::store_for_object(stores, &obj) else {
        return Ok(());
    };
    let name = meta_str(&obj, "name");
    let namespace = meta_str(&obj, "namespace");
    if !namespace.is_empty() {
        if let Some((ns_store, version)) = namespaces {
            // Best effort: a failure shows in the retries below.
            let body = serde_json::json!({"metadata": {"name": namespace}});
            if let Err(e) = ns_store.ensure("", version, body).await {
                tracing::debug!(error = %e, %namespace, "ensuring the namespace of a bootstrap RBAC object");
            }
        }
        // The namespace may still be on its way (or being deleted): try
        // again a little (up to 5 s, looking every 10 ms: readiness waits
        // for this hook).
        let mut attempt = 0;
        loop {
            match store.ensure(&namespace, "v1", obj.clone()).await {
                Ok(created) => {
                    if created {
                        tracing::info!(%kind, %namespace, %name, "created bootstrap RBAC object");
                    }
                    return Ok(());
                }
                Err(e) if attempt < 500 => {
                    tracing::debug!(error = %e, %kind, %name, "creating bootstrap RBAC object; retrying");
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, %kind, %namespace, %name, "creating bootstrap RBAC object failed");
                    return Ok(());
                }
            }
        }
    }
    if store.ensure(&namespace, "v1", obj).await? {
        tracing::info!(%kind, %name, "created bootstrap RBAC object");
    }
    Ok(())
}

/// Creates the missing [`bootstrap_objects`], then keeps the RBAC
/// authorizer's snapshot equal to the stored objects (re-read whenever one
/// changes). Does nothing unless RBAC is a mode and its kinds are served;
/// without the kinds the authorizer keeps the bootstrap policy.
pub async fn start(
    rbac: Option<Arc<Rbac>>,
    stores: &Stores,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> ApiResult<()> {
    let Some(rbac) = rbac else {
        return Ok(());
    };
    let namespaces = stores
        .get("", "v1", "namespaces")
        .map(|(store, info)| (store, info.version));
    let stores = stores.stores_of(GROUP, &KINDS);
    if stores.is_empty() {
        return Ok(());
    }
    // Each one is a consistent read (and a create when missing): several
    // at a time, so that a restart on etcd under load is ready sooner.
    let results: Vec<ApiResult<()>> = futures::stream::iter(bootstrap_objects())
        .map(|obj| ensure_bootstrap_object(&stores, namespaces.as_ref(), obj))
        .buffer_unordered(BOOTSTRAP_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<ApiResult<()>>()?;
    refresh(&rbac, &stores).await?;
    tokio::spawn(async move {
        let view = stores.clone();
        crate::registry::informer::keep_current("RBAC", stores, shutdown, move || {
            let (rbac, view) = (rbac.clone(), view.clone());
            async move {
                if let Err(e) = refresh(&rbac, &view).await {
                    tracing::warn!(error = %e, "RBAC: re-reading roles failed");
                }
            }
        })
        .await;
    });
    Ok(())
}

/// Reads the stored objects into `rbac` and writes the rules of aggregated
/// ClusterRoles back when they changed (kube-controller-manager's
/// clusterrole-aggregation controller).
async fn refresh(rbac: &Rbac, stores: &[(Store, &'static str)]) -> ApiResult<()> {
    let snapshot = read_all(stores).await?;
    let stale = snapshot.stale_aggregations();
    rbac.replace(snapshot);
    let Some((store, _)) = stores.iter().find(|(_, k)| *k == "ClusterRole") else {
        return Ok(());
    };
    for (name, rules) in stale {
        let rules = serde_json::to_value(&rules).unwrap_or_default();
        store
            .update_internal("", &name, |obj| {
                if obj.get("rules") == Some(&rules) {
                    return false;
                }
                obj["rules"] = rules.clone();
                true
            })
            .await?;
        tracing::debug!(clusterrole = %name, "aggregated rules updated");
    }
    Ok(())
}

async fn read_all(stores: &[(Store, &'static str)]) -> ApiResult<Snapshot> {
    let mut objects = Vec::new();
    for (store, kind) in stores {
        let page = store.list(None, &ListParams::default()).await?;
        for mut obj in page.items {
            obj["kind"] = Value::from(*kind);
            objects.push(obj);
        }
    }
    Ok(Snapshot::from_objects(&objects))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(user: UserInfo, verb: &str, group: &str, resource: &str, ns: &str) -> Attributes {
        Attributes {
            user,
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            namespace: ns.into(),
            ..Default::default()
        }
    }

    #[test]
    fn evaluation() {
        let mut objects = bootstrap_objects();
        objects.push(json!({"kind": "RoleBinding", "metadata": {"name": "alice-edit", "namespace": "dev"},
            "roleRef": {"kind": "ClusterRole", "name": "edit"}, "subjects": [{"kind": "User", "name": "alice"}]}));
        objects.push(json!({"kind": "Role", "metadata": {"name": "cm-one", "namespace": "dev"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"], "verbs": ["get"]}]}));
        objects.push(json!({"kind": "RoleBinding", "metadata": {"name": "sa", "namespace": "dev"},
            "roleRef": {"kind": "Role", "name": "cm-one"}, "subjects": [{"kind": "ServiceAccount", "name": "robot"}]}));
        let s = Snapshot::from_objects(&objects);
        let alice = UserInfo::new("alice", &[AUTHENTICATED_GROUP]);
        let (d, reason) = s.authorize(&attrs(alice.clone(), "create", "", "secrets", "dev"));
        assert_eq!(d, Decision::Allow);
        assert_eq!(
            reason,
            "RBAC: allowed by RoleBinding \"alice-edit/dev\" of ClusterRole \"edit\" to User \"alice\""
        );
        assert_eq!(
            s.authorize(&attrs(alice.clone(), "list", "", "configmaps", "dev"))
                .0,
            Decision::Allow
        );
        assert_eq!(
            s.authorize(&attrs(alice.clone(), "list", "", "configmaps", "prod"))
                .0,
            Decision::NoOpinion
        );
        assert_eq!(
            s.authorize(&attrs(alice.clone(), "create", GROUP, "roles", "dev"))
                .0,
            Decision::NoOpinion
        );
        let robot = UserInfo::new("system:serviceaccount:dev:robot", &[]);
        let mut a = attrs(robot, "get", "", "configmaps", "dev");
        assert_eq!(s.authorize(&a).0, Decision::NoOpinion);
        a.name = "one".into();
        assert_eq!(s.authorize(&a).0, Decision::Allow);
        let anon = UserInfo::anonymous();
        let mut a = attrs(anon, "get", "", "", "");
        a.resource_request = false;
        a.path = "/healthz".into();
        assert_eq!(s.authorize(&a).0, Decision::Allow);
        a.path = "/apis".into();
        assert_eq!(s.authorize(&a).0, Decision::NoOpinion);
    }

    #[test]
    fn escalation_atoms() {
        let owned = vec![PolicyRule {
            verbs: vec!["get".into(), "list".into()],
            api_groups: vec!["".into()],
            resources: vec!["pods".into()],
            ..Default::default()
        }];
        let requested = vec![PolicyRule {
            verbs: vec!["get".into(), "delete".into()],
            api_groups: vec!["".into()],
            resources: vec!["pods".into()],
            ..Default::default()
        }];
        let missing = uncovered(&owned, &requested);
        assert_eq!(missing.len(), 1);
        assert_eq!(
            compact(&missing[0]),
            "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"
        );
    }
}
