//! Tests of MutatingAdmissionPolicy and its binding. Expected messages are
//! upstream's (`validation.go`'s `validateMutatingAdmissionPolicySpec`,
//! `validateMutation` and `validateMutatingAdmissionPolicyBindingSpec`).

use serde_json::{Value, json};

use super::*;
use crate::resource::Resource as _;
use crate::validation::ErrorList;

fn lines(errs: &ErrorList) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

#[track_caller]
fn assert_has(errs: &ErrorList, line: &str) {
    assert!(
        lines(errs).iter().any(|l| l.contains(line)),
        "missing {line:?} in {:#?}",
        lines(errs)
    );
}

/// A defaulted policy with one rule on deployments, one apply
/// configuration mutation, and the spec fields of `extra`.
fn policy(extra: Value) -> MutatingAdmissionPolicy {
    let mut spec = json!({
        "matchConstraints": {"resourceRules": [{
            "operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
        }]},
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
            "expression": "Object{spec: Object.spec{replicas: 1}}",
        }}],
        "reinvocationPolicy": "Never",
    });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    let mut p: MutatingAdmissionPolicy =
        serde_json::from_value(json!({"metadata": {"name": "config"}, "spec": spec}))
            .expect("policy");
    p.default_fields();
    p
}

fn errors(p: &MutatingAdmissionPolicy) -> ErrorList {
    p.validate_create()
}

#[test]
fn kind_facts_and_defaults() {
    let p = MutatingAdmissionPolicy::INFO;
    assert_eq!(p.plural, "mutatingadmissionpolicies");
    assert!(!p.namespaced());
    assert!(!p.subresources.status);
    let b = MutatingAdmissionPolicyBinding::INFO;
    assert_eq!(b.plural, "mutatingadmissionpolicybindings");
    assert!(!b.namespaced());
    let p = policy(json!({}));
    assert_eq!(p.spec.failure_policy.as_deref(), Some("Fail"));
    let m = p.spec.match_constraints.as_ref().expect("constraints");
    assert_eq!(m.match_policy.as_deref(), Some("Equivalent"));
    assert_eq!(m.resource_rules[0].scope.as_deref(), Some("*"));
    assert!(errors(&p).is_empty(), "{:#?}", lines(&errors(&p)));
}

#[test]
fn required_fields() {
    let mut p: MutatingAdmissionPolicy =
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {}})).expect("policy");
    p.default_fields();
    let errs = errors(&p);
    assert_has(&errs, "spec.matchConstraints: Required value");
    assert_has(
        &errs,
        "spec.mutations: Required value: mutations must contain at least one item",
    );
    assert_has(&errs, "spec.reinvocationPolicy: Required value");
}

#[test]
fn enumerations() {
    let errs = errors(&policy(
        json!({"failurePolicy": "other", "reinvocationPolicy": "other"}),
    ));
    assert_has(
        &errs,
        r#"spec.failurePolicy: Unsupported value: "other": supported values: "Fail", "Ignore""#,
    );
    assert_has(
        &errs,
        r#"spec.reinvocationPolicy: Unsupported value: "other": supported values: "Never", "IfNeeded""#,
    );
    let errs = errors(&policy(json!({"mutations": [{"patchType": "other"}]})));
    assert_has(
        &errs,
        r#"spec.mutations[0].patchType: Unsupported value: "other": supported values: "ApplyConfiguration", "JSONPatch""#,
    );
    let errs = errors(&policy(json!({"mutations": [{}]})));
    assert_has(&errs, "spec.mutations[0].patchType: Required value");
}

#[test]
fn delete_cannot_be_mutated() {
    let errs = errors(&policy(json!({"matchConstraints": {"resourceRules": [{
        "operations": ["DELETE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
    }]}})));
    assert_has(
        &errs,
        r#"spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE""#,
    );
}

#[test]
fn patch_type_union() {
    let errs = errors(&policy(json!({"mutations": [{"patchType": "JSONPatch",
        "applyConfiguration": {"expression": "Object{}"}}]})));
    assert_has(
        &errs,
        "spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch",
    );
    assert_has(
        &errs,
        r#"spec.mutations[0].applyConfiguration: Invalid value: "{applyConfiguration}": must not be specified when patchType is JSONPatch"#,
    );
    let errs = errors(&policy(
        json!({"mutations": [{"patchType": "ApplyConfiguration",
        "jsonPatch": {"expression": "[]"}}]}),
    ));
    assert_has(
        &errs,
        "spec.mutations[0].applyConfiguration: Required value: must be specified when patchType is ApplyConfiguration",
    );
    assert_has(
        &errs,
        r#"spec.mutations[0].jsonPatch: Invalid value: "{jsonPatch}": must not be specified when patchType is ApplyConfiguration"#,
    );
    let errs = errors(&policy(json!({"mutations": [{"patchType": "JSONPatch",
        "jsonPatch": {"expression": "  "}}]})));
    assert_has(
        &errs,
        "spec.mutations[0].jsonPatch.expression: Required value",
    );
}

#[test]
fn expressions_must_compile() {
    let errs = errors(&policy(json!({"mutations": [
        {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{spec:"}},
        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: \"add\", path: \"/a\", value: 1}]"}},
        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[Foo{op: \"add\"}]"}},
    ]})));
    assert_has(
        &errs,
        r#"spec.mutations[0].applyConfiguration.expression: Invalid value: "Object{spec:": compilation failed: ERROR: <input>:1:13: Syntax error"#,
    );
    assert!(
        !lines(&errs).iter().any(|l| l.contains("mutations[1]")),
        "{:#?}",
        lines(&errs)
    );
    assert_has(
        &errs,
        "spec.mutations[2].jsonPatch.expression: Invalid value: \"[Foo{op: \\\"add\\\"}]\": compilation failed: undeclared reference to 'Foo'",
    );
    let errs = errors(&policy(
        json!({"variables": [{"name": "x", "expression": "1 +"}]}),
    ));
    assert_has(&errs, "spec.variables[0].expression: Invalid value");
}

#[test]
fn binding_validation() {
    let mut b: MutatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": "b"},
        "spec": {"matchResources": {"resourceRules": [{
            "operations": ["DELETE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
        }]}, "paramRef": {"name": "p"}},
    }))
    .expect("binding");
    b.default_fields();
    let errs = b.validate_create();
    assert_has(&errs, "spec.policyName: Required value");
    assert_has(
        &errs,
        r#"spec.matchResources.resourceRules.operations: Unsupported value: "DELETE""#,
    );
    assert_has(
        &errs,
        "spec.paramRef.parameterNotFoundAction: Required value",
    );
    let ok: MutatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": "b"}, "spec": {"policyName": "p"},
    }))
    .expect("binding");
    assert!(ok.validate_create().is_empty());
}
