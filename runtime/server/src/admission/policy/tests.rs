//! Unit tests of the policy evaluation. Expected strings are upstream's
//! (`admission/plugin/policy/validating/{validator,dispatcher}.go`, and the
//! CEL filter's `expression '%v' resulted in error: %v` in
//! `admission/plugin/cel/filter.go`).

use serde_json::json;

use super::*;

fn policy(spec: Value) -> Policy {
    let p: ValidatingAdmissionPolicy =
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("policy");
    Policy::new(p, &Context::new(Arc::new(super::super::NoLookup)))
}

fn activation(object: &Value) -> cel::Context<'static, 'static> {
    Activation {
        object: apiforge_core::cel::to_cel(object),
        old_object: cel::Value::Null,
        request: apiforge_core::cel::to_cel(&request()),
        namespace_object: cel::Value::Null,
    }
    .into_root()
}

fn request() -> Value {
    json!({"operation": "CREATE", "namespace": "ns"})
}

/// Evaluates `p` over `object` with `params`, as the dispatcher does: the
/// interpreter's activation, and the same JSON for the direct programs.
fn run(p: &Policy, object: Value, params: Value) -> Outcome {
    let request = request();
    evaluate(
        p,
        &activation(&object),
        &apiforge_core::cel::to_cel(&params),
        &[&object, &NULL, &request, &params],
    )
}

fn denial(d: &Decision) -> Option<(String, String)> {
    match d {
        Decision::Admit => None,
        Decision::Deny { message, reason } => Some((message.clone(), reason.clone())),
    }
}

/// `validator.Validate`: the message falls back from `messageExpression`
/// to `message` to `failed expression: <expr>`; the reason defaults to
/// Invalid.
#[test]
fn messages_and_reasons() {
    let p = policy(json!({"validations": [
        {"expression": "object.n < 3"},
        {"expression": "object.n < 3", "message": " too many "},
        {"expression": "object.n < 3", "message": "m", "messageExpression": "'n is ' + string(object.n)", "reason": "Forbidden"},
        {"expression": "object.n < 3", "message": "fallback", "messageExpression": "1"},
        {"expression": "object.n > 3"},
    ]}));
    let out = run(&p, json!({"n": 5}), Value::Null);
    let got: Vec<_> = out.decisions.iter().map(denial).collect();
    assert_eq!(
        got,
        [
            Some(("failed expression: object.n < 3".into(), "Invalid".into())),
            Some(("too many".into(), "Invalid".into())),
            Some(("n is 5".into(), "Forbidden".into())),
            Some(("fallback".into(), "Invalid".into())),
            None,
        ]
    );
}

/// Evaluation errors: denied with the CEL filter's message under
/// `failurePolicy: Fail`, admitted under `Ignore`.
#[test]
fn errors_follow_the_failure_policy() {
    let spec = |fp: &str| json!({"failurePolicy": fp, "validations": [{"expression": "object.missing == 1"}]});
    let out = run(&policy(spec("Fail")), json!({}), Value::Null);
    let (message, _) = denial(&out.decisions[0]).expect("denied");
    assert!(
        message.starts_with("expression 'object.missing == 1' resulted in error: "),
        "{message}"
    );
    let out = run(&policy(spec("Ignore")), json!({}), Value::Null);
    assert!(denial(&out.decisions[0]).is_none());
}

/// Params, variables (each seeing the earlier ones) and audit annotations.
#[test]
fn params_variables_and_annotations() {
    let p = policy(json!({
        "variables": [
            {"name": "limit", "expression": "int(params.data.max)"},
            {"name": "over", "expression": "object.n > variables.limit"},
        ],
        "validations": [{"expression": "!variables.over", "messageExpression": "'max is ' + string(variables.limit)"}],
        "auditAnnotations": [
            {"key": "n", "valueExpression": "string(object.n)"},
            {"key": "none", "valueExpression": "null"},
            {"key": "bad", "valueExpression": "1"},
        ],
    }));
    let params = json!({"data": {"max": "3"}});
    let out = run(&p, json!({"n": 5}), params.clone());
    assert_eq!(
        denial(&out.decisions[0]),
        Some(("max is 3".into(), "Invalid".into()))
    );
    assert_eq!(out.annotations, [("n".to_string(), "5".to_string())]);
    assert_eq!(
        out.annotation_errors,
        [
            "valueExpression '1' resulted in unsupported return type: int. Return type must be either string or null."
        ]
    );
    let out = run(&p, json!({"n": 2}), params);
    assert!(denial(&out.decisions[0]).is_none());
}

/// Match conditions gate the validations.
#[test]
fn match_conditions_gate() {
    let p = policy(json!({
        "matchConditions": [{"name": "only-big", "expression": "object.n > 10"}],
        "validations": [{"expression": "false"}],
    }));
    assert!(run(&p, json!({"n": 5}), Value::Null).decisions.is_empty());
    assert_eq!(run(&p, json!({"n": 50}), Value::Null).decisions.len(), 1);
}

/// The dispatcher's denial: `admission.NewForbidden` with the policy's
/// message, the reason's code (`reasonToCode`) and the message as a cause.
#[test]
fn denial_status() {
    let attrs = Attributes {
        group: "".into(),
        resource: "configmaps".into(),
        name: "cm".into(),
        ..Default::default()
    };
    let err = Denial {
        policy: "p".into(),
        binding: Some("b".into()),
        message: "nope".into(),
        reason: "RequestEntityTooLarge".into(),
    }
    .into_error(&attrs);
    let s = err.as_status();
    assert_eq!(
        s.message,
        "configmaps \"cm\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: nope"
    );
    assert_eq!((s.code, s.reason.as_str()), (413, "RequestEntityTooLarge"));
    let causes = &s.details.as_ref().expect("details").causes;
    assert_eq!(
        causes[0].message,
        "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: nope"
    );
    let err = Denial {
        policy: "p".into(),
        binding: None,
        message: "failed to configure policy: x".into(),
        reason: String::new(),
    }
    .into_error(&attrs);
    assert_eq!(err.as_status().code, 422);
    assert!(
        err.as_status().message.ends_with(
            "ValidatingAdmissionPolicy 'p' denied request: failed to configure policy: x"
        )
    );
}

/// A variable that fails to evaluate surfaces in the expressions that use
/// it as upstream's `variableAccessor.Callback` words it.
#[test]
fn failed_variables() {
    let p = policy(json!({
        "variables": [
            {"name": "owner", "expression": "object.data.owner"},
            {"name": "ownerLen", "expression": "size(variables.owner)"},
        ],
        "validations": [
            {"expression": "variables.owner != ''"},
            {"expression": "variables.ownerLen > 0"},
            {"expression": "true"},
        ],
    }));
    let out = run(&p, json!({"data": {}}), Value::Null);
    let messages: Vec<_> = out.decisions.iter().map(denial).collect();
    let (first, _) = messages[0].clone().expect("denied");
    assert!(
        first.starts_with("expression 'variables.owner != ''' resulted in error: composited variable \"owner\" fails to evaluate: "),
        "{first}"
    );
    let (second, _) = messages[1].clone().expect("denied");
    assert!(
        second.starts_with("expression 'variables.ownerLen > 0' resulted in error: composited variable \"ownerLen\" fails to evaluate: composited variable \"owner\" fails to evaluate: "),
        "{second}"
    );
    assert!(messages[2].is_none());
    assert!(mentions("variables.owner == 1", "owner"));
    assert!(!mentions("variables.ownerLen == 1", "owner"));
}

/// JSON read in place reads as the same JSON converted to `cel::Value`
/// and bound.
#[test]
fn direct_conversion_matches_to_cel() {
    let object = json!({"a": [1, -2, 18446744073709551615u64, 1.5, "s", null, true, {"b": {}}], "c": {"d": []}});
    let request = json!({"x": 1});
    let direct = root_context(Some(&object), None, Some(&request), cel::Value::Null);
    let bound = Activation {
        object: apiforge_core::cel::to_cel(&object),
        old_object: cel::Value::Null,
        request: apiforge_core::cel::to_cel(&json!({"x": 1})),
        namespace_object: cel::Value::Null,
    }
    .into_root();
    let env = apiforge_core::apiextensions::cel_env();
    for e in [
        "object",
        "oldObject",
        "request",
        "object.a[2] == 18446744073709551615u",
        "type(object.a[3])",
        "object == request",
    ] {
        let p = env.compile(e).expect("compiles");
        assert_eq!(p.execute(&direct).ok(), p.execute(&bound).ok(), "{e}");
    }
}

/// The variables a policy may read are found by name in all its
/// expressions; the ones none reads are not built.
#[test]
fn uses_scan_every_expression() {
    let p = policy(json!({
        "matchConditions": [{"name": "c", "expression": "request.operation == 'CREATE'"}],
        "variables": [{"name": "v", "expression": "oldObject == null"}],
        "validations": [{"expression": "object.n < 3", "messageExpression": "string(namespaceObject)"}],
    }));
    let all = Uses {
        old_object: true,
        request: true,
        namespace_object: true,
        authorizer: false,
    };
    assert_eq!(p.uses, all);
    let p = policy(
        json!({"validations": [{"expression": "authorizer.path('/').check('get').allowed()"}]}),
    );
    assert!(p.uses.authorizer);
    let p = policy(json!({"validations": [{"expression": "object.n < 3"}]}));
    assert_eq!(p.uses, Uses::default());
    let p = policy(json!({
        "validations": [{"expression": "true"}],
        "auditAnnotations": [{"key": "k", "valueExpression": "request.name"}],
    }));
    assert!(p.uses.request && !p.uses.old_object);
}

/// Timing loop: per request, the activation of a ~1 KiB flunder built
/// once, then 1 or 10 policies like the benchmark's evaluated, with the
/// expression's direct program and by the interpreter alone. A few rounds
/// in the suite (both ways must admit; no timing is asserted); for figures
/// run
/// `POLICY_TIMING_ROUNDS=2000 cargo test ... policy_timing -- --nocapture`.
#[test]
fn policy_timing() {
    use std::time::Instant;
    let p = policy(json!({"validations": [{
        "expression": "object.metadata.name.size() < 200 && !has(object.spec.flunderReference)",
    }]}));
    let object = matching::timing_flunder();
    let n = matching::timing_rounds("POLICY_TIMING_ROUNDS");
    // The same policy with its expressions left to the interpreter.
    let mut interpreted = policy(json!({"validations": [{
        "expression": "object.metadata.name.size() < 200 && !has(object.spec.flunderReference)",
    }]}));
    for v in &mut interpreted.validations {
        v.expression.direct = None;
    }
    for policies in [1, 10] {
        let time = |p: &Policy| {
            let t = Instant::now();
            for _ in 0..n {
                // Made as the dispatcher makes it: when an expression first
                // needs the interpreter.
                let cell = OnceCell::new();
                let root = || {
                    cell.get_or_init(|| {
                        let mut root = root_context(Some(&object), None, None, cel::Value::Null);
                        make_plain(&mut root);
                        root
                    })
                };
                let json = [&object, &NULL, &NULL, &NULL];
                for _ in 0..policies {
                    let out = evaluate_plain(p, &root, &json);
                    assert!(matches!(out.decisions[..], [Decision::Admit]));
                }
            }
            t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        };
        let (old, new) = (time(&interpreted), time(&p));
        println!("{policies} policies: interpreted {old:.1} µs, direct {new:.1} µs per request");
    }
}

/// A plain policy (no conditions, no variables) evaluated without params
/// straight in a root made plain decides as in an inner scope: the same
/// decisions, messages and errors (`params` null, `variables` empty).
#[test]
fn plain_roots_decide_as_inner_scopes() {
    let p = policy(json!({"validations": [
        {"expression": "object.metadata.name.size() < 5 && !has(object.spec.ref)"},
        {"expression": "params == null"},
        {"expression": "variables.missing == 1"},
        {"expression": "object.n > 3", "messageExpression": "'n is ' + string(object.n)"},
    ], "auditAnnotations": [{"key": "k", "valueExpression": "'v' + string(object.n)"}]}));
    assert!(p.plain);
    let object = json!({"metadata": {"name": "longer"}, "spec": {"ref": "x"}, "n": 2});
    let json = [&object, &NULL, &NULL, &NULL];
    let inner = evaluate(
        &p,
        &root_context(Some(&object), None, None, cel::Value::Null),
        &cel::Value::Null,
        &json,
    );
    let mut root = root_context(Some(&object), None, None, cel::Value::Null);
    make_plain(&mut root);
    let plain = evaluate_plain(&p, &|| &root, &json);
    let got = |o: &Outcome| o.decisions.iter().map(denial).collect::<Vec<_>>();
    assert_eq!(got(&plain), got(&inner));
    assert_eq!(plain.annotations, inner.annotations);
    assert_eq!(plain.annotation_errors, inner.annotation_errors);
    assert!(got(&plain)[0].is_some());
    assert!(got(&plain)[1].is_none());
    let (missing, _) = got(&plain)[2].clone().expect("denied");
    assert!(
        missing.starts_with("expression 'variables.missing == 1' resulted in error: "),
        "{missing}"
    );
    assert_eq!(got(&plain)[3], Some(("n is 2".into(), "Invalid".into())));
    // A policy with params evaluates in its own scope, over a plain root
    // too.
    let params = json!({"max": 1});
    let q = policy(json!({"validations": [{"expression": "object.n <= params.max"}]}));
    let over_plain = evaluate(
        &q,
        &root,
        &apiforge_core::cel::to_cel(&params),
        &[&object, &NULL, &NULL, &params],
    );
    assert_eq!(
        got(&over_plain),
        [Some((
            "failed expression: object.n <= params.max".into(),
            "Invalid".into()
        ))]
    );
}

/// Conditions or variables make a policy not plain; conditions that name
/// `variables` keep the roots unplain.
#[test]
fn what_is_plain() {
    let p = policy(json!({"validations": [{"expression": "true"}]}));
    assert!(p.plain && !p.conditions_read_variables);
    let p = policy(
        json!({"variables": [{"name": "v", "expression": "1"}], "validations": [{"expression": "true"}]}),
    );
    assert!(!p.plain);
    let p = policy(
        json!({"matchConditions": [{"name": "c", "expression": "variables.v == 1"}], "validations": [{"expression": "true"}]}),
    );
    assert!(!p.plain && p.conditions_read_variables);
}
