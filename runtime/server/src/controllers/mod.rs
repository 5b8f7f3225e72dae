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
//!   carries out orphaning and foreground deletion.
//! - [`admission_policy_status`]: type-checks ValidatingAdmissionPolicies
//!   and writes their `status.typeChecking`.
//!
//! The singleton controllers run on one replica at a time, as
//! kube-controller-manager's: the holder of the `coordination.k8s.io/v1`
//! Lease [`LEASE_NAMESPACE`]/[`LEASE_NAME`] ([`leader_election`], one lease
//! for all of them, as kube-controller-manager's
//! `kube-system/kube-controller-manager`) runs the namespace controller,
//! the garbage collector and the admission policy status controller, and is the one replica that finalizes deleted
//! CustomResourceDefinitions, writes APIServices' availability and
//! collects expired identity leases ([`Leading`]). What every replica must
//! do stays on every replica: serving custom resources, renewing its own
//! identity lease, and the bootstrap of defaults (create-if-absent, as
//! every kube-apiserver does it).

pub mod admission_policy_status;
pub mod authentication_trust;
pub mod bootstrap;
pub mod conversion_webhook;
pub mod custom_resource_definitions;
pub mod garbage_collector;
pub mod identity_lease;
pub mod leader_election;
pub mod namespace;

use std::sync::Arc;

use crate::registry::Stores;
pub use leader_election::Leading;

/// The namespace of the controllers' leader-election Lease.
pub const LEASE_NAMESPACE: &str = "kube-system";
/// The name of the controllers' leader-election Lease.
pub const LEASE_NAME: &str = "apiforge-controller-manager";

/// How the singleton controllers are elected (kube-controller-manager's
/// `--leader-elect*` flags).
#[derive(Clone, Debug)]
pub struct Options {
    /// Whether the singleton controllers run only on the holder of the
    /// controllers' Lease (`--leader-elect`); off, every replica runs them.
    pub leader_elect: bool,
    /// The election's timings (`--leader-elect-lease-duration`,
    /// `--leader-elect-renew-deadline`, `--leader-elect-retry-period`).
    pub leader_election: leader_election::Options,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            leader_elect: true,
            leader_election: leader_election::Options::default(),
        }
    }
}

/// Starts the singleton controllers on the current tokio runtime: under
/// leader election on the Lease [`LEASE_NAMESPACE`]/[`LEASE_NAME`] (when
/// `options.leader_elect` and the server serves Leases; lease times read
/// from `clock`), else at once.
/// `leading` follows whether this replica runs them. They stop when
/// `shutdown` turns true (the lease is then released).
pub fn start(
    stores: &Stores,
    options: &Options,
    clock: crate::clock::Clock,
    leading: tokio::sync::watch::Sender<bool>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let leases = stores.find("coordination.k8s.io", "leases");
    let stores = stores.clone();
    let Some(leases) = leases.filter(|_| options.leader_elect) else {
        leading.send_replace(true);
        tokio::spawn(run_singletons(stores, shutdown));
        return;
    };
    let elector = leader_election::LeaderElector::new(
        leases,
        LEASE_NAMESPACE,
        LEASE_NAME,
        leader_election::new_identity(),
        options.leader_election.clone(),
    )
    .with_clock(clock);
    let leading = Arc::new(leading);
    tokio::spawn(elector.run(shutdown, move |mut stop| {
        let stores = stores.clone();
        let leading = leading.clone();
        async move {
            leading.send_replace(true);
            let running = tokio::spawn(run_singletons(stores, stop.clone()));
            let _ = stop.wait_for(|stop| *stop).await;
            leading.send_replace(false);
            let _ = running.await;
        }
    }));
}

/// Runs the namespace controller, the garbage collector and the
/// admission policy status controller until `stop` turns true.
async fn run_singletons(stores: Stores, stop: tokio::sync::watch::Receiver<bool>) {
    tokio::join!(
        namespace::run(stores.clone(), stop.clone()),
        admission_policy_status::run(stores.clone(), stop.clone()),
        garbage_collector::run(stores, stop),
    );
}
