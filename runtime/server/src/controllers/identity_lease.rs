//! The server's identity lease (kube-apiserver's
//! `start-kube-apiserver-identity-lease-controller` and
//! `start-kube-apiserver-identity-lease-garbage-collector`): each instance
//! holds a `coordination.k8s.io/v1` Lease `apiserver-<id>` in `kube-system`,
//! labelled `apiserver.kubernetes.io/identity: kube-apiserver`, renews it
//! every renew interval, and deletes other instances' identity leases
//! whose `renewTime + leaseDurationSeconds` has passed. Every replica renews
//! its own lease; only the replica holding the controllers' lease
//! ([`super::Leading`]) collects, each delete guarded by the expired
//! lease's resourceVersion.

use std::time::Duration;

use serde_json::{Value, json};

use crate::clock::Clock;
use crate::error::ApiResult;
use crate::registry::Stores;
use crate::registry::{LabelSelector, ListParams, Preconditions, Store};
use apiforge_core::builtin::coordination_v1::micro_time;
use apiforge_core::meta::Status;

/// The namespace of identity leases.
pub const NAMESPACE: &str = "kube-system";
/// The label marking identity leases, and its value for this server.
pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// The value of [`IDENTITY_LABEL`] for kube-apiserver instances.
pub const IDENTITY_VALUE: &str = "kube-apiserver";
/// The host name label.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Identity lease settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// `spec.leaseDurationSeconds` of the lease; also how often expired
    /// leases of other instances are collected (as kube-apiserver does).
    pub duration: Duration,
    /// How often the lease is renewed.
    pub renew_interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            duration: Duration::from_secs(3600),
            renew_interval: Duration::from_secs(10),
        }
    }
}

/// The lease name of a new server instance: `apiserver-` and a random id.
pub fn new_identity() -> String {
    format!("apiserver-{}", uuid::Uuid::new_v4().simple())
}

/// The machine's host name (empty when unknown).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Starts renewing the lease `identity` and collecting expired identity
/// leases while `leading`, until `shutdown` turns true; times are read
/// from `clock`, and a step of the clock renews and collects at once. Does
/// nothing without a Lease store.
pub fn start(
    stores: &Stores,
    identity: String,
    options: Options,
    clock: Clock,
    leading: super::Leading,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let Some(leases) = stores.find("coordination.k8s.io", "leases") else {
        return;
    };
    let controller = IdentityLease {
        leases,
        identity,
        options,
        clock,
    };
    tokio::spawn(controller.run(leading, shutdown));
}

/// What the loop does next.
enum Step {
    Renew,
    Collect,
    /// The clock was stepped: renew, then collect.
    Stepped,
    Stop,
}

/// The renewing and collecting loop.
struct IdentityLease {
    leases: Store,
    identity: String,
    options: Options,
    clock: Clock,
}

impl IdentityLease {
    async fn run(
        self,
        mut leading: super::Leading,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut renew = tokio::time::interval(self.options.renew_interval);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut collect = tokio::time::interval(self.options.duration);
        collect.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut steps = self.clock.steps();
        loop {
            let stopping = async {
                let _ = shutdown.wait_for(|stop| *stop).await;
            };
            let was_leading = leading.is_leading();
            let step = tokio::select! {
                _ = renew.tick() => Step::Renew,
                _ = collect.tick() => Step::Collect,
                () = steps.next() => Step::Stepped,
                // A new leader collects at once.
                () = leading.wait_for(!was_leading) => {
                    if was_leading {
                        continue;
                    }
                    Step::Collect
                }
                () = stopping => Step::Stop,
            };
            match step {
                Step::Renew => {
                    if let Err(e) = self.renew().await {
                        tracing::warn!(lease = %self.identity, error = %e, "identity lease: renewing failed");
                    }
                }
                Step::Collect if !leading.is_leading() => {}
                Step::Collect => self.collect_logged().await,
                Step::Stepped => {
                    if let Err(e) = self.renew().await {
                        tracing::warn!(lease = %self.identity, error = %e, "identity lease: renewing failed");
                    }
                    if leading.is_leading() {
                        self.collect_logged().await;
                    }
                }
                Step::Stop => {
                    tracing::info!(lease = %self.identity, "identity lease: stopped renewing");
                    return;
                }
            }
        }
    }

    fn duration_seconds(&self) -> i64 {
        i64::try_from(self.options.duration.as_secs())
            .unwrap_or(i64::from(i32::MAX))
            .clamp(1, i64::from(i32::MAX))
    }

    /// Sets `renewTime` (and the holder and duration) of the lease, or
    /// creates it.
    async fn renew(&self) -> ApiResult<()> {
        let now = micro_time(self.clock.now());
        let duration = self.duration_seconds();
        let updated = self
            .leases
            .update_internal(NAMESPACE, &self.identity, |lease| {
                let Some(obj) = lease.as_object_mut() else {
                    return false;
                };
                let spec = obj.entry("spec").or_insert_with(|| json!({}));
                if !spec.is_object() {
                    *spec = json!({});
                }
                spec["holderIdentity"] = json!(self.identity);
                spec["leaseDurationSeconds"] = json!(duration);
                spec["renewTime"] = json!(now);
                true
            })
            .await?;
        if updated.is_some() {
            return Ok(());
        }
        let body = json!({
            "metadata": {
                "name": self.identity,
                "namespace": NAMESPACE,
                "labels": {IDENTITY_LABEL: IDENTITY_VALUE, HOSTNAME_LABEL: hostname()},
            },
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": duration,
                "acquireTime": now,
                "renewTime": now,
            },
        });
        let hub = self
            .leases
            .kind()
            .decode("v1", body)
            .map_err(|e| Status::internal(e.to_string()))?;
        match self.leases.create(NAMESPACE, hub, false).await {
            Ok(_) => {
                tracing::info!(lease = %self.identity, "identity lease: created");
                Ok(())
            }
            Err(e) if e.code() == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn collect_logged(&self) {
        if let Err(e) = self.collect().await {
            tracing::warn!(error = %e, "identity lease: collecting expired leases failed");
        }
    }

    /// Deletes the expired identity leases of other instances.
    async fn collect(&self) -> ApiResult<()> {
        let labels = LabelSelector::parse(&format!("{IDENTITY_LABEL}={IDENTITY_VALUE}"))
            .map_err(|e| Status::internal(e.to_string()))?;
        let params = ListParams {
            labels,
            ..Default::default()
        };
        let page = self.leases.list(Some(NAMESPACE), &params).await?;
        let now = self.clock.now();
        for lease in &page.items {
            let meta = apiforge_core::scheme::object_meta(lease);
            if meta.name == self.identity || !expired(lease, now) {
                continue;
            }
            let pre = Preconditions {
                resource_version: Some(meta.resource_version.clone()),
                ..Default::default()
            };
            match self.leases.delete(NAMESPACE, &meta.name, &pre, false).await {
                Ok(_) => {
                    tracing::info!(lease = %meta.name, "identity lease: deleted expired lease");
                }
                Err(e) if e.code() == 404 || e.code() == 409 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Whether a lease's `renewTime + leaseDurationSeconds` is before `now`
/// (a lease without them counts as expired).
fn expired(lease: &Value, now: jiff::Timestamp) -> bool {
    let renew = lease
        .pointer("/spec/renewTime")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let duration = lease
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64);
    match (renew, duration) {
        (Some(renew), Some(duration)) => renew
            .checked_add(jiff::SignedDuration::from_secs(duration))
            .map_or(true, |end| end < now),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry() {
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap_or_default();
        let lease = |t: &str, d: i64| json!({"spec": {"renewTime": t, "leaseDurationSeconds": d}});
        assert!(expired(&lease("2026-01-01T00:00:00.000000Z", 30), now));
        assert!(!expired(&lease("2026-01-01T00:00:00.000000Z", 3600), now));
        assert!(expired(&json!({"spec": {}}), now));
        assert!(new_identity().starts_with("apiserver-"));
    }
}
