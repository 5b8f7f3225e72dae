//! Unit tests of the patch algorithms, modelled on apimachinery's
//! `strategicpatch` and `jsonpatch` test cases.

use serde_json::{Value, json};

use super::*;

/// A schema shaped like apimachinery's `mergeItem` test type.
fn merge_item() -> KindSchema {
    let item = json!({"$ref": "#/components/schemas/MergeItem"});
    let defs = json!({
        "MergeItem": {"type": "object", "properties": {
            "name": {"type": "string"},
            "value": {"type": "string"},
            "other": {"type": "string"},
            "mergingList": {"type": "array", "items": item,
                "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
            "nonMergingList": {"type": "array", "items": item},
            "mergingIntList": {"type": "array", "items": {"type": "integer"},
                "x-kubernetes-patch-strategy": "merge"},
            "nonMergingIntList": {"type": "array", "items": {"type": "integer"}},
            "simpleMap": {"type": "object", "additionalProperties": {"type": "string"}},
            "replacingItem": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "x-kubernetes-patch-strategy": "replace"},
            "retainKeysMap": {"allOf": [{"$ref": "#/components/schemas/RetainKeysMap"}],
                "x-kubernetes-patch-strategy": "retainKeys"},
            "retainKeysMergingList": {"type": "array", "items": item,
                "x-kubernetes-patch-strategy": "merge,retainKeys", "x-kubernetes-patch-merge-key": "name"},
        }},
        "RetainKeysMap": {"type": "object", "properties": {
            "name": {"type": "string"}, "value": {"type": "string"}, "other": {"type": "string"},
            "simpleMap": {"type": "object", "additionalProperties": {"type": "string"}},
            "mergingList": {"type": "array", "items": item,
                "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
        }},
    });
    KindSchema::from_parts(item.clone(), defs.as_object().cloned().unwrap_or_default())
}

fn smp(original: Value, patch: Value) -> Result<Value, PatchError> {
    let schema = merge_item();
    let bytes = serde_json::to_vec(&patch).expect("patch");
    apply_strategic_patch(&original, &bytes, &schema.root())
}

fn smp_ok(original: Value, patch: Value) -> Value {
    smp(original, patch).expect("patch applies")
}

#[test]
fn smp_maps_merge_recursively_and_null_deletes() {
    assert_eq!(
        smp_ok(
            json!({"name": "a", "simpleMap": {"k1": "v1"}}),
            json!({"simpleMap": {"k2": "v2"}})
        ),
        json!({"name": "a", "simpleMap": {"k1": "v1", "k2": "v2"}})
    );
    assert_eq!(
        smp_ok(
            json!({"name": "a", "value": "b"}),
            json!({"value": null, "other": null})
        ),
        json!({"name": "a"})
    );
    // Nulls in values new to the object are dropped.
    assert_eq!(
        smp_ok(json!({}), json!({"simpleMap": {"a": null, "b": "x"}})),
        json!({"simpleMap": {"b": "x"}})
    );
    // Scalars and type changes replace.
    assert_eq!(
        smp_ok(
            json!({"value": "a", "simpleMap": {"a": "b"}}),
            json!({"value": "b", "simpleMap": "x"})
        ),
        json!({"value": "b", "simpleMap": "x"})
    );
}

#[test]
fn smp_patch_directives_on_maps() {
    assert_eq!(
        smp_ok(
            json!({"simpleMap": {"a": "1", "b": "2"}}),
            json!({"simpleMap": {"$patch": "replace", "c": "3"}})
        ),
        json!({"simpleMap": {"c": "3"}})
    );
    assert_eq!(
        smp_ok(
            json!({"simpleMap": {"a": "1"}}),
            json!({"simpleMap": {"$patch": "delete"}})
        ),
        json!({"simpleMap": {}})
    );
    assert_eq!(
        smp_ok(
            json!({"name": "a", "value": "b"}),
            json!({"$patch": "replace", "other": "c"})
        ),
        json!({"other": "c"})
    );
    assert_eq!(
        smp_ok(json!({"name": "a"}), json!({"$patch": "delete"})),
        json!({})
    );
    assert!(matches!(
        smp(json!({}), json!({"$patch": "frobnicate"})),
        Err(PatchError::Internal(m)) if m.starts_with("unknown patch type: frobnicate")
    ));
}

#[test]
fn smp_replace_strategy_on_maps() {
    assert_eq!(
        smp_ok(
            json!({"replacingItem": {"a": 1, "b": 2}}),
            json!({"replacingItem": {"c": 3}})
        ),
        json!({"replacingItem": {"c": 3}})
    );
}

#[test]
fn smp_lists_without_strategy_are_replaced() {
    assert_eq!(
        smp_ok(
            json!({"nonMergingList": [{"name": "1"}, {"name": "2"}], "nonMergingIntList": [1, 2]}),
            json!({"nonMergingList": [{"name": "3"}], "nonMergingIntList": [3]})
        ),
        json!({"nonMergingList": [{"name": "3"}], "nonMergingIntList": [3]})
    );
}

#[test]
fn smp_merging_lists_of_maps_merge_by_key() {
    let original = json!({"mergingList": [
        {"name": "1", "value": "1"}, {"name": "2", "value": "2"}]});
    assert_eq!(
        smp_ok(
            original.clone(),
            json!({"mergingList": [{"name": "1", "value": "a"}, {"name": "3"}]})
        ),
        json!({"mergingList": [{"name": "1", "value": "a"}, {"name": "3"}, {"name": "2", "value": "2"}]})
    );
    // Nested nulls delete inside the matched element.
    assert_eq!(
        smp_ok(
            original.clone(),
            json!({"mergingList": [{"name": "2", "value": null}]})
        ),
        json!({"mergingList": [{"name": "1", "value": "1"}, {"name": "2"}]})
    );
    // $patch: delete removes the element with that key.
    assert_eq!(
        smp_ok(
            original.clone(),
            json!({"mergingList": [{"name": "1", "$patch": "delete"}]})
        ),
        json!({"mergingList": [{"name": "2", "value": "2"}]})
    );
    // $patch: replace keeps only the patch's elements.
    assert_eq!(
        smp_ok(
            original.clone(),
            json!({"mergingList": [{"name": "3"}, {"$patch": "replace"}]})
        ),
        json!({"mergingList": [{"name": "3"}]})
    );
    // $patch: merge in a list is refused.
    assert!(
        smp(
            original.clone(),
            json!({"mergingList": [{"$patch": "merge"}]})
        )
        .is_err()
    );
    // Elements without the merge key are refused.
    assert!(matches!(
        smp(original, json!({"mergingList": [{"value": "x"}]})),
        Err(PatchError::Internal(m)) if m.contains("does not contain declared merge key: name")
    ));
}

#[test]
fn smp_merging_lists_of_scalars() {
    assert_eq!(
        smp_ok(
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"mergingIntList": [4, 2]})
        ),
        json!({"mergingIntList": [4, 1, 2, 3]})
    );
    assert_eq!(
        smp_ok(
            json!({"mergingIntList": [1, 2]}),
            json!({"mergingIntList": [2, 1]})
        ),
        json!({"mergingIntList": [2, 1]})
    );
    assert_eq!(
        smp_ok(
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [2, 5]})
        ),
        json!({"mergingIntList": [1, 3]})
    );
    // Deleting from a missing list does nothing.
    assert_eq!(
        smp_ok(
            json!({}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [2]})
        ),
        json!({})
    );
    assert!(matches!(
        smp(json!({}), json!({"$deleteFromPrimitiveList": [2]})),
        Err(PatchError::BadRequest(m)) if m == "invalid patch format of primitive list"
    ));
}

#[test]
fn smp_lists_of_lists_are_refused() {
    assert!(matches!(
        smp(json!({"mergingIntList": [[1]]}), json!({"mergingIntList": [[2]]})),
        Err(PatchError::Invalid(m)) if m == "lists of lists are not supported"
    ));
}

#[test]
fn smp_set_element_order() {
    let original = json!({"mergingList": [
        {"name": "1", "value": "a"}, {"name": "2", "value": "b"}, {"name": "3", "value": "c"}]});
    // Reorder only.
    assert_eq!(
        smp_ok(
            original.clone(),
            json!({"$setElementOrder/mergingList": [{"name": "3"}, {"name": "1"}, {"name": "2"}]})
        ),
        json!({"mergingList": [
            {"name": "3", "value": "c"}, {"name": "1", "value": "a"}, {"name": "2", "value": "b"}]})
    );
    // Change one, add one, keep order from the directive.
    assert_eq!(
        smp_ok(
            original.clone(),
            json!({
                "$setElementOrder/mergingList": [{"name": "4"}, {"name": "2"}, {"name": "1"}, {"name": "3"}],
                "mergingList": [{"name": "4", "value": "d"}, {"name": "1", "value": "x"}],
            })
        ),
        json!({"mergingList": [
            {"name": "4", "value": "d"}, {"name": "2", "value": "b"},
            {"name": "1", "value": "x"}, {"name": "3", "value": "c"}]})
    );
    // Server-only elements go before the first patch element that follows
    // them in the live list.
    assert_eq!(
        smp_ok(
            original.clone(),
            json!({"$setElementOrder/mergingList": [{"name": "3"}, {"name": "1"}]})
        ),
        json!({"mergingList": [
            {"name": "2", "value": "b"}, {"name": "3", "value": "c"}, {"name": "1", "value": "a"}]})
    );
    // Deletions alongside the directive.
    assert_eq!(
        smp_ok(
            original.clone(),
            json!({
                "$setElementOrder/mergingList": [{"name": "3"}, {"name": "1"}],
                "mergingList": [{"name": "2", "$patch": "delete"}],
            })
        ),
        json!({"mergingList": [{"name": "3", "value": "c"}, {"name": "1", "value": "a"}]})
    );
    // Primitive lists.
    assert_eq!(
        smp_ok(
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"$setElementOrder/mergingIntList": [3, 1, 2, 4], "mergingIntList": [4]})
        ),
        json!({"mergingIntList": [3, 1, 2, 4]})
    );
    // The patch list must follow the directive's order.
    assert!(
        smp(
            original.clone(),
            json!({
                "$setElementOrder/mergingList": [{"name": "1"}, {"name": "3"}],
                "mergingList": [{"name": "3", "value": "x"}, {"name": "1", "value": "y"}],
            })
        )
        .is_err()
    );
    assert!(matches!(
        smp(original, json!({"$setElementOrder/mergingList": "x"})),
        Err(PatchError::BadRequest(m)) if m == "invalid patch format of setElementOrder list"
    ));
}

#[test]
fn smp_retain_keys() {
    let original = json!({"retainKeysMap": {"name": "foo", "value": "bar", "other": "baz"}});
    assert_eq!(
        smp_ok(
            original.clone(),
            json!({"retainKeysMap": {"$retainKeys": ["name", "value"], "value": "new"}})
        ),
        json!({"retainKeysMap": {"name": "foo", "value": "new"}})
    );
    // Keys set to null need not be listed.
    assert_eq!(
        smp_ok(
            original.clone(),
            json!({"retainKeysMap": {"$retainKeys": ["name"], "value": null}})
        ),
        json!({"retainKeysMap": {"name": "foo"}})
    );
    // Every key of the patch must be retained.
    assert!(matches!(
        smp(original.clone(), json!({"retainKeysMap": {"$retainKeys": ["name"], "value": "x"}})),
        Err(PatchError::BadRequest(m)) if m == "invalid patch format of retainKeys"
    ));
    assert!(matches!(
        smp(original, json!({"retainKeysMap": {"$retainKeys": "name"}})),
        Err(PatchError::BadRequest(_))
    ));
    // merge,retainKeys lists still merge by key.
    assert_eq!(
        smp_ok(
            json!({"retainKeysMergingList": [{"name": "1", "value": "a"}]}),
            json!({"retainKeysMergingList": [{"name": "2"}]})
        ),
        json!({"retainKeysMergingList": [{"name": "2"}, {"name": "1", "value": "a"}]})
    );
}

#[test]
fn smp_new_values_apply_their_directives() {
    assert_eq!(
        smp_ok(
            json!({}),
            json!({"mergingList": [{"name": "1"}, {"name": "2", "$patch": "delete"}]})
        ),
        json!({"mergingList": [{"name": "1"}]})
    );
    assert_eq!(
        smp_ok(
            json!({}),
            json!({"retainKeysMap": {"$retainKeys": ["name"], "name": "x"}})
        ),
        json!({"retainKeysMap": {"name": "x"}})
    );
}

#[test]
fn smp_rejects_non_object_patches() {
    assert!(matches!(
        smp(json!({}), json!([1])),
        Err(PatchError::BadRequest(_))
    ));
    let schema = merge_item();
    assert!(matches!(
        apply_strategic_patch(&json!({}), b"{not json", &schema.root()),
        Err(PatchError::BadRequest(_))
    ));
}

/// kubectl's client-side apply against a real kind's generated schema:
/// ObjectMeta's finalizers merge, labels and annotations merge.
#[test]
fn smp_on_generated_namespace_schema() {
    let mut scheme = apiforge_core::scheme::Scheme::new();
    apiforge_core::builtin::core_v1::install(&mut scheme);
    let (kind, _) = scheme.resource("", "v1", "namespaces").expect("namespaces");
    let ops = kind.version("v1").expect("v1");
    let schema = KindSchema::cached(ops);
    let original = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "x", "labels": {"a": "1"}, "finalizers": ["one"],
        "annotations": {"keep": "me"}}, "spec": {"finalizers": ["kubernetes"]}});
    let patch = json!({"metadata": {
        "$setElementOrder/finalizers": ["two", "one"],
        "finalizers": ["two"],
        "labels": {"b": "2", "a": null},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"finalizers": ["other"]}});
    let out = apply_strategic_patch(
        &original,
        &serde_json::to_vec(&patch).expect("json"),
        &schema.root(),
    )
    .expect("applies");
    assert_eq!(
        out,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": "x", "labels": {"b": "2"}, "finalizers": ["two", "one"],
            "annotations": {"keep": "me", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"finalizers": ["other"]}})
    );
}

#[test]
fn json_patch_operations() {
    let doc = json!({"metadata": {"name": "x", "labels": {"a": "1"}}, "spec": {"list": [1, 2]}});
    let patch = json!([
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        {"op": "remove", "path": "/metadata/labels/a"},
        {"op": "replace", "path": "/spec/list/0", "value": 9},
        {"op": "add", "path": "/spec/list/-", "value": 3},
        {"op": "copy", "from": "/metadata/name", "path": "/spec/copy"},
        {"op": "move", "from": "/spec/copy", "path": "/spec/moved"},
        {"op": "test", "path": "/spec/moved", "value": "x"},
    ]);
    let out = apply_json_patch(&doc, &serde_json::to_vec(&patch).expect("json")).expect("applies");
    assert_eq!(
        out,
        json!({"metadata": {"name": "x", "labels": {"b": "2"}}, "spec": {"list": [9, 2, 3], "moved": "x"}})
    );
    // A failing operation leaves nothing applied and is a 422.
    assert!(matches!(
        apply_json_patch(&doc, br#"[{"op": "remove", "path": "/nope"}]"#),
        Err(PatchError::Invalid(_))
    ));
    assert!(matches!(
        apply_json_patch(
            &doc,
            br#"[{"op": "test", "path": "/metadata/name", "value": "y"}]"#
        ),
        Err(PatchError::Invalid(_))
    ));
    assert!(matches!(
        apply_json_patch(&doc, br#"[{"op": "frobnicate", "path": "/x"}]"#),
        Err(PatchError::Invalid(_))
    ));
    assert!(matches!(
        apply_json_patch(&doc, br#"{"op": "add"}"#),
        Err(PatchError::BadRequest(_))
    ));
    assert!(matches!(
        apply_json_patch(&doc, b"[{"),
        Err(PatchError::BadRequest(_))
    ));
}

#[test]
fn json_patch_operation_limit() {
    let ops: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
        .map(|_| json!({"op": "test", "path": "/a", "value": 1}))
        .collect();
    let bytes = serde_json::to_vec(&ops).expect("json");
    assert_eq!(
        apply_json_patch(&json!({"a": 1}), &bytes),
        Err(PatchError::TooLarge(
            "The allowed maximum operations in a JSON patch is 10000, got 10001".into()
        ))
    );
}

#[test]
fn merge_patch_rfc7386_examples() {
    let cases = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (
            json!({"a": "b"}),
            json!({"b": "c"}),
            json!({"a": "b", "b": "c"}),
        ),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (
            json!({"a": "b", "b": "c"}),
            json!({"a": null}),
            json!({"b": "c"}),
        ),
        (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
        (
            json!({"a": {"b": "c"}}),
            json!({"a": {"b": "d", "c": null}}),
            json!({"a": {"b": "d"}}),
        ),
        (
            json!({"a": [{"b": "c"}]}),
            json!({"a": [1]}),
            json!({"a": [1]}),
        ),
        (
            json!({"e": null}),
            json!({"a": 1}),
            json!({"e": null, "a": 1}),
        ),
        (
            json!({}),
            json!({"a": {"bb": {"ccc": null}}}),
            json!({"a": {"bb": {}}}),
        ),
    ];
    for (doc, patch, want) in cases {
        let got =
            apply_merge_patch(&doc, &serde_json::to_vec(&patch).expect("json")).expect("applies");
        assert_eq!(got, want, "{doc} + {patch}");
    }
    assert_eq!(
        apply_merge_patch(&json!({}), b"null"),
        Err(PatchError::BadRequest("Invalid JSON Patch".into()))
    );
    assert_eq!(
        apply_merge_patch(&json!({}), b"{"),
        Err(PatchError::BadRequest("Invalid JSON Patch".into()))
    );
}

#[test]
fn patch_types_by_content_type() {
    assert_eq!(
        PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
        Some(PatchType::Merge)
    );
    assert_eq!(
        PatchType::from_content_type("application/strategic-merge-patch+json"),
        Some(PatchType::Strategic)
    );
    assert_eq!(
        PatchType::from_content_type("application/json-patch+json"),
        Some(PatchType::Json)
    );
    assert_eq!(
        PatchType::from_content_type("application/apply-patch+yaml"),
        Some(PatchType::Apply)
    );
    assert_eq!(PatchType::from_content_type("application/json"), None);
}

#[test]
fn strict_checks_find_unknown_and_duplicate_fields_in_order() {
    let schema = merge_item();
    let body = br#"{"apiVersion": "v1", "kind": "X", "name": "a", "foo": 1, "name": "b",
        "simpleMap": {"k": "v", "k": "w"}, "retainKeysMap": {"bar": {"x": 1}},
        "mergingList": [{"name": "1"}, {"name": "2", "zap": true}], "replacingItem": {"any": 1}}"#;
    let issues = fields::check_json(body, &schema.root(), true).expect("json");
    assert_eq!(
        issues,
        vec![
            "unknown field \"foo\"",
            "duplicate field \"name\"",
            "duplicate field \"simpleMap.k\"",
            "unknown field \"retainKeysMap.bar\"",
            "unknown field \"mergingList[1].zap\"",
        ]
    );
    // apiVersion and kind are only known at the top.
    let value = json!({"retainKeysMap": {"kind": "x"}});
    assert_eq!(
        fields::check_value(&value, &schema.root(), true),
        vec!["unknown field \"retainKeysMap.kind\""]
    );
    assert!(fields::check_json(b"{", &schema.root(), true).is_err());
}

#[test]
fn strict_checks_handle_escaped_keys_big_maps_and_nested_lists() {
    let schema = merge_item();
    // A key with escapes is the same key; an escaped unknown key is
    // reported unescaped.
    let body = br#"{"name": "a", "na\u006de": "b", "f\u006fo": 1}"#;
    assert_eq!(
        fields::check_json(body, &schema.root(), true).expect("json"),
        vec!["duplicate field \"name\"", "unknown field \"foo\""]
    );
    // Duplicates are found in maps of any size, in document order.
    let mut entries: Vec<String> = (0..50).map(|i| format!("\"k{i}\": \"v\"")).collect();
    entries.push("\"k3\": \"again\"".into());
    entries.push("\"k45\": \"again\"".into());
    let body = format!(r#"{{"simpleMap": {{{}}}}}"#, entries.join(", "));
    assert_eq!(
        fields::check_json(body.as_bytes(), &schema.root(), true).expect("json"),
        vec![
            "duplicate field \"simpleMap.k3\"",
            "duplicate field \"simpleMap.k45\"",
        ]
    );
    // Paths through lists of objects inside lists of objects.
    let body = br#"{"mergingList": [{"name": "x", "mergingList": [{}, {"name": "y", "bad": 1}]}],
        "retainKeysMap": {"mergingList": [{"zip": 2}]}, "nope": [1, 2]}"#;
    assert_eq!(
        fields::check_json(body, &schema.root(), true).expect("json"),
        vec![
            "unknown field \"mergingList[0].mergingList[1].bad\"",
            "unknown field \"retainKeysMap.mergingList[0].zip\"",
            "unknown field \"nope\"",
        ]
    );
}

#[test]
fn field_validation_values() {
    assert_eq!(FieldValidation::parse(None), Some(FieldValidation::Warn));
    assert_eq!(
        FieldValidation::parse(Some("")),
        Some(FieldValidation::Warn)
    );
    assert_eq!(
        FieldValidation::parse(Some("Strict")),
        Some(FieldValidation::Strict)
    );
    assert_eq!(
        FieldValidation::parse(Some("Ignore")),
        Some(FieldValidation::Ignore)
    );
    assert_eq!(FieldValidation::parse(Some("strict")), None);
}

/// `findAtomics` of MutatingAdmissionPolicy apply configurations: atomic
/// lists (unannotated ones included), atomic maps and structs are found
/// through declared fields and list items, not through a map's values.
#[test]
fn atomic_paths_of_an_apply_configuration() {
    let root = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {
                    "name": {"type": "string"},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                        "additionalProperties": {"type": "string"}},
                }}},
            "labels": {"type": "object", "additionalProperties": {
                "type": "array", "items": {"type": "string"}}},
        }},
    }});
    let schema = KindSchema::from_parts(root, serde_json::Map::new());
    let node = schema.root();
    assert_eq!(
        structured::atomic_paths(
            &json!({"spec": {"items": ["a"], "ports": [{"name": "p", "tags": ["t"], "selector": {"a": "b"}}],
                "labels": {"x": ["y"]}, "undeclared": [1]}}),
            &node
        ),
        [".spec.items", ".spec.ports[0].selector"]
    );
    assert!(
        structured::atomic_paths(&json!({"spec": {"ports": [{"name": "p"}]}}), &node).is_empty()
    );
}
