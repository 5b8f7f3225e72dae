//! Serving: TLS, the listener, the admin kubeconfig and graceful shutdown.
//!
//! [`run`] takes a [`Config`], the scheme, the generated documents and a
//! storage backend, and serves HTTPS (HTTP/1.1 and HTTP/2) until the
//! shutdown future completes.

pub mod kubeconfig;
pub mod tls;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::endpoints::{ApiServer, ApiServerParts, Documents, VersionInfo};
use crate::scheme::Scheme;
use crate::storage::Storage;

/// Errors of starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    /// Certificates could not be made or loaded.
    #[error("TLS: {0}")]
    Tls(String),
    /// Start-up objects (system namespaces) could not be created.
    #[error("bootstrap failed: {0}")]
    Bootstrap(String),
    /// Authentication or authorization configuration could not be loaded.
    #[error("{0}")]
    Auth(String),
    /// The audit policy or a backend could not be loaded.
    #[error("{0}")]
    Audit(String),
    /// The listener could not be bound.
    #[error("failed to listen on {0}: {1}")]
    Bind(SocketAddr, #[source] std::io::Error),
}

/// What the server needs to start.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on.
    pub bind_address: IpAddr,
    /// Port to listen on (0 picks a free one).
    pub secure_port: u16,
    /// Where certificates, credentials and the kubeconfig live.
    pub data_dir: PathBuf,
    /// Serving certificate file; generated when `None`.
    pub tls_cert_file: Option<PathBuf>,
    /// Serving key file; generated when `None`.
    pub tls_private_key_file: Option<PathBuf>,
    /// The address clients use; defaults to the bind address (loopback when
    /// unspecified).
    pub advertise_address: Option<IpAddr>,
    /// How long `/readyz` fails before the listener closes on shutdown.
    pub shutdown_delay: Duration,
    /// Storage key prefix (`/registry`).
    pub storage_prefix: String,
    /// Watch cache settings; `None` serves reads from storage.
    pub watch_cache: Option<crate::registry::CacheOptions>,
    /// The enabled admission plugins, in order.
    pub admission: crate::admission::Plugins,
    /// Authentication settings.
    pub authentication: crate::authn::Options,
    /// Authorization settings.
    pub authorization: crate::authz::Options,
    /// Audit settings.
    pub audit: crate::audit::Options,
}

/// Starts serving and runs until `shutdown` completes, then shuts down
/// gracefully: readiness fails, the listener closes after the shutdown
/// delay, watches end, and in-flight requests finish.
pub async fn run(
    config: Config,
    scheme: Scheme,
    docs: Documents,
    storage: Arc<dyn Storage>,
    version: VersionInfo,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    std::fs::create_dir_all(&config.data_dir).map_err(|e| Error::Io(config.data_dir.clone(), e))?;
    let advertise = config.advertise_address.unwrap_or(config.bind_address);
    let (cert, key, ca) = match (&config.tls_cert_file, &config.tls_private_key_file) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone(), cert.clone()),
        _ => {
            let extra = vec![
                tls::advertised_host(advertise)
                    .trim_matches(['[', ']'])
                    .to_string(),
            ];
            let paths = tls::ensure_self_signed(&config.data_dir, &extra)?;
            (paths.cert, paths.key, paths.ca)
        }
    };
    let tls_config = tls::server_config(&cert, &key, &config.authentication.client_ca_files())?;
    let token = kubeconfig::ensure_admin_token(&config.data_dir.join("admin.token"))?;
    let authenticator = crate::authn::Authenticator::new(&config.authentication, token.clone())
        .map_err(|e| Error::Auth(e.to_string()))?;
    let authorizer = crate::authz::Authorizer::new(&config.authorization)
        .map_err(|e| Error::Auth(e.to_string()))?;
    let auditor = crate::audit::Auditor::new(&config.audit).map_err(Error::Audit)?;

    let addr = SocketAddr::new(config.bind_address, config.secure_port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Bind(addr, e))?;
    let local = listener.local_addr().map_err(|e| Error::Bind(addr, e))?;
    let url = format!(
        "https://{}:{}",
        tls::advertised_host(advertise),
        local.port()
    );
    let ca_pem = std::fs::read(&ca).map_err(|e| Error::Io(ca.clone(), e))?;
    let kubeconfig_path = config.data_dir.join("admin.kubeconfig");
    kubeconfig::write_kubeconfig(&kubeconfig_path, &url, &ca_pem, &token)?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let parts = ApiServerParts {
        scheme,
        storage,
        storage_prefix: config.storage_prefix.clone(),
        docs,
        authenticator,
        authorizer,
        version,
        watch_cache: config.watch_cache.clone(),
        admission: config.admission.clone(),
        auditor,
    };
    let server = Arc::new(ApiServer::new(parts, stop_rx.clone()));
    server
        .bootstrap()
        .await
        .map_err(|e| Error::Bootstrap(e.to_string()))?;
    crate::controllers::start(&server, stop_rx.clone());
    crate::authz::rbac::start(&server, stop_rx.clone())
        .await
        .map_err(|e| Error::Bootstrap(e.to_string()))?;
    let router = server.clone().router();
    tracing::info!(%url, kubeconfig = %kubeconfig_path.display(), "serving; use: kubectl --kubeconfig {}", kubeconfig_path.display());

    let acceptor = TlsAcceptor::from(tls_config);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    tokio::pin!(shutdown);
    let mut shutdown_started = false;
    let delay = tokio::time::sleep(Duration::MAX);
    tokio::pin!(delay);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (tcp, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let router = router.clone();
                let builder = builder.clone();
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    let tls = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    };
                    // A verified client certificate authenticates every request of the connection.
                    let cert = tls.get_ref().1.peer_certificates().filter(|c| !c.is_empty()).map(|c| {
                        crate::authn::ClientCertificate(Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()))
                    });
                    let service = TowerToHyperService::new(tower::ServiceExt::map_request(
                        router,
                        move |mut req: http::Request<hyper::body::Incoming>| {
                            if let Some(cert) = &cert {
                                req.extensions_mut().insert(cert.clone());
                            }
                            req.extensions_mut().insert(crate::audit::PeerAddr(peer));
                            req
                        },
                    ));
                    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
                    if let Err(e) = watcher.watch(conn.into_owned()).await {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown, if !shutdown_started => {
                tracing::info!(delay = ?config.shutdown_delay, "shutdown requested; /readyz now fails");
                server.begin_shutdown();
                shutdown_started = true;
                delay.as_mut().reset(tokio::time::Instant::now() + config.shutdown_delay);
            }
            () = &mut delay, if shutdown_started => break,
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    tracing::info!("listener closed; draining in-flight requests");
    if tokio::time::timeout(Duration::from_secs(60), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests did not finish within 60s");
    }
    tracing::info!("shutdown complete");
    Ok(())
}
