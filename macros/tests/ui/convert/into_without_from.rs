#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default)]
pub struct Hub {
    pub a: String,
}

fn a_into_hub(_: &V) -> String {
    String::new()
}

#[derive(Clone, Default, Convert)]
#[convert(hub = Hub)]
pub struct V {
    #[convert(into_hub = a_into_hub)]
    pub a: String,
}

fn main() {}
