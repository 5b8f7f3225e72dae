#![allow(unused_imports)]

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use apiforge_runtime::scheme::Convert as _;

#[derive(Clone, Default)]
pub struct Hub {
    pub a: String,
}

fn a_from_hub(hub: &Hub) -> String {
    hub.a.clone()
}

// The only error is the attribute's: the stub impl keeps the uses below
// from adding "the trait bound is not satisfied" errors.
#[derive(Clone, Default, Convert)]
#[convert(hub = Hub)]
pub struct V {
    #[convert(from_hub = a_from_hub)]
    pub a: String,
}

fn to_hub(v: V) -> Hub {
    v.into_hub()
}

fn from_hub(hub: &Hub) -> V {
    V::from_hub(hub)
}

fn main() {
    let _ = (to_hub, from_hub);
}
