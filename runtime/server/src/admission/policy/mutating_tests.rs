//! Unit tests of the mutation application. Expected strings are
//! upstream's (`admission/plugin/policy/generic`'s `PolicyError`,
//! `admission/plugin/policy/mutating/patch/json_patch.go`).

use serde_json::json;

use super::*;

fn policy(spec: Value) -> Policy {
    let p: MutatingAdmissionPolicy =
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("policy");
    Policy::new(p, &Context::new(Arc::new(super::super::super::NoLookup)))
}

fn attrs(object: Value) -> Attributes {
    Attributes {
        operation: Some(Operation::Create),
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
        resource: "deployments".into(),
        namespace: "ns".into(),
        name: "d".into(),
        object: Some(object),
        ..Default::default()
    }
}

fn matched() -> Matched {
    Matched {
        version: "v1".into(),
        resource: "deployments".into(),
        kind: "Deployment".into(),
    }
}

/// Runs `policy` once on `object`: the object after, and the errors.
fn run(policy: &Policy, object: Value, param: Value) -> (Value, Vec<PolicyError>) {
    let mut a = attrs(object);
    let m = matched();
    let mut errors = Vec::new();
    let context = Context::new(Arc::new(crate::admission::NoLookup));
    Invocation {
        policy,
        binding: "b",
        matched: &m,
        param: &param,
        namespace: cel::Value::Null,
        context: &context,
    }
    .run(&mut a, &mut errors);
    (a.object.unwrap_or_default(), errors)
}

fn apply(expression: &str) -> Value {
    json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}})
}

fn patch(expression: &str) -> Value {
    json!({"patchType": "JSONPatch", "jsonPatch": {"expression": expression}})
}

#[test]
fn apply_configuration_merges_maps() {
    let p = policy(json!({"mutations": [apply(
        r#"Object{metadata: Object.metadata{labels: {"env": "prod"}}, spec: Object.spec{replicas: 3}}"#
    )]}));
    let (got, errors) = run(
        &p,
        json!({"metadata": {"name": "d", "labels": {"app": "a"}}, "spec": {"replicas": 1, "paused": true}}),
        Value::Null,
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        got,
        json!({"metadata": {"name": "d", "labels": {"app": "a", "env": "prod"}}, "spec": {"replicas": 3, "paused": true}})
    );
}

#[test]
fn json_patch_adds_and_escapes() {
    let p = policy(json!({"mutations": [patch(
        r#"[
            JSONPatch{op: "add", path: "/spec/items/-", value: "c"},
            JSONPatch{op: "add", path: "/metadata/labels/" + JSONPatch.escapeKey("example.com/owner"), value: "me"},
        ]"#
    )]}));
    let (got, errors) = run(
        &p,
        json!({"metadata": {"labels": {}}, "spec": {"items": ["a", "b"]}}),
        Value::Null,
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        got,
        json!({"metadata": {"labels": {"example.com/owner": "me"}}, "spec": {"items": ["a", "b", "c"]}})
    );
}

/// A failing `test` operation leaves the object as it was, without error.
#[test]
fn failed_test_operation_is_no_change() {
    let p = policy(json!({"mutations": [patch(
        r#"[JSONPatch{op: "test", path: "/spec/replicas", value: 5}, JSONPatch{op: "replace", path: "/spec/replicas", value: 1}]"#
    )]}));
    let (got, errors) = run(&p, json!({"spec": {"replicas": 2}}), Value::Null);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(got, json!({"spec": {"replicas": 2}}));
}

/// Mutations run in order, each on the object the previous one left;
/// variables and params are available.
#[test]
fn mutations_in_order_with_params_and_variables() {
    let p = policy(json!({
        "variables": [{"name": "want", "expression": "int(params.data.replicas)"}],
        "mutations": [
            apply("Object{spec: Object.spec{replicas: variables.want}}"),
            patch(r#"[JSONPatch{op: "add", path: "/spec/doubled", value: object.spec.replicas * 2}]"#),
        ],
    }));
    let (got, errors) = run(
        &p,
        json!({"spec": {"replicas": 1}}),
        json!({"data": {"replicas": "4"}}),
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(got, json!({"spec": {"replicas": 4, "doubled": 8}}));
}

#[test]
fn match_conditions_gate() {
    let p = policy(json!({
        "matchConditions": [{"name": "big", "expression": "object.spec.replicas > 10"}],
        "mutations": [apply("Object{spec: Object.spec{replicas: 0}}")],
    }));
    let (got, errors) = run(&p, json!({"spec": {"replicas": 2}}), Value::Null);
    assert!(errors.is_empty());
    assert_eq!(got, json!({"spec": {"replicas": 2}}));
}

/// Errors: upstream's `PolicyError` text, reason Invalid, 403; dropped
/// under `failurePolicy: Ignore`.
#[test]
fn errors_and_failure_policy() {
    let spec = |fp: &str| {
        json!({"failurePolicy": fp, "mutations": [
            patch(r#"[JSONPatch{op: "replace", path: "/spec/missing/x", value: 1}]"#),
            apply("object.spec.nothing"),
        ]})
    };
    let (got, errors) = run(&policy(spec("Fail")), json!({"spec": {}}), Value::Null);
    assert_eq!(got, json!({"spec": {}}));
    assert_eq!(errors.len(), 2, "{errors:?}");
    let text = errors[0].text();
    assert!(
        text.starts_with("policy 'p' with binding 'b' denied request: JSONPath: "),
        "{text}"
    );
    assert!(
        errors[1]
            .text()
            .starts_with("policy 'p' with binding 'b' denied request: expression 'object.spec.nothing' resulted in error: "),
        "{}",
        errors[1].text()
    );
    let err = into_error(errors, &attrs(json!({"metadata": {"name": "d"}}))).expect("error");
    let status = err.as_status();
    assert_eq!(status.code, 403);
    assert_eq!(status.reason, "Invalid");
    assert_eq!(status.message, text);
    let causes = &status.details.as_ref().expect("details").causes;
    assert_eq!(causes.len(), 2);
    assert_eq!(causes[0].message, text);

    let (_, errors) = run(&policy(spec("Ignore")), json!({"spec": {}}), Value::Null);
    assert_eq!(errors.len(), 2);
    assert!(into_error(errors, &attrs(json!({}))).is_none());
}

#[test]
fn wrong_result_types() {
    let p = policy(json!({"mutations": [
        apply("[1]"),
        patch("Object{}"),
        apply(r#"{"spec": {}}"#),
        patch(r#"[{"op": "add", "path": "/a", "value": 1}]"#),
        apply("Object{spec: Object.spec{selector: Object.spec.wrong{}}}"),
        patch(r#"[JSONPatch{op: "add", path: "/spec", value: Object.spec{x: Object.spec.y{}}}]"#),
    ]}));
    let (_, errors) = run(&p, json!({}), Value::Null);
    let texts: Vec<String> = errors.iter().map(PolicyError::text).collect();
    assert_eq!(
        texts,
        [
            "policy 'p' with binding 'b' denied request: unsupported return type from ApplyConfiguration expression: list",
            "policy 'p' with binding 'b' denied request: type mismatch: JSONPatchType.expression should evaluate to array, got map",
            "policy 'p' with binding 'b' denied request: unsupported return type from ApplyConfiguration expression: map",
            "policy 'p' with binding 'b' denied request: type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of map",
            r#"policy 'p' with binding 'b' denied request: type mismatch: unexpected type name "Object.spec.wrong", expected "Object.spec.selector", which matches field name path from root Object type"#,
            r#"policy 'p' with binding 'b' denied request: type mismatch: unexpected type name "Object.spec.y", expected "Object.spec.x", which matches field name path from root Object type"#,
        ]
    );
}

#[test]
fn configuration_errors_read_as_upstream() {
    let e = PolicyError {
        policy: "p".into(),
        binding: None,
        message: "failed to configure policy: x".into(),
        reason: None,
        ignore: false,
    };
    assert_eq!(
        e.text(),
        r#"policy "p" denied request: failed to configure policy: x"#
    );
    let err = into_error(vec![e], &attrs(json!({}))).expect("error");
    assert_eq!(err.as_status().reason, "Forbidden");
}
