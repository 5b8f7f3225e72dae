//! The server's own control loops, started with the server (kube runs
//! them in kube-controller-manager; a standalone apiforge has no such
//! process, so it carries the ones its API semantics need).
//!
//! - [`namespace`]: empties and removes deleted namespaces.
//! - [`identity_lease`]: the server's identity lease and the collection
//!   of expired ones.
//! - [`informer`]: the watch-and-rebuild loop of the RBAC and flow-control
//!   views.

pub mod identity_lease;
pub mod informer;
pub mod namespace;

use crate::endpoints::ApiServer;

/// Starts every controller on the current tokio runtime; they stop when
/// `shutdown` turns true.
pub fn start(server: &ApiServer, shutdown: tokio::sync::watch::Receiver<bool>) {
    namespace::start(server, shutdown);
}
