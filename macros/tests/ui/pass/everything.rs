#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(
    group = "g.example.com",
    version = "v1",
    namespaced,
    printcolumn(name = "Size", type = "integer", json_path = ".spec.size", priority = 1, description = "size", format = "int32"),
    selectable_fields = [".spec.size"],
    subresource_status,
    subresource_scale(spec_replicas_path = ".spec.size", status_replicas_path = ".status.size", label_selector_path = ".status.selector"),
    deprecated,
    deprecation_warning = "g.example.com/v1 Thing is deprecated; use v2",
    default_strategy
)]
#[validate(cel(rule = "self.spec.size >= 0"))]
pub struct Thing {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Spec,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[validate(at_most_one_of(a, b))]
pub struct Spec {
    #[validate(minimum = 0, maximum = 10, default = 1)]
    pub size: i32,
    pub a: Option<String>,
    pub b: Option<String>,
}

fn main() {
    use apiforge_runtime::resource::Resource as _;
    assert_eq!(Thing::INFO.printer_columns.len(), 1);
}
