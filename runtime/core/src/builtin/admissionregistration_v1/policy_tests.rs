//! Tests of ValidatingAdmissionPolicy and its binding. Expected messages
//! are upstream's (`pkg/apis/admissionregistration/validation/validation.go`;
//! each test names the Go function whose message it checks, and the cases
//! of `validation_test.go`'s `TestValidateValidatingAdmissionPolicy` /
//! `TestValidateValidatingAdmissionPolicyBinding` it mirrors).

use serde_json::{Value, json};

use super::super::LabelSelector;
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

/// A defaulted policy `config` with one rule on deployments and the spec
/// fields of `extra`.
fn policy(extra: Value) -> ValidatingAdmissionPolicy {
    let mut spec = json!({
        "matchConstraints": {"resourceRules": [{
            "operations": ["CREATE"], "apiGroups": ["a"], "apiVersions": ["a"], "resources": ["a"],
        }]},
        "validations": [{"expression": "object.x < 100"}],
    });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    let mut p: ValidatingAdmissionPolicy =
        serde_json::from_value(json!({"metadata": {"name": "config"}, "spec": spec}))
            .expect("policy");
    p.default_fields();
    p
}

fn binding(spec: Value) -> ValidatingAdmissionPolicyBinding {
    let mut b: ValidatingAdmissionPolicyBinding =
        serde_json::from_value(json!({"metadata": {"name": "config"}, "spec": spec}))
            .expect("binding");
    b.default_fields();
    b
}

#[test]
fn kind_facts() {
    let p = ValidatingAdmissionPolicy::INFO;
    assert_eq!(p.plural, "validatingadmissionpolicies");
    assert!(!p.namespaced());
    assert!(p.subresources.status);
    let b = ValidatingAdmissionPolicyBinding::INFO;
    assert_eq!(b.plural, "validatingadmissionpolicybindings");
    assert!(!b.namespaced());
}

/// `SetDefaults_ValidatingAdmissionPolicySpec`, `SetDefaults_MatchResources`,
/// `SetDefaults_Rule` (v1 `defaults.go`; v1, like v1beta1, has no
/// `SetDefaults_ParamRef`, so `parameterNotFoundAction` stays unset and
/// `validateParamRef` requires it).
#[test]
fn defaults() {
    let p = policy(json!({}));
    assert_eq!(p.spec.failure_policy.as_deref(), Some("Fail"));
    let m = p.spec.match_constraints.as_ref().expect("constraints");
    assert_eq!(m.match_policy.as_deref(), Some("Equivalent"));
    assert_eq!(m.namespace_selector, Some(LabelSelector::default()));
    assert_eq!(m.object_selector, Some(LabelSelector::default()));
    assert_eq!(m.resource_rules[0].scope.as_deref(), Some("*"));
    assert!(
        p.validate_create().is_empty(),
        "{:?}",
        lines(&p.validate_create())
    );

    let b = binding(
        json!({"policyName": "p", "paramRef": {"name": "x"}, "validationActions": ["Deny"]}),
    );
    let pr = b.spec.param_ref.as_ref().expect("paramRef");
    assert_eq!(pr.parameter_not_found_action, None);
    assert!(b.spec.match_resources.is_none());
    assert_eq!(
        lines(&b.validate_create()),
        ["spec.paramRef.parameterNotFoundAction: Required value"]
    );
    let b = binding(json!({"policyName": "p", "validationActions": ["Deny"],
        "paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}}));
    assert!(
        b.validate_create().is_empty(),
        "{:?}",
        lines(&b.validate_create())
    );
}

/// Upstream's strategy: a new policy's status is empty (the type-checking
/// controller writes `observedGeneration` with `typeChecking`); an update
/// keeps the stored status.
#[test]
fn status_is_left_to_the_controller() {
    let mut p = policy(json!({}));
    p.prepare_for_create();
    assert_eq!(p.status, Some(ValidatingAdmissionPolicyStatus::default()));
    let mut old = p.clone();
    old.metadata.generation = 1;
    old.status = Some(ValidatingAdmissionPolicyStatus {
        observed_generation: Some(1),
        type_checking: Some(Default::default()),
        conditions: Vec::new(),
    });
    let mut changed = old.clone();
    changed.status = None;
    changed.spec.validations[0].expression = "true".into();
    changed.prepare_for_update(&old);
    assert_eq!(changed.status, old.status);
}

/// `validateValidatingAdmissionPolicySpec`: missing pieces.
#[test]
fn required_fields() {
    let mut p = policy(json!({"validations": []}));
    p.spec.match_constraints = None;
    p.spec.failure_policy = None;
    let errs = p.validate_create();
    assert_has(&errs, "spec.failurePolicy: Required value");
    assert_has(&errs, "spec.matchConstraints: Required value");
    assert_has(
        &errs,
        "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
    );
    assert_has(
        &errs,
        "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
    );
    let errs = policy(json!({"matchConstraints": {}})).validate_create();
    assert_has(&errs, "spec.matchConstraints.resourceRules: Required value");
    let errs = policy(json!({"failurePolicy": "Other"})).validate_create();
    assert_has(
        &errs,
        "spec.failurePolicy: Unsupported value: \"Other\": supported values: \"Fail\", \"Ignore\"",
    );
}

/// `validateValidation` and `convertCELErrorToValidationError`.
#[test]
fn validations() {
    let errs =
        policy(json!({"validations": [{"expression": "object.x in [1, 2, "}]})).validate_create();
    assert_has(
        &errs,
        "spec.validations[0].expression: Invalid value: \"object.x in [1, 2, \": compilation failed: ",
    );
    let errs = policy(json!({"validations": [{"expression": " "}]})).validate_create();
    assert_has(
        &errs,
        "spec.validations[0].expression: Required value: expression is not specified",
    );
    let errs = policy(json!({"validations": [{"expression": "true", "message": "a\nb"}]}))
        .validate_create();
    assert_has(
        &errs,
        "spec.validations[0].message: Invalid value: \"a\\nb\": message must not contain line breaks",
    );
    let errs =
        policy(json!({"validations": [{"expression": "true", "message": " "}]})).validate_create();
    assert_has(
        &errs,
        "spec.validations[0].message: Invalid value: \" \": message must be non-empty if specified",
    );
    let errs = policy(json!({"validations": [{"expression": "true", "messageExpression": " "}]}))
        .validate_create();
    assert_has(
        &errs,
        "spec.validations[0].messageExpression: Invalid value: \" \": must be non-empty if specified",
    );
    let errs =
        policy(json!({"validations": [{"expression": "true", "messageExpression": "'a' +"}]}))
            .validate_create();
    assert_has(
        &errs,
        "spec.validations[0].messageExpression: Invalid value: \"'a' +\": compilation failed: ",
    );
    let errs = policy(json!({"validations": [{"expression": "true", "reason": "Other"}]}))
        .validate_create();
    assert_has(
        &errs,
        "spec.validations[0].reason: Unsupported value: \"Other\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\", \"Unauthorized\"",
    );
}

/// `validateVariable` and `isCELIdentifier`.
#[test]
fn variables() {
    let errs = policy(json!({"variables": [
        {"name": "1bad", "expression": "true"},
        {"name": "in", "expression": "true"},
        {"name": "", "expression": ""},
        {"name": "ok", "expression": "1 +"},
    ]}))
    .validate_create();
    assert_has(
        &errs,
        "spec.variables[0].name: Invalid value: \"1bad\": name is not a valid CEL identifier",
    );
    assert_has(
        &errs,
        "spec.variables[1].name: Invalid value: \"in\": name is not a valid CEL identifier",
    );
    assert_has(
        &errs,
        "spec.variables[2].name: Required value: name is not specified",
    );
    assert_has(
        &errs,
        "spec.variables[2].expression: Required value: expression is not specified",
    );
    assert_has(
        &errs,
        "spec.variables[3].expression: Invalid value: \"1 +\": compilation failed: ",
    );
}

/// `validateAuditAnnotation`.
#[test]
fn audit_annotations() {
    let errs = policy(json!({"auditAnnotations": [
        {"key": "a", "valueExpression": "'x'"},
        {"key": "a", "valueExpression": "'y'"},
        {"key": "b", "valueExpression": ""},
        {"key": "", "valueExpression": "'x'"},
    ]}))
    .validate_create();
    assert_has(
        &errs,
        "spec.auditAnnotations[1].key: Duplicate value: \"a\"",
    );
    assert_has(
        &errs,
        "spec.auditAnnotations[2].valueExpression: Required value: valueExpression is not specified",
    );
    assert_has(
        &errs,
        "spec.auditAnnotations[3].key: Invalid value: \"config/\"",
    );
}

/// `validateParamKind`.
#[test]
fn param_kind() {
    let errs = policy(json!({"paramKind": {"apiVersion": "a/b/c", "kind": "ConfigMap"}}))
        .validate_create();
    assert_has(
        &errs,
        "spec.paramKind.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
    );
    let errs = policy(json!({"paramKind": {"apiVersion": "example.com/", "kind": "Bad_Kind"}}))
        .validate_create();
    assert_has(
        &errs,
        "spec.paramKind.apiVersion: Invalid value: \"example.com/\": version must be specified",
    );
    assert_has(
        &errs,
        "spec.paramKind.kind: Invalid value: \"Bad_Kind\": may have mixed case, but should otherwise match: ",
    );
    let errs = policy(json!({"paramKind": {}})).validate_create();
    assert_has(&errs, "spec.paramKind.apiVersion: Required value");
    assert_has(&errs, "spec.paramKind.kind: Required value");
}

/// `validateMatchResources` and `validateNamedRuleWithOperations`.
#[test]
fn match_resources() {
    let errs = policy(json!({"matchConstraints": {
        "matchPolicy": "Other",
        "namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]},
        "resourceRules": [{"resourceNames": ["x", "x", "a/b"], "operations": ["CREATE"], "apiGroups": ["a"], "apiVersions": ["a"], "resources": ["a"]}],
        "excludeResourceRules": [{"operations": ["CREATE"], "apiGroups": [], "apiVersions": ["a"], "resources": ["a"]}],
    }}))
    .validate_create();
    assert_has(
        &errs,
        "spec.matchConstraints.matchPolicy: Unsupported value: \"Other\": supported values: \"Equivalent\", \"Exact\"",
    );
    assert_has(
        &errs,
        "spec.matchConstraints.namespaceSelector.matchExpressions[0].operator: Invalid value: \"Bogus\": not a valid selector operator",
    );
    assert_has(
        &errs,
        "spec.matchConstraints.resourceRules[0].resourceNames[1]: Duplicate value: \"x\"",
    );
    assert_has(
        &errs,
        "spec.matchConstraints.resourceRules[0].resourceNames[2]: Invalid value: \"a/b\": may not contain '/'",
    );
    assert_has(
        &errs,
        "spec.matchConstraints.excludeResourceRules[0].apiGroups: Required value",
    );
}

/// `validateValidatingAdmissionPolicyBindingSpec`, `validateParamRef` and
/// `validateValidationActions`.
#[test]
fn binding_validation() {
    let errs = binding(json!({"validationActions": []})).validate_create();
    assert_has(&errs, "spec.policyName: Required value");
    assert_has(
        &errs,
        "spec.validationActions: Required value: at least one validation action is required",
    );
    let errs =
        binding(json!({"policyName": "p", "validationActions": ["Deny", "Warn", "Deny", "Block"]}))
            .validate_create();
    assert_has(
        &errs,
        "spec.validationActions[2]: Duplicate value: \"Deny\"",
    );
    assert_has(
        &errs,
        "spec.validationActions[3]: Unsupported value: \"Block\": supported values: \"Audit\", \"Deny\", \"Warn\"",
    );
    assert_has(
        &errs,
        "spec.validationActions: Invalid value: [\"Deny\",\"Warn\",\"Deny\",\"Block\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
    );
    let errs = binding(json!({"policyName": "p", "validationActions": ["Deny"],
        "paramRef": {"name": "a", "selector": {}, "parameterNotFoundAction": "Maybe"}}))
    .validate_create();
    assert_has(
        &errs,
        "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
    );
    assert_has(
        &errs,
        "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
    );
    assert_has(
        &errs,
        "spec.paramRef.parameterNotFoundAction: Unsupported value: \"Maybe\": supported values: \"Deny\", \"Allow\"",
    );
    let errs = binding(json!({"policyName": "p", "validationActions": ["Deny"], "paramRef": {}}))
        .validate_create();
    assert_has(
        &errs,
        "spec.paramRef: Required value: one of name or selector must be specified",
    );
    let errs = binding(
        json!({"policyName": "Bad_Name", "validationActions": ["Audit"],
        "matchResources": {"objectSelector": {"matchLabels": {"a": "b c"}}}}),
    )
    .validate_create();
    assert_has(&errs, "spec.policyName: Invalid value: \"Bad_Name\"");
    // Upstream's field path is spelt this way.
    assert_has(
        &errs,
        "spec.matchResouces.objectSelector.matchLabels: Invalid value: \"b c\"",
    );
}

/// `printValidatingAdmissionPolicy` / `printValidatingAdmissionPolicyBinding`
/// (`pkg/printers/internalversion/printers.go`).
#[test]
fn printers() {
    let cells = |printer: &crate::resource::TablePrinter, obj: Value| (printer.cells)(&obj);
    let p = cells(
        &crate::builtin::printers::VALIDATING_ADMISSION_POLICY,
        json!({"metadata": {"name": "p"}, "spec": {"validations": [{}, {}], "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}}),
    );
    assert_eq!(&p[..3], &[json!("p"), json!(2), json!("v1/ConfigMap")]);
    let p = cells(
        &crate::builtin::printers::VALIDATING_ADMISSION_POLICY,
        json!({"metadata": {"name": "p"}, "spec": {}}),
    );
    assert_eq!(p[2], json!("<unset>"));
    let b = |pr: Value| {
        cells(
            &crate::builtin::printers::VALIDATING_ADMISSION_POLICY_BINDING,
            json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "paramRef": pr}}),
        )[2]
        .clone()
    };
    assert_eq!(b(json!({"name": "x", "namespace": "ns"})), json!("ns/x"));
    assert_eq!(b(json!({"name": "x"})), json!("*/x"));
    assert_eq!(
        b(
            json!({"selector": {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]}]}})
        ),
        json!("a=b,c in (x,y)")
    );
    assert_eq!(b(Value::Null), json!("<unset>"));
}

/// `validateValidatingAdmissionPolicyStatus` (`validateExpressionWarning`,
/// metav1's `ValidateConditions`), run on updates (the `/status` writes).
#[test]
fn status_validation() {
    let old = policy(json!({}));
    let mut new = old.clone();
    new.status = Some(
        serde_json::from_value(json!({
            "typeChecking": {"expressionWarnings": [{"fieldRef": " ", "warning": ""}]},
            "conditions": [{"type": "", "status": "Maybe"}],
        }))
        .expect("status"),
    );
    let errs = new.validate_update(&old);
    assert_has(
        &errs,
        "status.typeChecking.expressionWarnings[0].warning: Required value",
    );
    assert_has(
        &errs,
        "status.typeChecking.expressionWarnings[0].fieldRef: Required value",
    );
    assert_has(
        &errs,
        "status.conditions[0].type: Required value: must be set",
    );
    assert_has(
        &errs,
        "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
    );
}
