//! # apiforge-runtime
//!
//! The generic Kubernetes-style API server that resource groups declared with
//! `apiforge-macros` plug into. A tour:
//!
//! - [`meta`]: `meta.k8s.io/v1` types (ObjectMeta, ListMeta, Status).
//! - [`resource`]: the [`resource::Resource`] trait the derive macro
//!   implements, its static [`resource::KindInfo`], and the overridable
//!   [`resource::Strategy`] hooks.
//! - [`validation`]: Kubernetes field errors and paths, the
//!   [`validation::Validate`] trait the derives implement, the shared
//!   validators and the declarative rules ([`validation::rules`]).
//! - [`cel`]: CEL rules (`x-kubernetes-validations`) evaluated on objects.
//! - [`schema`]: publication of the declarative rules into OpenAPI schemas.
//! - [`scheme`]: the registry of kinds and versions, and the type-erased
//!   operations every layer above storage uses.
//! - [`builtin`]: the runtime's own groups (core `v1` Namespace, ConfigMap,
//!   Secret), declared
//!   with the same macros as user groups.
//! - [`openapi`], [`discovery`]: documents generated from the scheme (at
//!   build time, by the binary's `build.rs`); [`bundle`] puts them together.
//!
//! With the `server` feature (default):
//! - [`admission`]: the admission chain (mutating then validating plugins)
//!   and the built-in `NamespaceLifecycle` plugin.
//! - [`authn`]: who makes a request — client certificates, tokens,
//!   anonymous — and impersonation; [`authz`]: what they may do —
//!   AlwaysAllow, AlwaysDeny, ABAC, Webhook, RBAC — and the request guard.
//! - [`controllers`]: the server's own control loops (namespace deletion).
//! - [`storage`]: the etcd-shaped [`storage::Storage`] trait and its backends.
//! - [`patch`]: JSON, merge and strategic merge patches, and the strict
//!   field checks of `fieldValidation`.
//! - [`registry`]: the generic REST store (server-set metadata, optimistic
//!   concurrency, watch translation).
//! - [`filters`]: the request filter chain (audit ID, request info,
//!   metrics, panic recovery, in-flight tracking, timeouts, warnings, CORS,
//!   HSTS, authentication, max-in-flight) around the director.
//! - [`metrics`]: the Prometheus metrics served at `/metrics`.
//! - [`endpoints`]: request parsing, the resource handlers, discovery,
//!   OpenAPI, health.
//! - [`protobuf`]: Kubernetes protobuf for the built-in kinds and Status.
//! - [`server`]: options, TLS, the listener, the admin kubeconfig, health
//!   checks, post-start/pre-shutdown hooks and graceful shutdown.
//! - [`warning`]: `Warning: 299` response headers recorded during a request.
//! - [`webhook`]: clients of kubeconfig-named webhooks (token
//!   authentication, authorization, the audit backend).
//!
//! Without `server` only the type-level half is built; that is what build
//! scripts link.

extern crate self as apiforge_runtime;

pub mod builtin;
pub mod bundle;
pub mod cel;
pub mod discovery;
#[cfg(feature = "server")]
pub mod error;
pub mod meta;
pub mod openapi;
pub mod resource;
pub mod schema;
pub mod scheme;
pub mod validation;

#[cfg(feature = "server")]
pub mod admission;
#[cfg(feature = "server")]
pub mod audit;
#[cfg(feature = "server")]
pub mod authn;
#[cfg(feature = "server")]
pub mod authz;
#[cfg(feature = "server")]
pub mod controllers;
#[cfg(feature = "server")]
pub mod endpoints;
#[cfg(feature = "server")]
pub mod filters;
#[cfg(feature = "server")]
pub mod flowcontrol;
#[cfg(feature = "server")]
pub mod go_errors;
#[cfg(feature = "server")]
pub mod metrics;
#[cfg(feature = "server")]
pub mod patch;
#[cfg(feature = "server")]
pub mod protobuf;
#[cfg(feature = "server")]
pub mod registry;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
pub mod storage;
#[cfg(feature = "server")]
pub mod warning;
#[cfg(feature = "server")]
pub mod webhook;

pub use apiforge_macros::{Convert, Resource, Validate};

/// Re-exports for generated code. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
