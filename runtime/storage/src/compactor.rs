//! The periodic compactor of `--etcd-compaction-interval`.
//!
//! Like kube-apiserver's etcd compactor, every interval it compacts storage
//! to the revision it saw at the previous tick, so one interval of history
//! is always kept: watches and paginated lists may resume from any revision
//! younger than that, and older ones fail with [`Error::Compacted`]
//! (410 Expired at the API). The first tick only records the revision.
//! kube-apiserver coordinates several API servers through a
//! `compact_rev_key` transaction; apiforge runs alone and compacts directly.

use std::sync::Weak;
use std::time::Duration;

use super::{Error, Revision, Storage};

/// Compacts `storage` every `interval` until the store is dropped. A failed
/// compaction is logged and retried at the next tick.
pub async fn run(storage: Weak<dyn Storage>, interval: Duration) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut previous: Revision = 0;
    loop {
        ticker.tick().await;
        let Some(store) = storage.upgrade() else {
            return;
        };
        let current = match store.current_revision().await {
            Ok(revision) => revision,
            Err(e) => {
                tracing::warn!(error = %e, "compactor: reading the current revision failed");
                continue;
            }
        };
        if previous > 0 {
            match store.compact(previous).await {
                Ok(()) | Err(Error::Compacted { .. }) => {
                    tracing::debug!(revision = previous, "storage compacted");
                }
                Err(e) => tracing::warn!(error = %e, revision = previous, "compaction failed"),
            }
        }
        previous = current;
    }
}
