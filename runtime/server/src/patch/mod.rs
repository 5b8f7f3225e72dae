//! PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and
//! Kubernetes strategic merge patch, applied to an object in its request
//! version as JSON; the strict field checks (`fieldValidation`) that
//! create, update and patch share; and server-side apply's structured
//! merge ([`structured`]) and field ownership ([`managed`], over
//! [`fieldpath`] sets).
//!
//! Everything here is pure: the endpoint layer turns [`PatchError`] into a
//! `Status` and runs the result through the normal update path.

pub mod fieldpath;
pub mod fields;
pub mod managed;
pub mod merge_patch;
pub mod operations;
pub mod schema;
pub mod strategic;
pub mod structured;

pub use fields::FieldValidation;
pub use schema::{KindSchema, Node, Shape};

use serde_json::Value;

/// kube-apiserver's limit on the operations of one JSON patch.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The bytes the `copy` operations of one JSON patch may add in total
/// (json-patch's `AccumulatedCopySizeLimit`, which kube-apiserver sets to
/// its request body limit).
pub const JSON_PATCH_MAX_COPY_BYTES: usize = crate::request::MAX_REQUEST_BODY_BYTES;

/// The patch formats, by `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// The patch type of a `Content-Type` header (parameters such as
    /// `;charset=utf-8` are ignored, as kube-apiserver does).
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media.to_ascii_lowercase().as_str() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }

    /// The media type.
    pub fn media_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Why a patch could not be applied, by the status kube-apiserver answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// 400 BadRequest: the patch itself is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 422 Invalid without details (`NewGenericServerResponse(422, ...)`):
    /// the patch does not apply to the object. The text is for logs only;
    /// kube-apiserver answers "the server rejected our request due to an
    /// error in our request".
    #[error("{0}")]
    Invalid(String),
    /// 413 RequestEntityTooLarge.
    #[error("{0}")]
    TooLarge(String),
    /// A failure kube-apiserver reports as a non-Status error (500).
    #[error("{0}")]
    Internal(String),
}

/// Applies a JSON (RFC 6902) patch to `doc`.
pub fn apply_json_patch(doc: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let ops: Value = serde_json::from_slice(patch)
        .map_err(|e| PatchError::BadRequest(crate::go_errors::json_error(&e, patch)))?;
    let Value::Array(list) = &ops else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            json_type_name(&ops)
        )));
    };
    if list.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            list.len()
        )));
    }
    if let Some(bad) = list.iter().find(|op| !op.is_object()) {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            json_type_name(bad)
        )));
    }
    let parsed: json_patch::Patch =
        serde_json::from_value(ops).map_err(|e| PatchError::Invalid(e.to_string()))?;
    let mut out = doc.clone();
    operations::apply(&mut out, &parsed, JSON_PATCH_MAX_COPY_BYTES)
        .map_err(|e| PatchError::Invalid(e.message))?;
    Ok(out)
}

/// Applies a JSON merge patch (RFC 7386) to `doc`.
pub fn apply_merge_patch(doc: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(patch)
        .map_err(|_| PatchError::BadRequest("Invalid JSON Patch".into()))?;
    if patch.is_null() {
        return Err(PatchError::BadRequest("Invalid JSON Patch".into()));
    }
    let mut out = doc.clone();
    merge_patch::merge(&mut out, &patch);
    Ok(out)
}

/// Applies a strategic merge patch to `doc`, whose schema is `node`.
pub fn apply_strategic_patch(
    doc: &Value,
    patch: &[u8],
    node: &Node<'_>,
) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(patch)
        .map_err(|e| PatchError::BadRequest(crate::go_errors::json_error(&e, patch)))?;
    strategic::apply(doc.clone(), patch, node)
}

/// Applies a patch of any supported type (not apply patches).
pub fn apply(
    patch_type: PatchType,
    doc: &Value,
    patch: &[u8],
    node: &Node<'_>,
) -> Result<Value, PatchError> {
    match patch_type {
        PatchType::Json => apply_json_patch(doc, patch),
        PatchType::Merge => apply_merge_patch(doc, patch),
        PatchType::Strategic => apply_strategic_patch(doc, patch, node),
        PatchType::Apply => Err(PatchError::Internal(
            "apply patches are not supported".into(),
        )),
    }
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod managed_tests;
