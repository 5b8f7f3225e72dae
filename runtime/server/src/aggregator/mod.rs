//! kube-aggregator: the first link of the delegation chain. It keeps the
//! `apiregistration.k8s.io/v1` APIServices and
//!
//! - passes the requests of a group version an APIService sends to a
//!   Service (a *remote* APIService) on to that backend ([`proxy`]), and
//!   everything else to the core server;
//! - keeps a *local* APIService (no `service`) for every group version this
//!   server serves itself, compiled-in or from a CustomResourceDefinition
//!   ([`autoregister`], upstream's autoregister and crdregistration
//!   controllers);
//! - keeps their `Available` condition ([`available`], upstream's local
//!   and remote availability controllers); a request for an unavailable
//!   remote group version is answered `503 service unavailable`;
//! - reads the backends' discovery and OpenAPI documents ([`discovery`])
//!   for the server to publish together with its own.
//!
//! The table of remote APIServices is rebuilt from the watch cache after
//! every change of an APIService; Services, Endpoints and EndpointSlices
//! are read when a request or a check needs them.

pub mod autoregister;
pub mod available;
pub mod discovery;
pub mod proxy;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use http::StatusCode;
use serde_json::Value;

use crate::admission::service_resolver::{self, ResolveError, ResolvedService};
use crate::registry::{ListParams, Store, Stores};
use crate::registry::{StoreLookup, StoreMap};
use apiforge_core::builtin::apiregistration_v1::{APIService, GROUP};

pub use discovery::RemoteVersion;

/// The aggregator's settings (kube-apiserver's flags).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--proxy-client-cert-file` and `--proxy-client-key-file`: the client
    /// certificate the aggregator presents to backends (which trust it
    /// through their `--requestheader-client-ca-file`).
    pub proxy_client_cert: Option<(PathBuf, PathBuf)>,
    /// `--enable-aggregator-routing`: dial a ready endpoint of the Service
    /// instead of its cluster IP.
    pub enable_aggregator_routing: bool,
}

/// Errors of the aggregator's configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The proxy client certificate or key could not be read.
    #[error("reading {0}: {1}")]
    Read(PathBuf, #[source] std::io::Error),
}

/// One remote APIService as the proxy uses it.
pub struct Backend {
    /// The APIService's name (`<version>.<group>`).
    pub name: String,
    /// The group served.
    pub group: String,
    /// The version served.
    pub version: String,
    /// `spec.groupPriorityMinimum`.
    pub group_priority_minimum: i32,
    /// `spec.versionPriority`.
    pub version_priority: i32,
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub service: String,
    /// The Service port.
    pub port: i32,
    /// Whether the `Available` condition is `True`.
    pub available: bool,
    /// The TLS transport, or why it could not be built (a bad `caBundle`).
    pub transport: Result<Arc<proxy::Transport>, String>,
    /// The transport of the availability check: it does not verify the
    /// backend's certificate (upstream's check is a best-effort GET that
    /// skips verification), and presents the proxy client certificate.
    check_transport: Result<Arc<proxy::Transport>, String>,
    /// What the transport was built from (a transport is kept while it is
    /// the same, and with it its connection).
    transport_key: String,
    /// The cluster-IP or external-name resolution, once made (the table is
    /// rebuilt, and this forgotten, after every change of Services and
    /// endpoints; endpoint routing resolves each request anew, picking an
    /// endpoint at random).
    resolved: std::sync::Mutex<Option<ResolvedService>>,
}

/// The remote APIServices by group and version.
#[derive(Default)]
struct Table {
    by_group: HashMap<String, HashMap<String, Arc<Backend>>>,
}

impl Table {
    fn backends(&self) -> impl Iterator<Item = &Arc<Backend>> {
        self.by_group.values().flat_map(HashMap::values)
    }
}

/// A group version this server serves itself.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LocalVersion {
    /// The group (`""` for the core group).
    pub group: String,
    /// The version.
    pub version: String,
    /// Whether a CustomResourceDefinition serves it (its APIService is
    /// managed continuously, and goes with the definition).
    pub custom: bool,
}

/// The aggregator's state (see the module documentation).
pub struct Aggregator {
    options: Options,
    client_cert: Option<(Vec<u8>, Vec<u8>)>,
    table: RwLock<Arc<Table>>,
    /// Reads Services and endpoints (set by [`Aggregator::start`]).
    lookup: RwLock<Option<Arc<StoreLookup>>>,
    /// Asks the availability and discovery loops to run now.
    recheck: tokio::sync::Notify,
    /// The group versions served locally, for the autoregister loop.
    local: tokio::sync::watch::Sender<Arc<Vec<LocalVersion>>>,
    /// The backends' documents, for the server to publish.
    remote: tokio::sync::watch::Sender<Arc<Vec<RemoteVersion>>>,
    /// Counts the rebuilds of the table.
    table_version: tokio::sync::watch::Sender<u64>,
}

impl Aggregator {
    /// An aggregator with `options`; it serves nothing until
    /// [`Aggregator::start`] gives it the stores.
    pub fn new(options: Options) -> Result<Self, Error> {
        let client_cert = match &options.proxy_client_cert {
            Some((cert, key)) => Some((
                std::fs::read(cert).map_err(|e| Error::Read(cert.clone(), e))?,
                std::fs::read(key).map_err(|e| Error::Read(key.clone(), e))?,
            )),
            None => None,
        };
        Ok(Aggregator {
            options,
            client_cert,
            table: RwLock::new(Arc::new(Table::default())),
            lookup: RwLock::new(None),
            recheck: tokio::sync::Notify::new(),
            local: tokio::sync::watch::Sender::new(Arc::new(Vec::new())),
            remote: tokio::sync::watch::Sender::new(Arc::new(Vec::new())),
            table_version: tokio::sync::watch::Sender::new(0),
        })
    }

    fn table(&self) -> Arc<Table> {
        self.table
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Changes whenever the table of remote APIServices is rebuilt.
    fn table_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.table_version.subscribe()
    }

    fn lookup(&self) -> Option<Arc<StoreLookup>> {
        self.lookup
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The remote APIService serving the group version of `path`
    /// (`/apis/<group>/<version>` and below), if any.
    pub fn route(&self, path: &str) -> Option<Arc<Backend>> {
        let rest = path.strip_prefix("/apis/")?;
        let mut parts = rest.splitn(3, '/');
        let group = parts.next()?;
        let version = parts.next().filter(|v| !v.is_empty())?;
        let table = self.table.read().ok()?;
        if table.by_group.is_empty() {
            return None;
        }
        table.by_group.get(group)?.get(version).cloned()
    }

    /// Proxies `req` to `backend` (see [`proxy::forward`]) as upstream's
    /// proxy handler answers: `503 service unavailable` while the
    /// APIService is not available or its Service does not resolve, the
    /// transport's error when the backend cannot be reached.
    pub async fn serve(&self, backend: Arc<Backend>, req: Request) -> Response {
        if !backend.available {
            return proxy::plain_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
        }
        let transport = match &backend.transport {
            Ok(t) => t.clone(),
            Err(e) => return proxy::plain_error(StatusCode::INTERNAL_SERVER_ERROR, e),
        };
        let Some(user) = crate::request::user::user_of(&req).cloned() else {
            return proxy::plain_error(StatusCode::INTERNAL_SERVER_ERROR, "missing user");
        };
        let resolved = match self.resolve(&backend).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(apiservice = %backend.name, error = %e, "error resolving the backend");
                return proxy::plain_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
            }
        };
        let audit_id = req
            .extensions()
            .get::<crate::request::AuditId>()
            .map(|id| id.0.clone());
        let discovery = {
            let path = req.uri().path().trim_matches('/');
            path.split('/').count() == 3
        };
        match proxy::forward(
            &transport,
            &resolved.host_port,
            req,
            &user,
            audit_id.as_deref(),
            discovery,
        )
        .await
        {
            Ok(resp) => resp,
            Err(e) => {
                tracing::warn!(apiservice = %backend.name, error = %e, "proxying failed");
                // Check the APIService now rather than at its next resync.
                self.recheck.notify_one();
                proxy::plain_error(StatusCode::SERVICE_UNAVAILABLE, &e)
            }
        }
    }

    /// Where the backend's Service leads now: its cluster IP, or with
    /// `--enable-aggregator-routing` a ready endpoint (`type:
    /// ExternalName`: the external name either way).
    async fn resolve(&self, backend: &Backend) -> Result<ResolvedService, ResolveError> {
        let Some(lookup) = self.lookup() else {
            return Err(ResolveError {
                code: 503,
                message: "the aggregator is not started".into(),
            });
        };
        if self.options.enable_aggregator_routing {
            return service_resolver::resolve_service(
                lookup.as_ref(),
                &backend.namespace,
                &backend.service,
                backend.port,
            )
            .await;
        }
        if let Some(known) = backend
            .resolved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        {
            return Ok(known);
        }
        let resolved = service_resolver::resolve_cluster(
            lookup.as_ref(),
            &backend.namespace,
            &backend.service,
            backend.port,
        )
        .await?;
        *backend
            .resolved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(resolved.clone());
        Ok(resolved)
    }

    /// The group versions this server serves itself changed (start-up, a
    /// CustomResourceDefinition came or went): their local APIServices
    /// follow.
    pub fn set_local(&self, versions: Vec<LocalVersion>) {
        self.local.send_replace(Arc::new(versions));
    }

    /// The backends' documents, changing when they are read anew.
    pub fn remote_documents(&self) -> tokio::sync::watch::Receiver<Arc<Vec<RemoteVersion>>> {
        self.remote.subscribe()
    }

    /// Starts the aggregator's controllers over `stores` until `stop` turns
    /// true: the table of APIServices (kept current from the watch cache),
    /// autoregistration, availability and the backends' documents. Returns
    /// once the local APIServices of the group versions given to
    /// [`Aggregator::set_local`] exist and are available.
    pub async fn start(
        self: Arc<Self>,
        stores: &Stores,
        leading: crate::controllers::Leading,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), String> {
        let map: StoreMap = stores
            .iter()
            .map(|(store, info)| {
                (
                    (
                        info.group.to_string(),
                        info.version.to_string(),
                        info.plural.to_string(),
                    ),
                    (store, info),
                )
            })
            .collect();
        *self
            .lookup
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(Arc::new(StoreLookup::new(map)));
        let api_services = api_services(stores)?;
        self.rebuild(&api_services).await;
        let watched: Vec<(Store, &'static str)> = [
            (GROUP, "v1", "apiservices"),
            ("", "v1", "services"),
            ("", "v1", "endpoints"),
            ("discovery.k8s.io", "v1", "endpointslices"),
        ]
        .into_iter()
        .filter_map(|(g, v, r)| stores.get(g, v, r).map(|(s, _)| (s, r)))
        .collect();
        let me = self.clone();
        let informer_stop = stop.clone();
        let store = api_services.clone();
        tokio::spawn(async move {
            crate::registry::informer::keep_current("apiservices", watched, informer_stop, || {
                let me = me.clone();
                let store = store.clone();
                async move {
                    me.rebuild(&store).await;
                    me.recheck.notify_one();
                }
            })
            .await;
        });
        // Ready once the local APIServices exist and are available (as
        // upstream's `autoregister-completion` check); remote ones are
        // checked in the background.
        let synced = autoregister::sync_once(&self, &api_services).await;
        if let Err(e) = &synced {
            tracing::warn!(error = %e, "local apiservices not synced at start-up");
        }
        if let Err(e) = available::settle_local(&self, &api_services).await {
            tracing::warn!(error = %e, "local apiservices' availability not written at start-up");
        }
        tokio::spawn(autoregister::run(
            self.clone(),
            api_services.clone(),
            synced.is_err(),
            stop.clone(),
        ));
        tokio::spawn(available::run(
            self.clone(),
            api_services,
            leading,
            stop.clone(),
        ));
        tokio::spawn(discovery::run(self, stop));
        Ok(())
    }

    /// Rebuilds the table of remote APIServices from the stored ones,
    /// keeping the transports (and their connections) of unchanged ones.
    async fn rebuild(&self, store: &Store) {
        let items = match list_all(store).await {
            Ok(items) => items,
            Err(e) => {
                tracing::warn!(error = %e, "apiservices could not be listed");
                return;
            }
        };
        let old = self.table();
        let mut table = Table::default();
        for api in items {
            let Some(service) = &api.spec.service else {
                continue;
            };
            let port = service.port.unwrap_or(443);
            let transport_key = format!(
                "{}/{}:{port}|{}|{}",
                service.namespace,
                service.name,
                api.spec.insecure_skip_tls_verify,
                String::from_utf8_lossy(&api.spec.ca_bundle.0)
            );
            let reused = old
                .by_group
                .get(&api.spec.group)
                .and_then(|versions| versions.get(&api.spec.version))
                .filter(|b| b.transport_key == transport_key)
                .map(|b| (b.transport.clone(), b.check_transport.clone()));
            let server_name =
                service_resolver::service_server_name(&service.namespace, &service.name);
            let (transport, check_transport) = reused.unwrap_or_else(|| {
                (
                    proxy::Transport::new(
                        &server_name,
                        &api.spec.ca_bundle.0,
                        api.spec.insecure_skip_tls_verify,
                        self.client_cert.as_ref(),
                    )
                    .map(Arc::new),
                    proxy::Transport::new(&server_name, &[], true, self.client_cert.as_ref())
                        .map(Arc::new),
                )
            });
            let backend = Backend {
                name: api.metadata.name.clone(),
                group: api.spec.group.clone(),
                version: api.spec.version.clone(),
                group_priority_minimum: api.spec.group_priority_minimum,
                version_priority: api.spec.version_priority,
                namespace: service.namespace.clone(),
                service: service.name.clone(),
                port,
                available: api.is_available(),
                transport,
                check_transport,
                transport_key,
                resolved: std::sync::Mutex::new(None),
            };
            table
                .by_group
                .entry(backend.group.clone())
                .or_default()
                .insert(backend.version.clone(), Arc::new(backend));
        }
        *self
            .table
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(table);
        self.table_version.send_modify(|v| *v += 1);
    }

    /// A GET of `path` on `backend` as the aggregator itself
    /// (`system:kube-aggregator` in `system:masters`, as upstream's checks
    /// are), within `limit`: the answer's status and body. `verify`: over
    /// the proxy's transport (verifying the backend with its `caBundle`),
    /// else over the availability check's.
    async fn get(
        &self,
        backend: &Backend,
        path: &str,
        accept: &str,
        limit: Duration,
        verify: bool,
    ) -> Result<(StatusCode, bytes::Bytes), String> {
        let transport = if verify {
            backend.transport.clone()?
        } else {
            backend.check_transport.clone()?
        };
        let resolved = self.resolve(backend).await.map_err(|e| e.message)?;
        let url = format!("https://{}{path}", resolved.host_port);
        let req = http::Request::get(path)
            .header(http::header::ACCEPT, accept)
            .body(axum::body::Body::empty())
            .map_err(|e| e.to_string())?;
        let user = aggregator_user();
        let exchange = async {
            let resp = proxy::forward(&transport, &resolved.host_port, req, &user, None, false)
                .await
                .map_err(|e| format!("Get {url:?}: {e}"))?;
            let status = resp.status();
            let body = axum::body::to_bytes(resp.into_body(), 64 << 20)
                .await
                .map_err(|e| format!("Get {url:?}: {e}"))?;
            Ok::<_, String>((status, body))
        };
        tokio::time::timeout(limit, exchange)
            .await
            .map_err(|_| format!("Get {url:?}: context deadline exceeded"))?
    }

    /// The URL a check of `backend` would fetch `path` from (for messages).
    async fn url_of(&self, backend: &Backend, path: &str) -> Result<String, ResolveError> {
        let resolved = self.resolve(backend).await?;
        Ok(format!("https://{}{path}", resolved.host_port))
    }
}

/// The identity of the aggregator's own requests to backends.
fn aggregator_user() -> crate::request::user::UserInfo {
    crate::request::user::UserInfo {
        name: "system:kube-aggregator".into(),
        groups: vec!["system:masters".into()],
        ..Default::default()
    }
}

/// The APIService store.
fn api_services(stores: &Stores) -> Result<Store, String> {
    stores
        .get(GROUP, "v1", "apiservices")
        .map(|(s, _)| s)
        .ok_or_else(|| "apiregistration.k8s.io/v1 apiservices is not served".to_string())
}

/// Every stored APIService (from the watch cache).
async fn list_all(store: &Store) -> Result<Vec<APIService>, String> {
    let params = ListParams {
        resource_version: Some(0),
        ..ListParams::default()
    };
    let page = store.list(None, &params).await.map_err(|e| e.to_string())?;
    Ok(page
        .items
        .into_iter()
        .filter_map(|v: Value| serde_json::from_value::<APIService>(v).ok())
        .collect())
}
