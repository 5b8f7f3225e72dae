//! Transition rules (`oldSelf`, `immutable`) where kube-apiserver can
//! correlate old and new values: object fields, map values, the items of
//! `list_type = "map"` lists.
#![allow(unused_imports)]

use std::collections::BTreeMap;

use apiforge_runtime::{Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[validate(cel(rule = "self.size >= oldSelf.size", message = "may not shrink"))]
pub struct Volume {
    #[validate(required)]
    pub name: String,
    pub size: i64,
}

#[derive(Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
pub struct Plain {
    pub size: i64,
}

#[derive(Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
pub struct Spec {
    #[validate(list_type = "map", list_map_keys = ["name"])]
    pub volumes: Vec<Volume>,
    pub main: Option<Volume>,
    pub by_name: BTreeMap<String, Volume>,
    // Atomic lists are fine for types without transition rules.
    pub plain: Vec<Plain>,
    pub names: Vec<String>,
}

fn main() {
    assert!(Volume::__APIFORGE_TRANSITION_RULES);
    assert!(Spec::__APIFORGE_TRANSITION_RULES);
    assert!(!Plain::__APIFORGE_TRANSITION_RULES);
}
