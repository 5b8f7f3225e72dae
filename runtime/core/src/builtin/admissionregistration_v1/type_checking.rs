//! `ValidatingAdmissionPolicy.status.typeChecking`, as
//! kube-controller-manager's `validatingadmissionpolicy-status` controller
//! computes it (upstream's `validating.TypeChecker`):
//!
//! - the kinds checked are those `spec.matchConstraints.resourceRules`
//!   name exactly: a rule with `*` in its groups or versions (or none of
//!   them) is skipped, resources with `*` or `/` are dropped; groups,
//!   versions and resources are sorted and walked in that order, at most
//!   10 kinds per rule; the kinds are sorted by group, version and kind,
//!   and a kind without a schema is dropped;
//! - only `spec.validations[i].expression` and `.messageExpression` are
//!   checked, in the environment of a policy's expressions: `object` and
//!   `oldObject` typed from the kind's schema ([`crate::cel_check::schema`]),
//!   `request`, `namespaceObject`, `authorizer`, `params` when there is a
//!   `paramKind` (typed from its schema, else `dyn`) and `variables` (each
//!   variable's type inferred in order; a variable with errors is `dyn`,
//!   and its errors are not reported);
//! - an expression with errors for some kind gets one
//!   [`ExpressionWarning`]: for each such kind, in order,
//!   `"<group>/<version>, Kind=<Kind>: "` and cel-go's display of the
//!   errors, each ending in a newline, joined by a newline.
//!
//! Object types are named after the kind (see [`crate::cel_check`]), so a
//! message naming one reads `ConfigMap.metadata` where upstream's would
//! read `ConfigMap123456789.metadata`.

use std::collections::BTreeSet;
use std::fmt;

use super::policy::{ExpressionWarning, TypeChecking, ValidatingAdmissionPolicy};
use crate::cel_check::{self, Env, Type};

/// How many kinds one resource rule contributes at most
/// (`maxTypesToCheck`).
pub const MAX_TYPES_PER_RULE: usize = 10;

/// Where the checker learns what the matched resources are.
pub trait SchemaResolver {
    /// The kind served as `group`/`version`/`resource` (a REST mapping);
    /// `None` when it is not served.
    fn kind_for(&self, group: &str, version: &str, resource: &str) -> Option<String>;

    /// The CEL type of the objects of `group`/`version`/`kind`:
    /// `None` when the kind is unknown, `Some(None)` when its schema gives
    /// no type (then `object` is `dyn`).
    fn object_type(&self, group: &str, version: &str, kind: &str) -> Option<Option<Type>>;
}

/// A group, version and kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Gvk {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
}

impl fmt::Display for Gvk {
    /// `schema.GroupVersionKind.String()`: `apps/v1, Kind=Deployment`,
    /// `/v1, Kind=ConfigMap`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// The kinds the policy's resource rules name, in checking order.
pub fn types_to_check(
    policy: &ValidatingAdmissionPolicy,
    resolver: &dyn SchemaResolver,
) -> Vec<Gvk> {
    let mut found = BTreeSet::new();
    let Some(constraints) = &policy.spec.match_constraints else {
        return Vec::new();
    };
    for rule in &constraints.resource_rules {
        let exact = |list: &[String]| !list.is_empty() && !list.iter().any(|s| s.contains('*'));
        if !exact(&rule.api_groups) || !exact(&rule.api_versions) {
            continue;
        }
        let mut resources: Vec<&String> = rule
            .resources
            .iter()
            .filter(|r| !r.contains('*') && !r.contains('/'))
            .collect();
        if resources.is_empty() {
            continue;
        }
        let mut groups: Vec<&String> = rule.api_groups.iter().collect();
        let mut versions: Vec<&String> = rule.api_versions.iter().collect();
        groups.sort();
        versions.sort();
        resources.sort();
        let mut count = 0;
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    let Some(kind) = resolver.kind_for(group, version, resource) else {
                        continue;
                    };
                    if !kind.is_empty() {
                        found.insert(Gvk {
                            group: group.to_string(),
                            version: version.to_string(),
                            kind,
                        });
                    }
                    count += 1;
                    if count == MAX_TYPES_PER_RULE {
                        return found.into_iter().collect();
                    }
                }
            }
        }
    }
    found.into_iter().collect()
}

/// The parameter kind's group and version: `None` when `apiVersion` does
/// not parse.
fn param_group_version(api_version: &str) -> Option<(&str, &str)> {
    match api_version.split_once('/') {
        None if !api_version.is_empty() => Some(("", api_version)),
        Some((g, v)) if !g.is_empty() && !v.is_empty() && !v.contains('/') => Some((g, v)),
        _ => None,
    }
}

/// `kubernetes.AdmissionRequest` (upstream's `BuildRequestType`).
fn request_type() -> Type {
    let gvk = Type::object(
        "kubernetes.GroupVersionKind",
        vec![
            ("group", Type::String),
            ("version", Type::String),
            ("kind", Type::String),
        ],
    );
    let gvr = Type::object(
        "kubernetes.GroupVersionResource",
        vec![
            ("group", Type::String),
            ("version", Type::String),
            ("resource", Type::String),
        ],
    );
    let user = Type::object(
        "kubernetes.UserInfo",
        vec![
            ("username", Type::String),
            ("uid", Type::String),
            ("groups", Type::list(Type::String)),
            ("extra", Type::map(Type::String, Type::list(Type::String))),
        ],
    );
    Type::object(
        "kubernetes.AdmissionRequest",
        vec![
            ("kind", gvk.clone()),
            ("resource", gvr.clone()),
            ("subResource", Type::String),
            ("requestKind", gvk),
            ("requestResource", gvr),
            ("requestSubResource", Type::String),
            ("name", Type::String),
            ("namespace", Type::String),
            ("operation", Type::String),
            ("userInfo", user),
            ("dryRun", Type::Bool),
            ("options", Type::Dyn),
        ],
    )
}

/// `kubernetes.Namespace` (upstream's `BuildNamespaceType`).
fn namespace_type() -> Type {
    let strings = || Type::list(Type::String);
    let string_map = || Type::map(Type::String, Type::String);
    let condition = Type::object(
        "kubernetes.NamespaceCondition",
        vec![
            ("status", Type::String),
            ("type", Type::String),
            ("lastTransitionTime", Type::Timestamp),
            ("message", Type::String),
            ("reason", Type::String),
        ],
    );
    Type::object(
        "kubernetes.Namespace",
        vec![
            (
                "metadata",
                Type::object(
                    "kubernetes.NamespaceMetadata",
                    vec![
                        ("name", Type::String),
                        ("generateName", Type::String),
                        ("namespace", Type::String),
                        ("labels", string_map()),
                        ("annotations", string_map()),
                        ("UID", Type::String),
                        ("creationTimestamp", Type::Timestamp),
                        ("deletionGracePeriodSeconds", Type::Int),
                        ("deletionTimestamp", Type::Timestamp),
                        ("generation", Type::Int),
                        ("resourceVersion", Type::String),
                        ("finalizers", strings()),
                    ],
                ),
            ),
            (
                "spec",
                Type::object("kubernetes.NamespaceSpec", vec![("finalizers", strings())]),
            ),
            (
                "status",
                Type::object(
                    "kubernetes.NamespaceStatus",
                    vec![
                        ("conditions", Type::list(condition)),
                        ("phase", Type::String),
                    ],
                ),
            ),
        ],
    )
}

fn parser() -> cel::parser::Parser {
    crate::apiextensions::cel_env().parser()
}

/// Type-checks the policy's validations against every kind its rules
/// match; the result for `status.typeChecking` (no warnings: `{}`).
pub fn type_check(
    policy: &ValidatingAdmissionPolicy,
    resolver: &dyn SchemaResolver,
) -> TypeChecking {
    let kinds = types_to_check(policy, resolver);
    let spec = &policy.spec;
    // `params`: declared with a parameter kind whose apiVersion parses,
    // typed from its schema if there is one.
    let params = spec.param_kind.as_ref().and_then(|pk| {
        let (group, version) = param_group_version(&pk.api_version)?;
        Some(
            resolver
                .object_type(group, version, &pk.kind)
                .flatten()
                .unwrap_or(Type::Dyn),
        )
    });
    let mut results: Vec<Vec<String>> = vec![Vec::new(); spec.validations.len() * 2];
    for gvk in &kinds {
        let Some(object) = resolver.object_type(&gvk.group, &gvk.version, &gvk.kind) else {
            continue;
        };
        let object = object.unwrap_or(Type::Dyn);
        let mut env = Env::new();
        env.declare("namespaceObject", namespace_type())
            .declare("request", request_type())
            .declare("object", object.clone())
            .declare("oldObject", object);
        if let Some(p) = &params {
            env.declare("params", p.clone());
        }
        env.declare("authorizer", cel_check::authorizer_type());
        let mut variables: Vec<(String, Type)> = Vec::new();
        for v in &spec.variables {
            let mut with = env.clone();
            with.declare("variables", variables_type(&variables));
            let checked = cel_check::check(parser(), &v.expression, &with);
            let ty = if checked.issues.is_empty() {
                checked.ty.as_variable()
            } else {
                Type::Dyn
            };
            variables.push((v.name.clone(), ty));
        }
        env.declare("variables", variables_type(&variables));
        for (i, validation) in spec.validations.iter().enumerate() {
            let exprs = [
                (2 * i, &validation.expression),
                (2 * i + 1, &validation.message_expression),
            ];
            for (slot, source) in exprs {
                if source.is_empty() && slot % 2 == 1 {
                    continue;
                }
                let checked = cel_check::check(parser(), source, &env);
                if !checked.issues.is_empty() {
                    results[slot].push(format!("{gvk}: {}\n", checked.issues.display()));
                }
            }
        }
    }
    let mut warnings = Vec::new();
    for (slot, blocks) in results.into_iter().enumerate() {
        if blocks.is_empty() {
            continue;
        }
        let field = if slot % 2 == 0 {
            "expression"
        } else {
            "messageExpression"
        };
        warnings.push(ExpressionWarning {
            field_ref: format!("spec.validations[{}].{field}", slot / 2),
            warning: blocks.join("\n"),
        });
    }
    TypeChecking {
        expression_warnings: warnings,
    }
}

/// `kubernetes.variables`: one field per variable declared so far.
fn variables_type(vars: &[(String, Type)]) -> Type {
    Type::object(
        "kubernetes.variables",
        vars.iter().map(|(n, t)| (n.as_str(), t.clone())).collect(),
    )
}

#[cfg(test)]
#[path = "type_checking_tests.rs"]
mod tests;
