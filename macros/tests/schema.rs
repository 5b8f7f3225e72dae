//! Schema snapshots: every declared rule is published into the OpenAPI
//! schema of its type (JSON equality).

#![allow(missing_docs)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::resource::Resource as _;
use apiforge_runtime::{Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(group = "test.example.com", version = "v1", namespaced)]
#[validate(cel(rule = "self.metadata.name != 'x'", message = "no x"))]
pub struct Shape {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ShapeSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(default, rename_all = "camelCase")]
#[validate(one_of(a, b), cel(rule = "self.sides >= 3"))]
pub struct ShapeSpec {
    #[validate(minimum = 3, maximum = 12, exclusive_maximum, default = 4)]
    pub sides: i32,
    #[validate(minimum = 0.5, exclusive_minimum)]
    pub scale: f64,
    #[validate(
        required,
        min_length = 1,
        max_length = 63,
        pattern = "^[a-z]+$",
        immutable
    )]
    pub shape_name: String,
    #[validate(format = "uuid")]
    pub id: Option<String>,
    #[validate(format = "dns1123_subdomain")]
    pub host: String,
    #[validate(enum_values = ["red", "blue"], default = "red")]
    pub color: String,
    #[validate(min_items = 1, max_items = 4, list_type = "set")]
    pub tags: Vec<String>,
    #[validate(list_type = "map", list_map_keys = ["name"], patch_strategy = "merge", patch_merge_key = "name")]
    pub corners: Vec<Corner>,
    #[validate(optional, cel(rule = "self >= oldSelf", message = "may not shrink"))]
    pub a: Option<i32>,
    pub b: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
pub struct Corner {
    #[validate(required)]
    pub name: String,
    #[validate(maximum = 360)]
    pub angle: Option<u32>,
}

fn definitions() -> serde_json::Map<String, Value> {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let _ = generator.subschema_for::<Shape>();
    Shape::publish_schema(&mut generator);
    generator.take_definitions(true)
}

#[test]
fn spec_rules_are_published() {
    let defs = definitions();
    assert_eq!(
        defs["ShapeSpec"],
        json!({
            "type": "object",
            "properties": {
                "sides": {"type": "integer", "format": "int32", "default": 4, "minimum": 3, "maximum": 12, "exclusiveMaximum": true},
                "scale": {"type": "number", "format": "double", "default": 0.0, "minimum": 0.5, "exclusiveMinimum": true},
                "shapeName": {
                    "type": "string", "default": "", "minLength": 1, "maxLength": 63, "pattern": "^[a-z]+$",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "field is immutable"}]
                },
                "id": {"type": "string", "nullable": true, "default": null, "format": "uuid"},
                "host": {"type": "string", "default": "", "format": "k8s-long-name"},
                "color": {"type": "string", "default": "red", "enum": ["red", "blue"]},
                "tags": {"type": "array", "items": {"type": "string"}, "default": [], "minItems": 1, "maxItems": 4, "x-kubernetes-list-type": "set"},
                "corners": {
                    "type": "array", "items": {"$ref": "#/components/schemas/Corner"}, "default": [],
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"
                },
                "a": {"type": "integer", "format": "int32", "nullable": true, "default": null, "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "may not shrink"}]},
                "b": {"type": "integer", "format": "int32", "nullable": true, "default": null}
            },
            // `one_of(a, b)` as rules with the compiled messages, then the
            // container's own rule.
            "x-kubernetes-validations": [
                {"rule": "(has(self.a) ? 1 : 0) + (has(self.b) ? 1 : 0) != 0", "message": "must specify one of: `a`, `b`"},
                {"rule": "(has(self.a) ? 1 : 0) + (has(self.b) ? 1 : 0) <= 1", "message": "must specify exactly one of: `a`, `b`"},
                {"rule": "self.sides >= 3"}
            ],
            "required": ["shapeName"]
        })
    );
}

#[test]
fn nested_and_root_rules_are_published() {
    let defs = definitions();
    assert_eq!(
        defs["Corner"],
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "angle": {"type": "integer", "format": "uint32", "minimum": 0, "nullable": true, "maximum": 360}
            },
            "required": ["name"]
        })
    );
    assert_eq!(
        defs["Shape"]["x-kubernetes-validations"],
        json!([{"rule": "self.metadata.name != 'x'", "message": "no x"}])
    );
}

#[test]
fn patch_fields_are_read_back() {
    let defs = definitions();
    let fields = apiforge_runtime::schema::patch_fields(
        &json!({"$ref": "#/components/schemas/Shape"}),
        &defs,
    );
    // ObjectMeta's own fields (ownerReferences, finalizers) come first.
    let spec: Vec<_> = fields
        .iter()
        .filter(|f| f.path.starts_with("spec."))
        .cloned()
        .collect();
    assert_eq!(
        spec,
        vec![apiforge_runtime::schema::PatchField {
            path: "spec.corners".into(),
            strategy: "merge".into(),
            merge_key: "name".into()
        }]
    );
    assert!(fields.iter().any(|f| f.path == "metadata.finalizers"));
}

/// The errors of the CRD exported from `Shape` (`apiforge crd`) for a
/// body, read through the custom resource path (decode, then the
/// strategy's validation), as `(path, message)`.
fn crd_errors(crd: &apiforge_runtime::scheme::Kind, spec: Value) -> Vec<(String, String)> {
    let body = json!({"apiVersion": "test.example.com/v1", "kind": "Shape",
        "metadata": {"name": "s", "namespace": "ns"}, "spec": spec});
    let hub = crd.decode_object("v1", body).expect("decoded");
    crd.validate_create_object(&hub)
        .expect("validated")
        .iter()
        .map(|e| (e.field.clone(), e.detail.clone()))
        .collect()
}

// `one_of(a, b)` exported as rules: a CRD made from the kind refuses and
// accepts the same specs as the compiled validation, at the same path with
// the same message (the bad value differs: the compiled check shows the
// members, a CRD rule the type).
impl apiforge_runtime::resource::Strategy for Shape {}

#[test]
fn exported_unions_refuse_what_the_kind_refuses() {
    use apiforge_runtime::resource::Strategy as _;
    use apiforge_runtime::scheme::{Group, KindBuilder, custom, definition};
    let group = Group::new("test.example.com", &["v1"]).kind(
        KindBuilder::<Shape>::new()
            .version::<Shape>()
            .storage::<Shape>()
            .build(),
    );
    let crd = definition::definitions_of(&group, None).remove(0);
    let crd = custom::kind_from_definition(&crd, None).expect("a valid definition");
    let valid = json!({"sides": 4, "scale": 1.0, "shapeName": "sq", "tags": ["t"]});
    for (a, b) in [
        (None, None),
        (Some(1), None),
        (None, Some(0)),
        (Some(1), Some(2)),
    ] {
        let mut spec = valid.clone();
        spec["a"] = json!(a);
        spec["b"] = json!(b);
        let compiled: Shape =
            serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": spec}))
                .expect("a shape");
        let union = |errs: Vec<(String, String)>| -> Vec<(String, String)> {
            errs.into_iter()
                .filter(|(_, m)| m.contains("one of"))
                .collect()
        };
        let compiled_errs = union(
            compiled
                .validate_create()
                .iter()
                .map(|e| (e.field.clone(), e.detail.clone()))
                .collect(),
        );
        let crd_errs = union(crd_errors(&crd, spec.clone()));
        assert_eq!(crd_errs, compiled_errs, "a = {a:?}, b = {b:?}");
        assert_eq!(compiled_errs.is_empty(), a.is_some() != b.is_some());
    }
}
