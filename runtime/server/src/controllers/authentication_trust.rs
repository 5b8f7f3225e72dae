//! kube-apiserver's ClusterAuthenticationTrust controller (post-start hook
//! `start-cluster-authentication-info-controller`): publishes how this
//! server authenticates clients in the ConfigMap
//! `kube-system/extension-apiserver-authentication`, for aggregated
//! (delegating) API servers to look up: `client-ca-file` (the
//! `--client-ca-file` bundle) and, with `--requestheader-client-ca-file`,
//! the `requestheader-*` keys (header names and allowed names as JSON
//! arrays), in upstream's format ([`Info::to_data`]).
//!
//! As upstream, what is stored is the union of the stored settings and
//! this server's (several servers share the ConfigMap): additions by
//! others stay, this server's own settings are put back. It runs when the
//! server has a client CA or a request-header CA, syncs once before the
//! hook finishes and again every [`SYNC_INTERVAL`] (upstream: on changes
//! of the ConfigMap or the CA files, and every minute), re-reading the CA
//! files each time.

use std::time::Duration;

use serde_json::{Value, json};

use crate::authn::delegated::{CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, Info};
use crate::error::ApiResult;
use crate::registry::{Store, Stores};

/// How often the ConfigMap is brought up to date.
pub const SYNC_INTERVAL: Duration = Duration::from_secs(10);

/// This server's settings from its authentication options (the CA files
/// as they are now); `None` when it has neither a client CA nor a
/// request-header CA.
pub fn own_info(options: &crate::authn::Options) -> Option<Info> {
    let read = |path: &Option<std::path::PathBuf>| {
        path.as_ref()
            .map(|p| {
                std::fs::read_to_string(p).unwrap_or_else(|e| {
                    tracing::warn!(file = %p.display(), error = %e, "reading a CA file to publish failed");
                    String::new()
                })
            })
            .unwrap_or_default()
    };
    if options.client_ca_file.is_none() && options.request_header.client_ca_file.is_none() {
        return None;
    }
    let rh = &options.request_header;
    let names = |v: &Vec<String>| -> Vec<String> {
        v.iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    Some(Info {
        client_ca: read(&options.client_ca_file),
        request_header_ca: read(&rh.client_ca_file),
        username_headers: names(&rh.username_headers),
        uid_headers: names(&rh.uid_headers),
        group_headers: names(&rh.group_headers),
        extra_headers_prefix: names(&rh.extra_headers_prefix),
        allowed_names: names(&rh.allowed_names),
    })
}

/// Brings the ConfigMap to the union of what is stored and `own`; returns
/// whether it was written.
pub async fn sync(store: &Store, own: &Info) -> ApiResult<bool> {
    let stored = match store.get(CONFIGMAP_NAMESPACE, CONFIGMAP_NAME, None).await {
        Ok(cm) => Some(
            Info::from_data(cm.get("data").unwrap_or(&Value::Null)).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "the stored {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} is malformed; replacing it");
                Info::default()
            }),
        ),
        Err(e) if e.code() == 404 => None,
        Err(e) => return Err(e),
    };
    let Some(stored) = stored else {
        let cm = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP_NAME, "namespace": CONFIGMAP_NAMESPACE},
            "data": own.to_data(),
        });
        return store.ensure(CONFIGMAP_NAMESPACE, "v1", cm).await;
    };
    let data = serde_json::to_value(stored.combined(own).to_data()).unwrap_or_default();
    let mut wrote = false;
    store
        .update_internal(CONFIGMAP_NAMESPACE, CONFIGMAP_NAME, |obj| {
            if obj.get("data") == Some(&data) {
                return false;
            }
            obj["data"] = data.clone();
            wrote = true;
            true
        })
        .await?;
    Ok(wrote)
}

/// Syncs once (retrying for a few seconds while `kube-system` is being
/// created), then keeps the ConfigMap current until `shutdown` turns true.
/// Does nothing without the core ConfigMap kind or anything to publish.
pub async fn start(
    stores: &Stores,
    options: crate::authn::Options,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> ApiResult<()> {
    let Some((store, _)) = stores.get("", "v1", "configmaps") else {
        return Ok(());
    };
    let Some(own) = own_info(&options) else {
        return Ok(());
    };
    let mut attempt = 0;
    loop {
        match sync(&store, &own).await {
            Ok(_) => break,
            Err(e) if attempt < 50 => {
                tracing::debug!(error = %e, "publishing {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} failed; retrying");
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SYNC_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let Some(own) = own_info(&options) else { return };
                    match sync(&store, &own).await {
                        Ok(true) => tracing::info!("updated {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"),
                        Ok(false) => {}
                        Err(e) => tracing::warn!(error = %e, "publishing {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} failed"),
                    }
                }
                r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
            }
        }
    });
    Ok(())
}
