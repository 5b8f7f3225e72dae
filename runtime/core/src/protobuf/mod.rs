//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), byte for
//! byte as kube-apiserver writes it
//! (`[apimachinery] pkg/runtime/serializer/protobuf/protobuf.go`).
//!
//! A body is the 4 magic bytes `k8s\0` followed by a `runtime.Unknown`
//! message: `typeMeta` (1: `apiVersion` = 1, `kind` = 2), `raw` (2: the
//! kind's own message, e.g. `k8s.io.api.core.v1.ConfigMap`),
//! `contentEncoding` (3) and `contentType` (4), both empty. The messages are
//! the `k8s-pb` crate's prost types; [`ProtobufKind`] maps a kind's Rust
//! type to and from them, and [`ops`] erases it into the
//! [`crate::scheme::ProtobufOps`] a served version carries.
//!
//! Go's generated marshallers write every non-pointer field, even when it
//! is empty (`name`, `namespace`, `creationTimestamp`, ...); the mappings
//! here set those fields to `Some(..)` so that prost writes them too, in
//! the same (field-number) order. One difference remains: a map entry with
//! an empty value is written by Go as `key` + empty `value` and by prost as
//! `key` alone; both decode to the same map.

pub mod gnostic;
pub(crate) mod meta;

use prost::Message;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::meta::{ListMeta, Status};
use crate::resource::Resource;
use crate::scheme::{DecodeError, ProtobufOps};
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};

pub use meta::{list_meta_to_pb, object_meta_from_pb, object_meta_to_pb, status_to_pb};

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every protobuf body.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// Why a protobuf body or message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The body lacks the `k8s\0` prefix.
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    NotProtobuf,
    /// The bytes are not a valid message.
    #[error("{0}")]
    Message(#[from] prost::DecodeError),
    /// The envelope names a content encoding the server does not read.
    #[error("unsupported content encoding {0:?}")]
    ContentEncoding(String),
    /// A time field is out of range.
    #[error("invalid time: {0}")]
    Time(#[source] jiff::Error),
    /// A managed-fields entry's `fieldsV1` is not JSON.
    #[error("invalid fieldsV1: {0}")]
    FieldsV1(#[source] serde_json::Error),
    /// The message does not fit the kind.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// A kind whose Rust type maps onto an upstream protobuf message.
pub trait ProtobufKind: Resource {
    /// The upstream message, e.g. `k8s_pb::api::core::v1::ConfigMap`.
    type Message: Message + Default;
    /// The upstream list message, e.g. `k8s_pb::api::core::v1::ConfigMapList`.
    type List: Message + Default;

    /// This object as its message.
    fn to_message(&self) -> Self::Message;

    /// The object a message carries.
    fn from_message(message: Self::Message) -> Result<Self, Error>;

    /// A list message from its metadata and items.
    fn list_message(
        metadata: k8s_pb::apimachinery::pkg::apis::meta::v1::ListMeta,
        items: Vec<Self::Message>,
    ) -> Self::List;
}

/// The erased codec of `K` for [`crate::scheme::KindBuilder::protobuf`].
pub fn ops<K: ProtobufKind>() -> ProtobufOps {
    ProtobufOps {
        decode: decode_object::<K>,
        encode: encode_object::<K>,
        encode_list: encode_list::<K>,
    }
}

fn invalid(e: impl std::fmt::Display) -> DecodeError {
    DecodeError::Invalid(e.to_string())
}

fn decode_object<K: ProtobufKind>(raw: &[u8]) -> Result<Value, DecodeError> {
    let message = K::Message::decode(raw).map_err(invalid)?;
    let object = K::from_message(message).map_err(invalid)?;
    serde_json::to_value(&object).map_err(invalid)
}

fn encode_object<K: ProtobufKind>(object: &Value) -> Result<Vec<u8>, DecodeError> {
    let object = K::deserialize(object).map_err(invalid)?;
    Ok(object.to_message().encode_to_vec())
}

fn encode_list<K: ProtobufKind>(list: &Value) -> Result<Vec<u8>, DecodeError> {
    let metadata: ListMeta = list
        .get("metadata")
        .map(ListMeta::deserialize)
        .transpose()
        .map_err(invalid)?
        .unwrap_or_default();
    let items = list
        .get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|item| {
            serde_json::from_value::<K>(item.clone())
                .map(|o| o.to_message())
                .map_err(invalid)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(K::list_message(list_meta_to_pb(&metadata), items).encode_to_vec())
}

/// Wraps a raw message into the `k8s\0` + `runtime.Unknown` envelope.
pub fn wrap(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

/// An unwrapped body: the envelope's type meta and the raw message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Envelope {
    /// `typeMeta.apiVersion` (may be empty).
    pub api_version: String,
    /// `typeMeta.kind` (may be empty).
    pub kind: String,
    /// The raw message.
    pub raw: Vec<u8>,
}

/// Reads the `k8s\0` + `runtime.Unknown` envelope.
pub fn unwrap(body: &[u8]) -> Result<Envelope, Error> {
    let rest = body.strip_prefix(&MAGIC).ok_or(Error::NotProtobuf)?;
    let unknown = Unknown::decode(rest)?;
    if unknown
        .content_encoding
        .as_deref()
        .is_some_and(|e| !e.is_empty())
    {
        return Err(Error::ContentEncoding(
            unknown.content_encoding.unwrap_or_default(),
        ));
    }
    let type_meta = unknown.type_meta.unwrap_or_default();
    Ok(Envelope {
        api_version: type_meta.api_version.unwrap_or_default(),
        kind: type_meta.kind.unwrap_or_default(),
        raw: unknown.raw.unwrap_or_default(),
    })
}

/// Decodes a protobuf request body into the versioned JSON object, with
/// `apiVersion` and `kind` from the envelope (when set) so that the usual
/// type checks apply.
pub fn decode_body(ops: &ProtobufOps, body: &[u8]) -> Result<Value, Error> {
    let envelope = unwrap(body)?;
    let object = (ops.decode)(&envelope.raw)?;
    let mut out = Map::new();
    if !envelope.api_version.is_empty() {
        out.insert("apiVersion".into(), Value::String(envelope.api_version));
    }
    if !envelope.kind.is_empty() {
        out.insert("kind".into(), Value::String(envelope.kind));
    }
    if let Value::Object(map) = object {
        out.extend(map);
    }
    Ok(Value::Object(out))
}

/// Encodes a versioned JSON object (with `apiVersion` and `kind`) as a
/// protobuf body.
pub fn encode_body(ops: &ProtobufOps, object: &Value) -> Result<Vec<u8>, DecodeError> {
    let raw = (ops.encode)(object)?;
    Ok(wrap(
        type_str(object, "apiVersion"),
        type_str(object, "kind"),
        raw,
    ))
}

/// Encodes a versioned JSON list (with `apiVersion`, `kind`, `metadata`,
/// `items`) as a protobuf body.
pub fn encode_list_body(ops: &ProtobufOps, list: &Value) -> Result<Vec<u8>, DecodeError> {
    let raw = (ops.encode_list)(list)?;
    Ok(wrap(
        type_str(list, "apiVersion"),
        type_str(list, "kind"),
        raw,
    ))
}

/// A `metav1.Status` as a protobuf body (`v1`, `Status`).
pub fn status_body(status: &Status) -> Vec<u8> {
    wrap("v1", "Status", status_to_pb(status).encode_to_vec())
}

fn type_str<'a>(object: &'a Value, key: &str) -> &'a str {
    object.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// True when a media type (parameters ignored) is protobuf.
pub fn is_protobuf(media_type: &str) -> bool {
    media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .eq_ignore_ascii_case(MEDIA_TYPE)
}

#[cfg(test)]
mod tests;
