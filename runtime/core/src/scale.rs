//! `autoscaling/v1` `Scale`: the body of every `/scale` subresource, and
//! its mapping onto an object through the kind's
//! [`ScaleSubresource`](crate::resource::ScaleSubresource) paths (as the
//! CRD scale subresource maps it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::meta::ObjectMeta;
use crate::resource::{KindInfo, ScaleSubresource};
use crate::validation::{ErrorList, FieldError};

/// The API group of [`Scale`].
pub const SCALE_GROUP: &str = "autoscaling";
/// The API version of [`Scale`].
pub const SCALE_VERSION: &str = "v1";
/// The OpenAPI model name of [`Scale`].
pub const SCALE_MODEL: &str = "io.k8s.api.autoscaling.v1.Scale";

/// The static facts of `autoscaling/v1` `Scale` (for tables and errors).
pub const SCALE_INFO: KindInfo = KindInfo {
    group: SCALE_GROUP,
    version: SCALE_VERSION,
    kind: "Scale",
    plural: "scales",
    singular: "scale",
    openapi_name: SCALE_MODEL,
    ..KindInfo::EMPTY
};

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// Scale represents a scaling request for a resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.api.autoscaling.v1.Scale")]
#[schemars(extend("x-kubernetes-group-version-kind" = [{"group": "autoscaling", "kind": "Scale", "version": "v1"}]))]
pub struct Scale {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// spec defines the behavior of the scale.
    #[serde(default)]
    pub spec: ScaleSpec,
    /// status is the current status of the scale. Read-only.
    #[serde(default)]
    pub status: ScaleStatus,
}

/// ScaleSpec describes the attributes of a scale subresource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.api.autoscaling.v1.ScaleSpec")]
pub struct ScaleSpec {
    /// replicas is the desired number of instances for the scaled object.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
}

/// ScaleStatus represents the current status of a scale subresource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.api.autoscaling.v1.ScaleStatus")]
pub struct ScaleStatus {
    /// replicas is the actual number of observed instances of the scaled object.
    #[serde(default)]
    pub replicas: i32,
    /// selector is the label query over pods that should match the replicas count, in the string form of a label selector.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
}

/// The segments of a simple JSON path (`.spec.replicas`).
fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('.').filter(|s| !s.is_empty())
}

fn lookup<'v>(obj: &'v Value, path: &str) -> Option<&'v Value> {
    if path.is_empty() {
        return None;
    }
    segments(path).try_fold(obj, |cur, key| cur.get(key))
}

/// An integer at a path (0 when absent or not a 32-bit integer).
fn replicas_at(obj: &Value, path: &str) -> i32 {
    lookup(obj, path)
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or(0)
}

impl Scale {
    /// The Scale of `obj` (the object in the version whose paths `scale`
    /// names): name, namespace, uid, resourceVersion and creationTimestamp
    /// of the object, `spec.replicas` from the spec replicas path,
    /// `status.replicas` from the status replicas path and
    /// `status.selector` from the label selector path (0 or empty when
    /// absent).
    pub fn of(obj: &Value, scale: &ScaleSubresource) -> Scale {
        let meta = crate::scheme::object_meta(obj);
        Scale {
            api_version: format!("{SCALE_GROUP}/{SCALE_VERSION}"),
            kind: "Scale".into(),
            metadata: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                uid: meta.uid,
                resource_version: meta.resource_version,
                creation_timestamp: meta.creation_timestamp,
                ..Default::default()
            },
            spec: ScaleSpec {
                replicas: replicas_at(obj, scale.spec_replicas_path),
            },
            status: ScaleStatus {
                replicas: replicas_at(obj, scale.status_replicas_path),
                selector: lookup(obj, scale.label_selector_path)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            },
        }
    }

    /// Writes `spec.replicas` into `obj` at the spec replicas path
    /// (creating the objects on the way).
    pub fn apply_to(&self, obj: &mut Value, scale: &ScaleSubresource) {
        let mut cur = obj;
        let mut parts = segments(scale.spec_replicas_path).peekable();
        while let Some(key) = parts.next() {
            if !cur.is_object() {
                *cur = Value::Object(Default::default());
            }
            let Some(map) = cur.as_object_mut() else {
                return;
            };
            if parts.peek().is_none() {
                map.insert(key.into(), Value::from(self.spec.replicas));
                return;
            }
            cur = map
                .entry(key)
                .or_insert_with(|| Value::Object(Default::default()));
        }
    }

    /// The generic Scale validation (`ValidateScale`): replicas may not be
    /// negative.
    pub fn validate(&self) -> ErrorList {
        let mut errs = ErrorList::default();
        if self.spec.replicas < 0 {
            errs.push(FieldError::invalid(
                "spec.replicas",
                self.spec.replicas,
                "must be greater than or equal to 0",
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const PATHS: ScaleSubresource = ScaleSubresource {
        spec_replicas_path: ".spec.replicas",
        status_replicas_path: ".status.replicas",
        label_selector_path: ".status.selector",
    };

    #[test]
    fn maps_the_paths() {
        let obj = json!({"metadata": {"name": "db", "namespace": "ns", "uid": "u", "resourceVersion": "7",
            "labels": {"a": "b"}, "generation": 3},
            "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=db"}});
        let scale = Scale::of(&obj, &PATHS);
        assert_eq!(
            serde_json::to_value(&scale).unwrap_or_default(),
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "db", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
                "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=db"}})
        );
        let empty = Scale::of(&json!({"metadata": {"name": "db"}}), &PATHS);
        assert_eq!(
            serde_json::to_value(&empty).unwrap_or_default(),
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "db"},
                "spec": {}, "status": {"replicas": 0}})
        );
    }

    #[test]
    fn writes_spec_replicas() {
        let mut obj = json!({"spec": {"version": "16"}});
        let mut scale = Scale::default();
        scale.spec.replicas = 5;
        scale.apply_to(&mut obj, &PATHS);
        assert_eq!(obj, json!({"spec": {"version": "16", "replicas": 5}}));
        let mut bare = json!({});
        scale.apply_to(&mut bare, &PATHS);
        assert_eq!(bare, json!({"spec": {"replicas": 5}}));
    }

    #[test]
    fn negative_replicas_are_invalid() {
        let mut scale = Scale::default();
        assert!(scale.validate().is_empty());
        scale.spec.replicas = -1;
        let errs: Vec<String> = scale.validate().iter().map(ToString::to_string).collect();
        assert_eq!(
            errs,
            ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
        );
    }
}
