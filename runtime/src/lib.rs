//! # apiforge-runtime
//!
//! The generic Kubernetes-style API server that resource groups declared with
//! `apiforge-macros` plug into. This crate is the one users depend on: it
//! re-exports three layered crates, each importing only the ones before it.
//!
//! 1. **`apiforge-core`** (always): the type-level half.
//!    - [`meta`]: `meta.k8s.io/v1` types (ObjectMeta, ListMeta, Status).
//!    - [`resource`]: the [`resource::Resource`] trait the derive macro
//!      implements, its static [`resource::KindInfo`], and the overridable
//!      [`resource::Strategy`] hooks.
//!    - [`validation`]: Kubernetes field errors and paths, the
//!      [`validation::Validate`] trait the derives implement, the shared
//!      validators and the declarative rules ([`validation::rules`]).
//!    - [`cel`]: CEL rules (`x-kubernetes-validations`) evaluated on objects.
//!    - [`schema`]: publication of the declarative rules into OpenAPI schemas.
//!    - [`scheme`]: the registry of kinds and versions, and the type-erased
//!      operations every layer above storage uses.
//!    - [`scale`]: `autoscaling/v1` `Scale` and its mapping onto an object.
//!    - [`builtin`]: the runtime's own groups (core `v1` Namespace,
//!      ConfigMap, Secret; RBAC, coordination, flow control), declared with
//!      the same macros as user groups.
//!    - [`openapi`], [`discovery`]: documents generated from the scheme (at
//!      build time, by the binary's `build.rs`); [`bundle`] puts them
//!      together.
//! 2. **`apiforge-storage`** (feature `server`): [`storage`], the
//!    etcd-shaped [`storage::Storage`] trait and its backends (embedded,
//!    etcd3).
//! 3. **`apiforge-server`** (feature `server`): everything that serves.
//!    - [`admission`]: the admission chain (mutating then validating
//!      plugins) and the built-in `NamespaceLifecycle` plugin.
//!    - [`authn`]: who makes a request — client certificates, tokens,
//!      anonymous — and impersonation; [`authz`]: what they may do —
//!      AlwaysAllow, AlwaysDeny, ABAC, Webhook, RBAC — and the request guard.
//!    - [`audit`]: audit policy, events and backends; [`flowcontrol`]: API
//!      Priority and Fairness.
//!    - [`controllers`]: the server's own control loops (namespace deletion).
//!    - [`patch`]: JSON, merge and strategic merge patches, and the strict
//!      field checks of `fieldValidation`.
//!    - [`registry`]: the generic REST store (server-set metadata, optimistic
//!      concurrency, watch translation).
//!    - [`filters`]: the request filter chain (audit ID, request info,
//!      metrics, panic recovery, in-flight tracking, timeouts, warnings,
//!      CORS, HSTS, authentication, max-in-flight) around the director.
//!    - [`metrics`]: the Prometheus metrics served at `/metrics`.
//!    - [`endpoints`]: request parsing, the resource handlers, discovery,
//!      OpenAPI, health; [`protobuf`]: Kubernetes protobuf for the built-in
//!      kinds and Status.
//!    - [`server`]: options, TLS, the listener, the admin kubeconfig, health
//!      checks, post-start/pre-shutdown hooks and graceful shutdown.
//!    - [`request`]: the request-scoped state every layer reads (request
//!      info, user, audit ID, deadline, ...) and the response writers;
//!      [`warning`]: `Warning: 299` response headers recorded during a
//!      request.
//!    - [`webhook`]: clients of kubeconfig-named webhooks (token
//!      authentication, authorization, the audit backend).
//!
//! Without `server` only `apiforge-core` is built; that is what build
//! scripts link.

pub use apiforge_core::{Convert, Resource, Validate};
pub use apiforge_core::{
    builtin, bundle, cel, discovery, meta, openapi, resource, scale, schema, scheme, validation,
};

#[cfg(feature = "server")]
pub use apiforge_core::protobuf;
#[cfg(feature = "server")]
pub use apiforge_server::request::warning;
#[cfg(feature = "server")]
pub use apiforge_server::{
    admission, audit, authn, authz, controllers, endpoints, error, filters, flowcontrol, go_errors,
    metrics, patch, registry, request, server, webhook,
};
#[cfg(feature = "server")]
pub use apiforge_storage as storage;

#[doc(hidden)]
pub use apiforge_core::__private;
