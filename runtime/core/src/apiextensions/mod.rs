//! Structural schemas of custom resources (placeholder until the schema
//! engine lands: prunes, defaults and validates nothing).

use serde_json::Value;

use crate::validation::ErrorList;

/// A parsed structural schema.
#[derive(Clone, Debug)]
pub struct CustomSchema;

impl CustomSchema {
    /// Parses an `openAPIV3Schema`.
    pub fn from_json(_schema: &Value) -> Result<CustomSchema, String> {
        Ok(CustomSchema)
    }
    /// Prunes unknown fields.
    pub fn prune(&self, _obj: &mut Value) -> Vec<String> {
        Vec::new()
    }
    /// Applies defaults.
    pub fn apply_defaults(&self, _obj: &mut Value) {}
    /// Validates an object.
    pub fn validate(&self, _obj: &Value) -> ErrorList {
        ErrorList::default()
    }
    /// Validates an update.
    pub fn validate_update(&self, _obj: &Value, _old: &Value) -> ErrorList {
        ErrorList::default()
    }
}
