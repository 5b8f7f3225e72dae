//! The namespace controller (kube's `pkg/controller/namespace`): when a
//! Namespace is terminating (DELETE set its `deletionTimestamp` and phase
//! `Terminating`), it deletes every object of every served namespaced kind
//! in it, then removes the `kubernetes` finalizer from `spec.finalizers`,
//! upon which the registry removes the namespace for good.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::error::ApiResult;
use crate::registry::{DeleteOutcome, ListParams, Preconditions, Store, Stores, WatchEvent};
use apiforge_core::builtin::core_v1::FINALIZER_KUBERNETES;

/// How often terminating namespaces are looked at again while something
/// (objects with finalizers, errors) keeps them from going away.
const RETRY: Duration = Duration::from_secs(1);
/// How often all namespaces are looked at even without events.
const RESYNC: Duration = Duration::from_secs(30);

/// Starts the controller when the server serves core `v1` Namespaces.
pub fn start(stores: &Stores, shutdown: tokio::sync::watch::Receiver<bool>) {
    let Some(namespaces) = stores.find("", "namespaces") else {
        return;
    };
    let controller = NamespaceController {
        namespaces,
        content: Content::Served(stores.clone()),
    };
    tokio::spawn(controller.run(shutdown));
}

/// The stores whose objects a namespace's deletion deletes.
enum Content {
    /// These stores.
    Fixed(Vec<Store>),
    /// Every namespaced kind served at the time (custom resources come and
    /// go).
    Served(Stores),
}

impl Content {
    fn stores(&self) -> Vec<Store> {
        match self {
            Content::Fixed(stores) => stores.clone(),
            Content::Served(served) => {
                let mut content: Vec<Store> = Vec::new();
                for (store, info) in served.iter() {
                    if info.namespaced()
                        && !content.iter().any(|c| Arc::ptr_eq(c.kind(), store.kind()))
                    {
                        content.push(store);
                    }
                }
                content
            }
        }
    }
}

/// The controller's state: the Namespace store and the stores of the
/// namespaced kinds.
pub struct NamespaceController {
    namespaces: Store,
    content: Content,
}

fn is_terminating(ns: &Value) -> bool {
    ns.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

impl NamespaceController {
    /// A controller over `namespaces` and the stores of the namespaced
    /// kinds whose objects it deletes.
    pub fn new(namespaces: Store, content: Vec<Store>) -> Self {
        NamespaceController {
            namespaces,
            content: Content::Fixed(content),
        }
    }

    /// Runs until `shutdown` turns true: reacts to namespace events, and
    /// retries while terminating namespaces remain.
    pub async fn run(self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let mut events = None;
        let mut need_sync = true;
        let mut pending = false;
        let mut last_sync = tokio::time::Instant::now();
        loop {
            if need_sync {
                pending = match self.sync_all().await {
                    Ok(pending) => pending,
                    Err(e) => {
                        tracing::warn!(error = %e, "namespace controller: sync failed");
                        true
                    }
                };
                need_sync = false;
                last_sync = tokio::time::Instant::now();
            }
            if events.is_none() {
                events = match self
                    .namespaces
                    .watch(None, &ListParams::default(), false)
                    .await
                {
                    Ok(stream) => Some(stream),
                    Err(e) => {
                        tracing::warn!(error = %e, "namespace controller: watch failed");
                        None
                    }
                };
            }
            let wait = if pending || events.is_none() {
                RETRY
            } else {
                RESYNC
            };
            let next_event = async {
                match events.as_mut() {
                    Some(stream) => stream.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = next_event => match ev {
                    Some(WatchEvent::Object(_, ns)) => {
                        need_sync = ns.object().map_or(true, |o| is_terminating(&o));
                    }
                    Some(WatchEvent::Bookmark(_) | WatchEvent::InitialEventsEnd(_)) => {}
                    Some(WatchEvent::Error(_)) | None => {
                        events = None;
                        need_sync = true;
                    }
                },
                () = tokio::time::sleep_until(last_sync + wait) => need_sync = true,
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// Works on every terminating namespace once; returns whether some are
    /// still waiting.
    pub async fn sync_all(&self) -> ApiResult<bool> {
        let page = self.namespaces.list(None, &ListParams::default()).await?;
        let mut pending = false;
        for ns in page.items.iter().filter(|ns| is_terminating(ns)) {
            let name = apiforge_core::scheme::object_meta(ns).name;
            match self.finalize(&name).await {
                Ok(done) => pending |= !done,
                Err(e) => {
                    tracing::warn!(namespace = %name, error = %e, "namespace controller: cannot finalize");
                    pending = true;
                }
            }
        }
        Ok(pending)
    }

    /// Deletes the namespace's content; when nothing is left, removes the
    /// `kubernetes` finalizer. Returns whether the finalizer is gone.
    pub async fn finalize(&self, namespace: &str) -> ApiResult<bool> {
        let mut remaining = 0usize;
        for store in &self.content.stores() {
            let page = store.list(Some(namespace), &ListParams::default()).await?;
            for obj in &page.items {
                if is_terminating(obj) {
                    remaining += 1;
                    continue;
                }
                let name = apiforge_core::scheme::object_meta(obj).name;
                match store
                    .delete(namespace, &name, &Preconditions::default(), false)
                    .await
                {
                    Ok(DeleteOutcome::Removed(_)) => {}
                    Ok(DeleteOutcome::Terminating(_)) => remaining += 1,
                    Err(e) if e.code() == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if remaining > 0 {
            tracing::debug!(%namespace, remaining, "namespace controller: waiting for finalizers");
            return Ok(false);
        }
        self.namespaces
            .update_internal("", namespace, |ns| {
                let Some(list) = ns
                    .pointer_mut("/spec/finalizers")
                    .and_then(Value::as_array_mut)
                else {
                    return false;
                };
                let before = list.len();
                list.retain(|f| f.as_str() != Some(FINALIZER_KUBERNETES));
                list.len() != before
            })
            .await?;
        tracing::info!(%namespace, "namespace controller: namespace emptied and finalized");
        Ok(true)
    }
}
