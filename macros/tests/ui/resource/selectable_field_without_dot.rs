#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(group = "g.example.com", version = "v1", namespaced, selectable_fields = ["spec.engine"])]
pub struct Thing {
    #[serde(default)]
    pub metadata: ObjectMeta,
}

fn main() {}
