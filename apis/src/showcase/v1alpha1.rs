//! `showcase.apiforge.dev/v1alpha1`: `engineVersion` became `version` in
//! v1 (a rename) and the flat `storageGiB` became `storage.sizeGiB` (a
//! function pair); everything else converts field by field.

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::{Convert, Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::v1;

/// A managed database, first version.
#[derive(
    Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource, Convert,
)]
#[resource(
    group = "showcase.apiforge.dev",
    version = "v1alpha1",
    namespaced,
    short_names = ["db"],
    printcolumn(name = "Engine", type = "string", json_path = ".spec.engine"),
    printcolumn(name = "Version", type = "string", json_path = ".spec.engineVersion"),
    subresource_status,
    deprecated,
    deprecation_warning = "showcase.apiforge.dev/v1alpha1 Database is deprecated; use showcase.apiforge.dev/v1 Database",
    default_strategy
)]
#[convert(hub = v1::Database)]
pub struct Database {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state.
    #[serde(default)]
    pub spec: DatabaseSpec,
    /// The observed state (the v1 type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<v1::DatabaseStatus>,
}

/// The desired state of a v1alpha1 Database.
#[derive(
    Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate, Convert,
)]
#[serde(rename_all = "camelCase")]
#[convert(hub = v1::DatabaseSpec, hub_default)]
pub struct DatabaseSpec {
    /// The engine.
    #[serde(default)]
    #[validate(immutable)]
    pub engine: v1::Engine,
    /// The engine version (`version` in v1).
    #[serde(default)]
    #[validate(required, max_length = 16)]
    #[convert(rename = version)]
    pub engine_version: String,
    /// The number of instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(minimum = 1, maximum = 9, default = 1)]
    pub replicas: Option<i32>,
    /// Volume size in GiB (`storage.sizeGiB` in v1).
    #[serde(default, rename = "storageGiB")]
    #[validate(minimum = 1, maximum = 1024, default = 10)]
    #[convert(rename = storage, into_hub = storage_into_hub, from_hub = storage_from_hub)]
    pub storage_gib: i32,
}

fn storage_into_hub(spec: &DatabaseSpec) -> v1::StorageSpec {
    v1::StorageSpec {
        size_gib: spec.storage_gib,
        class_name: None,
    }
}

fn storage_from_hub(hub: &v1::DatabaseSpec) -> i32 {
    hub.storage.size_gib
}
