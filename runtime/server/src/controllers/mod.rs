//! The server's own control loops, started with the server (kube runs
//! them in kube-controller-manager; a standalone apiforge has no such
//! process, so it carries the ones its API semantics need).
//!
//! - [`bootstrap`]: the system namespaces from the first start.
//! - [`authentication_trust`]: publishes the client CA and request-header
//!   settings in `kube-system/extension-apiserver-authentication`.
//! - [`namespace`]: empties and removes deleted namespaces.
//! - [`custom_resource_definitions`]: serves CustomResourceDefinitions'
//!   kinds, names and establishes them, and empties deleted ones; their
//!   conversion webhooks are [`conversion_webhook`].
//! - [`identity_lease`]: the server's identity lease and the collection
//!   of expired ones.
//! - [`garbage_collector`]: deletes objects whose owners are gone, and
//!   carries out orphaning and foreground deletion; one replica runs it,
//!   elected through [`leader_election`].

pub mod authentication_trust;
pub mod bootstrap;
pub mod conversion_webhook;
pub mod custom_resource_definitions;
pub mod garbage_collector;
pub mod identity_lease;
pub mod leader_election;
pub mod namespace;

use crate::registry::Stores;

/// Starts every controller on the current tokio runtime; they stop when
/// `shutdown` turns true.
pub fn start(stores: &Stores, shutdown: tokio::sync::watch::Receiver<bool>) {
    namespace::start(stores, shutdown.clone());
    garbage_collector::start(stores, shutdown);
}
