#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default, Serialize, Deserialize, JsonSchema, Validate)]
#[validate(cel(rule = "self.replicas > \"3\""))]
pub struct Spec {
    pub replicas: i32,
    #[validate(cel(rule = "self + 1 == 'a1'"))]
    pub name: String,
}

fn main() {}
