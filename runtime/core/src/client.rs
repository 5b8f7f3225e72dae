//! kube-rs client types for kinds declared with `#[derive(Resource)]`
//! (feature `kube`).
//!
//! One Rust type defines a kind served by apiforge and is the kube-rs
//! client type of that kind: `kube::Api<KubeObject<Book>>` reads and writes
//! `Book`s, and `kube::runtime::watcher` / reflectors see them.
//!
//! # Why a wrapper and not `impl kube::Resource for Book`
//!
//! kube-core's `Resource::meta()` must return a reference to
//! `k8s_openapi`'s `ObjectMeta`, while the server side of a kind
//! ([`crate::Resource::metadata`]) hands out a reference to apiforge's own
//! [`ObjectMeta`] (plain `String`s and maps where k8s-openapi has
//! `Option`s). One struct field cannot be both types, and a converted copy
//! cannot be returned by reference (nor kept in sync through `meta_mut()`).
//! So the derive leaves the struct alone and [`KubeObject<T>`] carries the
//! k8s-openapi metadata next to the kind's value: on the wire it is exactly
//! the kind's JSON (`apiVersion`, `kind`, `metadata` and the kind's other
//! fields), `kube::Resource` is implemented once, generically, from
//! [`crate::Resource::INFO`], and [`Deref`] gives the kind's fields
//! (`obj.spec.title`). `obj.metadata` is the k8s-openapi metadata (the
//! wrapper's own field shadows the kind's); the kind's own `metadata` field
//! inside is left empty and ignored on serialization.
//!
//! The only per-kind piece is the scope type (`Namespaced` or `Cluster`),
//! which the derive emits through [`KubeScope`] when this feature is on.
//!
//! k8s-openapi needs exactly one Kubernetes version feature, chosen by the
//! final binary or test crate (e.g. `k8s-openapi/latest`), never by this
//! library.

use std::ops::{Deref, DerefMut};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as KubeMeta;
use serde::de::{DeserializeOwned, Error as _};
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

pub use kube_core::{ClusterResourceScope, NamespaceResourceScope};

use crate::meta::ObjectMeta;
use crate::resource::Resource;

/// The kube-rs scope type of a kind: implemented by `#[derive(Resource)]`
/// when the `kube` feature is on.
pub trait KubeScope {
    /// [`NamespaceResourceScope`] or [`ClusterResourceScope`].
    type Scope;
}

/// Emits [`KubeScope`] for a derived kind (feature `kube`). Not a public
/// API: the derive calls it through the codegen contract.
#[doc(hidden)]
#[macro_export]
macro_rules! __kube_scope {
    ($ty:ident, namespaced) => {
        #[automatically_derived]
        impl $crate::client::KubeScope for $ty {
            type Scope = $crate::client::NamespaceResourceScope;
        }
    };
    ($ty:ident, cluster) => {
        #[automatically_derived]
        impl $crate::client::KubeScope for $ty {
            type Scope = $crate::client::ClusterResourceScope;
        }
    };
}

/// A kind's value as a kube-rs resource: `kube::Api<KubeObject<Book>>`
/// (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KubeObject<T> {
    /// The object's metadata, as k8s-openapi (and kube-rs) types.
    pub metadata: KubeMeta,
    /// The kind's value; its own `metadata` field is unused (empty after
    /// decoding, ignored when encoding).
    pub data: T,
}

impl<T: Resource> KubeObject<T> {
    /// A new object named `name` (namespace unset) holding `data`.
    pub fn new(name: &str, data: T) -> Self {
        KubeObject {
            metadata: KubeMeta {
                name: Some(name.to_owned()),
                ..KubeMeta::default()
            },
            data,
        }
    }

    /// Sets the namespace (builder style).
    pub fn within(mut self, namespace: &str) -> Self {
        self.metadata.namespace = Some(namespace.to_owned());
        self
    }

    /// The kind's value with its metadata converted to apiforge's type:
    /// the server-side form of the object.
    pub fn into_inner(self) -> T {
        let mut data = self.data;
        *data.metadata_mut() = to_apiforge_meta(&self.metadata);
        data
    }
}

impl<T: Resource> From<T> for KubeObject<T> {
    /// Wraps a server-side value, converting its metadata.
    fn from(mut data: T) -> Self {
        let metadata = to_kube_meta(data.metadata());
        *data.metadata_mut() = ObjectMeta::default();
        KubeObject { metadata, data }
    }
}

impl<T> Deref for KubeObject<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T> DerefMut for KubeObject<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.data
    }
}

/// Converts apiforge's metadata into k8s-openapi's (through their common
/// JSON form; both are `meta.k8s.io/v1` `ObjectMeta`).
pub fn to_kube_meta(meta: &ObjectMeta) -> KubeMeta {
    serde_json::to_value(meta)
        .and_then(serde_json::from_value)
        .unwrap_or_default()
}

/// Converts k8s-openapi's metadata into apiforge's.
pub fn to_apiforge_meta(meta: &KubeMeta) -> ObjectMeta {
    serde_json::to_value(meta)
        .and_then(serde_json::from_value)
        .unwrap_or_default()
}

impl<T: Resource> Serialize for KubeObject<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = serde_json::to_value(&self.data).map_err(S::Error::custom)?;
        let Value::Object(fields) = value else {
            return Err(S::Error::custom("a kind must serialize as a JSON object"));
        };
        let mut out = serde_json::Map::with_capacity(fields.len() + 3);
        out.insert("apiVersion".into(), T::INFO.api_version().into());
        out.insert("kind".into(), T::INFO.kind.into());
        out.insert(
            "metadata".into(),
            serde_json::to_value(&self.metadata).map_err(S::Error::custom)?,
        );
        for (k, v) in fields {
            if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                out.insert(k, v);
            }
        }
        out.serialize(serializer)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for KubeObject<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut value = Value::deserialize(deserializer)?;
        let metadata = match value.as_object_mut().and_then(|o| o.remove("metadata")) {
            Some(m) => serde_json::from_value(m).map_err(D::Error::custom)?,
            None => KubeMeta::default(),
        };
        let data = serde_json::from_value(value).map_err(D::Error::custom)?;
        Ok(KubeObject { metadata, data })
    }
}

impl<T: Resource + KubeScope> kube_core::Resource for KubeObject<T> {
    type DynamicType = ();
    type Scope = T::Scope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        T::INFO.kind.into()
    }

    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        T::INFO.group.into()
    }

    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        T::INFO.version.into()
    }

    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        T::INFO.plural.into()
    }

    fn meta(&self) -> &KubeMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut KubeMeta {
        &mut self.metadata
    }
}
