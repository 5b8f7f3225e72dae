//! CEL: the input is an `x-kubernetes-validations` rule, compiled with the
//! CRD environment and evaluated (within the runtime cost budget) by a
//! custom resource schema on a create and on an update. Must never panic
//! or run away, whatever the rule.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fn objects() -> &'static (Value, Value) {
    static OBJECTS: OnceLock<(Value, Value)> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let new = json!({"apiVersion": "fuzz.example.com/v1", "kind": "Thing",
            "metadata": {"name": "a"},
            "spec": {"name": "web", "replicas": 3, "ratio": 0.5, "enabled": true,
                     "tags": ["a", "b", "c"], "labels": {"app": "web", "tier": "x"},
                     "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}],
                     "image": "registry.example.com/web:1.2.3", "cidr": "10.0.0.0/8"}});
        let mut old = new.clone();
        old["spec"]["replicas"] = json!(1);
        old["spec"]["tags"] = json!(["a"]);
        (new, old)
    })
}

fn schema(rule: &str) -> Value {
    let string = json!({"type": "string", "maxLength": 64});
    json!({"type": "object", "properties": {
        "spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": rule, "messageExpression": rule}],
            "properties": {
                "name": string, "image": string, "cidr": string,
                "replicas": {"type": "integer", "minimum": 0},
                "ratio": {"type": "number"},
                "enabled": {"type": "boolean"},
                "tags": {"type": "array", "maxItems": 16, "items": string,
                         "x-kubernetes-list-type": "set"},
                "labels": {"type": "object", "maxProperties": 16, "additionalProperties": string},
                "ports": {"type": "array", "maxItems": 8, "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"], "properties": {
                              "name": string, "port": {"type": "integer"}}}}}}}})
}

fuzz_target!(|data: &[u8]| {
    let Ok(rule) = std::str::from_utf8(data) else {
        return;
    };
    let _ = apiforge_core::apiextensions::cel_env().compile(rule);
    let Ok(schema) = apiforge_core::apiextensions::CustomSchema::from_json(&schema(rule)) else {
        return;
    };
    let (new, old) = objects();
    let _ = schema.validate(new);
    let _ = schema.validate_update(new, old);
});
