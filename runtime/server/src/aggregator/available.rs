//! The `Available` condition of every APIService, as kube-aggregator's
//! availability controllers decide it:
//!
//! - local: `True`, `Local`, `Local APIServices are always available`;
//! - remote: `False` with `ServiceNotFound` (no such Service),
//!   `ServicePortError` (a `ClusterIP` Service without the port),
//!   `EndpointsNotFound` / `MissingEndpoints` (a `ClusterIP` Service
//!   without endpoint slices, or none with a ready address on the port's
//!   name), `FailedDiscoveryCheck` (the backend's
//!   `/apis/<group>/<version>` did not answer 2xx/3xx within 5 s — five
//!   attempts at once, one success is enough; as upstream's, the check does
//!   not verify the backend's certificate, the proxy does); `True`,
//!   `Passed`, `all checks passed` otherwise.
//!
//! Checks run after every change of APIServices, Services, Endpoints and
//! EndpointSlices, when a proxied request fails, every 30 s (upstream's
//! resync), and every 5 s for an APIService that is not available (upstream
//! retries failed checks with a growing backoff instead). Without an
//! endpoint slice controller, a Service's Endpoints count as its slices.
//!
//! Upstream runs these controllers on every kube-apiserver; here the checks
//! of [`run`] write only on the replica holding the controllers' lease
//! ([`crate::controllers::Leading`]): two replicas that see a backend
//! differently would otherwise flip the condition (and its
//! `lastTransitionTime`) back and forth. Every replica proxies by the stored
//! condition. The local APIServices' verdict (the same everywhere, written
//! only when it changes) is settled by every replica at start-up.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Aggregator, Backend, list_all};
use crate::admission::service_resolver::{self, ResolveError};
use crate::registry::Store;
use apiforge_core::builtin::apiregistration_v1::{APIService, APIServiceCondition, AVAILABLE};
use apiforge_core::builtin::core_v1::{Endpoints, Service, TYPE_CLUSTER_IP};
use apiforge_core::builtin::discovery_v1::EndpointSlice;

/// How often every APIService is checked.
const RESYNC: Duration = Duration::from_secs(30);
/// How often an unavailable remote APIService is checked.
const RETRY: Duration = Duration::from_secs(5);

/// A verdict: status, reason, message.
type Verdict = (&'static str, &'static str, String);

/// Runs until `stop` turns true, checking while `leading` (see the module
/// documentation).
pub async fn run(
    aggregator: Arc<Aggregator>,
    store: Store,
    mut leading: crate::controllers::Leading,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut last_full = Instant::now() - RESYNC;
    // The APIServices in `aggregator_unavailable_apiservice`.
    let mut reported: HashSet<String> = HashSet::new();
    loop {
        if !leading.is_leading() {
            tokio::select! {
                () = leading.wait_for(true) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
        let full = last_full.elapsed() >= RESYNC;
        if full {
            last_full = Instant::now();
        }
        let mut any_unavailable = false;
        match list_all(&store).await {
            Ok(items) => {
                let mut names = HashSet::new();
                for api in items {
                    let verdict = check(&aggregator, &api).await;
                    any_unavailable |= verdict.0 != "True";
                    record(&api, &verdict);
                    names.insert(api.metadata.name.clone());
                    write(&store, &api, verdict).await;
                }
                for gone in reported.difference(&names) {
                    let _ = crate::metrics::global()
                        .unavailable_apiservice
                        .remove_label_values(&[gone.as_str()]);
                }
                reported = names;
            }
            Err(e) => tracing::warn!(error = %e, "apiservices could not be listed"),
        }
        let wait = if any_unavailable { RETRY } else { RESYNC };
        let asked = tokio::select! {
            () = aggregator.recheck.notified() => true,
            () = tokio::time::sleep(wait) => false,
            () = leading.wait_for(false) => false,
            _ = stop.wait_for(|s| *s) => return,
        };
        if asked {
            // Let a burst of changes settle.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Writes the `Available` condition of every local APIService (the
/// start-up pass: the server is ready once they are settled; remote ones
/// are checked by [`run`]).
pub async fn settle_local(aggregator: &Aggregator, store: &Store) -> Result<(), String> {
    // All at once, so that their writes share the store's commits.
    let local = list_all(store)
        .await?
        .into_iter()
        .filter(|api| api.spec.service.is_none());
    futures::future::join_all(local.map(|api| async move {
        let verdict = check(aggregator, &api).await;
        record(&api, &verdict);
        write(store, &api, verdict).await;
    }))
    .await;
    Ok(())
}

/// The verdict on `api` now.
async fn check(aggregator: &Aggregator, api: &APIService) -> Verdict {
    let Some(service) = &api.spec.service else {
        return (
            "True",
            "Local",
            "Local APIServices are always available".into(),
        );
    };
    let (ns, name) = (service.namespace.as_str(), service.name.as_str());
    let port = service.port.unwrap_or(443);
    let Some(lookup) = aggregator.lookup() else {
        return ("Unknown", "ServiceAccessError", "not started".into());
    };
    let svc =
        match service_resolver::get::<Service>(lookup.as_ref(), "", "v1", "services", ns, name)
            .await
        {
            Ok(Some(svc)) => svc,
            Ok(None) => {
                return (
                    "False",
                    "ServiceNotFound",
                    format!("service/{name} in {ns:?} is not present"),
                );
            }
            Err(e) => {
                return (
                    "Unknown",
                    "ServiceAccessError",
                    format!("service/{name} in {ns:?} cannot be checked due to: {e}"),
                );
            }
        };
    if svc.spec.type_ == TYPE_CLUSTER_IP {
        let Some(port_name) = svc
            .spec
            .ports
            .iter()
            .find(|p| p.port == port)
            .map(|p| p.name.clone())
        else {
            return (
                "False",
                "ServicePortError",
                format!("service/{name} in {ns:?} is not listening on port {port}"),
            );
        };
        match endpoint_slices(lookup.as_ref(), ns, name).await {
            Err(e) => {
                return (
                    "Unknown",
                    "EndpointsAccessError",
                    format!("service/{name} in {ns:?} cannot be checked due to: {e}"),
                );
            }
            Ok(slices) if slices.is_empty() => {
                return (
                    "False",
                    "EndpointsNotFound",
                    format!("cannot find endpointslices for service/{name} in {ns:?}"),
                );
            }
            Ok(slices) => {
                if !slices.iter().any(|s| has_available_endpoint(s, &port_name)) {
                    return (
                        "False",
                        "MissingEndpoints",
                        format!(
                            "endpointslices for service/{name} in {ns:?} have no addresses with port name {port_name:?}"
                        ),
                    );
                }
            }
        }
    }
    match discovery_check(aggregator, api).await {
        Ok(()) => ("True", "Passed", "all checks passed".into()),
        Err(message) => ("False", "FailedDiscoveryCheck", message),
    }
}

/// GETs the backend's `/apis/<group>/<version>` five times at once; one
/// 2xx/3xx answer passes.
async fn discovery_check(aggregator: &Aggregator, api: &APIService) -> Result<(), String> {
    let backend = aggregator
        .table()
        .by_group
        .get(&api.spec.group)
        .and_then(|v| v.get(&api.spec.version))
        .cloned();
    let Some(backend) = backend else {
        // The table has not caught up with a new APIService yet.
        return Err("the APIService is not known to the proxy yet".into());
    };
    let path = if api.metadata.name == "v1." {
        format!("/api/{}", api.spec.version)
    } else {
        format!("/apis/{}/{}", api.spec.group, api.spec.version)
    };
    let attempts = (0..5).map(|_| attempt(aggregator, &backend, &path));
    let results = futures::future::join_all(attempts).await;
    let mut last = Ok(());
    for result in results {
        if result.is_ok() {
            return Ok(());
        }
        last = result;
    }
    last
}

async fn attempt(aggregator: &Aggregator, backend: &Backend, path: &str) -> Result<(), String> {
    let url = aggregator
        .url_of(backend, path)
        .await
        .map_err(|e| e.message)?;
    match aggregator
        .get(
            backend,
            path,
            "application/json",
            Duration::from_secs(5),
            false,
        )
        .await
    {
        Ok((status, _)) if status.is_success() || status.is_redirection() => Ok(()),
        Ok((status, _)) => Err(format!(
            "failing or missing response from {url}: bad status from {url}: {}",
            status.as_u16()
        )),
        Err(e) => Err(format!("failing or missing response from {url}: {e}")),
    }
}

/// Whether a slice has a ready endpoint and a port named `port_name`.
fn has_available_endpoint(slice: &EndpointSlice, port_name: &str) -> bool {
    slice
        .endpoints
        .iter()
        .any(|e| e.conditions.ready.unwrap_or(true))
        && slice
            .ports
            .iter()
            .any(|p| p.name.as_deref() == Some(port_name) && p.port.is_some())
}

/// The Service's EndpointSlices; without any, its Endpoints as slices
/// (there is no mirroring controller here).
async fn endpoint_slices(
    lookup: &dyn crate::admission::Lookup,
    ns: &str,
    name: &str,
) -> Result<Vec<EndpointSlice>, ResolveError> {
    let slices = service_resolver::slices_of(lookup, ns, name)
        .await?
        .unwrap_or_default();
    if !slices.is_empty() {
        return Ok(slices);
    }
    let Some(endpoints) =
        service_resolver::get::<Endpoints>(lookup, "", "v1", "endpoints", ns, name).await?
    else {
        return Ok(slices);
    };
    Ok(endpoints
        .subsets
        .iter()
        .map(|subset| EndpointSlice {
            endpoints: subset
                .addresses
                .iter()
                .map(|a| apiforge_core::builtin::discovery_v1::Endpoint {
                    addresses: vec![a.ip.clone()],
                    ..Default::default()
                })
                .collect(),
            ports: subset
                .ports
                .iter()
                .map(|p| apiforge_core::builtin::discovery_v1::EndpointPort {
                    name: Some(p.name.clone()),
                    port: Some(p.port),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect())
}

/// kube-aggregator's availability metrics: `aggregator_unavailable_apiservice`
/// (1 while unavailable) and, when an APIService becomes unavailable,
/// `aggregator_unavailable_apiservice_total{reason}`.
fn record(api: &APIService, (status, reason, _): &Verdict) {
    let metrics = crate::metrics::global();
    let name = api.metadata.name.as_str();
    let unavailable = *status != "True";
    metrics
        .unavailable_apiservice
        .with_label_values(&[name])
        .set(i64::from(unavailable));
    let was_available = api.available().is_none_or(|c| c.status == "True");
    if unavailable && was_available {
        let reason = if reason.is_empty() {
            "UnknownReason"
        } else {
            reason
        };
        metrics
            .unavailable_apiservice_total
            .with_label_values(&[name, reason])
            .inc();
    }
}

/// Writes the verdict into the APIService's `Available` condition when it
/// changed (the transition time moves only when the status does).
async fn write(store: &Store, api: &APIService, (status, reason, message): Verdict) {
    let unchanged = api
        .available()
        .is_some_and(|c| c.status == status && c.reason == reason && c.message == message);
    if unchanged {
        return;
    }
    if api.available().map(|c| c.status.as_str()) != Some(status) {
        tracing::info!(apiservice = %api.metadata.name, status, reason, %message, "changing APIService availability");
    }
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let result = store
        .update_internal("", &api.metadata.name, |obj: &mut Value| {
            let Ok(mut current) = serde_json::from_value::<APIService>(obj.clone()) else {
                return false;
            };
            let previous = current.available().cloned();
            let transition = match &previous {
                Some(p) if p.status == status => p.last_transition_time.clone(),
                _ => Some(now.clone()),
            };
            let condition = APIServiceCondition {
                type_: AVAILABLE.into(),
                status: status.into(),
                last_transition_time: transition,
                reason: reason.into(),
                message: message.clone(),
            };
            if previous.as_ref() == Some(&condition) {
                return false;
            }
            current.status.conditions.retain(|c| c.type_ != AVAILABLE);
            current.status.conditions.push(condition);
            match (serde_json::to_value(&current.status), obj.as_object_mut()) {
                (Ok(s), Some(map)) => {
                    map.insert("status".into(), s);
                    true
                }
                _ => false,
            }
        })
        .await;
    if let Err(e) = result {
        tracing::warn!(apiservice = %api.metadata.name, error = %e, "APIService status not written");
    }
}
