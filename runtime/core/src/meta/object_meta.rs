use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A timestamp with second precision, serialized as RFC 3339 in UTC
/// (`2025-01-01T10:00:00Z`), as `metav1.Time` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub jiff::Timestamp);

impl Time {
    /// The current time, truncated to whole seconds.
    pub fn now() -> Self {
        let now = jiff::Timestamp::now();
        Time(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // jiff prints whole seconds without a fraction and UTC as `Z`.
        write!(f, "{}", self.0)
    }
}

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse::<jiff::Timestamp>()
            .map(Time)
            .map_err(|e| serde::de::Error::custom(format!("invalid time {s:?}: {e}")))
    }
}

impl JsonSchema for Time {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.  Wrappers are provided for many of the factory methods that the time package offers.",
            "type": "string",
            "format": "date-time",
        })
    }
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// `ObjectMeta` is metadata that all persisted resources must have, which
/// includes all objects users must create.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")]
pub struct ObjectMeta {
    /// Name must be unique within a namespace. Is required when creating
    /// resources, although some resources may allow a client to request the
    /// generation of an appropriate name automatically.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// GenerateName is an optional prefix, used by the server, to generate a
    /// unique name ONLY IF the Name field has not been provided.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub generate_name: String,
    /// Namespace defines the space within which each name must be unique.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Deprecated: selfLink is a legacy read-only field that is no longer
    /// populated by the system.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub self_link: String,
    /// UID is the unique in time and space value for this object. Populated
    /// by the system. Read-only.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// An opaque value that represents the internal version of this object
    /// that can be used by clients to determine when objects have changed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// A sequence number representing a specific generation of the desired
    /// state. Populated by the system. Read-only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: i64,
    /// CreationTimestamp is a timestamp representing the server time when
    /// this object was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Time>,
    /// DeletionTimestamp is RFC 3339 date and time at which this resource
    /// will be deleted. Set by the server when a graceful deletion is
    /// requested by the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Time>,
    /// Number of seconds allowed for this object to gracefully terminate
    /// before it will be removed from the system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// Map of string keys and values that can be used to organize and
    /// categorize (scope and select) objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations is an unstructured key value map stored with a resource
    /// that may be set by external tools to store and retrieve arbitrary
    /// metadata.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// List of objects depended by this object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-patch-merge-key" = "uid", "x-kubernetes-patch-strategy" = "merge"))]
    pub owner_references: Vec<OwnerReference>,
    /// Must be empty before the object is deleted from the registry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-patch-strategy" = "merge"))]
    pub finalizers: Vec<String>,
    /// ManagedFields maps workflow-id and version to the set of fields that
    /// are managed by that workflow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

/// OwnerReference contains enough information to let you identify an owning
/// object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference")]
pub struct OwnerReference {
    /// API version of the referent.
    pub api_version: String,
    /// Kind of the referent.
    pub kind: String,
    /// Name of the referent.
    pub name: String,
    /// UID of the referent.
    pub uid: String,
    /// If true, this reference points to the managing controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// If true, AND if the owner has the "foregroundDeletion" finalizer,
    /// then the owner cannot be deleted from the key-value store until this
    /// reference is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

/// ManagedFieldsEntry is a workflow-id, a FieldSet and the group version of
/// the resource that the fieldset applies to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry")]
pub struct ManagedFieldsEntry {
    /// Manager is an identifier of the workflow managing these fields.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manager: String,
    /// Operation is the type of operation which lead to this
    /// ManagedFieldsEntry being created.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operation: String,
    /// APIVersion defines the version of this resource that this field set
    /// applies to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Time is the timestamp of when the ManagedFields entry was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
    /// FieldsType is the discriminator for the different fields format and
    /// version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fields_type: String,
    /// FieldsV1 holds the first JSON version format as described in the
    /// "FieldsV1" type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields_v1: Option<serde_json::Value>,
    /// Subresource is the name of the subresource used to update that
    /// object, or empty string if the object was updated through the main
    /// resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// ListMeta describes metadata that synthetic resources must have, including
/// lists and various status objects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")]
pub struct ListMeta {
    /// String that identifies the server's internal version of this object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Set if the user set a limit on the number of items returned, and
    /// indicates that the server has more data available.
    #[serde(default, skip_serializing_if = "String::is_empty", rename = "continue")]
    pub continue_: String,
    /// The number of subsequent items in the list which are not included in
    /// this list response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_item_count: Option<i64>,
}
