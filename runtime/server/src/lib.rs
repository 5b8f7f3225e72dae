//! # apiforge-server
//!
//! Everything that serves the kinds of an `apiforge_core::scheme::Scheme`
//! over HTTPS, built on `apiforge-core` (types) and `apiforge-storage`
//! (the store). A tour, from the leaves up (modules import only the
//! ones listed before them; `python3 ../shared/tools/modcycles.py .` finds
//! no cycle):
//!
//! - [`error`]: the API error every request can end with; [`go_errors`]:
//!   Go-compatible error messages; [`metrics`]: the Prometheus metrics
//!   served at `/metrics`; [`webhook`]: clients of kubeconfig-named
//!   webhooks (token authentication, authorization, the audit backend);
//!   [`clock`]: the wall clock of the lease controllers (a test server's
//!   can be frozen and stepped).
//! - [`request`]: the leaf of request-scoped state (request info, user,
//!   peer address, audit ID, arrival time, deadline, limit exemption,
//!   warnings, query) and the response writers.
//! - [`patch`]: JSON, merge and strategic merge patches, the strict
//!   field checks of `fieldValidation`, and server-side apply's
//!   structured merge and field ownership (`managedFields`).
//! - [`admission`]: the admission chain (mutating then validating plugins)
//!   and the built-in `NamespaceLifecycle` plugin.
//! - [`app`]: the command line as a library — `app::Server` gives a
//!   program the `apiforge` binary's `serve` (every flag), `openapi`,
//!   `crd` and `snapshot`.
//! - [`registry`]: the generic REST store (server-set metadata, optimistic
//!   concurrency, watch translation), the watch cache, the one map of
//!   stores ([`registry::Stores`]) and the informer loop.
//! - [`authn`]: who makes a request — client certificates, tokens,
//!   anonymous; [`authz`]: what they may do —
//!   AlwaysAllow, AlwaysDeny, ABAC, Webhook, RBAC — and the request guard.
//! - [`audit`]: audit policy, events and backends.
//! - [`flowcontrol`]: API Priority and Fairness.
//! - [`controllers`]: the server's own control loops (namespace deletion,
//!   identity lease).
//! - [`handlers`]: the resource handlers, one file per verb, and request
//!   body decoding, content negotiation, tables and protobuf responses.
//! - [`filters`]: every filter of the request chain (audit ID, request
//!   info, metrics, panic recovery, in-flight tracking, timeouts, warnings,
//!   CORS, HSTS, authentication, audit, impersonation, priority and
//!   fairness or max-in-flight, authorization), composed in one place
//!   around a [`filters::Handler`].
//! - [`endpoints`]: the route table (resource requests to their
//!   [`handlers::Rest`] handler, the server's own paths to theirs) and the
//!   delegation chain, discovery, OpenAPI, version, metrics and health.
//! - [`server`]: options, TLS, the listener, the admin kubeconfig, health
//!   checks, post-start/pre-shutdown hooks and graceful shutdown.

// The unit tests declare kinds with the derive macros, whose output names
// the runtime crate.
#[cfg(test)]
extern crate apiforge_core as apiforge_runtime;

pub mod admission;
pub mod aggregator;
pub mod app;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod clock;
pub mod controllers;
pub mod endpoints;
pub mod error;
pub mod filters;
pub mod flowcontrol;
pub mod go_errors;
pub mod handlers;
pub mod metrics;
pub mod patch;
pub mod registry;
pub mod request;
pub mod server;

pub mod webhook;
