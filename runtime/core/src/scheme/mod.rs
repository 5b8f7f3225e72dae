//! The kind registry: every compiled-in kind with its versions, and the
//! type-erased operations (decode, default, convert, validate, encode) the
//! layers above storage use. Objects cross this boundary as JSON values or
//! as one typed [`Object`] (the create path: a body decoded once), so the
//! registry, cacher and endpoints are written once for all kinds.
//!
//! A kind has one *hub* type (the type the strategy runs on, often one of the
//! versions) and any number of served versions, each convertible to and
//! from the hub. One served version is the storage version.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::meta::ObjectMeta;
use crate::resource::{KindInfo, Resource, Strategy};
use crate::validation::ErrorList;

pub mod custom;
pub mod definition;
pub mod go_json;
mod object;
mod runtime_config;
pub use object::{Object, typed_decodes};

/// Conversion between a versioned type and its hub. Identity for the hub
/// itself; derived or hand-written for the other versions.
pub trait Convert<H>: Sized {
    /// Converts this version into the hub.
    fn into_hub(self) -> H;
    /// Converts the hub into this version.
    fn from_hub(hub: &H) -> Self;
}

impl<T: Clone> Convert<T> for T {
    fn into_hub(self) -> T {
        self
    }
    fn from_hub(hub: &T) -> Self {
        hub.clone()
    }
}

/// Why a body could not be decoded into a kind.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The JSON does not fit the type (wrong field types, ...).
    #[error("{0}")]
    Invalid(String),
}

/// The codec of one served version: how bodies of this version become hub
/// objects and back. Compiled-in kinds get it from [`KindBuilder::version`]
/// (their Rust types); a schema-driven kind (a custom resource) implements
/// it over JSON.
pub trait VersionCodec: Send + Sync {
    /// Decodes a request body of this version into the hub's JSON form
    /// (defaulted).
    fn decode(&self, body: Value) -> Result<Value, DecodeError>;
    /// Decodes an object read from storage in this version into the hub's
    /// JSON form: [`VersionCodec::decode`] unless a codec reads stored
    /// objects more leniently than request bodies (custom resources drop
    /// malformed embedded metadata, as upstream's storage decoder does).
    fn decode_stored(&self, stored: Value) -> Result<Value, DecodeError> {
        self.decode(stored)
    }
    /// Encodes a hub object given as JSON in this version (with
    /// `apiVersion` and `kind`).
    fn encode(&self, hub: &Value) -> Result<Value, DecodeError>;
    /// Decodes a request body of this version into a typed hub object
    /// (defaulted): the request's one typed decode.
    fn decode_object(&self, body: Value) -> Result<Object, DecodeError>;
    /// Encodes a typed hub object in this version.
    fn encode_object(&self, hub: &Object) -> Result<Value, DecodeError>;
    /// Encodes a hub object for storage in this version (no
    /// resourceVersion): the bytes, and the hub object they read back as.
    fn store_object(&self, hub: &Object) -> Result<(Vec<u8>, Object), DecodeError>;
    /// The OpenAPI schema of this version.
    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema;
}

/// Operations of one served version of a kind.
#[derive(Clone)]
pub struct VersionOps {
    /// The version's static facts.
    pub info: &'static KindInfo,
    codec: Arc<dyn VersionCodec>,
    protobuf: Option<ProtobufOps>,
}

/// The Kubernetes protobuf codec of one served version (see
/// the `protobuf` module). It works on the *versioned* JSON form, so it is just
/// another serializer next to JSON and YAML: decoding yields the object as
/// its JSON body would (then [`Kind::decode`] defaults and converts it),
/// encoding starts from [`Kind::encode`]'s output. The bytes are the raw
/// upstream message (e.g. `k8s.io.api.core.v1.ConfigMap`), without the
/// `k8s\0` + `runtime.Unknown` envelope.
#[derive(Clone, Copy)]
pub struct ProtobufOps {
    /// Raw message bytes → versioned JSON object.
    pub decode: fn(&[u8]) -> Result<Value, DecodeError>,
    /// Versioned JSON object → raw message bytes.
    pub encode: fn(&Value) -> Result<Vec<u8>, DecodeError>,
    /// Versioned JSON list (`metadata` + `items`) → raw list message bytes.
    pub encode_list: fn(&Value) -> Result<Vec<u8>, DecodeError>,
}

impl VersionOps {
    /// A version served by `codec` (a schema-driven kind's version; the
    /// compiled-in kinds' versions come from [`KindBuilder::version`]).
    pub fn new(info: &'static KindInfo, codec: Arc<dyn VersionCodec>) -> Self {
        VersionOps {
            info,
            codec,
            protobuf: None,
        }
    }

    /// The version's codec.
    pub fn codec(&self) -> &dyn VersionCodec {
        &*self.codec
    }

    /// The protobuf codec of this version, if the kind supports protobuf.
    pub fn protobuf(&self) -> Option<&ProtobufOps> {
        self.protobuf.as_ref()
    }

    /// The strategic-merge-patch metadata of this version's fields
    /// (`#[validate(patch_strategy = ..., patch_merge_key = ...)]`), read
    /// from its published OpenAPI schema.
    pub fn patch_fields(&self) -> Vec<crate::schema::PatchField> {
        let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
        let root = self.schema(&mut generator);
        let definitions = generator.take_definitions(true);
        crate::schema::patch_fields(root.as_value(), &definitions)
    }

    /// The OpenAPI schema of this version.
    pub fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        self.codec.schema(generator)
    }
}

/// The codec of a compiled-in version `V` of hub `H`.
struct TypedVersion<V, H>(std::marker::PhantomData<fn() -> (V, H)>);

impl<V, H> VersionCodec for TypedVersion<V, H>
where
    V: Strategy + Convert<H>,
    H: Resource,
{
    fn decode(&self, body: Value) -> Result<Value, DecodeError> {
        decode_version::<V, H>(body)
    }
    fn encode(&self, hub: &Value) -> Result<Value, DecodeError> {
        encode_version::<V, H>(hub)
    }
    fn decode_object(&self, body: Value) -> Result<Object, DecodeError> {
        decode_version_object::<V, H>(body)
    }
    fn encode_object(&self, hub: &Object) -> Result<Value, DecodeError> {
        encode_version_object::<V, H>(hub)
    }
    fn store_object(&self, hub: &Object) -> Result<(Vec<u8>, Object), DecodeError> {
        store_version_object::<V, H>(hub)
    }
    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schema_of::<V>(generator)
    }
}

fn decode_version<V, H>(body: Value) -> Result<Value, DecodeError>
where
    V: Strategy + Convert<H>,
    H: Resource,
{
    let hub: H = decode_hub::<V, H>(body)?;
    serde_json::to_value(&hub).map_err(|e| DecodeError::Invalid(e.to_string()))
}

/// Deserializes a body of version `V` (its `null`s read as Go reads them:
/// [`go_json`]), defaults it and converts it to the hub: the one typed
/// decode of a request body.
fn decode_hub<V, H>(body: Value) -> Result<H, DecodeError>
where
    V: Strategy + Convert<H>,
    H: Resource,
{
    object::count_decode();
    let mut v: V = go_json::from_value(body).map_err(|e| DecodeError::Invalid(e.to_string()))?;
    v.default_fields();
    Ok(v.into_hub())
}

fn decode_version_object<V, H>(body: Value) -> Result<Object, DecodeError>
where
    V: Strategy + Convert<H>,
    H: Resource,
{
    decode_hub::<V, H>(body).map(Object::new)
}

fn encode_version_object<V, H>(hub: &Object) -> Result<Value, DecodeError>
where
    V: Resource + Convert<H>,
    H: Resource,
{
    versioned(&V::from_hub(hub.hub::<H>()?))
}

/// A versioned object's JSON form with `apiVersion` and `kind` first.
fn versioned<V: Resource>(v: &V) -> Result<Value, DecodeError> {
    let body = serde_json::to_value(v).map_err(|e| DecodeError::Invalid(e.to_string()))?;
    Ok(with_type_meta(body, &V::INFO))
}

/// Encodes a hub object in storage version `V` (without resourceVersion)
/// and converts that back to the hub, as reading the bytes would give,
/// without parsing them.
fn store_version_object<V, H>(hub: &Object) -> Result<(Vec<u8>, Object), DecodeError>
where
    V: Resource + Convert<H>,
    H: Resource,
{
    let mut v = V::from_hub(hub.hub::<H>()?);
    v.metadata_mut().resource_version.clear();
    let bytes =
        serde_json::to_vec(&versioned(&v)?).map_err(|e| DecodeError::Invalid(e.to_string()))?;
    Ok((bytes, Object::new(v.into_hub())))
}

fn encode_version<V, H>(hub: &Value) -> Result<Value, DecodeError>
where
    V: Resource + Convert<H>,
    H: Resource,
{
    versioned(&V::from_hub(&typed::<H>(hub)?))
}

/// Puts `apiVersion` and `kind` first in an encoded object.
pub fn with_type_meta(body: Value, info: &KindInfo) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::String(info.api_version()));
    out.insert("kind".into(), Value::String(info.kind.into()));
    if let Value::Object(map) = body {
        for (k, v) in map {
            if k != "apiVersion" && k != "kind" {
                out.insert(k, v);
            }
        }
    }
    Value::Object(out)
}

fn schema_of<V: Resource>(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let schema = generator.subschema_for::<V>();
    V::publish_schema(generator);
    schema
}

/// The strategy of a kind on its hub objects, type-erased: what the
/// registry runs around a write. Compiled-in kinds get it from their
/// [`Strategy`] ([`KindBuilder`]); a schema-driven kind implements it over
/// JSON.
pub trait KindHooks: Send + Sync {
    /// Reads a hub object given as JSON into an [`Object`].
    fn hub_object(&self, hub: &Value) -> Result<Object, DecodeError>;
    /// [`Strategy::reset_status_on_create`].
    fn reset_status_on_create(&self, hub: &mut Object) -> Result<(), DecodeError>;
    /// [`Strategy::prepare_for_create`], then [`Strategy::canonicalize`].
    fn prepare_for_create(&self, hub: &mut Object) -> Result<(), DecodeError>;
    /// [`Strategy::validate_create`].
    fn validate_create(&self, hub: &Object) -> Result<ErrorList, DecodeError>;
    /// [`Strategy::warnings_on_create`].
    fn warnings_on_create(&self, hub: &Object) -> Result<Vec<String>, DecodeError>;
    /// [`Strategy::validate_update`].
    fn validate_update(&self, hub: &Value, old: &Value) -> Result<ErrorList, DecodeError>;
    /// [`Strategy::prepare_for_update`], then [`Strategy::canonicalize`].
    fn prepare_for_update(&self, hub: &mut Value, old: &Value) -> Result<(), DecodeError>;
    /// [`Strategy::canonicalize`].
    fn canonicalize(&self, hub: &mut Value) -> Result<(), DecodeError>;
    /// [`Strategy::warnings_on_update`].
    fn warnings_on_update(&self, hub: &Value, old: &Value) -> Result<Vec<String>, DecodeError>;
    /// [`Strategy::prepare_status_update`].
    fn prepare_status_update(&self, hub: &mut Value, old: &Value) -> Result<(), DecodeError>;
    /// [`Strategy::finalizers_pending`].
    fn finalizers_pending(&self, hub: &Value) -> Result<bool, DecodeError>;
    /// [`Strategy::on_deletion_requested`].
    fn on_deletion_requested(&self, hub: &mut Value) -> Result<(), DecodeError>;
}

/// The static facts of a kind's strategy (what [`Strategy`] answers
/// without an object).
#[derive(Clone, Copy, Debug, Default)]
pub struct KindFacts {
    /// [`Strategy::allow_create_on_update`].
    pub allow_create_on_update: bool,
    /// [`Strategy::allow_unconditional_update`].
    pub allow_unconditional_update: bool,
    /// [`Strategy::bump_generation_on_spec_change`].
    pub bump_generation: bool,
    /// [`Strategy::table_printer`].
    pub table_printer: Option<&'static crate::resource::TablePrinter>,
    /// [`Strategy::default_garbage_collection_policy`].
    pub gc_policy: crate::resource::GarbageCollectionPolicy,
    /// Whether strategic merge patches apply (compiled-in kinds; custom
    /// resources have no patch strategies and refuse them, as upstream).
    pub strategic_merge_patch: bool,
    /// [`Strategy::deletion_finalizers`].
    pub deletion_finalizers: &'static [&'static str],
}

/// A kind with all its versions, type-erased.
#[derive(Clone)]
pub struct Kind {
    versions: Vec<VersionOps>,
    storage_version: &'static str,
    hooks: Arc<dyn KindHooks>,
    facts: KindFacts,
}

/// The strategy of hub type `H`, as [`KindHooks`].
struct TypedHooks<H>(std::marker::PhantomData<fn() -> H>);

impl<H: Strategy> KindHooks for TypedHooks<H> {
    fn hub_object(&self, hub: &Value) -> Result<Object, DecodeError> {
        object::count_decode();
        H::deserialize(hub)
            .map(Object::new)
            .map_err(|e| DecodeError::Invalid(e.to_string()))
    }
    fn reset_status_on_create(&self, hub: &mut Object) -> Result<(), DecodeError> {
        hub.hub_mut::<H>()?.reset_status_on_create();
        Ok(())
    }
    fn prepare_for_create(&self, hub: &mut Object) -> Result<(), DecodeError> {
        let h = hub.hub_mut::<H>()?;
        h.prepare_for_create();
        h.canonicalize();
        Ok(())
    }
    fn validate_create(&self, hub: &Object) -> Result<ErrorList, DecodeError> {
        Ok(hub.hub::<H>()?.validate_create())
    }
    fn warnings_on_create(&self, hub: &Object) -> Result<Vec<String>, DecodeError> {
        Ok(hub.hub::<H>()?.warnings_on_create())
    }
    fn validate_update(&self, hub: &Value, old: &Value) -> Result<ErrorList, DecodeError> {
        hub_validate_update::<H>(hub, old)
    }
    fn prepare_for_update(&self, hub: &mut Value, old: &Value) -> Result<(), DecodeError> {
        hub_prepare_update::<H>(hub, old)
    }
    fn canonicalize(&self, hub: &mut Value) -> Result<(), DecodeError> {
        hub_canonicalize::<H>(hub)
    }
    fn warnings_on_update(&self, hub: &Value, old: &Value) -> Result<Vec<String>, DecodeError> {
        hub_warnings_update::<H>(hub, old)
    }
    fn prepare_status_update(&self, hub: &mut Value, old: &Value) -> Result<(), DecodeError> {
        hub_prepare_status_update::<H>(hub, old)
    }
    fn finalizers_pending(&self, hub: &Value) -> Result<bool, DecodeError> {
        hub_finalizers_pending::<H>(hub)
    }
    fn on_deletion_requested(&self, hub: &mut Value) -> Result<(), DecodeError> {
        hub_on_deletion_requested::<H>(hub)
    }
}

fn hub_validate_update<H: Strategy>(v: &Value, old: &Value) -> Result<ErrorList, DecodeError> {
    let h: H = typed(v)?;
    let o: H = typed(old)?;
    Ok(h.validate_update(&o))
}

fn hub_prepare_update<H: Strategy>(v: &mut Value, old: &Value) -> Result<(), DecodeError> {
    let mut h: H = typed(v)?;
    let o: H = typed(old)?;
    h.prepare_for_update(&o);
    h.canonicalize();
    *v = serde_json::to_value(&h).map_err(|e| DecodeError::Invalid(e.to_string()))?;
    Ok(())
}

fn from_value<H: Strategy>(v: &Value) -> Result<H, DecodeError> {
    typed(v)
}

/// Deserializes a typed value from a JSON value without copying it first.
fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, DecodeError> {
    object::count_decode();
    T::deserialize(v).map_err(|e| DecodeError::Invalid(e.to_string()))
}

fn to_value<H: Strategy>(h: &H) -> Result<Value, DecodeError> {
    serde_json::to_value(h).map_err(|e| DecodeError::Invalid(e.to_string()))
}

fn hub_canonicalize<H: Strategy>(v: &mut Value) -> Result<(), DecodeError> {
    let mut h: H = from_value(v)?;
    h.canonicalize();
    *v = to_value(&h)?;
    Ok(())
}

fn hub_warnings_update<H: Strategy>(v: &Value, old: &Value) -> Result<Vec<String>, DecodeError> {
    Ok(from_value::<H>(v)?.warnings_on_update(&from_value::<H>(old)?))
}

fn hub_finalizers_pending<H: Strategy>(v: &Value) -> Result<bool, DecodeError> {
    let h: H = typed(v)?;
    Ok(h.finalizers_pending())
}

fn hub_on_deletion_requested<H: Strategy>(v: &mut Value) -> Result<(), DecodeError> {
    let mut h: H = from_value(v)?;
    h.on_deletion_requested();
    *v = to_value(&h)?;
    Ok(())
}

fn hub_prepare_status_update<H: Strategy>(v: &mut Value, old: &Value) -> Result<(), DecodeError> {
    let mut h: H = from_value(v)?;
    h.prepare_status_update(&from_value::<H>(old)?);
    *v = to_value(&h)?;
    Ok(())
}

/// Builds a [`Kind`] from its hub type and versions.
pub struct KindBuilder<H: Strategy> {
    versions: Vec<VersionOps>,
    storage_version: Option<&'static str>,
    _hub: std::marker::PhantomData<fn() -> H>,
}

impl<H: Strategy> Default for KindBuilder<H> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H: Strategy> KindBuilder<H> {
    /// A kind whose strategy runs on `H`.
    pub fn new() -> Self {
        KindBuilder {
            versions: Vec::new(),
            storage_version: None,
            _hub: std::marker::PhantomData,
        }
    }

    /// Adds a served version `V` (convertible to and from the hub).
    pub fn version<V: Strategy + Convert<H>>(mut self) -> Self {
        self.versions.push(VersionOps::new(
            &V::INFO,
            Arc::new(TypedVersion::<V, H>(std::marker::PhantomData)),
        ));
        self
    }

    /// Gives version `V` (already added) a Kubernetes protobuf codec.
    pub fn protobuf<V: Resource>(mut self, ops: ProtobufOps) -> Self {
        if let Some(v) = self
            .versions
            .iter_mut()
            .find(|v| v.info.version == V::INFO.version)
        {
            v.protobuf = Some(ops);
        }
        self
    }

    /// Marks version `V` (already added) as the storage version.
    pub fn storage<V: Resource>(mut self) -> Self {
        self.storage_version = Some(V::INFO.version);
        self
    }

    /// Finishes the kind. Without an explicit storage version, the first
    /// added version stores.
    pub fn build(self) -> Kind {
        let storage_version = self
            .storage_version
            .or_else(|| self.versions.first().map(|v| v.info.version))
            .unwrap_or("");
        Kind {
            versions: self.versions,
            storage_version,
            hooks: Arc::new(TypedHooks::<H>(std::marker::PhantomData)),
            facts: KindFacts {
                allow_create_on_update: H::allow_create_on_update(),
                allow_unconditional_update: H::allow_unconditional_update(),
                bump_generation: H::bump_generation_on_spec_change(),
                table_printer: H::table_printer(),
                gc_policy: H::default_garbage_collection_policy(),
                strategic_merge_patch: true,
                deletion_finalizers: H::deletion_finalizers(),
            },
        }
    }
}

impl Kind {
    /// A kind of `versions` (stored in `storage_version`) whose strategy is
    /// `hooks`: a schema-driven kind (the compiled-in kinds are built with
    /// [`KindBuilder`]).
    pub fn new(
        versions: Vec<VersionOps>,
        storage_version: &'static str,
        hooks: Arc<dyn KindHooks>,
        facts: KindFacts,
    ) -> Kind {
        Kind {
            versions,
            storage_version,
            hooks,
            facts,
        }
    }

    /// The served versions of this kind.
    pub fn versions(&self) -> &[VersionOps] {
        &self.versions
    }

    /// The operations of one version.
    pub fn version(&self, version: &str) -> Option<&VersionOps> {
        self.versions.iter().find(|v| v.info.version == version)
    }

    /// The storage version's facts.
    pub fn storage_info(&self) -> &'static KindInfo {
        self.version(self.storage_version)
            .map(|v| v.info)
            .unwrap_or_else(|| self.versions[0].info)
    }

    /// Decodes a request body in `version` into the hub form (defaulted).
    pub fn decode(&self, version: &str, body: Value) -> Result<Value, DecodeError> {
        let ops = self
            .version(version)
            .ok_or_else(|| DecodeError::Invalid(format!("version {version} is not served")))?;
        ops.codec.decode(body)
    }

    /// Encodes a hub object in `version` (with `apiVersion` and `kind`).
    pub fn encode(&self, version: &str, hub: &Value) -> Result<Value, DecodeError> {
        let ops = self
            .version(version)
            .ok_or_else(|| DecodeError::Invalid(format!("version {version} is not served")))?;
        ops.codec.encode(hub)
    }

    /// Decodes a request body in `version` into a typed hub object
    /// (defaulted): the request's one typed decode.
    pub fn decode_object(&self, version: &str, body: Value) -> Result<Object, DecodeError> {
        self.served(version)?.codec.decode_object(body)
    }

    /// Reads a hub object given as JSON (the hub's own form, as
    /// [`Kind::decode`] returns it) into a typed [`Object`].
    pub fn hub_object(&self, hub: &Value) -> Result<Object, DecodeError> {
        self.hooks.hub_object(hub)
    }

    /// Encodes a typed hub object in `version` (with `apiVersion` and
    /// `kind`).
    pub fn encode_object(&self, version: &str, hub: &Object) -> Result<Value, DecodeError> {
        self.served(version)?.codec.encode_object(hub)
    }

    /// The bytes that store a typed hub object (the storage version, no
    /// resourceVersion), and the hub object reading them back gives
    /// (lossy conversions show here), converted without parsing the bytes.
    pub fn store_object(&self, hub: &Object) -> Result<(Vec<u8>, Object), DecodeError> {
        self.served(self.storage_version)?.codec.store_object(hub)
    }

    /// [`Kind::reset_status_on_create`] on a typed object.
    pub fn reset_status_on_create_object(&self, hub: &mut Object) -> Result<(), DecodeError> {
        self.hooks.reset_status_on_create(hub)
    }

    /// [`Kind::prepare_for_create`] (preparation, then canonicalization)
    /// on a typed object.
    pub fn prepare_for_create_object(&self, hub: &mut Object) -> Result<(), DecodeError> {
        self.hooks.prepare_for_create(hub)
    }

    /// [`Kind::validate_create`] on a typed object.
    pub fn validate_create_object(&self, hub: &Object) -> Result<ErrorList, DecodeError> {
        self.hooks.validate_create(hub)
    }

    /// [`Kind::warnings_on_create`] on a typed object.
    pub fn warnings_on_create_object(&self, hub: &Object) -> Result<Vec<String>, DecodeError> {
        self.hooks.warnings_on_create(hub)
    }

    /// Runs a typed hook on a hub object given as JSON, writing the result
    /// back.
    fn on_object(
        &self,
        hub: &mut Value,
        hook: impl FnOnce(&mut Object) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        let mut object = self.hub_object(hub)?;
        hook(&mut object)?;
        *hub = object.to_value()?;
        Ok(())
    }

    fn served(&self, version: &str) -> Result<&VersionOps, DecodeError> {
        self.version(version)
            .ok_or_else(|| DecodeError::Invalid(format!("version {version} is not served")))
    }

    /// Round-trips a hub object through the storage version, as writing it
    /// to storage and reading it back would (lossy conversions show here).
    pub fn to_storage(&self, hub: &Value) -> Result<Value, DecodeError> {
        self.encode(self.storage_version, hub)
    }

    /// Decodes an object read from storage into the hub form.
    pub fn from_storage(&self, stored: Value) -> Result<Value, DecodeError> {
        let version = self.storage_version;
        let ops = self
            .version(version)
            .ok_or_else(|| DecodeError::Invalid(format!("version {version} is not served")))?;
        ops.codec.decode_stored(stored)
    }

    /// Runs the strategy's create validation.
    pub fn validate_create(&self, hub: &Value) -> Result<ErrorList, DecodeError> {
        self.validate_create_object(&self.hub_object(hub)?)
    }

    /// Runs the strategy's update validation.
    pub fn validate_update(&self, hub: &Value, old: &Value) -> Result<ErrorList, DecodeError> {
        self.hooks.validate_update(hub, old)
    }

    /// Runs the strategy's create preparation, then its canonicalization.
    pub fn prepare_for_create(&self, hub: &mut Value) -> Result<(), DecodeError> {
        self.on_object(hub, |o| self.prepare_for_create_object(o))
    }

    /// Runs the strategy's update preparation, then its canonicalization.
    pub fn prepare_for_update(&self, hub: &mut Value, old: &Value) -> Result<(), DecodeError> {
        self.hooks.prepare_for_update(hub, old)
    }

    /// Whether a PUT on a missing object creates it.
    pub fn allow_create_on_update(&self) -> bool {
        self.facts.allow_create_on_update
    }

    /// Whether a PUT without a resourceVersion is allowed.
    pub fn allow_unconditional_update(&self) -> bool {
        self.facts.allow_unconditional_update
    }

    /// Runs the strategy's canonicalization alone (the prepare methods
    /// already include it).
    pub fn canonicalize(&self, hub: &mut Value) -> Result<(), DecodeError> {
        self.hooks.canonicalize(hub)
    }

    /// The strategy's warnings for creating `hub`.
    pub fn warnings_on_create(&self, hub: &Value) -> Result<Vec<String>, DecodeError> {
        self.warnings_on_create_object(&self.hub_object(hub)?)
    }

    /// The strategy's warnings for updating `old` to `hub`.
    pub fn warnings_on_update(&self, hub: &Value, old: &Value) -> Result<Vec<String>, DecodeError> {
        self.hooks.warnings_on_update(hub, old)
    }

    /// Whether `metadata.generation` tracks changes outside metadata and
    /// status ([`Strategy::bump_generation_on_spec_change`]).
    pub fn bump_generation_on_spec_change(&self) -> bool {
        self.facts.bump_generation
    }

    /// Runs the strategy's [`Strategy::reset_status_on_create`].
    pub fn reset_status_on_create(&self, hub: &mut Value) -> Result<(), DecodeError> {
        self.on_object(hub, |o| self.reset_status_on_create_object(o))
    }

    /// Runs the strategy's [`Strategy::prepare_status_update`]: keeps
    /// everything but `status` from `old`.
    pub fn prepare_status_update(&self, hub: &mut Value, old: &Value) -> Result<(), DecodeError> {
        self.hooks.prepare_status_update(hub, old)
    }

    /// The kind's hand-written Table rendering
    /// ([`Strategy::table_printer`]).
    pub fn table_printer(&self) -> Option<&'static crate::resource::TablePrinter> {
        self.facts.table_printer
    }

    /// Whether something besides `metadata.finalizers` holds `hub` in
    /// storage ([`Strategy::finalizers_pending`]).
    pub fn finalizers_pending(&self, hub: &Value) -> Result<bool, DecodeError> {
        self.hooks.finalizers_pending(hub)
    }

    /// Runs the strategy's [`Strategy::on_deletion_requested`].
    pub fn on_deletion_requested(&self, hub: &mut Value) -> Result<(), DecodeError> {
        self.hooks.on_deletion_requested(hub)
    }

    /// Finalizers a first DELETE adds ([`Strategy::deletion_finalizers`]).
    pub fn deletion_finalizers(&self) -> &'static [&'static str] {
        self.facts.deletion_finalizers
    }

    /// Whether PATCH takes strategic merge patches.
    pub fn supports_strategic_merge_patch(&self) -> bool {
        self.facts.strategic_merge_patch
    }

    /// What happens to dependents when a DELETE does not say
    /// ([`Strategy::default_garbage_collection_policy`]).
    pub fn default_garbage_collection_policy(&self) -> crate::resource::GarbageCollectionPolicy {
        self.facts.gc_policy
    }
}

/// One API group: its name, versions (preferred first) and kinds.
#[derive(Clone)]
pub struct Group {
    /// The group name (`""` for core).
    pub name: &'static str,
    /// Served versions, preferred first.
    pub versions: Vec<&'static str>,
    /// Prefix of OpenAPI model names, e.g.
    /// `io.k8s.sample-apiserver.pkg.apis.wardle` (the version is appended).
    pub model_prefix: &'static str,
    /// OpenAPI `info.title` of the group's documents.
    pub title: &'static str,
    /// The kinds of the group.
    pub kinds: Vec<Arc<Kind>>,
}

impl Group {
    /// A new group with its versions, preferred first.
    pub fn new(name: &'static str, versions: &[&'static str]) -> Self {
        Group {
            name,
            versions: versions.to_vec(),
            model_prefix: "",
            title: "",
            kinds: Vec::new(),
        }
    }

    /// Sets the OpenAPI model-name prefix.
    pub fn model_prefix(mut self, prefix: &'static str) -> Self {
        self.model_prefix = prefix;
        self
    }

    /// Sets the OpenAPI document title.
    pub fn title(mut self, title: &'static str) -> Self {
        self.title = title;
        self
    }

    /// Adds a kind.
    pub fn kind(mut self, kind: Kind) -> Self {
        self.kinds.push(Arc::new(kind));
        self
    }

    /// The kinds served in `version`, with their version operations.
    pub fn kinds_in(&self, version: &str) -> Vec<(&Arc<Kind>, &VersionOps)> {
        self.kinds
            .iter()
            .filter_map(|k| k.version(version).map(|v| (k, v)))
            .collect()
    }
}

/// All compiled-in groups.
#[derive(Clone, Default)]
pub struct Scheme {
    groups: Vec<Group>,
    /// The group versions turned off (`--runtime-config`).
    disabled: Vec<(String, String)>,
}

pub use runtime_config::RuntimeConfigError;

impl Scheme {
    /// An empty scheme.
    pub fn new() -> Self {
        Scheme::default()
    }

    /// Installs a group (replacing one of the same name).
    pub fn add_group(&mut self, group: Group) {
        self.groups.retain(|g| g.name != group.name);
        self.groups.push(group);
    }

    /// The installed groups, in installation order.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The group with this name.
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// Looks up a kind by group, version and plural resource name.
    pub fn resource(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<(Arc<Kind>, &'static KindInfo)> {
        let g = self.group(group)?;
        if !g.versions.contains(&version) {
            return None;
        }
        g.kinds_in(version)
            .into_iter()
            .find(|(_, v)| v.info.plural == plural)
            .map(|(k, v)| (k.clone(), v.info))
    }

    /// Stops serving `group`/`version` (its kinds are no longer served in
    /// it; a group left without versions goes). Returns whether it was
    /// served.
    pub fn disable_version(&mut self, group: &str, version: &str) -> bool {
        let Some(g) = self.groups.iter_mut().find(|g| g.name == group) else {
            return false;
        };
        let before = g.versions.len();
        g.versions.retain(|v| *v != version);
        if g.versions.len() == before {
            return false;
        }
        if g.versions.is_empty() {
            self.groups.retain(|g| g.name != group);
        }
        self.disabled.push((group.to_string(), version.to_string()));
        true
    }

    /// Whether `group`/`version` was turned off
    /// ([`Scheme::disable_version`]).
    pub fn is_disabled(&self, group: &str, version: &str) -> bool {
        self.disabled
            .iter()
            .any(|(g, v)| g == group && v == version)
    }

    /// Groups keyed by name (sorted), for stable document output.
    pub fn groups_by_name(&self) -> BTreeMap<&'static str, &Group> {
        self.groups.iter().map(|g| (g.name, g)).collect()
    }
}

/// Reads `metadata` of a JSON object into [`ObjectMeta`].
pub fn object_meta(obj: &Value) -> ObjectMeta {
    obj.get("metadata")
        .and_then(|m| ObjectMeta::deserialize(m).ok())
        .unwrap_or_default()
}
