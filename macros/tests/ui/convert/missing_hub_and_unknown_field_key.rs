#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default, Convert)]
pub struct V {
    #[convert(renamed = b)]
    pub a: String,
}

fn main() {}
