#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default, Serialize, Deserialize, JsonSchema, Validate)]
pub struct Spec {
    // Unbounded: up to ~1.5 million items of up to 3 MiB, each matched.
    #[validate(cel(rule = "self.all(n, n.matches('^[a-z]+$'))"))]
    pub notes: Vec<String>,
    // Bounded: 16 items fit the budget.
    #[validate(max_items = 16, cel(rule = "self.all(n, n.size() < 64)"))]
    pub tags: Vec<String>,
}

fn main() {}
