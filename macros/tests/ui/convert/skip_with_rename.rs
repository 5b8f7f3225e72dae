#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default)]
pub struct Hub {
    pub b: String,
}

#[derive(Clone, Default, Convert)]
#[convert(hub = Hub, hub_default)]
pub struct V {
    #[convert(skip, rename = b)]
    pub a: String,
}

fn main() {}
