//! The wardle group through the type-erased [`Kind`] operations, as the
//! registry uses them.

use serde_json::{Value, json};

use super::*;

fn flunders() -> std::sync::Arc<apiforge_runtime::scheme::Kind> {
    let scheme = crate::scheme();
    let found = scheme
        .resource(GROUP, "v1beta1", "flunders")
        .map(|(k, _)| k);
    found.unwrap_or_else(|| std::sync::Arc::new(KindBuilder::<internal::Flunder>::new().build()))
}

fn create(version: &str, body: Value) -> (Value, Vec<String>) {
    let kind = flunders();
    let hub = kind.decode(version, body).unwrap_or(Value::Null);
    let errs = kind
        .validate_create(&hub)
        .map(|e| e.iter().map(ToString::to_string).collect())
        .unwrap_or_default();
    let stored = kind.to_storage(&hub).unwrap_or(Value::Null);
    let back = kind.from_storage(stored).unwrap_or(Value::Null);
    (back, errs)
}

#[test]
fn versions_and_storage() {
    let scheme = crate::scheme();
    let g = scheme
        .group(GROUP)
        .map(|g| g.versions.clone())
        .unwrap_or_default();
    assert_eq!(g, vec!["v1beta1", "v1alpha1"]);
    assert_eq!(flunders().storage_info().version, "v1alpha1");
    assert!(scheme.resource(GROUP, "v1alpha1", "fischers").is_some());
    assert!(scheme.resource(GROUP, "v1beta1", "fischers").is_none());
}

#[test]
fn cross_version_reads() {
    let kind = flunders();
    let (hub, errs) = create(
        "v1alpha1",
        json!({"metadata": {"name": "f"}, "spec": {"reference": "x"}}),
    );
    assert!(errs.is_empty());
    let v1beta1 = kind.encode("v1beta1", &hub).unwrap_or(Value::Null);
    assert_eq!(
        v1beta1["spec"],
        json!({"flunderReference": "x", "referenceType": "Flunder"})
    );
    assert_eq!(v1beta1["apiVersion"], "wardle.example.com/v1beta1");

    let (hub, errs) = create(
        "v1beta1",
        json!({"metadata": {"name": "g"}, "spec": {"fischerReference": "f", "referenceType": "Fischer"}}),
    );
    assert!(errs.is_empty());
    let v1alpha1 = kind.encode("v1alpha1", &hub).unwrap_or(Value::Null);
    assert_eq!(
        v1alpha1["spec"],
        json!({"reference": "f", "referenceType": "Fischer"})
    );
}

#[test]
fn v1alpha1_validation_uses_internal_names() {
    let (_, errs) = create("v1alpha1", json!({"spec": {"referenceType": "Flunder"}}));
    assert_eq!(
        errs,
        vec![
            "spec.flunderReference: Invalid value: \"\": cannot be empty if referenceType is Flunder"
        ]
    );
}

#[test]
fn storing_v1alpha1_loses_what_it_cannot_express() {
    let kind = flunders();
    let hub = kind
        .decode(
            "v1beta1",
            json!({"spec": {"flunderReference": "a", "referenceType": ""}}),
        )
        .unwrap_or(Value::Null);
    let stored = kind.to_storage(&hub).unwrap_or(Value::Null);
    assert_eq!(stored["spec"], json!({}));
    let read = kind
        .encode("v1beta1", &kind.from_storage(stored).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    assert_eq!(read["spec"], json!({}));
}

#[test]
fn openapi_names_and_list_type() {
    let doc = apiforge_runtime::openapi::group_version_document(
        crate::scheme().group(GROUP).unwrap_or(&group()),
        "v1alpha1",
    );
    let schemas = &doc["components"]["schemas"];
    let fischer = &schemas["io.k8s.sample-apiserver.pkg.apis.wardle.v1alpha1.Fischer"];
    assert_eq!(
        fischer["properties"]["disallowedFlunders"]["x-kubernetes-list-type"],
        "atomic"
    );
    assert_eq!(
        fischer["properties"]["disallowedFlunders"]["description"],
        "DisallowedFlunders holds a list of Flunder.Names that are disallowed."
    );
    assert!(
        schemas
            .get("io.k8s.sample-apiserver.pkg.apis.wardle.v1alpha1.Flunder")
            .is_some()
    );
    assert!(
        schemas
            .get("io.k8s.sample-apiserver.pkg.apis.wardle.v1alpha1.FlunderSpec")
            .is_some()
    );
}

#[test]
fn wardle_does_not_bump_generation() {
    for kind in &super::group().kinds {
        assert!(!kind.bump_generation_on_spec_change());
    }
}
