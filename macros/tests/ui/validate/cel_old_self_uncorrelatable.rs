#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
#[validate(cel(rule = "self.size >= oldSelf.size", message = "may not shrink"))]
pub struct Volume {
    #[validate(required)]
    pub name: String,
    pub size: i64,
}

#[derive(Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
pub struct Spec {
    // An atomic list: its items have no old value to compare with.
    pub volumes: Vec<Volume>,
}

fn main() {}
