//! Server-side apply's merge and ownership rules, with expectations taken
//! from structured-merge-diff's tests and Kubernetes' documentation of
//! server-side apply (`managedFields` of a Deployment created by kubectl,
//! conflicts, shared ownership, list types).

use std::sync::Arc;

use serde_json::{Value, json};

use super::fieldpath::{Path, PathElement, Set};
use super::managed::{self, FieldManager, Managed, ManagedError, Versions};
use super::schema::KindSchema;
use super::structured;

struct OneVersion(Arc<KindSchema>);

impl Versions for OneVersion {
    fn schema(&self, api_version: &str) -> Option<Arc<KindSchema>> {
        (api_version == "example.com/v1").then(|| self.0.clone())
    }
    fn convert(&self, obj: &Value, _from: &str, to: &str) -> Option<Value> {
        (to == "example.com/v1").then(|| obj.clone())
    }
}

fn schema() -> Arc<KindSchema> {
    let string = json!({"type": "string"});
    let root = json!({"type": "object", "properties": {
        "apiVersion": string, "kind": string,
        "metadata": {"type": "object", "properties": {
            "name": string, "namespace": string, "uid": string, "resourceVersion": string,
            "labels": {"type": "object", "additionalProperties": string},
            "annotations": {"type": "object", "additionalProperties": string},
            "finalizers": {"type": "array", "items": string, "x-kubernetes-patch-strategy": "merge"},
            "managedFields": {"type": "array", "items": {"type": "object"}},
        }},
        "spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "color": string,
            "target": {"type": "string", "format": "int-or-string"},
            "tags": {"type": "array", "items": string, "x-kubernetes-list-type": "set"},
            "args": {"type": "array", "items": string},
            "containers": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {
                    "name": string, "image": string, "port": {"type": "integer"}}}},
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                "additionalProperties": string},
        }},
        "status": {"type": "object", "properties": {"phase": string}},
    }});
    Arc::new(KindSchema::from_parts(root, Default::default()))
}

fn manager<'a>(versions: &'a OneVersion) -> FieldManager<'a> {
    FieldManager {
        versions,
        api_version: "example.com/v1".into(),
        subresource: "",
        reset_fields: Set::from_paths([Path::fields(&["status"])]),
    }
}

fn obj(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "x"}, "spec": spec})
}

/// Applies in sequence; returns the object and ownership.
fn apply_all(steps: &[(&str, Value, bool)]) -> Result<(Value, Managed), ManagedError> {
    let versions = OneVersion(schema());
    let fm = manager(&versions);
    let mut live =
        json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {}, "spec": {}});
    let mut managed = Managed::default();
    for (who, config, force) in steps {
        let (new, m) = fm.apply(&live, config, managed, who, *force)?;
        if let Some(new) = new {
            live = new;
        }
        managed = m;
    }
    Ok((live, managed))
}

fn owned(managed: &Managed, who: &str) -> Value {
    managed
        .fields
        .iter()
        .find(|(id, _)| id.manager == who)
        .map(|(_, s)| s.set.to_fields_v1())
        .unwrap_or(Value::Null)
}

#[test]
fn applied_fields_encode_as_upstream_fields_v1() {
    let config = json!({"apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "x", "labels": {"app": "web"}},
        "spec": {"replicas": 1, "args": ["a"], "tags": ["t1"], "selector": {"app": "web"},
                 "containers": [{"name": "nginx", "image": "nginx:1"}]}});
    let (_, managed) = apply_all(&[("kubectl", config, false)]).unwrap();
    // As `kubectl apply --server-side` of a Deployment shows it: labels
    // entries without ".", list items keyed with ".", atomic fields as leaves.
    assert_eq!(
        serde_json::to_string(&owned(&managed, "kubectl")).unwrap(),
        r#"{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:args":{},"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{}}},"f:replicas":{},"f:selector":{},"f:tags":{"v:\"t1\"":{}}}}"#
    );
}

#[test]
fn update_on_create_owns_new_maps_with_a_dot_but_not_existing_structs() {
    let versions = OneVersion(schema());
    let fm = manager(&versions);
    // The empty object of the kind (as Go's zero value serializes it).
    let zero = json!({"metadata": {}, "spec": {}, "status": {}});
    let new = json!({"apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "x", "labels": {"app": "web"}},
        "spec": {"replicas": 1, "containers": [{"name": "a", "image": "i"}]},
        "status": {"phase": "Ready"}});
    let managed = fm
        .update(&zero, &new, Managed::default(), "kubectl-create")
        .unwrap();
    // Kubernetes' kubectl-create entry for a Deployment has this shape: the
    // new labels map is a member, spec is not; status is reset, not owned.
    assert_eq!(
        serde_json::to_string(&owned(&managed, "kubectl-create")).unwrap(),
        r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{".":{},"k:{\"name\":\"a\"}":{".":{},"f:image":{},"f:name":{}}},"f:replicas":{}}}"#
    );
    let entries = managed::encode(&managed);
    assert_eq!(entries[0]["operation"], "Update");
    assert_eq!(entries[0]["apiVersion"], "example.com/v1");
    assert_eq!(entries[0]["fieldsType"], "FieldsV1");
    assert!(entries[0]["time"].is_string());
}

#[test]
fn a_second_applier_of_a_changed_value_conflicts_with_the_owner() {
    let err = apply_all(&[
        ("a", obj(json!({"replicas": 1})), false),
        ("b", obj(json!({"replicas": 2})), false),
    ])
    .unwrap_err();
    let ManagedError::Conflicts(conflicts) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].manager.manager, "a");
    assert_eq!(conflicts[0].path.to_string(), ".spec.replicas");
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "a": .spec.replicas"#
    );
}

#[test]
fn the_same_value_is_shared_and_survives_one_owner_dropping_it() {
    let (live, managed) = apply_all(&[
        ("a", obj(json!({"color": "red", "replicas": 1})), false),
        ("b", obj(json!({"color": "red"})), false),
        ("a", obj(json!({"replicas": 1})), false),
    ])
    .unwrap();
    assert_eq!(live["spec"], json!({"replicas": 1, "color": "red"}));
    assert_eq!(owned(&managed, "b"), json!({"f:spec": {"f:color": {}}}));
    assert_eq!(owned(&managed, "a"), json!({"f:spec": {"f:replicas": {}}}));
    // Now b drops it too: nobody owns it, it goes.
    let (live, _) = apply_all(&[
        ("a", obj(json!({"color": "red", "replicas": 1})), false),
        ("b", obj(json!({"color": "red"})), false),
        ("a", obj(json!({"replicas": 1})), false),
        ("b", obj(json!({})), false),
    ])
    .unwrap();
    assert_eq!(live["spec"], json!({"replicas": 1}));
}

#[test]
fn force_takes_ownership() {
    let (live, managed) = apply_all(&[
        ("a", obj(json!({"replicas": 1, "color": "red"})), false),
        ("b", obj(json!({"replicas": 2})), true),
    ])
    .unwrap();
    assert_eq!(live["spec"]["replicas"], 2);
    assert_eq!(owned(&managed, "a"), json!({"f:spec": {"f:color": {}}}));
    assert_eq!(owned(&managed, "b"), json!({"f:spec": {"f:replicas": {}}}));
}

#[test]
fn an_update_then_an_apply_conflicts_naming_the_updater_and_its_version() {
    let versions = OneVersion(schema());
    let fm = manager(&versions);
    let live = obj(json!({"replicas": 1}));
    let (live, managed) = fm
        .apply(
            &live,
            &obj(json!({"replicas": 1})),
            Managed::default(),
            "a",
            false,
        )
        .map(|(n, m)| (n.unwrap_or(live), m))
        .unwrap();
    let mut changed = live.clone();
    changed["spec"]["replicas"] = json!(3);
    let managed = fm.update(&live, &changed, managed, "controller").unwrap();
    // The controller took the field from a.
    assert_eq!(owned(&managed, "a"), Value::Null);
    let err = fm
        .apply(
            &changed,
            &obj(json!({"replicas": 5, "color": "x"})),
            managed,
            "a",
            false,
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "controller" using example.com/v1: .spec.replicas"#
    );
}

#[test]
fn several_conflicts_are_listed_by_manager() {
    let err = apply_all(&[
        ("a", obj(json!({"replicas": 1, "color": "red"})), false),
        ("b", obj(json!({"replicas": 2, "color": "blue"})), false),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .spec.color\n- .spec.replicas"
    );
}

#[test]
fn associative_lists_merge_by_key_and_sets_by_value() {
    let (live, managed) = apply_all(&[
        (
            "a",
            obj(json!({"containers": [{"name": "a", "image": "1"}], "tags": ["x"]})),
            false,
        ),
        (
            "b",
            obj(json!({"containers": [{"name": "b", "image": "2"}], "tags": ["y"]})),
            false,
        ),
    ])
    .unwrap();
    assert_eq!(
        live["spec"],
        json!({"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}], "tags": ["x", "y"]})
    );
    assert_eq!(
        owned(&managed, "b"),
        json!({"f:spec": {"f:containers": {"k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}},
            "f:tags": {"v:\"y\"": {}}}})
    );
    // a stops applying its container: only b's is left.
    let (live, _) = apply_all(&[
        (
            "a",
            obj(json!({"containers": [{"name": "a", "image": "1"}]})),
            false,
        ),
        (
            "b",
            obj(json!({"containers": [{"name": "b", "image": "2"}]})),
            false,
        ),
        ("a", obj(json!({})), false),
    ])
    .unwrap();
    assert_eq!(
        live["spec"],
        json!({"containers": [{"name": "b", "image": "2"}]})
    );
}

#[test]
fn atomic_lists_and_maps_are_replaced_whole_and_conflict_whole() {
    let (live, _) = apply_all(&[
        (
            "a",
            obj(json!({"args": ["1", "2"], "selector": {"x": "1", "y": "2"}})),
            false,
        ),
        (
            "a",
            obj(json!({"args": ["3"], "selector": {"z": "3"}})),
            false,
        ),
    ])
    .unwrap();
    assert_eq!(live["spec"], json!({"args": ["3"], "selector": {"z": "3"}}));
    let err = apply_all(&[
        ("a", obj(json!({"args": ["1"]})), false),
        ("b", obj(json!({"args": ["1", "2"]})), false),
    ])
    .unwrap_err();
    assert!(err.to_string().ends_with(": .spec.args"), "{err}");
}

#[test]
fn an_apply_that_changes_nothing_returns_no_object() {
    let versions = OneVersion(schema());
    let fm = manager(&versions);
    let live = obj(json!({"replicas": 1}));
    let (first, managed) = fm
        .apply(
            &live,
            &obj(json!({"replicas": 1})),
            Managed::default(),
            "a",
            false,
        )
        .unwrap();
    assert!(first.is_none());
    let time = managed.times.values().next().copied();
    assert!(time.is_none(), "no change, no time: {managed:?}");
}

#[test]
fn malformed_configurations_are_reported_with_their_paths() {
    let versions = OneVersion(schema());
    let fm = manager(&versions);
    let live = obj(json!({}));
    let cases = [
        (
            obj(json!({"nope": 1})),
            ".spec.nope: field not declared in schema",
        ),
        (obj(json!([])), ".spec: expected map, got list"),
        (
            obj(json!({"color": true})),
            ".spec.color: expected string, got bool",
        ),
        (
            obj(json!({"replicas": "1"})),
            ".spec.replicas: expected numeric, got string",
        ),
        (
            obj(json!({"containers": [{"name": "a"}, {"name": "a"}]})),
            r#".spec.containers: duplicate entries for key [name="a"]"#,
        ),
        (
            obj(json!({"containers": [{"image": "a"}]})),
            r#".spec.containers: element 0: associative list with keys has an element that omits key field "name" (and doesn't have default value)"#,
        ),
    ];
    for (config, want) in cases {
        let err = fm
            .apply(&live, &config, Managed::default(), "a", false)
            .unwrap_err();
        assert_eq!(err.to_string(), want);
    }
}

/// An `IntOrString` (a string of format `int-or-string`) takes numbers
/// and strings, as structured-merge-diff's untyped scalar.
#[test]
fn int_or_string_takes_numbers_and_strings() {
    let versions = OneVersion(schema());
    let fm = manager(&versions);
    let live = obj(json!({}));
    for target in [json!(8443), json!("https")] {
        assert!(
            fm.apply(
                &live,
                &obj(json!({"target": target})),
                Managed::default(),
                "a",
                false
            )
            .is_ok()
        );
    }
    let err = fm
        .apply(
            &live,
            &obj(json!({"target": true})),
            Managed::default(),
            "a",
            false,
        )
        .unwrap_err();
    assert_eq!(err.to_string(), ".spec.target: expected string, got bool");
}

#[test]
fn managed_fields_round_trip_and_reset_markers() {
    let (_, managed) = apply_all(&[(
        "a",
        obj(json!({"containers": [{"name": "a", "port": 80}], "tags": ["x"]})),
        false,
    )])
    .unwrap();
    let encoded = managed::encode(&managed);
    let decoded = managed::decode(Some(&encoded)).unwrap();
    assert_eq!(decoded, managed);
    assert!(managed::is_reset(Some(&json!([{}]))));
    assert!(managed::is_reset(Some(&json!([]))));
    assert!(!managed::is_reset(None));
    assert!(!managed::is_reset(Some(&encoded)));
}

#[test]
fn paths_print_as_upstream() {
    let p = Path(vec![
        PathElement::field("spec"),
        PathElement::field("containers"),
        PathElement::Key(vec![(
            "name".into(),
            super::fieldpath::OrdValue(json!("a")),
        )]),
        PathElement::field("image"),
    ]);
    assert_eq!(p.to_string(), r#".spec.containers[name="a"].image"#);
    let v = Path(vec![
        PathElement::field("tags"),
        PathElement::Value(super::fieldpath::OrdValue(json!("x"))),
    ]);
    assert_eq!(v.to_string(), r#".tags[="x"]"#);
}

#[test]
fn client_side_applied_fields_with_unchanged_values_may_be_taken() {
    let s = schema();
    let live = json!({"apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "x", "annotations": {managed::LAST_APPLIED_ANNOTATION:
            r#"{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x"},"spec":{"replicas":1,"color":"red"}}"#}},
        "spec": {"replicas": 1, "color": "blue"}});
    let allowed = managed::allowed_conflicts_from_last_applied(&live, &s).unwrap();
    assert!(allowed.has(&Path::fields(&["spec", "replicas"]).0));
    assert!(!allowed.has(&Path::fields(&["spec", "color"]).0));
    let _ = structured::to_field_set(&live, &s.root());
}
