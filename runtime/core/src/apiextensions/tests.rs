//! Unit tests. Each expected message cites the upstream behaviour it
//! follows: kube-openapi `pkg/validation/errors/schema.go` (message
//! formats), `pkg/validation/validate/*` (which checks run, names of
//! paths), apiextensions-apiserver `pkg/apiserver/validation/validation.go`
//! (`kubeOpenAPIResultToFieldErrors`: error types), `schema/listtype`,
//! `schema/cel/validation.go`, `schema/pruning` and `schema/defaulting`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::CustomSchema;
use crate::validation::ErrorList;

fn schema(spec: Value) -> CustomSchema {
    let root = json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
        }
    });
    match CustomSchema::from_json(&root) {
        Ok(s) => s,
        Err(e) => panic!("schema: {e}"),
    }
}

fn messages(errs: &ErrorList) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

fn obj(spec: Value) -> Value {
    json!({"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "a"}, "spec": spec})
}

// kube-openapi type validator: InvalidType(path, "body", type, schType) →
// `typeFailWithData`; converted to field.TypeInvalid with the type name as
// value. A type error blocks CEL (`hasBlockingErr` in the CR strategy).
#[test]
fn type_errors_block_cel() {
    let s = schema(json!({
        "type": "object",
        "properties": {"replicas": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "false", "message": "never"}],
    }));
    let errs = s.validate(&obj(json!({"replicas": "3"})));
    assert_eq!(
        messages(&errs),
        [
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
            "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ]
    );
    assert_eq!(errs.0[0].type_.reason(), "FieldValueTypeInvalid");
    // 1.0 is an integer for kube-openapi (isFloatInt); 1.5 is not.
    assert!(s.validate(&obj(json!({"replicas": 1.0}))).0.len() == 1); // the CEL rule only
    let errs = s.validate(&obj(json!({"replicas": 1.5})));
    assert!(
        errs.0[0]
            .to_string()
            .ends_with("must be of type integer: \"number\"")
    );
}

// int-or-string joins its types with ","; null needs nullable.
#[test]
fn int_or_string_and_nullable() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "port": {"x-kubernetes-int-or-string": true},
            "note": {"type": "string", "nullable": true},
            "name": {"type": "string"},
        },
    }));
    assert!(
        s.validate(&obj(json!({"port": 80, "note": null})))
            .is_empty()
    );
    assert!(s.validate(&obj(json!({"port": "http"}))).is_empty());
    assert_eq!(
        messages(&s.validate(&obj(json!({"port": true, "name": null})))),
        [
            "spec.name: Invalid value: \"null\": spec.name in body must be of type string: \"null\"",
            "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
        ]
    );
}

// Messages of kube-openapi `errors/schema.go` and the field.Error types of
// `kubeOpenAPIResultToFieldErrors`: enum → NotSupported, maxLength →
// TooLong, maxItems/maxProperties → TooMany, required → Required, the rest
// Invalid with the value.
#[test]
fn value_validations() {
    let s = schema(json!({
        "type": "object",
        "required": ["name", "mode"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "size": {"type": "integer", "minimum": 1, "maximum": 10, "multipleOf": 2},
            "ratio": {"type": "number", "maximum": 0.5, "exclusiveMaximum": true},
            "tags": {"type": "array", "maxItems": 3, "minItems": 1, "items": {"type": "string"}},
            "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string", "maxLength": 2}},
            "addr": {"type": "string", "format": "ipv4"},
        },
    }));
    let errs = s.validate(&obj(json!({
        "name": "ABC",
        "mode": "x",
        "size": 11,
        "ratio": 0.5,
        "tags": ["a", "b", "c", "d"],
        "addr": "1.2.3",
    })));
    assert_eq!(
        messages(&errs),
        [
            "spec.addr: Invalid value: \"1.2.3\": spec.addr in body must be of type ipv4: \"1.2.3\"",
            "spec.mode: Unsupported value: \"x\": supported values: \"a\", \"b\"",
            "spec.name: Invalid value: \"ABC\": spec.name in body should match '^[a-z]+$'",
            "spec.ratio: Invalid value: 0.5: spec.ratio in body should be less than 0.5",
            "spec.size: Invalid value: 11: spec.size in body should be a multiple of 2",
            "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
            "spec.tags: Too many: 4: must have at most 3 items",
        ]
    );
    let errs = s.validate(&obj(
        json!({"name": "", "size": 0, "tags": [], "labels": {"a": "xyz", "b": "c"}}),
    ));
    assert_eq!(
        messages(&errs),
        [
            "spec.labels: Too many: 2: must have at most 1 item",
            "spec.name: Invalid value: \"\": spec.name in body should be at least 1 chars long",
            "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
            "spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items",
            "spec.mode: Required value",
        ]
    );
    // maxLength counts characters (utf8.RuneCountInString), and the value is omitted.
    let errs = s.validate(&obj(
        json!({"name": "éééééé", "mode": "a", "labels": {"k": "vvv"}}),
    ));
    assert_eq!(
        messages(&errs),
        [
            "spec.labels.k: Too long: may not be more than 2 bytes",
            "spec.name: Too long: may not be more than 5 bytes",
        ]
    );
    assert!(
        s.validate(&obj(json!({"name": "ééééé", "mode": "a"})))
            .len()
            == 1
    ); // pattern only
}

// schema/listtype: duplicates of a `map` list are reported at the item
// with the keys as a Go map, of a `set` with the value.
#[test]
fn list_types() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name", "protocol"],
                "items": {"type": "object", "properties": {
                    "name": {"type": "string"},
                    "protocol": {"type": "string", "default": "TCP"},
                }},
            },
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        },
    }));
    // Keys are compared as they are: defaults apply first, as on a write.
    let mut o = obj(json!({
        "ports": [{"name": "a"}, {"name": "a", "protocol": "TCP"}, {"name": "a", "protocol": "UDP"}],
        "tags": ["x", "y", "x", "x"],
    }));
    s.apply_defaults(&mut o);
    let errs = s.validate(&o);
    assert_eq!(
        messages(&errs),
        [
            "spec.ports[1]: Duplicate value: map[string]interface {}{\"name\":\"a\", \"protocol\":\"TCP\"}",
            "spec.tags[2]: Duplicate value: \"x\"",
        ]
    );
}

// schema/cel/validation.go before 1.35 (kubernetes#133832 changed it): the
// bad value is the schema's type (`sts.Type`); default message
// `failed rule: <rule>`; messageExpression; reason; fieldPath.
#[test]
fn cel_rules() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "min": {"type": "integer"},
            "max": {"type": "integer"},
            "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('db-')"}]},
        },
        "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "messageExpression": "'min ' + string(self.min) + ' exceeds max'"},
            {"rule": "self.min > 0", "message": "min must be positive", "reason": "FieldValueForbidden", "fieldPath": ".min"},
            {"rule": "has(self.name)", "reason": "FieldValueRequired", "message": "name is required", "fieldPath": ".name"},
            {"rule": "self.max < 100", "reason": "FieldValueDuplicate"},
        ],
    }));
    assert!(
        s.validate(&obj(json!({"min": 1, "max": 2, "name": "db-a"})))
            .is_empty()
    );
    let errs = s.validate(&obj(json!({"min": 0, "max": -1, "name": "x"})));
    assert_eq!(
        messages(&errs),
        [
            "spec: Invalid value: \"object\": min 0 exceeds max",
            "spec.min: Forbidden: min must be positive",
            "spec.name: Invalid value: \"string\": failed rule: self.startsWith('db-')",
        ]
    );
    let errs = s.validate(&obj(json!({"min": 1, "max": 200})));
    assert_eq!(
        messages(&errs),
        [
            "spec.name: Required value: name is required",
            "spec: Duplicate value: \"object\"",
        ]
    );
    assert_eq!(errs.0[1].type_.reason(), "FieldValueDuplicate");
}

// Values are typed from the schema as Kubernetes' CEL does
// (apiserver/pkg/cel/common/values.go): number → double, format
// date-time/date → timestamp, duration → duration, byte → bytes.
#[test]
fn cel_values_are_typed_by_the_schema() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "ratio": {"type": "number", "x-kubernetes-validations": [{"rule": "type(self) == double && self > 0.5"}]},
            "at": {"type": "string", "format": "date-time",
                   "x-kubernetes-validations": [{"rule": "self < timestamp('2030-01-01T00:00:00Z')"}]},
            "day": {"type": "string", "format": "date",
                    "x-kubernetes-validations": [{"rule": "self > timestamp('2020-01-01T00:00:00Z')"}]},
            "wait": {"type": "string", "format": "duration",
                     "x-kubernetes-validations": [{"rule": "self <= duration('1h')"}]},
            "data": {"type": "string", "format": "byte", "x-kubernetes-validations": [{"rule": "size(self) == 3"}]},
        },
    }));
    let ok = obj(
        json!({"ratio": 1, "at": "2026-01-01T10:00:00Z", "day": "2026-02-03", "wait": "30m", "data": "YWJj"}),
    );
    assert_eq!(messages(&s.validate(&ok)), Vec::<String>::new());
    // CEL errors follow the object's field order (upstream: Go map order).
    let bad = obj(json!({"ratio": 0, "at": "2031-01-01T10:00:00Z", "wait": "2h"}));
    assert_eq!(
        messages(&s.validate(&bad)),
        [
            "spec.ratio: Invalid value: \"number\": failed rule: type(self) == double && self > 0.5",
            "spec.at: Invalid value: \"string\": failed rule: self < timestamp('2030-01-01T00:00:00Z')",
            "spec.wait: Invalid value: \"string\": failed rule: self <= duration('1h')",
        ]
    );
}

// Rules inside allOf run on the same value (upstream AllOfValidators).
#[test]
fn cel_rules_under_all_of() {
    let s = schema(json!({
        "type": "object",
        "allOf": [{"x-kubernetes-validations": [{"rule": "has(self.a)", "message": "a is needed"}]}],
    }));
    assert_eq!(
        messages(&s.validate(&obj(json!({})))),
        ["spec: Invalid value: \"\": a is needed"]
    );
}

// Rules that do not compile are reported where they apply; evaluation
// errors as `<error> evaluating rule: <rule>`.
#[test]
fn cel_errors() {
    let s = schema(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.("}, {"rule": "self.missing == 1"}],
    }));
    let errs = s.validate(&obj(json!({})));
    assert_eq!(errs.len(), 2);
    assert!(
        errs.0[0].detail.starts_with("rule compile error: "),
        "{}",
        errs.0[0]
    );
    assert!(
        errs.0[1]
            .detail
            .ends_with("evaluating rule: self.missing == 1"),
        "{}",
        errs.0[1]
    );
}

// Transition rules run only with an old value; ratcheting drops errors of
// unchanged values (OpenAPI and non-transition CEL rules).
#[test]
fn updates_ratchet_and_transition_rules() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "size": {"type": "integer", "maximum": 5,
                     "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "may not shrink"}]},
            "name": {"type": "string", "maxLength": 2,
                     "x-kubernetes-validations": [{"rule": "self != 'bad'"}]},
        },
    }));
    let old = obj(json!({"size": 7, "name": "bad"}));
    assert!(s.validate_update(&old, &old).is_empty());
    assert_eq!(s.validate(&old).len(), 3);
    let errs = s.validate_update(&obj(json!({"size": 6, "name": "bad"})), &old);
    assert_eq!(
        messages(&errs),
        [
            "spec.size: Invalid value: 6: spec.size in body should be less than or equal to 5",
            "spec.size: Invalid value: \"integer\": may not shrink",
        ]
    );
}

// schema/cel/validation.go (`validationActivationWithOldSelf`): a rule
// with `optionalOldSelf: true` also runs without an old value (create, a
// new field, a new item of a map list), `oldSelf` then being
// `optional.none()`, else `optional.of(old)`. Other transition rules still
// need an old value.
#[test]
fn optional_old_self_rules() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "phase": {"type": "string", "x-kubernetes-validations": [
                {"rule": "oldSelf.hasValue() || self == 'initial'", "message": "must start as initial",
                 "optionalOldSelf": true},
            ]},
            "replicas": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "self >= oldSelf.orValue(0)", "message": "may not shrink", "optionalOldSelf": true},
                {"rule": "self != oldSelf", "message": "must change"},
            ]},
            "items": {
                "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
                    "x-kubernetes-validations": [
                        {"rule": "!oldSelf.hasValue() ? self.size == 1 : self.size >= oldSelf.value().size",
                         "message": "items start at 1 and grow", "optionalOldSelf": true},
                    ]},
            },
        },
    }));
    // Create: oldSelf is optional.none(); `self != oldSelf` does not run.
    assert_eq!(
        messages(&s.validate(&obj(json!({"phase": "running", "replicas": 2})))),
        ["spec.phase: Invalid value: \"string\": must start as initial"]
    );
    assert!(
        s.validate(&obj(
            json!({"phase": "initial", "replicas": 2, "items": [{"name": "a", "size": 1}]})
        ))
        .is_empty()
    );
    // Update: oldSelf is optional.of(old).
    let old = obj(json!({"phase": "initial", "replicas": 5, "items": [{"name": "a", "size": 4}]}));
    assert!(
        s.validate_update(
            &obj(json!({"phase": "running", "replicas": 6, "items": [{"name": "a", "size": 4}]})),
            &old
        )
        .is_empty()
    );
    assert_eq!(
        messages(&s.validate_update(
            &obj(json!({"phase": "running", "replicas": 3,
                        "items": [{"name": "a", "size": 3}, {"name": "b", "size": 2}]})),
            &old
        )),
        [
            "spec.replicas: Invalid value: \"integer\": may not shrink",
            "spec.items[0]: Invalid value: \"object\": items start at 1 and grow",
            "spec.items[1]: Invalid value: \"object\": items start at 1 and grow",
        ]
    );
    // A field new on update has no old value either.
    let old = obj(json!({"replicas": 5}));
    assert_eq!(
        messages(&s.validate_update(&obj(json!({"replicas": 6, "phase": "x"})), &old)),
        ["spec.phase: Invalid value: \"string\": must start as initial"]
    );
}

/// `n` distinct strings of 1000 characters.
fn strings(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| Value::String(format!("{i:01000}")))
            .collect(),
    )
}

/// An O(n²) rule over a list of strings: with n items of 1000 characters
/// its cost is n * (207n + 5) + 2 (cel-go's model: per inner item
/// `@not_strictly_false` 2, `&&` 1, `||` of two equalities of strings
/// 2 * (2 + 1000 * 0.1)).
const QUADRATIC: &str = "self.all(x, self.all(y, x == y || x != y))";

// schema/cel/validation.go: a rule whose evaluation would pass
// `PerCallLimit` (1,000,000) is stopped with cel-go's `operation
// cancelled: actual cost limit exceeded`, and no rule runs after it.
#[test]
fn cel_rule_over_the_per_call_limit_is_stopped() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "list": {"type": "array", "items": {"type": "string"},
                     "x-kubernetes-validations": [{"rule": QUADRATIC}, {"rule": "false", "message": "never reached"}]},
            "z": {"type": "string", "x-kubernetes-validations": [{"rule": "false", "message": "not reached either"}]},
        },
    }));
    // 69 items: 985874, within the limit.
    assert_eq!(
        messages(&s.validate(&obj(json!({"list": strings(69)})))),
        ["spec.list: Invalid value: \"array\": never reached"]
    );
    // 70 items: 1014652.
    assert_eq!(
        messages(&s.validate(&obj(json!({"list": strings(70), "z": "a"})))),
        [format!(
            "spec.list: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {QUADRATIC}"
        )]
    );
}

// schema/cel/validation.go: the rules of one request share
// `RuntimeCELCostBudget` (10,000,000); once it is spent, the rule that
// would overdraw it is reported and no further rule runs.
#[test]
fn cel_rules_share_the_request_budget() {
    let rules: Vec<Value> = (0..10).map(|_| json!({"rule": QUADRATIC})).collect();
    let s = schema(json!({
        "type": "object",
        "properties": {
            "list": {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": rules},
            "more": {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": [{"rule": QUADRATIC}]},
            "z": {"type": "string", "x-kubernetes-validations": [{"rule": "false", "message": "not reached"}]},
        },
    }));
    // 10 rules of 985874: 9858740 of the budget.
    assert!(s.validate(&obj(json!({"list": strings(69)}))).is_empty());
    // An 11th overdraws it.
    assert_eq!(
        messages(&s.validate(&obj(
            json!({"list": strings(69), "more": strings(69), "z": "a"})
        ))),
        [
            "spec.more: Invalid value: \"array\": validation failed due to running out of cost budget, no further validation rules will be run"
        ]
    );
}

// apiserver/pkg/cel (`Escape`): rules see declared properties under
// their CEL names: keywords as `__<word>__`, `-` as `__dash__`, `.` as
// `__dot__`; keys of maps are unchanged.
#[test]
fn cel_sees_escaped_property_names() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "namespace": {"type": "string"},
            "a-b": {"type": "string"},
            "x.y": {"type": "integer"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "x-kubernetes-validations": [
            {"rule": "has(self.__namespace__) && self.__namespace__ == 'ns'", "message": "namespace"},
            {"rule": "self.a__dash__b == 'v' && self.x__dot__y == 1", "message": "escaped"},
            {"rule": "self.labels['app-name'] == 'x'", "message": "map keys"},
        ],
    }));
    assert_eq!(
        messages(&s.validate(&obj(
            json!({"namespace": "ns", "a-b": "v", "x.y": 1, "labels": {"app-name": "x"}})
        ))),
        Vec::<String>::new()
    );
    assert_eq!(
        messages(&s.validate(&obj(
            json!({"namespace": "other", "a-b": "v", "x.y": 1, "labels": {"app-name": "x"}})
        ))),
        ["spec: Invalid value: \"object\": namespace"]
    );
}

// schema/cel/validation.go (`evalMessageExpression`): a failed rule's
// messageExpression is charged too, and stopped past the per-call limit.
#[test]
fn cel_message_expressions_are_charged() {
    let costly = "self.all(x, self.all(y, x == y || x != y)) ? 'a' : 'b'";
    let s = schema(json!({
        "type": "object",
        "properties": {
            "list": {"type": "array", "items": {"type": "string"},
                     "x-kubernetes-validations": [{"rule": "size(self) < 10", "messageExpression": costly}]},
        },
    }));
    assert_eq!(
        messages(&s.validate(&obj(json!({"list": strings(69)})))),
        ["spec.list: Invalid value: \"array\": a"]
    );
    assert_eq!(
        messages(&s.validate(&obj(json!({"list": strings(70)})))),
        [format!(
            "spec.list: Invalid value: \"array\": no further validation rules will be run due to call cost exceeds limit for messageExpression: {costly:?}"
        )]
    );
}

// schema/pruning (PruneWithOptions): unknown fields are removed and
// reported with their path;
// apiVersion/kind/metadata stay at the root and in embedded resources;
// x-kubernetes-preserve-unknown-fields keeps unknowns.
#[test]
fn pruning() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"k": {"type": "object"}}},
            "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "integer"}}}},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}},
        },
    }));
    let mut o = json!({
        "apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "a", "odd": 1}, "top": 1,
        "spec": {
            "foo": 1,
            "items": [{"a": "b", "bar": 2}],
            "free": {"any": {"thing": 1}, "k": {"gone": 1}},
            "map": {"m": {"x": 1, "y": 2}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "status": {}},
        },
    });
    // PruneOptions.ReturnPruned: sorted, keys joined with "." and indices
    // as "[i]", no leading dot.
    assert_eq!(
        s.prune(&mut o),
        [
            "spec.foo",
            "spec.free.k.gone",
            "spec.items[0].bar",
            "spec.map.m.y",
            "spec.template.status",
            "top"
        ]
    );
    assert_eq!(
        o,
        json!({
            "apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "a", "odd": 1},
            "spec": {
                "items": [{"a": "b"}],
                "free": {"any": {"thing": 1}, "k": {}},
                "map": {"m": {"x": 1}},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
            },
        })
    );
}

// schema/defaulting: PruneNonNullableNullsWithoutDefaults then Default.
#[test]
fn defaulting() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "a": {"type": "string", "default": "A"},
            "b": {"type": "string"},
            "c": {"type": "string", "nullable": true, "default": "C"},
            "obj": {"type": "object", "default": {}, "properties": {"n": {"type": "integer", "default": 3}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {"p": {"type": "string", "default": "P"}}}},
            "map": {"type": "object", "additionalProperties": {"type": "string", "default": "M"}},
        },
    }));
    let mut o =
        obj(json!({"b": null, "c": null, "list": [{}, {"p": "q"}], "map": {"x": null, "y": "y"}}));
    s.apply_defaults(&mut o);
    assert_eq!(
        o["spec"],
        json!({
            "a": "A", "c": null, "obj": {"n": 3},
            "list": [{"p": "P"}, {"p": "q"}],
            "map": {"x": "M", "y": "y"},
        })
    );
    // An absent object is not created unless it has a default itself.
    let mut o = json!({"apiVersion": "x.io/v1"});
    s.apply_defaults(&mut o);
    assert_eq!(o, json!({"apiVersion": "x.io/v1"}));
}

#[test]
fn type_at_paths() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "replicas": {"type": "integer"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
            "map": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "port": {"x-kubernetes-int-or-string": true},
        },
    }));
    assert_eq!(s.type_at(".spec.replicas"), Some("integer"));
    assert_eq!(s.type_at(".spec.items[*].n"), Some("string"));
    assert_eq!(s.type_at(".spec.map.anything"), Some("boolean"));
    assert_eq!(s.type_at(".spec.port"), Some("int-or-string"));
    assert_eq!(s.type_at(".spec"), Some("object"));
    assert_eq!(s.type_at(".spec.nope"), None);
}

#[test]
fn bad_schemas_are_refused() {
    assert!(CustomSchema::from_json(&json!("x")).is_err());
    assert!(CustomSchema::from_json(&json!({"type": "thing"})).is_err());
    assert!(CustomSchema::from_json(&json!({"type": "string", "pattern": "("})).is_err());
    assert!(
        CustomSchema::from_json(&json!({"x-kubernetes-validations": [{"message": "m"}]})).is_err()
    );
    // Deep nesting neither overflows nor is accepted.
    for (depth, ok) in [(30, true), (90, true), (150, false)] {
        let mut deep = json!({"type": "string"});
        for _ in 0..depth {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        assert_eq!(CustomSchema::from_json(&deep).is_ok(), ok, "{depth}");
    }
}

// The passes follow the schema, whose depth is bounded: the deepest schema
// accepted is walked without exhausting a test thread's stack.
#[test]
fn deepest_schemas_are_walked() {
    let depth = 95;
    let mut sch = json!({"type": "string", "default": "d", "x-kubernetes-validations": [{"rule": "self == 'd'"}]});
    let mut val = json!("wrong");
    for _ in 0..depth {
        sch = json!({"type": "object", "properties": {"a": sch}, "x-kubernetes-validations": [{"rule": "true"}]});
        val = json!({"a": val, "x": 1});
    }
    let Ok(s) = CustomSchema::from_json(&sch) else {
        panic!("a schema of depth {depth} is accepted");
    };
    let pruned = s.prune(&mut val);
    assert_eq!(pruned.len(), depth);
    s.apply_defaults(&mut val);
    let errs = s.validate(&val);
    assert_eq!(errs.len(), 1, "{:?}", messages(&errs));
    assert!(s.validate_update(&val, &val).is_empty());
}

// ---- Gateway API: every CRD version parses, every example validates. ----

const GATEWAY: &str = "/work/shared/data/gateway-api";

/// (group, version, kind) → schema, for every version of every CRD.
fn gateway_schemas() -> BTreeMap<(String, String, String), CustomSchema> {
    let mut out = BTreeMap::new();
    let mut files: Vec<_> = std::fs::read_dir(Path::new(GATEWAY).join("crds"))
        .expect("gateway-api CRDs under /work/shared/data")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read CRD");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("CRD YAML");
        for crd in docs {
            if crd["kind"] != "CustomResourceDefinition" {
                continue;
            }
            let group = crd["spec"]["group"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let kind = crd["spec"]["names"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
                let name = v["name"].as_str().unwrap_or_default().to_string();
                let s = CustomSchema::from_json(&v["schema"]["openAPIV3Schema"])
                    .unwrap_or_else(|e| panic!("{}: {kind} {name}: {e}", f.display()));
                assert_compiles(&s, &format!("{kind} {name}"));
                out.insert((group.clone(), name, kind.clone()), s);
            }
        }
    }
    out
}

fn assert_compiles(s: &CustomSchema, what: &str) {
    let mut stack = vec![&s.root];
    let mut count = 0;
    while let Some(n) = stack.pop() {
        for r in &n.rules {
            count += 1;
            if let Err(e) = &r.program {
                panic!("{what}: rule {:?} does not compile: {e}", r.rule);
            }
            if let Some(Err(e)) = &r.message_expression {
                panic!(
                    "{what}: messageExpression of {:?} does not compile: {e}",
                    r.rule
                );
            }
        }
        stack.extend(n.properties.values());
        stack.extend(n.items.as_deref());
        stack.extend(n.additional.schema());
        stack.extend(
            n.checks
                .all_of
                .iter()
                .chain(&n.checks.any_of)
                .chain(&n.checks.one_of),
        );
        stack.extend(n.checks.not.as_deref());
    }
    let _ = count;
}

fn examples() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut dirs = vec![Path::new(GATEWAY).join("examples")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d)
            .expect("examples")
            .filter_map(Result::ok)
        {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                let text = std::fs::read_to_string(&p).expect("read example");
                let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                for d in docs.into_iter().filter(|d| d.is_object()) {
                    out.push((p.display().to_string(), d));
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn gvk(o: &Value) -> (String, String, String) {
    let api = o["apiVersion"].as_str().unwrap_or_default();
    let (g, v) = api.split_once('/').unwrap_or(("", api));
    (
        g.into(),
        v.into(),
        o["kind"].as_str().unwrap_or_default().into(),
    )
}

#[test]
fn gateway_api_examples_validate() {
    let schemas = gateway_schemas();
    assert!(schemas.len() >= 10, "{}", schemas.len());
    let mut checked = 0;
    let mut failures = Vec::new();
    for (file, mut o) in examples() {
        let Some(s) = schemas.get(&gvk(&o)) else {
            continue;
        };
        s.prune(&mut o);
        s.apply_defaults(&mut o);
        let errs = s.validate(&o);
        if !errs.is_empty() {
            failures.push(format!(
                "{file} {}: {:?}",
                o["metadata"]["name"],
                messages(&errs)
            ));
        }
        // An unchanged update is valid too (and runs transition rules).
        let errs = s.validate_update(&o, &o);
        if !errs.is_empty() {
            failures.push(format!("{file} (update): {:?}", messages(&errs)));
        }
        checked += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked > 50, "{checked}");
}

fn gateway(spec: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "g"},
        "spec": spec,
    })
}

#[test]
fn gateway_api_mutations_fail_with_the_crd_messages() {
    let schemas = gateway_schemas();
    let s = &schemas[&(
        "gateway.networking.k8s.io".into(),
        "v1".into(),
        "Gateway".into(),
    )];
    let check = |spec: Value| {
        let mut o = gateway(spec);
        s.apply_defaults(&mut o);
        messages(&s.validate(&o))
    };
    // Valid baseline.
    assert_eq!(
        check(
            json!({"gatewayClassName": "c", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]})
        ),
        Vec::<String>::new()
    );
    // Two listeners with the same name: the list-map duplicate, then the
    // CRD's own rule on the list.
    assert_eq!(
        check(json!({"gatewayClassName": "c", "listeners": [
            {"name": "http", "protocol": "HTTP", "port": 80},
            {"name": "http", "protocol": "HTTP", "port": 8080},
        ]})),
        [
            "spec.listeners[1]: Duplicate value: map[string]interface {}{\"name\":\"http\"}",
            "spec.listeners: Invalid value: \"array\": Listener name must be unique within the Gateway",
        ]
    );
    // A hostname address breaking the address rule.
    let errs = check(json!({"gatewayClassName": "c",
        "addresses": [{"type": "Hostname", "value": "Bad_Host"}],
        "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}));
    assert_eq!(
        errs,
        [
            "spec.addresses[0]: Invalid value: \"object\": Hostname value must be empty or contain only valid characters (matching ^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)"
        ]
    );
    // A hostname on a TCP listener.
    let errs = check(json!({"gatewayClassName": "c",
        "listeners": [{"name": "tcp", "protocol": "TCP", "port": 9000, "hostname": "a.example.com"}]}));
    assert_eq!(
        errs,
        [
            "spec.listeners: Invalid value: \"array\": hostname must not be specified for protocols ['TCP', 'UDP']"
        ]
    );
    // An invalid enum (TLS mode).
    let errs = check(json!({"gatewayClassName": "c",
        "listeners": [{"name": "https", "protocol": "HTTPS", "port": 443,
            "tls": {"mode": "Bogus", "certificateRefs": [{"name": "cert"}]}}]}));
    assert_eq!(
        errs[0],
        "spec.listeners[0].tls.mode: Unsupported value: \"Bogus\": supported values: \"Terminate\", \"Passthrough\""
    );
}

// Embedded resources: apiextensions-apiserver `schema/objectmeta`
// (validation.go `Validate` / `validateEmbeddedResource`, coerce.go and
// algorithm.go `Coerce`), as of Kubernetes 1.33 (a missing apiVersion or
// kind is `field.Required(..., "must not be empty")`; 1.34 dropped the
// detail). The schema has a rule, so that, as upstream, `Required` errors
// block CEL (`hasBlockingErr`); upstream has no CEL validator, and no
// `<nil>` error, without rules.
fn embedded_schema() -> CustomSchema {
    let resource = json!({
        "type": "object",
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true,
    });
    schema(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "true"}],
        "properties": {
            "template": resource,
            "nested": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"inner": resource},
            },
            "items": {"type": "array", "items": resource},
            "byName": {"type": "object", "additionalProperties": resource},
        },
    }))
}

const NOT_CHECKED: &str = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

// objectmeta TestValidate ("embedded", "nested", "items",
// "additionalProperties"): apiVersion and kind are required in every
// embedded resource the schema reaches, with `Child` / `Index` / `Key`
// paths; metadata is not required.
#[test]
fn embedded_resources_require_api_version_and_kind() {
    let s = embedded_schema();
    let errs = s.validate(&obj(json!({
        "template": {},
        "nested": {"inner": {}},
        "items": [{"apiVersion": "v1", "kind": "Pod"}, {}],
        "byName": {"foo": {}},
    })));
    assert_eq!(
        messages(&errs),
        [
            "spec.template.apiVersion: Required value: must not be empty",
            "spec.template.kind: Required value: must not be empty",
            "spec.nested.apiVersion: Required value: must not be empty",
            "spec.nested.kind: Required value: must not be empty",
            "spec.nested.inner.apiVersion: Required value: must not be empty",
            "spec.nested.inner.kind: Required value: must not be empty",
            "spec.items[1].apiVersion: Required value: must not be empty",
            "spec.items[1].kind: Required value: must not be empty",
            "spec.byName[foo].apiVersion: Required value: must not be empty",
            "spec.byName[foo].kind: Required value: must not be empty",
            NOT_CHECKED,
        ]
    );
    assert_eq!(errs.0[0].type_.reason(), "FieldValueRequired");
    // The root is the server's (isResourceRoot false); a null embedded
    // value is not an object and is not checked.
    let errs = s.validate(&json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod"}}}));
    assert!(errs.is_empty(), "{errs:?}");
}

// validateEmbeddedResource: apiVersion must be a string, non-empty and
// parse as a group-version (`schema.ParseGroupVersion`: "unexpected
// GroupVersion string: %v"); kind must be a string, non-empty and a
// DNS-1035 label once lowercased ("may have mixed case, but should
// otherwise match: " + the IsDNS1035Label messages). field.Error shows a
// number with %v and nil as "null".
#[test]
fn embedded_api_version_and_kind_values() {
    let s = embedded_schema();
    let dns1035 = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    let errs = s.validate(&obj(json!({
        "template": {"apiVersion": 1, "kind": "foo.bar-com"},
        "items": [
            {"apiVersion": "", "kind": ""},
            {"apiVersion": "a/b/c", "kind": null},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet"},
        ],
    })));
    assert_eq!(
        messages(&errs),
        [
            "spec.template.apiVersion: Invalid value: 1: must be a string".to_string(),
            format!(
                "spec.template.kind: Invalid value: \"foo.bar-com\": may have mixed case, but should otherwise match: {dns1035}"
            ),
            "spec.items[0].apiVersion: Invalid value: \"\": must not be empty".to_string(),
            "spec.items[0].kind: Invalid value: \"\": must not be empty".to_string(),
            "spec.items[1].apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c"
                .to_string(),
            "spec.items[1].kind: Invalid value: \"null\": must be a string".to_string(),
        ]
    );
    assert!(errs.iter().all(|e| e.type_.reason() == "FieldValueInvalid"));
}

// validateEmbeddedResource → metav1 validation ValidateObjectMeta with
// path.ValidatePathSegmentName, requiresNamespace = namespace set, a
// missing name replaced by "fakename"; objectmeta TestValidateEmbeddedResource
// "invalid" (name "..", namespace "$$$", label and annotation "#").
// Messages: apimachinery util/validation IsQualifiedName,
// IsValidLabelValue, IsDNS1123Label (a valid subdomain: "must not contain
// dots"), api/validation/path, ValidateNonnegativeField,
// ValidateFinalizers.
#[test]
fn embedded_metadata_is_validated_as_object_meta() {
    let s = embedded_schema();
    let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    let name_part = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let value = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    let errs = s.validate(&obj(json!({
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "..",
            "namespace": "$$$",
            "labels": {"#": "#"},
            "annotations": {"#": "#"},
        }},
        "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "generateName": "a/",
                "namespace": "a.b",
                "generation": -1,
                "labels": {"example.com/": "ok", "a/b/c": "ok", "fine": &"x".repeat(64)},
                "finalizers": ["orphan", "foregroundDeletion"],
            }},
            // no name (not required here), a valid everything
            {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "generateName": "..",
                "namespace": "default",
                "labels": {"app.kubernetes.io/name": "web", "empty": ""},
                "annotations": {"Example.com/Note": "anything at all"},
            }},
        ],
    })));
    assert_eq!(
        messages(&errs),
        [
            "spec.template.metadata.name: Invalid value: \"..\": may not be '..'".to_string(),
            format!("spec.template.metadata.namespace: Invalid value: \"$$$\": {label}"),
            format!("spec.template.metadata.labels: Invalid value: \"#\": {name_part}"),
            format!("spec.template.metadata.labels: Invalid value: \"#\": {value}"),
            format!("spec.template.metadata.annotations: Invalid value: \"#\": {name_part}"),
            "spec.items[0].metadata.generateName: Invalid value: \"a/\": may not contain '/'".to_string(),
            "spec.items[0].metadata.namespace: Invalid value: \"a.b\": must not contain dots".to_string(),
            "spec.items[0].metadata.generation: Invalid value: -1: must be greater than or equal to 0".to_string(),
            format!(
                "spec.items[0].metadata.labels: Invalid value: \"a/b/c\": a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                name_part.strip_prefix("name part ").unwrap_or_default()
            ),
            "spec.items[0].metadata.labels: Invalid value: \"example.com/\": name part must be non-empty".to_string(),
            format!("spec.items[0].metadata.labels: Invalid value: \"example.com/\": {name_part}"),
            format!(
                "spec.items[0].metadata.labels: Invalid value: \"{}\": must be no more than 63 characters",
                "x".repeat(64)
            ),
            "spec.items[0].metadata.finalizers: Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set".to_string(),
        ]
    );
}

// GetObjectMeta(x, false) (Go's encoding/json into metav1.ObjectMeta):
// a type error is `field.Invalid(metadata, v, err.Error())`, v shown with
// %#v; unknown fields and nulls are no errors.
#[test]
fn embedded_metadata_that_does_not_decode() {
    let s = embedded_schema();
    let errs = s.validate(&obj(json!({
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 1, "labels": {"a": 2}}},
        "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": "x"},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": 2}}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"ownerReferences": [{"name": true}]}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": null, "unknown": 1, "labels": {"a": null}}},
        ],
    })));
    assert_eq!(
        messages(&errs),
        [
            "spec.template.metadata: Invalid value: map[string]interface {}{\"labels\":map[string]interface {}{\"a\":2}, \"name\":1}: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string",
            "spec.items[0].metadata: Invalid value: \"x\": json: cannot unmarshal string into Go value of type v1.ObjectMeta",
            "spec.items[1].metadata: Invalid value: map[string]interface {}{\"labels\":map[string]interface {}{\"a\":2}}: json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string",
            "spec.items[2].metadata: Invalid value: map[string]interface {}{\"ownerReferences\":[]interface {}{map[string]interface {}{\"name\":true}}}: json: cannot unmarshal bool into Go struct field OwnerReference.ownerReferences.name of type string",
        ]
    );
}

// The embedded checks are not ratcheted (the CR strategy's ValidateUpdate
// calls objectmeta.Validate on the new object alone).
#[test]
fn embedded_errors_are_not_ratcheted() {
    let s = embedded_schema();
    let bad =
        obj(json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ".."}}}));
    let errs = s.validate_update(&bad, &bad);
    assert_eq!(
        messages(&errs),
        ["spec.template.metadata.name: Invalid value: \"..\": may not be '..'"]
    );
}

// algorithm.go Coerce: on a write (dropInvalidFields false) the first
// non-string apiVersion/kind or undecodable metadata is refused; the
// metadata is rewritten through ObjectMeta (SetObjectMeta: unknown fields
// gone, a zero creationTimestamp removed). On a read of a stored object
// (dropInvalidFields true) those fields are dropped instead
// (GetObjectMeta's field-by-field decode), and a metadata that is not an
// object passes through.
#[test]
fn embedded_resources_are_coerced() {
    let s = embedded_schema();
    let mut o = obj(json!({"template": {"apiVersion": "v1", "kind": 1}}));
    let e = s.coerce(&mut o, false).expect_err("refused");
    assert_eq!(
        e.to_string(),
        "spec.template.kind: Invalid value: 1: must be a string"
    );
    let mut o =
        obj(json!({"items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ["x"]}}]}));
    let e = s.coerce(&mut o, false).expect_err("refused");
    assert_eq!(
        e.to_string(),
        "spec.items[0].metadata: Invalid value: map[string]interface {}{\"name\":[]interface {}{\"x\"}}: json: cannot unmarshal array into Go struct field ObjectMeta.name of type string"
    );

    let mut o = obj(json!({"template": {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "a", "creationTimestamp": null, "foo": "bar", "labels": {"k": "v"}},
        "spec": {"kept": true}}}));
    s.coerce(&mut o, false).expect("coerced");
    assert_eq!(
        o["spec"]["template"],
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "labels": {"k": "v"}}, "spec": {"kept": true}})
    );
    // The root's own metadata is not touched.
    assert_eq!(o["metadata"], json!({"name": "a"}));

    let mut o = obj(json!({
        "template": {"apiVersion": 2, "kind": "Pod", "metadata": {"name": 1, "namespace": "ns", "foo": "bar"}},
        "byName": {"k": {"apiVersion": "v1", "kind": false, "metadata": "not an object"}},
    }));
    s.coerce(&mut o, true).expect("dropped");
    assert_eq!(
        o["spec"],
        json!({
            "template": {"kind": "Pod", "metadata": {"namespace": "ns"}},
            "byName": {"k": {"apiVersion": "v1", "metadata": "not an object"}},
        })
    );
}

// k8s.io/apiserver pkg/cel/common/values.go (unstructuredMap.Find): in an
// object with properties, a null-valued (nullable) field is treated as
// absent, so `has()` is false for it.
#[test]
fn cel_null_fields_of_objects_are_absent() {
    let s = schema(json!({
        "type": "object",
        "properties": {"a": {"type": "integer", "nullable": true}},
        "x-kubernetes-validations": [{"rule": "!has(self.a)", "message": "a is set"}],
    }));
    assert!(s.validate(&obj(json!({"a": null}))).is_empty());
    assert_eq!(
        messages(&s.validate(&obj(json!({"a": 1})))),
        ["spec: Invalid value: \"object\": a is set"]
    );
}
