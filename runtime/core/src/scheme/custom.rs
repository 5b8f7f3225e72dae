//! Custom resources: a kind built at run time from a
//! CustomResourceDefinition, served through the same erased [`Kind`]
//! interface as the compiled-in kinds.
//!
//! Objects are [`Unstructured`]: typed metadata and JSON for the rest.
//! Conversion is `conversion.strategy: None` (the `apiVersion` is
//! rewritten) or `Webhook`, through a [`Converter`] the server provides.
//! Each served version has its structural schema ([`CustomSchema`]); a body
//! is pruned, coerced (embedded resources' `apiVersion`, `kind` and
//! `metadata`: refused when malformed in a request, dropped when read from
//! storage) and defaulted with the schema of its version, and keeps that
//! version as its `apiVersion` through the strategy (as upstream, a custom
//! resource is validated in the version it was written in). Conversion
//! between versions (`conversion.strategy: None`) rewrites `apiVersion`;
//! storing converts to the storage version, reading converts to the version
//! asked for and defaults with its schema (defaulting on read, as upstream).
//!
//! [`KindInfo`]s must be `'static`: the facts of a definition are leaked
//! once per definition built (a CRD create or update), which bounds the
//! leak by the number of CRD writes.

use std::sync::Arc;

use serde::de::Error as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{DecodeError, Kind, KindFacts, KindHooks, Object, VersionCodec, VersionOps};
use crate::apiextensions::CustomSchema;
use crate::meta::ObjectMeta;
use crate::resource::{KindInfo, PrinterColumn, Resource, ScaleSubresource, Scope, Subresources};
use crate::validation::ErrorList;

/// A custom resource: its metadata typed, every other field as JSON
/// (`apiVersion` and `kind` among them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Unstructured {
    /// The object's metadata.
    pub metadata: ObjectMeta,
    /// Every top-level field but `metadata`, in document order.
    pub fields: Map<String, Value>,
}

impl Unstructured {
    /// The object's `apiVersion`.
    pub fn api_version(&self) -> &str {
        self.fields
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The object as one JSON value.
    pub fn to_json(&self) -> Result<Value, DecodeError> {
        serde_json::to_value(self).map_err(|e| DecodeError::Invalid(e.to_string()))
    }

    /// Reads a JSON object.
    pub fn from_json(value: Value) -> Result<Self, DecodeError> {
        let Value::Object(mut fields) = value else {
            return Err(DecodeError::Invalid(
                "Object 'Kind' is missing in the body: the body is not a JSON object".into(),
            ));
        };
        let metadata = match fields.shift_remove("metadata") {
            None | Some(Value::Null) => ObjectMeta::default(),
            Some(m) => super::go_json::from_value::<ObjectMeta>(m)
                .map_err(|e| DecodeError::Invalid(e.to_string()))?,
        };
        Ok(Unstructured { metadata, fields })
    }
}

impl Serialize for Unstructured {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.fields.len() + 1))?;
        let mut written_meta = false;
        for (k, v) in &self.fields {
            if !written_meta && k != "apiVersion" && k != "kind" {
                map.serialize_entry("metadata", &self.metadata)?;
                written_meta = true;
            }
            map.serialize_entry(k, v)?;
        }
        if !written_meta {
            map.serialize_entry("metadata", &self.metadata)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Unstructured {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Unstructured::from_json(value).map_err(D::Error::custom)
    }
}

impl schemars::JsonSchema for Unstructured {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Unstructured".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    }
}

impl Resource for Unstructured {
    const INFO: KindInfo = KindInfo {
        kind: "Unstructured",
        ..KindInfo::EMPTY
    };

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Converts custom resources between versions for a definition whose
/// `conversion.strategy` is `Webhook` (the server's ConversionReview
/// client).
pub trait Converter: Send + Sync {
    /// `objects` converted to `desired_api_version`, in order, or why not.
    fn convert(&self, objects: Vec<Value>, desired_api_version: &str)
    -> Result<Vec<Value>, String>;
}

/// Why a definition cannot be served.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DefinitionError(pub String);

/// The parts of a CustomResourceDefinition that serving reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Definition {
    spec: DefinitionSpec,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefinitionSpec {
    group: String,
    names: Names,
    scope: String,
    #[serde(default)]
    versions: Vec<DefinitionVersion>,
    #[serde(default)]
    preserve_unknown_fields: bool,
    #[serde(default)]
    conversion: Option<Conversion>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Conversion {
    #[serde(default)]
    strategy: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Names {
    plural: String,
    #[serde(default)]
    singular: String,
    kind: String,
    #[serde(default)]
    short_names: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefinitionVersion {
    name: String,
    #[serde(default)]
    served: bool,
    #[serde(default)]
    storage: bool,
    #[serde(default)]
    deprecated: bool,
    #[serde(default)]
    deprecation_warning: Option<String>,
    #[serde(default)]
    schema: Option<VersionSchema>,
    #[serde(default)]
    subresources: Option<DefinitionSubresources>,
    #[serde(default)]
    additional_printer_columns: Vec<Column>,
    #[serde(default)]
    selectable_fields: Vec<SelectableField>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VersionSchema {
    #[serde(rename = "openAPIV3Schema", default)]
    open_api_v3_schema: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefinitionSubresources {
    #[serde(default)]
    status: Option<Value>,
    #[serde(default)]
    scale: Option<Scale>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Scale {
    spec_replicas_path: String,
    status_replicas_path: String,
    #[serde(default)]
    label_selector_path: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Column {
    name: String,
    #[serde(rename = "type")]
    type_: String,
    #[serde(default)]
    format: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    priority: i32,
    json_path: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SelectableField {
    json_path: String,
}

/// The column of a definition without printer columns.
const AGE_COLUMN: PrinterColumn = PrinterColumn {
    name: "Age",
    type_: "date",
    json_path: ".metadata.creationTimestamp",
    priority: 0,
    description: "",
    format: "",
};

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

fn leak_all(items: &[String]) -> &'static [&'static str] {
    Box::leak(
        items
            .iter()
            .map(|s| leak(s))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
}

/// One served version of a custom kind.
struct VersionState {
    name: &'static str,
    info: &'static KindInfo,
    schema: Arc<CustomSchema>,
    /// The raw `openAPIV3Schema`, published in OpenAPI.
    published: Value,
}

/// What every version's codec and the strategy share.
struct Shared {
    group: &'static str,
    kind: &'static str,
    /// The webhook of `conversion.strategy: Webhook`.
    converter: Option<Arc<dyn Converter>>,
    storage_version: &'static str,
    versions: Vec<VersionState>,
    status: bool,
}

impl Shared {
    fn version(&self, name: &str) -> Result<&VersionState, DecodeError> {
        self.versions
            .iter()
            .find(|v| v.name == name)
            .ok_or_else(|| DecodeError::Invalid(format!("version {name} is not served")))
    }

    fn api_version(&self, version: &str) -> String {
        format!("{}/{}", self.group, version)
    }

    /// The version of an object's `apiVersion` (the storage version when
    /// it names another group).
    fn version_of<'a>(&'a self, object: &'a Unstructured) -> &'a str {
        object
            .api_version()
            .strip_prefix(self.group)
            .and_then(|rest| rest.strip_prefix('/'))
            .unwrap_or(self.storage_version)
    }

    /// Converts an object to `version` (`conversion.strategy: None`:
    /// `apiVersion` is rewritten; `Webhook`: the converter's answer),
    /// defaulting with that version's schema when it changes version.
    fn convert(&self, object: &mut Unstructured, version: &str) -> Result<(), DecodeError> {
        let from = self.version_of(object).to_string();
        if from == version {
            return Ok(());
        }
        let state = self.version(version)?;
        let desired = self.api_version(version);
        let mut value = match &self.converter {
            None => {
                object
                    .fields
                    .insert("apiVersion".into(), Value::String(desired));
                object.to_json()?
            }
            Some(converter) => {
                // Upstream's error names the object's own group, version
                // and kind.
                let failed = |e: String| {
                    DecodeError::Invalid(format!(
                        "conversion webhook for {}/{from}, Kind={} failed: {e}",
                        self.group, self.kind
                    ))
                };
                let mut converted = converter
                    .convert(vec![object.to_json()?], &desired)
                    .map_err(failed)?;
                if converted.len() != 1 {
                    return Err(failed(format!(
                        "returned {} objects, expected 1",
                        converted.len()
                    )));
                }
                let out = converted.remove(0);
                if out.get("apiVersion").and_then(Value::as_str) != Some(desired.as_str()) {
                    return Err(failed(format!(
                        "invalid converted object: expected apiVersion {desired}, got {}",
                        out.get("apiVersion")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                    )));
                }
                restore_metadata(out, &object.metadata)?
            }
        };
        // as upstream's schemaCoercingConverter (refusing)
        state
            .schema
            .coerce(&mut value, false)
            .map_err(coerce_error)?;
        state.schema.apply_defaults(&mut value);
        *object = Unstructured::from_json(value)?;
        Ok(())
    }

    /// Prunes, coerces and defaults a body of `version` (the body keeps
    /// `version`). `stored`: a stored object, whose malformed embedded
    /// metadata is dropped rather than refused (upstream's storage decoder
    /// has `dropInvalidMetadata`, for objects written before it validated
    /// them).
    fn decode(
        &self,
        version: &str,
        body: Value,
        stored: bool,
    ) -> Result<Unstructured, DecodeError> {
        let state = self.version(version)?;
        let mut body = body;
        if !body.is_object() {
            return Err(DecodeError::Invalid(
                "the body of a custom resource must be a JSON object".into(),
            ));
        }
        state.schema.prune(&mut body);
        state
            .schema
            .coerce(&mut body, stored)
            .map_err(coerce_error)?;
        state.schema.apply_defaults(&mut body);
        let mut object = Unstructured::from_json(body)?;
        object.fields.insert(
            "apiVersion".into(),
            Value::String(self.api_version(version)),
        );
        object
            .fields
            .insert("kind".into(), Value::String(state.info.kind.into()));
        Ok(object)
    }

    fn encode(&self, version: &str, hub: &Unstructured) -> Result<Value, DecodeError> {
        let mut object = hub.clone();
        self.convert(&mut object, version)?;
        object.to_json()
    }
}

/// A refusal of [`CustomSchema::coerce`] as a decoding error (the server
/// answers it as upstream does a decoder's error: `400 <Kind> in version
/// "v1" cannot be handled as a <Kind>: spec.template.kind: Invalid value:
/// 1: must be a string`).
fn coerce_error(e: Box<crate::validation::FieldError>) -> DecodeError {
    DecodeError::Invalid(e.to_string())
}

/// A webhook's converted object with the original metadata but for labels
/// and annotations (the only metadata a conversion may change, as
/// upstream restores the rest).
fn restore_metadata(converted: Value, original: &ObjectMeta) -> Result<Value, DecodeError> {
    let mut object = Unstructured::from_json(converted)?;
    let mut meta = original.clone();
    meta.labels = object.metadata.labels.clone();
    meta.annotations = object.metadata.annotations.clone();
    object.metadata = meta;
    object.to_json()
}

/// The codec of one version of a custom kind.
struct CustomVersion {
    shared: Arc<Shared>,
    version: &'static str,
}

fn unstructured(object: &Object) -> Result<&Unstructured, DecodeError> {
    object.hub::<Unstructured>()
}

impl VersionCodec for CustomVersion {
    fn decode(&self, body: Value) -> Result<Value, DecodeError> {
        self.shared.decode(self.version, body, false)?.to_json()
    }

    fn decode_stored(&self, stored: Value) -> Result<Value, DecodeError> {
        self.shared.decode(self.version, stored, true)?.to_json()
    }

    fn encode(&self, hub: &Value) -> Result<Value, DecodeError> {
        self.shared
            .encode(self.version, &Unstructured::from_json(hub.clone())?)
    }

    fn decode_object(&self, body: Value) -> Result<Object, DecodeError> {
        self.shared
            .decode(self.version, body, false)
            .map(Object::new)
    }

    fn encode_object(&self, hub: &Object) -> Result<Value, DecodeError> {
        self.shared.encode(self.version, unstructured(hub)?)
    }

    fn store_object(&self, hub: &Object) -> Result<(Vec<u8>, Object), DecodeError> {
        let mut object = unstructured(hub)?.clone();
        self.shared.convert(&mut object, self.version)?;
        object.metadata.resource_version.clear();
        let bytes = serde_json::to_vec(&object).map_err(|e| DecodeError::Invalid(e.to_string()))?;
        Ok((bytes, Object::new(object)))
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let meta = generator.subschema_for::<ObjectMeta>();
        let published = self
            .shared
            .version(self.version)
            .map(|v| v.published.clone())
            .unwrap_or_else(|_| Value::Object(Map::new()));
        let mut schema = match published {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        schema
            .entry("type")
            .or_insert_with(|| Value::String("object".into()));
        let properties = schema
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(props) = properties {
            props.insert(
                "apiVersion".into(),
                serde_json::json!({
                    "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                    "type": "string"
                }),
            );
            props.insert(
                "kind".into(),
                serde_json::json!({
                    "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                    "type": "string"
                }),
            );
            props.insert("metadata".into(), meta.to_value());
        }
        // Registered as a model under its OpenAPI name (as compiled kinds'
        // types are), so documents list it and tools find it by its
        // group-version-kind.
        let name = self
            .shared
            .version(self.version)
            .map(|v| v.info.openapi_name)
            .unwrap_or_default();
        let reference = format!(
            "#{}/{}",
            generator.settings().definitions_path,
            name.replace('~', "~0").replace('/', "~1")
        );
        generator
            .definitions_mut()
            .insert(name.to_string(), Value::Object(schema));
        schemars::json_schema!({ "$ref": reference })
    }
}

/// The strategy of a custom kind (upstream's customResourceStrategy).
struct CustomHooks {
    shared: Arc<Shared>,
}

impl CustomHooks {
    fn validate(&self, object: &Unstructured) -> Result<ErrorList, DecodeError> {
        let state = self.shared.version(self.shared.version_of(object))?;
        Ok(state.schema.validate(&object.to_json()?))
    }

    /// `old` in the version of `new`, as JSON.
    fn old_in_version_of(&self, new: &Value, old: &Value) -> Result<Value, DecodeError> {
        let new = Unstructured::from_json(new.clone())?;
        let mut old = Unstructured::from_json(old.clone())?;
        self.shared
            .convert(&mut old, self.shared.version_of(&new))?;
        old.to_json()
    }
}

impl KindHooks for CustomHooks {
    fn hub_object(&self, hub: &Value) -> Result<Object, DecodeError> {
        Unstructured::from_json(hub.clone()).map(Object::new)
    }

    fn reset_status_on_create(&self, hub: &mut Object) -> Result<(), DecodeError> {
        if self.shared.status {
            hub.hub_mut::<Unstructured>()?.fields.shift_remove("status");
        }
        Ok(())
    }

    fn prepare_for_create(&self, _hub: &mut Object) -> Result<(), DecodeError> {
        Ok(())
    }

    fn validate_create(&self, hub: &Object) -> Result<ErrorList, DecodeError> {
        self.validate(unstructured(hub)?)
    }

    fn warnings_on_create(&self, _hub: &Object) -> Result<Vec<String>, DecodeError> {
        Ok(Vec::new())
    }

    fn validate_update(&self, hub: &Value, old: &Value) -> Result<ErrorList, DecodeError> {
        let object = Unstructured::from_json(hub.clone())?;
        let state = self.shared.version(self.shared.version_of(&object))?;
        let old = self.old_in_version_of(hub, old)?;
        Ok(state.schema.validate_update(hub, &old))
    }

    fn prepare_for_update(&self, hub: &mut Value, old: &Value) -> Result<(), DecodeError> {
        if !self.shared.status {
            return Ok(());
        }
        let old = self.old_in_version_of(hub, old)?;
        if let Value::Object(map) = hub {
            match old.get("status") {
                Some(status) => {
                    map.insert("status".into(), status.clone());
                }
                None => {
                    map.shift_remove("status");
                }
            }
        }
        Ok(())
    }

    fn canonicalize(&self, _hub: &mut Value) -> Result<(), DecodeError> {
        Ok(())
    }

    fn warnings_on_update(&self, _hub: &Value, _old: &Value) -> Result<Vec<String>, DecodeError> {
        Ok(Vec::new())
    }

    fn prepare_status_update(&self, hub: &mut Value, old: &Value) -> Result<(), DecodeError> {
        let old = self.old_in_version_of(hub, old)?;
        let status = hub.get("status").cloned();
        let mut merged = old;
        if let Value::Object(map) = &mut merged {
            match status {
                Some(status) => {
                    map.insert("status".into(), status);
                }
                None => {
                    map.shift_remove("status");
                }
            }
        }
        *hub = merged;
        Ok(())
    }

    fn finalizers_pending(&self, _hub: &Value) -> Result<bool, DecodeError> {
        Ok(false)
    }

    fn on_deletion_requested(&self, _hub: &mut Value) -> Result<(), DecodeError> {
        Ok(())
    }
}

/// The OpenAPI model name of a custom kind: the reversed group, the
/// version and the kind (`io.k8s.networking.gateway.v1.Gateway`).
fn model_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

/// Builds the kind a CustomResourceDefinition (its JSON) defines, serving
/// its served versions; `converter` converts between versions when the
/// definition's `conversion.strategy` is `Webhook`.
pub fn kind_from_definition(
    definition: &Value,
    converter: Option<Arc<dyn Converter>>,
) -> Result<Kind, DefinitionError> {
    let def = Definition::deserialize(definition)
        .map_err(|e| DefinitionError(format!("invalid definition: {e}")))?;
    let spec = def.spec;
    let webhook = spec
        .conversion
        .as_ref()
        .is_some_and(|c| c.strategy == "Webhook");
    let converter = match (webhook, converter) {
        (false, _) => None,
        (true, Some(c)) => Some(c),
        (true, None) => {
            return Err(DefinitionError(
                "conversion.strategy Webhook needs a conversion webhook client".into(),
            ));
        }
    };
    let group = leak(&spec.group);
    let scope = if spec.scope == "Cluster" {
        Scope::Cluster
    } else {
        Scope::Namespaced
    };
    let singular = if spec.names.singular.is_empty() {
        spec.names.kind.to_lowercase()
    } else {
        spec.names.singular.clone()
    };
    let (plural, kind, singular) = (
        leak(&spec.names.plural),
        leak(&spec.names.kind),
        leak(&singular),
    );
    let short_names = leak_all(&spec.names.short_names);
    let categories = leak_all(&spec.names.categories);
    let storage_version = spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| leak(&v.name))
        .ok_or_else(|| DefinitionError("no storage version".into()))?;
    let mut versions = Vec::new();
    let mut status = false;
    for v in spec.versions.iter().filter(|v| v.served || v.storage) {
        let subresources = v.subresources.as_ref();
        let has_status = subresources.is_some_and(|s| s.status.is_some());
        if v.storage {
            status = has_status;
        }
        let scale = subresources
            .and_then(|s| s.scale.as_ref())
            .map(|s| ScaleSubresource {
                spec_replicas_path: leak(&s.spec_replicas_path),
                status_replicas_path: leak(&s.status_replicas_path),
                label_selector_path: leak(s.label_selector_path.as_deref().unwrap_or_default()),
            });
        // Upstream's columns: the name, then the definition's columns, or
        // the age when it has none.
        let mut printer_columns = vec![PrinterColumn::NAME];
        printer_columns.extend(v.additional_printer_columns.iter().map(|c| PrinterColumn {
            name: leak(&c.name),
            type_: leak(&c.type_),
            json_path: leak(&c.json_path),
            priority: c.priority,
            description: leak(&c.description),
            format: leak(&c.format),
        }));
        if v.additional_printer_columns.is_empty() {
            printer_columns.push(AGE_COLUMN);
        }
        let selectable: Vec<String> = v
            .selectable_fields
            .iter()
            .map(|f| f.json_path.clone())
            .collect();
        let version = leak(&v.name);
        let info: &'static KindInfo = Box::leak(Box::new(KindInfo {
            group,
            version,
            kind,
            plural,
            singular,
            scope,
            short_names,
            categories,
            printer_columns: Box::leak(printer_columns.into_boxed_slice()),
            openapi_name: leak(&model_name(group, version, kind)),
            selectable_fields: leak_all(&selectable),
            subresources: Subresources {
                status: has_status,
                scale,
            },
            deprecated: v.deprecated,
            deprecation_warning: v.deprecation_warning.as_deref().map(leak),
        }));
        let published = v
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.clone())
            .unwrap_or_else(|| serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        let mut schema_source = published.clone();
        if spec.preserve_unknown_fields
            && let Value::Object(map) = &mut schema_source
        {
            map.insert(
                "x-kubernetes-preserve-unknown-fields".into(),
                Value::Bool(true),
            );
        }
        let schema = CustomSchema::from_json(&schema_source).map_err(|e| {
            DefinitionError(format!(
                "the schema of version {} cannot be served: {e}",
                v.name
            ))
        })?;
        versions.push((
            v.served,
            VersionState {
                name: version,
                info,
                schema: Arc::new(schema),
                published,
            },
        ));
    }
    let served: Vec<&'static str> = versions
        .iter()
        .filter(|(served, _)| *served)
        .map(|(_, v)| v.name)
        .collect();
    let shared = Arc::new(Shared {
        group,
        kind,
        converter,
        storage_version,
        versions: versions.into_iter().map(|(_, v)| v).collect(),
        status,
    });
    let ops = shared
        .versions
        .iter()
        .filter(|v| served.contains(&v.name))
        .map(|v| {
            VersionOps::new(
                v.info,
                Arc::new(CustomVersion {
                    shared: shared.clone(),
                    version: v.name,
                }),
            )
        })
        .collect();
    let facts = KindFacts {
        allow_create_on_update: false,
        allow_unconditional_update: false,
        bump_generation: true,
        table_printer: None,
        gc_policy: crate::resource::GarbageCollectionPolicy::DeleteDependents,
        strategic_merge_patch: false,
        deletion_finalizers: &[],
    };
    Ok(Kind::new(
        ops,
        storage_version,
        Arc::new(CustomHooks { shared }),
        facts,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn definition() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                     }}}},
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
                ]
            }
        })
    }

    #[test]
    fn versions_convert_by_rewriting_api_version() {
        let kind = kind_from_definition(&definition(), None).expect("kind");
        assert_eq!(kind.versions().len(), 2);
        assert_eq!(kind.storage_info().version, "v1");
        assert_eq!(kind.storage_info().short_names, ["wd"]);
        let body = json!({"apiVersion": "example.com/v1beta1", "kind": "Widget",
            "metadata": {"name": "a", "namespace": "ns"}, "spec": {"size": 3}});
        let hub = kind.decode_object("v1beta1", body).expect("decode");
        let (bytes, stored) = kind.store_object(&hub).expect("store");
        let stored_json: Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(stored_json["apiVersion"], "example.com/v1");
        assert_eq!(stored_json["metadata"]["name"], "a");
        let back = kind.encode_object("v1beta1", &stored).expect("encode");
        assert_eq!(back["apiVersion"], "example.com/v1beta1");
        assert_eq!(back["spec"]["size"], 3);
    }

    #[test]
    fn status_is_kept_apart_from_the_main_resource() {
        let kind = kind_from_definition(&definition(), None).expect("kind");
        let body = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "a"}, "spec": {"size": 1}, "status": {"ready": true}});
        let mut hub = kind.decode_object("v1", body).expect("decode");
        kind.reset_status_on_create_object(&mut hub).expect("reset");
        let created = hub.to_value().expect("json");
        assert!(created.get("status").is_none());
        let mut update = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "a"}, "spec": {"size": 2}, "status": {"ready": true}});
        kind.prepare_for_update(&mut update, &created)
            .expect("prepare");
        assert!(
            update.get("status").is_none(),
            "the main resource ignores status"
        );
        let mut status = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "a"}, "spec": {"size": 9}, "status": {"ready": true}});
        kind.prepare_status_update(&mut status, &update)
            .expect("status");
        assert_eq!(status["spec"]["size"], 2, "/status ignores everything else");
        assert_eq!(status["status"]["ready"], true);
    }

    fn templated() -> Kind {
        let mut def = definition();
        def["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["template"] = json!({"type": "object", "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true});
        kind_from_definition(&def, None).expect("kind")
    }

    // apiextensions-apiserver: the request decoder coerces embedded
    // resources refusing bad ones (customresource_handler.go
    // unstructuredSchemaCoercer, dropInvalidMetadata false), the storage
    // decoder drops them (dropInvalidMetadata true), and the strategy's
    // Validate runs objectmeta.Validate (strategy.go).
    #[test]
    fn embedded_resources_are_coerced_on_decode_and_validated() {
        let kind = templated();
        let body = |template: Value| {
            json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "a", "namespace": "ns"}, "spec": {"template": template}})
        };
        let refused = kind
            .decode_object("v1", body(json!({"apiVersion": "v1", "kind": 7})))
            .map(|_| ())
            .expect_err("refused");
        assert_eq!(
            refused.to_string(),
            "spec.template.kind: Invalid value: 7: must be a string"
        );
        let stored = kind
            .from_storage(body(json!({"apiVersion": "v1", "kind": 7,
                "metadata": {"name": "t", "labels": "bad", "foo": 1}})))
            .expect("read");
        assert_eq!(
            stored["spec"]["template"],
            json!({"apiVersion": "v1", "metadata": {"name": "t"}})
        );

        let hub = kind
            .decode_object(
                "v1",
                body(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "t", "labels": {"a": "-"}, "extra": true}})),
            )
            .expect("decoded");
        let decoded = hub.to_value().expect("json");
        assert_eq!(
            decoded["spec"]["template"]["metadata"],
            json!({"name": "t", "labels": {"a": "-"}})
        );
        let errs = kind.validate_create_object(&hub).expect("validated");
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "spec.template.metadata.labels: Invalid value: \"-\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
        let errs = kind.validate_update(&decoded, &decoded).expect("validated");
        assert_eq!(errs.len(), 1, "not ratcheted: {errs:?}");
    }

    /// Upper-cases `spec.size` on the way to v1beta1 (a webhook's work).
    struct Shout;

    impl Converter for Shout {
        fn convert(&self, objects: Vec<Value>, desired: &str) -> Result<Vec<Value>, String> {
            Ok(objects
                .into_iter()
                .map(|mut o| {
                    o["apiVersion"] = json!(desired);
                    o["metadata"]["uid"] = json!("changed by the webhook");
                    o["metadata"]["labels"] = json!({"converted": "yes"});
                    if let Some(size) = o["spec"]["size"].as_i64() {
                        o["spec"]["size"] = json!(size * 10);
                    }
                    o
                })
                .collect())
        }
    }

    #[test]
    fn a_webhook_converts_and_only_labels_and_annotations_of_metadata_change() {
        let mut def = definition();
        def["spec"]["conversion"] = json!({"strategy": "Webhook"});
        assert!(
            kind_from_definition(&def, None).is_err(),
            "a webhook needs a client"
        );
        let kind = kind_from_definition(&def, Some(Arc::new(Shout))).expect("kind");
        let body = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "a", "uid": "u1"}, "spec": {"size": 3}});
        let hub = kind.decode_object("v1", body).expect("decode");
        let beta = kind.encode_object("v1beta1", &hub).expect("encode");
        assert_eq!(beta["apiVersion"], "example.com/v1beta1");
        assert_eq!(beta["spec"]["size"], 30);
        assert_eq!(beta["metadata"]["uid"], "u1");
        assert_eq!(beta["metadata"]["labels"]["converted"], "yes");
    }

    struct Broken;

    impl Converter for Broken {
        fn convert(&self, _: Vec<Value>, _: &str) -> Result<Vec<Value>, String> {
            Err("connection refused".into())
        }
    }

    #[test]
    fn a_failing_webhook_names_the_object_kind() {
        let mut def = definition();
        def["spec"]["conversion"] = json!({"strategy": "Webhook"});
        let kind = kind_from_definition(&def, Some(Arc::new(Broken))).expect("kind");
        let body = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "a"}, "spec": {"size": 3}});
        let hub = kind.decode_object("v1", body).expect("decode");
        let err = kind.encode_object("v1beta1", &hub).expect_err("fails");
        assert_eq!(
            err.to_string(),
            "conversion webhook for example.com/v1, Kind=Widget failed: connection refused"
        );
    }
}
