//! `showcase.apiforge.dev/v1`: the hub and storage version of `Database`.

use apiforge_runtime::meta::{ObjectMeta, Time};
use apiforge_runtime::resource::Strategy;
use apiforge_runtime::{Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A managed database: the showcase of every macro feature.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(
    group = "showcase.apiforge.dev",
    version = "v1",
    namespaced,
    short_names = ["db"],
    categories = ["all"],
    printcolumn(name = "Engine", type = "string", json_path = ".spec.engine"),
    printcolumn(name = "Version", type = "string", json_path = ".spec.version"),
    printcolumn(name = "Replicas", type = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Phase", type = "string", json_path = ".status.phase"),
    printcolumn(name = "Storage", type = "integer", json_path = ".spec.storage.sizeGiB", priority = 1, description = "Volume size in GiB"),
    printcolumn(name = "Age", type = "date", json_path = ".metadata.creationTimestamp"),
    selectable_fields = [".spec.engine", ".status.phase"],
    subresource_status,
    subresource_scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    )
)]
#[validate(cel(
    rule = "self.spec.engine != 'mysql' || !has(self.spec.replicas) || self.spec.replicas <= 3",
    message = "mysql databases have at most 3 replicas"
))]
pub struct Database {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state.
    #[serde(default)]
    pub spec: DatabaseSpec,
    /// The observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DatabaseStatus>,
}

/// The hand-written strategy: every hook keeps its default (generated
/// defaulting and validation; `metadata.generation` bumps on spec changes
/// because of the status subresource) except the warnings.
impl Strategy for Database {
    fn warnings_on_create(&self) -> Vec<String> {
        self.spec.warnings()
    }

    fn warnings_on_update(&self, _old: &Self) -> Vec<String> {
        self.spec.warnings()
    }
}

impl DatabaseSpec {
    /// Warnings about a valid but questionable spec.
    fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.engine == Engine::Mysql && self.version.starts_with("5.") {
            out.push(format!(
                "spec.version: MySQL {} is end of life; use 8.0 or later",
                self.version
            ));
        }
        if self.backup.is_none() && self.replicas.unwrap_or(1) > 1 {
            out.push("spec.backup: a replicated database without backups".to_string());
        }
        out
    }
}

/// A database engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// PostgreSQL.
    #[default]
    Postgres,
    /// MySQL.
    Mysql,
}

/// The desired state of a Database.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseSpec {
    /// The engine; cannot change after creation.
    #[serde(default)]
    #[validate(immutable)]
    pub engine: Engine,
    /// The engine version, e.g. `16.2`.
    #[serde(default)]
    #[validate(required, max_length = 16, pattern = "^[0-9]+(\\.[0-9]+)*$")]
    pub version: String,
    /// The number of instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(minimum = 1, maximum = 9, default = 1)]
    pub replicas: Option<i32>,
    /// The volume of each instance.
    #[serde(default)]
    pub storage: StorageSpec,
    /// Database users, merged by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(list_type = "map", list_map_keys = ["name"], max_items = 16, patch_strategy = "merge", patch_merge_key = "name")]
    pub users: Vec<DatabaseUser>,
    /// Backups, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupSpec>,
}

/// The volume of each instance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
#[validate(cel(
    rule = "self.sizeGiB >= oldSelf.sizeGiB",
    message = "storage may not shrink"
))]
pub struct StorageSpec {
    /// Size in GiB.
    #[serde(default, rename = "sizeGiB")]
    #[validate(minimum = 1, maximum = 1024, default = 10)]
    pub size_gib: i32,
    /// The storage class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(format = "dns1123_subdomain")]
    pub class_name: Option<String>,
}

/// A database user.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseUser {
    /// The user name.
    #[serde(default)]
    #[validate(required, format = "dns1123_label")]
    pub name: String,
    /// Granted privileges.
    // A set of the three there are; bounded so that the rule's estimated
    // cost stays within Kubernetes' limit when the kind is installed as a
    // CRD (`apiforge crd`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(
        list_type = "set",
        max_items = 3,
        cel(
            rule = "self.all(p, p in ['read', 'write', 'admin'])",
            message = "privileges are read, write or admin"
        )
    )]
    pub privileges: Vec<String>,
}

/// Backups: on a schedule or continuous, not both.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
#[validate(at_most_one_of(schedule, continuous))]
pub struct BackupSpec {
    /// A cron schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(min_length = 9)]
    pub schedule: Option<String>,
    /// Continuous archiving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuous: Option<bool>,
    /// Days to keep backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(minimum = 1, maximum = 365)]
    pub retention_days: Option<u32>,
}

/// The observed state of a Database.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseStatus {
    /// The lifecycle phase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[validate(enum_values = ["Pending", "Running", "Failed"])]
    pub phase: String,
    /// Ready instances.
    #[serde(default)]
    #[validate(minimum = 0)]
    pub replicas: i32,
    /// The label selector of the instances (for the scale subresource).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
    /// Observations of the database's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(list_type = "map", list_map_keys = ["type"], patch_strategy = "merge", patch_merge_key = "type")]
    pub conditions: Vec<Condition>,
}

/// A status condition (`metav1.Condition`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    #[validate(required, max_length = 316)]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[validate(required, enum_values = ["True", "False", "Unknown"])]
    pub status: String,
    /// A CamelCase reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[validate(
        max_length = 1024,
        pattern = "^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?)?$"
    )]
    pub reason: String,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[validate(max_length = 32768)]
    pub message: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}
