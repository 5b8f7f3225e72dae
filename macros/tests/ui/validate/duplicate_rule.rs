#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default, Serialize, Deserialize, JsonSchema, Validate)]
pub struct Spec {
    #[validate(max_length = 3, max_length = 4)]
    pub field: String,
    pub other: Option<String>,
}

fn main() {}
