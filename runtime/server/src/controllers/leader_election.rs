//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's
//! `leaderelection` package does it with a `LeaseLock`: a candidate takes
//! the lease when nobody holds it or when the holder has not renewed it
//! for `leaseDurationSeconds` (measured on the candidate's clock from when
//! it last saw the lease change, so clock skew between replicas does not
//! matter); the leader renews it every retry period and steps down when it
//! could not renew for the renew deadline. Every write is a
//! compare-and-swap on the lease's revision, so two candidates cannot both
//! win.

use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};

use crate::clock::Clock;
use crate::error::ApiResult;
use crate::registry::Store;
use apiforge_core::builtin::coordination_v1::micro_time;
use apiforge_core::meta::Status;

/// Leader election timings (client-go's `LeaderElectionConfig`; the
/// defaults are kube-controller-manager's).
#[derive(Clone, Debug)]
pub struct Options {
    /// How long a lease holds without renewal (`leaseDurationSeconds`).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire, and the leader renews.
    pub retry_period: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Whether this replica holds the controllers' lease now: what the
/// controllers that run on every replica but write only on the leader
/// (custom resource definition finalization, APIService availability,
/// identity lease collection) look at.
#[derive(Clone, Debug)]
pub struct Leading(tokio::sync::watch::Receiver<bool>);

impl Leading {
    /// A new state, not leading, and the sender that changes it.
    pub fn channel() -> (tokio::sync::watch::Sender<bool>, Leading) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (tx, Leading(rx))
    }

    /// Always leading (one replica, `--leader-elect=false`).
    pub fn always() -> Leading {
        let (_, rx) = tokio::sync::watch::channel(true);
        Leading(rx)
    }

    /// Whether this replica leads now.
    pub fn is_leading(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until this replica leads (`true`) or does not (`false`); never
    /// returns when that can no longer happen.
    pub async fn wait_for(&mut self, leading: bool) {
        if self.0.wait_for(|now| *now == leading).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The identity of a candidate in this process, as kube-controller-manager
/// makes it: the host name, `_`, and a random uuid.
pub fn new_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// One candidate for the lease `namespace/name` in `leases`.
pub struct LeaderElector {
    leases: Store,
    namespace: String,
    name: String,
    identity: String,
    options: Options,
    /// The local clock: when the lease was last seen to change, and the
    /// times written to it.
    clock: Clock,
    /// The lease's `spec` when last seen, and when (local clock).
    observed: Option<(Value, std::time::Instant)>,
}

impl LeaderElector {
    /// A candidate `identity` for the lease `namespace/name`.
    pub fn new(
        leases: Store,
        namespace: &str,
        name: &str,
        identity: String,
        options: Options,
    ) -> Self {
        LeaderElector {
            leases,
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity,
            options,
            clock: Clock::system(),
            observed: None,
        }
    }

    /// Reads times from `clock` (the system clock by default); a step of
    /// it makes the candidate try again at once.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    fn duration_seconds(&self) -> i64 {
        i64::try_from(self.options.lease_duration.as_secs())
            .unwrap_or(i64::from(i32::MAX))
            .clamp(1, i64::from(i32::MAX))
    }

    /// Runs until `shutdown` turns true: acquires the lease, runs `lead`
    /// while holding it (its receiver turns true when leadership is lost
    /// or the server shuts down), and competes again after losing it. The
    /// lease is released on shutdown.
    pub async fn run<F, Fut>(mut self, mut shutdown: tokio::sync::watch::Receiver<bool>, lead: F)
    where
        F: Fn(tokio::sync::watch::Receiver<bool>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut steps = self.clock.steps();
        loop {
            // Acquire.
            loop {
                match self.try_acquire_or_renew().await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::debug!(lease = %self.name, error = %e, "leader election: cannot acquire");
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(self.options.retry_period) => {}
                    () = steps.next() => {}
                    _ = shutdown.wait_for(|stop| *stop) => return,
                }
            }
            tracing::info!(lease = %format!("{}/{}", self.namespace, self.name), identity = %self.identity, "leader election: acquired the lease");
            let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
            let leading = tokio::spawn(lead(stop_rx));
            // Renew.
            let mut renewed = self.clock.instant();
            let stopping = loop {
                tokio::select! {
                    () = tokio::time::sleep(self.options.retry_period) => {}
                    () = steps.next() => {}
                    _ = shutdown.wait_for(|stop| *stop) => break true,
                }
                match self.try_acquire_or_renew().await {
                    Ok(true) => renewed = self.clock.instant(),
                    Ok(false) => break false,
                    Err(e) => {
                        tracing::warn!(lease = %self.name, error = %e, "leader election: renewing failed");
                        if self.clock.instant().saturating_duration_since(renewed)
                            > self.options.renew_deadline
                        {
                            break false;
                        }
                    }
                }
            };
            let _ = stop_tx.send(true);
            let _ = leading.await;
            if stopping {
                if let Err(e) = self.release().await {
                    tracing::warn!(lease = %self.name, error = %e, "leader election: releasing failed");
                }
                return;
            }
            tracing::warn!(lease = %self.name, identity = %self.identity, "leader election: lost the lease");
        }
    }

    /// One attempt (client-go's `tryAcquireOrRenew`): creates the lease,
    /// renews it when held, or takes it over when it expired. Returns
    /// whether this candidate holds it now.
    pub async fn try_acquire_or_renew(&mut self) -> ApiResult<bool> {
        let now = self.clock.instant();
        let stamp = micro_time(self.clock.now());
        let duration = self.duration_seconds();
        let identity = self.identity.clone();
        let lease_duration = self.options.lease_duration;
        let mut observed = self.observed.take();
        let mut acquired = false;
        let updated = self
            .leases
            .update_internal(&self.namespace, &self.name, |lease| {
                acquired = false;
                let Some(obj) = lease.as_object_mut() else {
                    return false;
                };
                let spec = obj.entry("spec").or_insert_with(|| json!({}));
                if !spec.is_object() {
                    *spec = json!({});
                }
                // When the record changed, the holder renewed: the lease
                // duration counts from now on our clock.
                let changed = observed.as_ref().is_none_or(|(seen, _)| seen != spec);
                if changed {
                    observed = Some((spec.clone(), now));
                }
                let holder = spec
                    .get("holderIdentity")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let seen_at = observed.as_ref().map_or(now, |(_, at)| *at);
                if !holder.is_empty()
                    && holder != identity
                    && now.saturating_duration_since(seen_at) <= lease_duration
                {
                    return false;
                }
                if holder != identity {
                    let transitions = spec
                        .get("leaseTransitions")
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    spec["leaseTransitions"] = json!(transitions + 1);
                    spec["acquireTime"] = json!(stamp);
                }
                spec["holderIdentity"] = json!(identity);
                spec["leaseDurationSeconds"] = json!(duration);
                spec["renewTime"] = json!(stamp);
                observed = Some((spec.clone(), now));
                acquired = true;
                true
            })
            .await;
        self.observed = observed;
        match updated {
            Ok(Some(_)) => return Ok(acquired),
            Ok(None) => {}
            Err(e) => return Err(e),
        }
        // No lease yet: create it.
        let body = json!({
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": duration,
                "acquireTime": stamp,
                "renewTime": stamp,
                "leaseTransitions": 0,
            },
        });
        let hub = self
            .leases
            .kind()
            .decode("v1", body)
            .map_err(|e| Status::internal(e.to_string()))?;
        match self.leases.create(&self.namespace, hub, false).await {
            Ok(created) => {
                self.observed = created.get("spec").cloned().map(|spec| (spec, now));
                Ok(true)
            }
            Err(e) if e.code() == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up (client-go's `ReleaseOnCancel`): no holder, a
    /// one-second duration, so that another candidate takes it at once.
    pub async fn release(&mut self) -> ApiResult<()> {
        let stamp = micro_time(self.clock.now());
        let identity = self.identity.clone();
        self.leases
            .update_internal(&self.namespace, &self.name, |lease| {
                let Some(spec) = lease.get_mut("spec").and_then(Value::as_object_mut) else {
                    return false;
                };
                if spec.get("holderIdentity").and_then(Value::as_str) != Some(identity.as_str()) {
                    return false;
                }
                spec.insert("holderIdentity".into(), json!(""));
                spec.insert("leaseDurationSeconds".into(), json!(1));
                spec.insert("renewTime".into(), json!(stamp));
                spec.insert("acquireTime".into(), json!(stamp));
                true
            })
            .await?;
        tracing::info!(lease = %self.name, identity = %self.identity, "leader election: released the lease");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use apiforge_core::builtin::coordination_v1::Lease;
    use apiforge_core::scheme::KindBuilder;
    use apiforge_storage::Storage;
    use apiforge_storage::embedded::{EmbeddedOptions, EmbeddedStore};

    fn spec(v: &Value) -> &Value {
        &v["spec"]
    }

    /// A Lease store on a fresh embedded store (kept while the directory
    /// lives).
    fn lease_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> =
            Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
        let kind = Arc::new(KindBuilder::<Lease>::new().version::<Lease>().build());
        (dir, Store::new(kind, storage, "/registry", None))
    }

    #[tokio::test]
    async fn one_holder_takeover_after_expiry_and_release() {
        let (_dir, leases) = lease_store();
        let options = Options {
            lease_duration: Duration::from_millis(400),
            renew_deadline: Duration::from_millis(300),
            retry_period: Duration::from_millis(50),
        };
        let candidate = |id: &str| {
            LeaderElector::new(
                leases.clone(),
                "kube-system",
                "test-lock",
                id.to_string(),
                options.clone(),
            )
        };
        let (mut a, mut b) = (candidate("a"), candidate("b"));
        assert!(
            a.try_acquire_or_renew().await.unwrap(),
            "a creates the lease"
        );
        assert!(!b.try_acquire_or_renew().await.unwrap(), "a holds it");
        let lease = leases.get_live("kube-system", "test-lock").await.unwrap();
        assert_eq!(spec(&lease)["holderIdentity"], "a");
        assert_eq!(spec(&lease)["leaseDurationSeconds"], 1);
        assert_eq!(spec(&lease)["leaseTransitions"], 0);
        let acquired = spec(&lease)["acquireTime"].clone();
        // Renewals keep the holder and its acquire time.
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(a.try_acquire_or_renew().await.unwrap());
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(
            !b.try_acquire_or_renew().await.unwrap(),
            "renewed within the lease duration as b saw it"
        );
        let lease = leases.get_live("kube-system", "test-lock").await.unwrap();
        assert_eq!(spec(&lease)["acquireTime"], acquired);
        assert_ne!(spec(&lease)["renewTime"], acquired);
        // a stops renewing: b takes over once the lease expired on its clock.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            b.try_acquire_or_renew().await.unwrap(),
            "expired: b takes it"
        );
        let lease = leases.get_live("kube-system", "test-lock").await.unwrap();
        assert_eq!(spec(&lease)["holderIdentity"], "b");
        assert_eq!(spec(&lease)["leaseTransitions"], 1);
        assert!(!a.try_acquire_or_renew().await.unwrap(), "b holds it now");
        // Releasing lets the other candidate in at once.
        b.release().await.unwrap();
        let lease = leases.get_live("kube-system", "test-lock").await.unwrap();
        assert_eq!(spec(&lease)["holderIdentity"], "");
        assert!(a.try_acquire_or_renew().await.unwrap());
        let lease = leases.get_live("kube-system", "test-lock").await.unwrap();
        assert_eq!(spec(&lease)["holderIdentity"], "a");
        assert_eq!(spec(&lease)["leaseTransitions"], 2);
        assert!(new_identity().contains('_'));
    }

    /// With a frozen clock the holder's lease does not expire while the
    /// clock stands, however long that is; stepping it past the lease
    /// duration lets the waiting candidate take over at once (the step
    /// wakes it: its retry period alone would be a minute).
    #[tokio::test]
    async fn a_frozen_clock_holds_the_lease_until_stepped() {
        let (_dir, leases) = lease_store();
        let options = Options {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(60),
        };
        let clock = Clock::controllable();
        clock.freeze();
        let frozen_at = clock.now();
        let candidate = |id: &str| {
            LeaderElector::new(
                leases.clone(),
                "kube-system",
                "clock-lock",
                id.to_string(),
                options.clone(),
            )
            .with_clock(clock.clone())
        };
        let mut a = candidate("a");
        assert!(a.try_acquire_or_renew().await.unwrap(), "a holds it");
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let (led_tx, mut led_rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(candidate("b").run(stop_rx, move |mut stop| {
            let led_tx = led_tx.clone();
            async move {
                let _ = led_tx.send(());
                let _ = stop.wait_for(|s| *s).await;
            }
        }));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(led_rx.try_recv().is_err(), "a's lease holds");
        clock.step(Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(led_rx.try_recv().is_err(), "10 s of a 15 s lease");
        clock.step(Duration::from_secs(6));
        tokio::time::timeout(Duration::from_secs(5), led_rx.recv())
            .await
            .expect("b leads once the lease expired on the stepped clock")
            .expect("led");
        let lease = leases.get_live("kube-system", "clock-lock").await.unwrap();
        assert_eq!(spec(&lease)["holderIdentity"], "b");
        assert_eq!(spec(&lease)["leaseTransitions"], 1);
        let renewed: jiff::Timestamp = spec(&lease)["renewTime"].as_str().unwrap().parse().unwrap();
        assert_eq!(
            renewed.as_second(),
            frozen_at.as_second() + 16,
            "times written come from the clock"
        );
        stop_tx.send(true).unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn run_leads_while_holding_and_releases_on_shutdown() {
        let (_dir, leases) = lease_store();
        let options = Options {
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_secs(1),
            retry_period: Duration::from_millis(50),
        };
        let elector = LeaderElector::new(
            leases.clone(),
            "kube-system",
            "run-lock",
            "me".into(),
            options,
        );
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let (led_tx, mut led_rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(elector.run(stop_rx, move |mut stop| {
            let led_tx = led_tx.clone();
            async move {
                let _ = led_tx.send("started");
                let _ = stop.wait_for(|s| *s).await;
                let _ = led_tx.send("stopped");
            }
        }));
        assert_eq!(led_rx.recv().await, Some("started"));
        stop_tx.send(true).unwrap();
        assert_eq!(led_rx.recv().await, Some("stopped"));
        task.await.unwrap();
        let lease = leases.get_live("kube-system", "run-lock").await.unwrap();
        assert_eq!(spec(&lease)["holderIdentity"], "", "released on shutdown");
        assert_eq!(spec(&lease)["leaseDurationSeconds"], 1);
    }
}
