//! # apiforge-core
//!
//! The type-level half of apiforge: what a group author and a build script
//! need, and nothing that serves. No HTTP, TLS or storage here; the
//! `apiforge-server` crate builds on it. A tour:
//!
//! - [`meta`]: `meta.k8s.io/v1` types (ObjectMeta, ListMeta, Status).
//! - [`validation`]: Kubernetes field errors and paths, the
//!   [`validation::Validate`] trait the derives implement, the shared
//!   validators and the declarative rules ([`validation::rules`]).
//! - [`schema`]: publication of the declarative rules into OpenAPI schemas.
//! - [`resource`]: the [`resource::Resource`] trait the derive macro
//!   implements, its static [`resource::KindInfo`], and the overridable
//!   [`resource::Strategy`] hooks.
//! - [`cel`]: CEL rules (`x-kubernetes-validations`) evaluated on objects.
//! - [`scheme`]: the registry of kinds and versions, and the type-erased
//!   operations every layer above storage uses.
//! - [`scale`]: `autoscaling/v1` `Scale`, the body of every `/scale`
//!   subresource, and its mapping onto an object.
//! - [`builtin`]: the runtime's own groups (core `v1` Namespace, ConfigMap,
//!   Secret; RBAC, coordination, flow control), declared with the same
//!   macros as user groups.
//! - [`openapi`], [`discovery`]: documents generated from the scheme (at
//!   build time, by the binary's `build.rs`); [`bundle`] puts them together.
//! - `protobuf` (feature `protobuf`): Kubernetes protobuf for the built-in
//!   kinds, `Status` and the OpenAPI v2 document.
//!
//! Modules import downward only, in the order of this list.

extern crate self as apiforge_runtime;

pub mod builtin;
pub mod bundle;
pub mod cel;
pub mod discovery;
pub mod meta;
pub mod openapi;
#[cfg(feature = "protobuf")]
pub mod protobuf;
pub mod resource;
pub mod scale;
pub mod schema;
pub mod scheme;
pub mod validation;

pub use apiforge_macros::{Convert, Resource, Validate};

/// Re-exports for generated code. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
