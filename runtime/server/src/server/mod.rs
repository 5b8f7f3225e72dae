//! Serving: TLS, the listener, the admin kubeconfig, health checks,
//! post-start and pre-shutdown hooks, and graceful shutdown.
//!
//! [`run`] takes a [`Config`], the scheme, the generated documents and a
//! storage backend, and serves HTTPS (HTTP/1.1 and HTTP/2) through the
//! filter chain ([`crate::filters`]) until the shutdown future completes.

pub mod allocator;

pub mod kubeconfig;
pub mod lifecycle;
pub mod request_body;
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
use crate::registry::Stores;
use apiforge_core::scheme::Scheme;
use apiforge_storage::Storage;

/// How many bytes the kernel holds for a connection that it could not send
/// yet (`TCP_NOTSENT_LOWAT`; data in flight to a reading client does not
/// count, so throughput on long links is unaffected). Without it a client
/// that stops reading has the send buffer autotuned up to `tcp_wmem` (4 MiB)
/// of its watch events parked in the kernel, and its watch queue in the
/// cache (see [`crate::registry::cache`]) would take that much longer to
/// fill and get it dropped.
const UNSENT_LIMIT: u32 = 128 * 1024;

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
    /// A post-start hook failed.
    #[error("PostStartHook {0:?} failed: {1}")]
    PostStartHook(String, String),
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
    /// SNI certificates (`--tls-sni-cert-key`), tried before the default.
    pub tls_sni_cert_keys: Vec<tls::SniCertKey>,
    /// The address clients use; defaults to the bind address (loopback when
    /// unspecified).
    pub advertise_address: Option<IpAddr>,
    /// How long `/readyz` fails before the listener closes on shutdown.
    pub shutdown_delay: Duration,
    /// Storage key prefix (`/registry`).
    pub storage_prefix: String,
    /// Encryption at rest (`--encryption-provider-config`): the
    /// transformers of every resource; `None` stores plain bytes.
    pub encryption: Option<Arc<apiforge_storage::encryption::Transformers>>,
    /// Watch cache settings; `None` serves reads from storage.
    pub watch_cache: Option<crate::registry::CacheOptions>,
    /// The enabled admission plugins, in order.
    pub admission: crate::admission::Plugins,
    /// Timeouts, in-flight limits, CORS and HSTS of the filter chain.
    pub filters: crate::filters::ChainConfig,
    /// Authentication settings.
    pub authentication: crate::authn::Options,
    /// Authorization settings.
    pub authorization: crate::authz::Options,
    /// Identity lease timing.
    pub identity_lease: crate::controllers::identity_lease::Options,
    /// The wall clock of the lease controllers (identity lease, leader
    /// election): the system's, or a test's that it freezes and steps.
    pub clock: crate::clock::Clock,
    /// Leader election of the singleton controllers (`--leader-elect*`).
    pub controllers: crate::controllers::Options,
    /// Auditing (`--audit-policy-file`, `--audit-log-*`,
    /// `--audit-webhook-*`).
    pub audit: crate::audit::Options,
    /// The aggregator (`--proxy-client-*`, `--enable-aggregator-routing`).
    pub aggregator: crate::aggregator::Options,
}

impl Config {
    /// Fills in what was left to defaults (the advertise address: the bind
    /// address) and seals the result: [`run`] only takes a
    /// [`CompletedConfig`], so a configuration cannot be served without
    /// being completed.
    pub fn complete(mut self) -> CompletedConfig {
        if self.advertise_address.is_none() {
            self.advertise_address = Some(self.bind_address);
        }
        CompletedConfig(self)
    }
}

/// A [`Config`] after [`Config::complete`]; read its fields through
/// `Deref`.
#[derive(Clone, Debug)]
pub struct CompletedConfig(Config);

impl std::ops::Deref for CompletedConfig {
    type Target = Config;

    fn deref(&self) -> &Config {
        &self.0
    }
}

/// How long an HTTP/1.1 client may take to send a request's headers before
/// its connection is closed (kube-apiserver's `ReadHeaderTimeout`: 32 s,
/// "just shy of" its request timeout bound), so slow-header clients cannot
/// hold connections forever. As hyper starts the clock when it waits for a
/// request, an idle keep-alive connection is closed after it too
/// (kube-apiserver: 90 s).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// Header lines an HTTP/1.1 request may have. Go's server, and so
/// kube-apiserver, limits only the header bytes; hyper also limits the
/// lines (100 by default) and allocates that many slots for every request,
/// so this stays far above what clients send (a front proxy's
/// `X-Remote-Group` per group included) without costing every request.
const MAX_HEADER_LINES: usize = 512;

/// Bytes of request line and headers an HTTP/1.1 request may have: Go's
/// `DefaultMaxHeaderBytes` (1 MiB) plus the 4 KiB slack its server adds.
/// Over it: 431.
const MAX_HEADER_BYTES: usize = (1 << 20) + 4096;

/// Starts serving and runs until `shutdown` completes, then shuts down
/// gracefully: readiness fails, the listener closes after the shutdown
/// delay, watches end, and in-flight requests finish.
pub async fn run(
    config: CompletedConfig,
    scheme: Scheme,
    docs: Documents,
    storage: Arc<dyn Storage>,
    version: VersionInfo,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    crate::metrics::global()
        .build_info
        .with_label_values(&[
            version.major.as_str(),
            version.minor.as_str(),
            version.git_version.as_str(),
            version.git_commit.as_str(),
            version.git_tree_state.as_str(),
            version.build_date.as_str(),
            version.go_version.as_str(),
            version.compiler.as_str(),
            version.platform.as_str(),
        ])
        .set(1);
    // Created for its owner only: it holds the serving key and the admin
    // credentials (an existing directory keeps the mode it was given).
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&config.data_dir)
        .map_err(|e| Error::Io(config.data_dir.clone(), e))?;
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
    // A delegating server looks up what its flags leave out in the main
    // server's ConfigMap first: its CA bundles join the TLS layer's.
    let mut authentication = config.authentication.clone();
    let lookup = crate::authn::delegated::Lookup::start(&mut authentication)
        .await
        .map_err(|e| Error::Auth(e.to_string()))?;
    let tls_config = tls::DynamicServerConfig::load(tls::ServingFiles {
        cert: cert.clone(),
        key: key.clone(),
        sni: config.tls_sni_cert_keys.clone(),
        client_cas: authentication
            .client_ca_files()
            .into_iter()
            .map(std::path::Path::to_path_buf)
            .collect(),
        optional_client_cas: authentication.optional_client_ca_files(),
    })?;
    let token = kubeconfig::ensure_admin_token(&config.data_dir.join("admin.token"))?;
    let mut authenticator = crate::authn::Authenticator::new(&authentication, token.clone())
        .map_err(|e| Error::Auth(e.to_string()))?;
    let authorizer = crate::authz::Authorizer::new(&config.authorization)
        .map_err(|e| Error::Auth(e.to_string()))?;
    let auditor = crate::audit::Auditor::new(&config.audit).map_err(Error::Audit)?;
    let aggregator = Arc::new(
        crate::aggregator::Aggregator::new(config.aggregator.clone())
            .map_err(|e| Error::Tls(e.to_string()))?,
    );

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

    // Watches end when `stop` turns true; controllers when `controllers_stop` does.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (controllers_stop_tx, controllers_stop_rx) = tokio::sync::watch::channel(false);

    // Encryption wraps the timed backend, as kube-apiserver's transformer
    // sits above its etcd client: `etcd_request_duration_seconds` times
    // the backend alone, and a value is encrypted once, before the
    // backend's retries.
    let storage: Arc<dyn Storage> = Arc::new(apiforge_storage::metered::Metered::new(
        storage,
        &config.storage_prefix,
        Arc::new(crate::metrics::StorageObserver),
    ));
    let storage: Arc<dyn Storage> = match &config.encryption {
        Some(transformers) => Arc::new(
            apiforge_storage::encryption::Encrypted::new(
                storage,
                &config.storage_prefix,
                transformers.clone(),
                scheme.groups().iter().map(|g| g.name.to_string()),
            )
            .with_observer(Arc::new(crate::metrics::TransformationObserver)),
        ),
        None => storage,
    };
    let mut health = crate::endpoints::healthz::Health::default();
    let storage_check = storage.health_check_name();
    health.add_storage(storage_check, false, storage.clone());
    if storage_check == "etcd" {
        health.add_storage("etcd-readiness", true, storage.clone());
    }
    let rbac_stop_rx = controllers_stop_rx.clone();
    let lease_stop_rx = controllers_stop_rx.clone();
    let lease_options = config.identity_lease.clone();
    let mut controller_options = config.controllers.clone();
    // Only replicas sharing etcd compete: the embedded store has one
    // server, which runs the singleton controllers without a lease (and so
    // does not wait out a dead predecessor's lease after a crash).
    controller_options.leader_elect &= storage_check == "etcd";
    // Whether this replica runs the singleton controllers (see
    // `controllers::start`).
    let (leading_tx, leading) = crate::controllers::Leading::channel();
    let lease_clock = config.clock.clone();
    let controllers_clock = config.clock.clone();
    let lease_leading = leading.clone();
    let crd_leading = leading;
    let apf_stop_rx = controllers_stop_rx.clone();
    let crd_stop_rx = controllers_stop_rx.clone();
    let trust_stop_rx = controllers_stop_rx.clone();
    let flow_control = config.filters.enable_priority_and_fairness.then(|| {
        crate::flowcontrol::FlowControl::new(
            config.filters.max_requests_inflight + config.filters.max_mutating_requests_inflight,
        )
    });
    let apf_hook = flow_control.clone().map(|fc| {
        lifecycle::Hook::new(
            "priority-and-fairness-config-producer",
            move |ctx: lifecycle::HookContext| async move {
                crate::flowcontrol::start(ctx.server.stores(), fc, apf_stop_rx)
                    .await
                    .map_err(|e| e.to_string())
            },
        )
    });
    let mut hooks = vec![
        lifecycle::Hook::new(
            "bootstrap-system-namespaces",
            |ctx: lifecycle::HookContext| async move {
                crate::controllers::bootstrap::system_namespaces(ctx.server.stores())
                    .await
                    .map_err(|e| e.to_string())
            },
        ),
        lifecycle::Hook::new(
            "rbac/bootstrap-roles",
            move |ctx: lifecycle::HookContext| async move {
                crate::authz::rbac::start(
                    ctx.server.authorizer().rbac().cloned(),
                    ctx.server.stores(),
                    rbac_stop_rx,
                )
                .await
                .map_err(|e| e.to_string())
            },
        ),
        lifecycle::Hook::new(
            "start-kube-apiserver-identity-lease-controller",
            move |ctx: lifecycle::HookContext| async move {
                crate::controllers::identity_lease::start(
                    ctx.server.stores(),
                    crate::controllers::identity_lease::new_identity(),
                    lease_options,
                    lease_clock,
                    lease_leading,
                    lease_stop_rx,
                );
                Ok(())
            },
        ),
        lifecycle::Hook::new(
            "start-apiextensions-controllers",
            move |ctx: lifecycle::HookContext| async move {
                // The stored definitions are served (and published in
                // discovery and OpenAPI) before the hook, and so /readyz,
                // passes.
                crate::controllers::custom_resource_definitions::start(
                    ctx.server.stores(),
                    crd_leading.clone(),
                    crd_stop_rx.clone(),
                )
                .await;
                let generation = ctx.server.stores().generation();
                let custom = ctx.server.custom_groups();
                if !custom.is_empty() {
                    ctx.server.publish_custom(custom);
                }
                ctx.server.stores().mark_published(generation);
                tokio::spawn(
                    ctx.server
                        .clone()
                        .keep_documents_current(crd_stop_rx.clone()),
                );
                // The aggregator's controllers: its table of APIServices,
                // the local APIServices of what is served now, their
                // availability, and the backends' documents.
                ctx.server
                    .aggregator()
                    .set_local(ctx.server.local_versions());
                ctx.server
                    .aggregator()
                    .clone()
                    .start(ctx.server.stores(), crd_leading, crd_stop_rx.clone())
                    .await?;
                tokio::spawn(
                    ctx.server
                        .clone()
                        .keep_remote_documents_current(crd_stop_rx),
                );
                Ok(())
            },
        ),
        lifecycle::Hook::new(
            "start-namespace-controller",
            move |ctx: lifecycle::HookContext| async move {
                crate::controllers::start(
                    ctx.server.stores(),
                    &controller_options,
                    controllers_clock,
                    leading_tx,
                    controllers_stop_rx,
                );
                Ok(())
            },
        ),
    ];
    hooks.extend(apf_hook);
    // The main server's side of delegation: publish the client CA and the
    // request-header settings (a delegating server does not).
    if authentication.delegated.is_none()
        && crate::controllers::authentication_trust::own_info(&authentication).is_some()
    {
        let options = authentication.clone();
        hooks.push(lifecycle::Hook::new(
            "start-cluster-authentication-info-controller",
            move |ctx: lifecycle::HookContext| async move {
                crate::controllers::authentication_trust::start(
                    ctx.server.stores(),
                    options,
                    trust_stop_rx,
                )
                .await
                .map_err(|e| e.to_string())
            },
        ));
    }
    let post_start = lifecycle::PostStartHooks::register(hooks, &mut health);
    let pre_shutdown = vec![lifecycle::Hook::new(
        "stop-namespace-controller",
        move |_: lifecycle::HookContext| async move {
            let _ = controllers_stop_tx.send(true);
            Ok(())
        },
    )];
    health.add_shutdown();

    // RBAC's escalation check is an admission plugin of the RBAC kinds;
    // CEL's `authorizer` asks the server's authorizer.
    let admission = config
        .admission
        .clone()
        .with_authorizer(Arc::new(crate::authz::cel::CelChecker(authorizer.clone())));
    let admission = match authorizer.rbac() {
        Some(rbac) => admission.with(Arc::new(crate::authz::escalation::EscalationCheck::new(
            authorizer.clone(),
            rbac.clone(),
        ))),
        None => admission,
    };
    let stores = Stores::new(
        &scheme,
        storage,
        &config.storage_prefix,
        config.watch_cache.as_ref(),
        admission,
    );
    // Bootstrap tokens are Secrets in `kube-system`.
    if let Some((secrets, _)) = stores.get("", "v1", "secrets") {
        authenticator.set_secrets(secrets.clone());
    }
    let parts = ApiServerParts {
        scheme,
        stores,
        docs,
        authenticator,
        authorizer,
        version,
        health: Arc::new(health),
        min_request_timeout: config.filters.min_request_timeout,
        aggregator,
    };
    let server = Arc::new(ApiServer::new(parts, stop_rx.clone()));
    let (service, chain) = crate::filters::build(
        server.clone().director(),
        &config.filters,
        Arc::new(server.authenticator().clone()),
        Arc::new(server.authorizer().clone()),
        flow_control,
        auditor,
    );
    let hook_ctx = lifecycle::HookContext {
        server: server.clone(),
    };
    tracing::info!(%url, kubeconfig = %kubeconfig_path.display(), "serving; use: kubectl --kubeconfig {}", kubeconfig_path.display());

    tokio::spawn(tls_config.clone().watch(stop_rx.clone()));
    if let Some(lookup) = lookup {
        tokio::spawn(lookup.keep_current(stop_rx.clone()));
    }
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_headers(MAX_HEADER_LINES)
        .max_buf_size(MAX_HEADER_BYTES);
    tokio::pin!(shutdown);
    // The OpenAPI documents are built in the background once the
    // post-start hooks finished (not to slow start-up; a request for them
    // before that waits for them).
    let openapi = server.documents().openapi.clone();
    let post_start = post_start.run(hook_ctx.clone(), move || openapi.prepare());
    tokio::pin!(post_start);
    let mut pre_shutdown = Some(pre_shutdown);
    let mut pre_shutdown_task = None;
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
                // Bound what the kernel queues for a client that stopped
                // reading (see `UNSENT_LIMIT`).
                #[cfg(any(target_os = "linux", target_os = "android"))]
                let _ = socket2::SockRef::from(&tcp).set_tcp_notsent_lowat(UNSENT_LIMIT);
                let acceptor = TlsAcceptor::from(tls_config.current());
                let service = service.clone();
                let builder = builder.clone();
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    let tls = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            crate::metrics::global().tls_handshake_errors.inc();
                            return;
                        }
                        Err(_) => {
                            crate::metrics::global().tls_handshake_errors.inc();
                            return;
                        }
                    };
                    // A verified client certificate authenticates every request of the connection.
                    let cert = tls.get_ref().1.peer_certificates().filter(|c| !c.is_empty()).map(|c| {
                        crate::request::user::ClientCertificate(Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()))
                    });
                    let service = TowerToHyperService::new(tower::ServiceExt::map_request(
                        service,
                        move |req: http::Request<hyper::body::Incoming>| {
                            let mut req = request_body::RequestBody::new(req);
                            if let Some(cert) = &cert {
                                req.extensions_mut().insert(cert.clone());
                            }
                            req.extensions_mut().insert(crate::request::PeerAddr(peer));
                            req
                        },
                    ));
                    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
                    if let Err(e) = watcher.watch(conn.into_owned()).await {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                });
            }
            (name, error) = &mut post_start => {
                tracing::error!(hook = name, %error, "post-start hook failed; stopping");
                return Err(Error::PostStartHook(name, error));
            }
            () = &mut shutdown, if pre_shutdown.is_some() => {
                tracing::info!(delay = ?config.shutdown_delay, "shutdown requested; /readyz now fails");
                server.begin_shutdown();
                delay.as_mut().reset(tokio::time::Instant::now() + config.shutdown_delay);
                let hooks = pre_shutdown.take().unwrap_or_default();
                pre_shutdown_task = Some(tokio::spawn(lifecycle::run_pre_shutdown(hooks, hook_ctx.clone())));
            }
            () = &mut delay, if pre_shutdown.is_none() => break,
        }
    }
    if let Some(task) = pre_shutdown_task {
        let _ = task.await;
    }
    drop(listener);
    tracing::info!("listener closed; draining in-flight requests");
    chain.in_flight.close();
    let drain = config.filters.request_timeout.max(Duration::from_secs(1)) + Duration::from_secs(1);
    if tokio::time::timeout(drain, chain.in_flight.drained())
        .await
        .is_err()
    {
        tracing::warn!(
            in_flight = chain.in_flight.current(),
            "in-flight requests did not finish within the request timeout"
        );
    }
    // Watches end now, with a clean end of their streams.
    let _ = stop_tx.send(true);
    if tokio::time::timeout(Duration::from_secs(10), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections did not close within 10s");
    }
    tracing::info!("shutdown complete");
    Ok(())
}
