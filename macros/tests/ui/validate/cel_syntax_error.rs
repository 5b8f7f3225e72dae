#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default, Serialize, Deserialize, JsonSchema, Validate)]
#[validate(cel(rule = "self.replicas >"))]
pub struct Spec {
    pub replicas: i32,
}

fn main() {}
