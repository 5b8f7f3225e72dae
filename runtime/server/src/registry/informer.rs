//! An informer-style loop for controllers that keep an in-memory view of
//! whole built-in kinds (the RBAC authorizer's snapshot, the flow-control
//! configuration): watch every store, rebuild the view once the watches
//! are open (so no change falls in between) and after every change, and
//! start over a second after a watch ends or fails.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;

use crate::registry::{ListParams, Store, WatchEvent};

/// Runs until `shutdown` turns true: `refresh` rebuilds the view from
/// `stores`; `what` names the controller in logs.
pub async fn keep_current<F, Fut>(
    what: &'static str,
    stores: Vec<(Store, &'static str)>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    mut refresh: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        let mut streams = Vec::new();
        for (store, _) in &stores {
            let params = ListParams {
                send_initial_events: Some(false),
                ..Default::default()
            };
            match store.watch(None, &params, false).await {
                Ok(s) => streams.push(s),
                Err(e) => tracing::warn!(error = %e, "{what}: watch failed"),
            }
        }
        // Re-read after the watches started, so no change falls in between.
        refresh().await;
        let mut events = futures::stream::select_all(streams);
        loop {
            let changed = tokio::select! {
                ev = events.next() => match ev {
                    Some(WatchEvent::Object(..)) => Some(true),
                    Some(WatchEvent::Bookmark(_) | WatchEvent::InitialEventsEnd(_)) => Some(false),
                    Some(WatchEvent::Error(_)) | None => None,
                },
                _ = shutdown.wait_for(|stop| *stop) => return,
            };
            match changed {
                Some(true) => refresh().await,
                Some(false) => {}
                None => break,
            }
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}
