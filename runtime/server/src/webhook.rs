//! Clients of the webhooks a kubeconfig file names (the audit backend,
//! token authentication, authorization).
//!
//! As client-go's webhook helper does, the kubeconfig's current context (or
//! its first cluster and user) gives the server URL, the CA that signs the
//! webhook's serving certificate (`certificate-authority(-data)`;
//! `insecure-skip-tls-verify` is not supported) and the client credentials
//! (`client-certificate(-data)` + `client-key(-data)`, `token`,
//! `tokenFile`). Calls go over HTTP/1.1 connections kept in a small pool
//! per client (as Go's transport keeps idle connections), and end after the
//! request timeout (30 s upstream).
//!
//! A client may dial somewhere other than its URL's host: an admission
//! webhook's `service` reference is named `https://<name>.<namespace>.svc`
//! (the name its certificate is verified against) but dialled at the
//! address the service resolves to ([`Dial`]), resolved anew for each new
//! connection.
//!
//! [`Client::post_json`] retries like upstream's `WithExponentialBackoff`
//! with `DefaultShouldRetry`: transport errors, 429 and 5xx answers are
//! retried after 500 ms, then ×1.5 (±20 % jitter), 5 attempts in all.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// Errors of webhook configuration and calls.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig file is unusable.
    #[error("webhook config file {path:?}: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The webhook could not be reached, or the exchange failed.
    #[error("Post {url:?}: {message}")]
    Transport {
        /// The webhook URL.
        url: String,
        /// What failed.
        message: String,
    },
    /// The webhook answered with a non-2xx status.
    #[error(
        "the server responded with the status code {code} but did not return more information (post {kind})"
    )]
    Status {
        /// The HTTP status code.
        code: u16,
        /// What was posted, as client-go names it (`tokenreviews.authentication.k8s.io`).
        kind: String,
    },
    /// The webhook's answer is not the expected JSON.
    #[error("couldn't decode the webhook response: {0}")]
    Decode(String),
}

impl Error {
    /// Whether upstream's `DefaultShouldRetry` would try again.
    fn retryable(&self) -> bool {
        match self {
            Error::Transport { .. } => true,
            Error::Status { code, .. } => *code == 429 || *code >= 500,
            Error::Config { .. } | Error::Decode(_) => false,
        }
    }
}

/// The request timeout of webhook calls (client-go's
/// `DefaultRequestTimeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The client credentials of one kubeconfig user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserCredentials {
    /// A bearer token (`token` or `tokenFile`).
    pub token: Option<String>,
    /// Basic authentication (`username`, `password`).
    pub basic: Option<(String, String)>,
    /// A client certificate chain and key, PEM
    /// (`client-certificate(-data)`, `client-key(-data)`).
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
}

impl UserCredentials {
    /// The credentials of a kubeconfig `user` entry: `token` or `tokenFile`,
    /// `username`/`password`, `client-certificate(-data)` with
    /// `client-key(-data)`; files are relative to `base`.
    pub fn from_kubeconfig_user(user: &Value, base: &Path) -> Result<Self, String> {
        let token = match (field(user, "token"), field(user, "tokenFile")) {
            (Some(token), _) => Some(token.to_string()),
            (None, Some(file)) => Some(
                std::fs::read_to_string(base.join(file))
                    .map_err(|e| format!("reading {file}: {e}"))?
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
        let basic = field(user, "username").map(|name| {
            (
                name.to_string(),
                field(user, "password").unwrap_or_default().to_string(),
            )
        });
        let cert = data_or_file(user, "client-certificate", base)?;
        let key = data_or_file(user, "client-key", base)?;
        let client_cert = match (cert, key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => return Err("client-certificate and client-key must be given together".into()),
        };
        Ok(UserCredentials {
            token,
            basic,
            client_cert,
        })
    }
}

/// Where a client connects: `(host, port)`, or why it cannot.
pub type DialResult = Result<(String, u16), String>;

/// Finds the address to dial for a client whose URL names a service
/// rather than a host (see the module docs).
pub trait Dial: Send + Sync {
    /// The address to connect to now.
    fn dial(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = DialResult> + Send + '_>>;
}

type Sender = hyper::client::conn::http1::SendRequest<http_body_util::Full<Bytes>>;

/// An HTTP/1.1 connection's I/O (plain or TLS), a future that runs until
/// the connection ends.
type Driver = std::pin::Pin<Box<dyn std::future::Future<Output = hyper::Result<()>> + Send>>;

/// One pooled connection: the handle requests are sent on and its I/O,
/// driven by the task that uses it rather than a task of its own, so an
/// exchange wakes no other task (the aggregator's proxy does the same).
struct Connection {
    sender: Sender,
    driver: Driver,
}

impl Connection {
    /// Whether the connection can take another request: its driver has not
    /// ended (a server that closed an idle connection ends it here).
    fn alive(&mut self) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        !self.sender.is_closed() && self.driver.as_mut().poll(&mut cx).is_pending()
    }
}

/// Idle connections kept per client.
const POOL_SIZE: usize = 16;

/// A webhook endpoint and the credentials to call it.
pub struct Client {
    uri: http::Uri,
    tls: Option<tokio_rustls::TlsConnector>,
    /// The `Authorization` header value (`Bearer ...` or `Basic ...`).
    authorization: Option<String>,
    timeout: Duration,
    dial: Option<Arc<dyn Dial>>,
    /// The URL's authority, the `host` label of `rest_client_requests_total`.
    host: String,
    idle: std::sync::Mutex<Vec<Connection>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("uri", &self.uri)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

fn field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn decode_b64(data: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| e.to_string())
}

/// Inline `<key>-data` (base64) or the file `<key>` relative to `base`.
fn data_or_file(v: &Value, key: &str, base: &Path) -> Result<Option<Vec<u8>>, String> {
    if let Some(data) = field(v, &format!("{key}-data")) {
        return decode_b64(data).map(Some);
    }
    match field(v, key) {
        Some(file) => {
            let p = base.join(file);
            std::fs::read(&p)
                .map(Some)
                .map_err(|e| format!("reading {}: {e}", p.display()))
        }
        None => Ok(None),
    }
}

/// The named entry (`clusters`, `users`) of the current context, else the
/// first one.
fn entry<'a>(config: &'a Value, list: &str, item: &str, context_key: &str) -> Option<&'a Value> {
    let entries = config.get(list)?.as_array()?;
    let current = field(config, "current-context");
    let wanted = current.and_then(|name| {
        config
            .get("contexts")?
            .as_array()?
            .iter()
            .find(|c| field(c, "name") == Some(name))?
            .get("context")
            .and_then(|c| field(c, context_key))
    });
    let found = match wanted {
        Some(name) => entries.iter().find(|e| field(e, "name") == Some(name)),
        None => entries.first(),
    };
    found?.get(item)
}

impl Client {
    /// Reads the kubeconfig at `path`.
    pub fn from_kubeconfig(path: &Path) -> Result<Self, Error> {
        Self::load(path).map_err(|message| Error::Config {
            path: path.to_path_buf(),
            message,
        })
    }

    fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let config: Value = serde_saphyr::from_str(&text).map_err(|e| e.to_string())?;
        let base = path.parent().unwrap_or(Path::new("."));
        let cluster = entry(&config, "clusters", "cluster", "cluster")
            .ok_or("the kubeconfig names no cluster")?;
        let server = field(cluster, "server").ok_or("the kubeconfig's cluster has no server")?;
        let uri: http::Uri = server
            .parse()
            .map_err(|e| format!("server {server:?}: {e}"))?;
        let no_user = Value::Null;
        let user = entry(&config, "users", "user", "user").unwrap_or(&no_user);
        let credentials = UserCredentials::from_kubeconfig_user(user, base)?;
        let tls = match uri.scheme_str() {
            Some("http") => None,
            Some("https") => Some(tls_connector(cluster, &credentials, base)?),
            _ => return Err(format!("server {server:?} is not an http(s) URL")),
        };
        Ok(Client {
            host: authority(&uri),
            uri,
            tls,
            authorization: credentials.token.map(|t| format!("Bearer {t}")),
            timeout: DEFAULT_TIMEOUT,
            dial: None,
            idle: Default::default(),
        })
    }

    /// A client of `url` (`https`, or `http` for tests) trusting the PEM
    /// certificates of `ca_bundle` (a CRD's or webhook configuration's
    /// `caBundle`), or the system's trust roots when there is none, as
    /// upstream; without credentials of its own.
    pub fn for_url(url: &str, ca_bundle: Option<&[u8]>, timeout: Duration) -> Result<Self, String> {
        Self::for_url_as(url, ca_bundle, timeout, None)
    }

    /// [`for_url`](Self::for_url) presenting `credentials` (a bearer
    /// token, basic authentication and/or a client certificate).
    pub fn for_url_as(
        url: &str,
        ca_bundle: Option<&[u8]>,
        timeout: Duration,
        credentials: Option<&UserCredentials>,
    ) -> Result<Self, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("url {url:?}: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("https") => {
                let roots = match ca_bundle.filter(|ca| !ca.is_empty()) {
                    Some(ca) => roots(ca, "caBundle")?,
                    None => system_roots()?,
                };
                let config = with_client_cert(
                    client_config(roots)?,
                    credentials.and_then(|c| c.client_cert.as_ref()),
                )?;
                Some(tokio_rustls::TlsConnector::from(Arc::new(config)))
            }
            Some("http") => None,
            _ => return Err(format!("url {url:?} is not an http(s) URL")),
        };
        let authorization = credentials.and_then(|c| match (&c.token, &c.basic) {
            (Some(token), _) => Some(format!("Bearer {token}")),
            (None, Some((user, password))) => {
                use base64::Engine;
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
                ))
            }
            (None, None) => None,
        });
        Ok(Client {
            host: authority(&uri),
            uri,
            tls,
            authorization,
            timeout,
            dial: None,
            idle: Default::default(),
        })
    }

    /// This client, dialling the addresses `dial` finds instead of its
    /// URL's host (which still names the server for TLS verification).
    pub fn with_dial(mut self, dial: Arc<dyn Dial>) -> Self {
        self.dial = Some(dial);
        self
    }

    /// The webhook URL.
    pub fn url(&self) -> String {
        self.uri.to_string()
    }

    /// This client with each call limited to `timeout` instead.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// A client of the same server, TLS settings and credentials calling
    /// `path` under the URL's own path (as client-go appends an API path
    /// to a kubeconfig's `server`): a delegating server's TokenReview,
    /// SubjectAccessReview and ConfigMap calls. It keeps its own
    /// connection pool.
    pub fn at_path(&self, path: &str) -> Result<Self, String> {
        let base = self.uri.path().trim_end_matches('/');
        let mut parts = self.uri.clone().into_parts();
        parts.path_and_query = Some(
            format!("{base}{path}")
                .parse()
                .map_err(|e| format!("path {path:?}: {e}"))?,
        );
        let uri = http::Uri::from_parts(parts).map_err(|e| format!("path {path:?}: {e}"))?;
        Ok(Client {
            host: authority(&uri),
            uri,
            tls: self.tls.clone(),
            authorization: self.authorization.clone(),
            timeout: self.timeout,
            dial: self.dial.clone(),
            idle: Default::default(),
        })
    }

    /// Counts one exchange in `rest_client_requests_total`.
    fn count<E>(
        &self,
        method: &http::Method,
        result: &Result<Result<(http::StatusCode, Bytes), String>, E>,
    ) {
        let status = match result {
            Ok(Ok((status, _))) => Some(*status),
            _ => None,
        };
        crate::metrics::global().count_client_request(status, method, &self.host);
    }

    /// GETs the URL once; the answer's status and body.
    pub async fn get(&self) -> Result<(http::StatusCode, Bytes), Error> {
        let transport = |message: String| Error::Transport {
            url: self.url(),
            message,
        };
        let result =
            tokio::time::timeout(self.timeout, self.exchange(http::Method::GET, Bytes::new()))
                .await;
        self.count(&http::Method::GET, &result);
        match result {
            Ok(result) => result.map_err(transport),
            Err(_) => Err(transport(
                "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into(),
            )),
        }
    }

    /// POSTs `body` (JSON) once; the answer's status and body.
    pub async fn post(&self, body: Bytes) -> Result<(http::StatusCode, Bytes), Error> {
        let transport = |message: String| Error::Transport {
            url: self.url(),
            message,
        };
        let result =
            tokio::time::timeout(self.timeout, self.exchange(http::Method::POST, body)).await;
        self.count(&http::Method::POST, &result);
        match result {
            Ok(result) => result.map_err(transport),
            Err(_) => Err(transport(
                "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into(),
            )),
        }
    }

    /// POSTs `body` as JSON and decodes the 2xx answer, retrying transport
    /// errors, 429 and 5xx with upstream's backoff; `kind` names what is
    /// posted in errors.
    pub async fn post_json(&self, kind: &str, body: &Value) -> Result<Value, Error> {
        let bytes =
            Bytes::from(serde_json::to_vec(body).map_err(|e| Error::Decode(e.to_string()))?);
        let mut delay = Duration::from_millis(500);
        let mut attempt = 1;
        loop {
            let result = match self.post(bytes.clone()).await {
                Ok((code, answer)) if code.is_success() => {
                    return serde_json::from_slice(&answer)
                        .map_err(|e| Error::Decode(e.to_string()));
                }
                Ok((code, _)) => Err(Error::Status {
                    code: code.as_u16(),
                    kind: kind.to_string(),
                }),
                Err(e) => Err(e),
            };
            match result {
                Err(e) if e.retryable() && attempt < 5 => {
                    tracing::debug!(error = %e, attempt, "webhook call failed, retrying");
                    let jitter = 1.0 + (rand::random::<f64>() * 0.2);
                    tokio::time::sleep(delay.mul_f64(jitter)).await;
                    delay = delay.mul_f64(1.5);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn exchange(
        &self,
        method: http::Method,
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), String> {
        let mut conn = match self.idle_connection() {
            Some(conn) => conn,
            None => self.connect().await?,
        };
        let path = self
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let mut req = http::Request::builder()
            .method(method.clone())
            .uri(path)
            .header(
                http::header::HOST,
                self.uri.authority().map_or("", |a| a.as_str()),
            )
            .header(http::header::ACCEPT, "application/json, */*");
        if method == http::Method::POST {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        if let Some(value) = &self.authorization {
            req = req.header(http::header::AUTHORIZATION, value.as_str());
        }
        let req = req
            .body(http_body_util::Full::new(body))
            .map_err(|e| e.to_string())?;
        // Whether the connection ended during the exchange: it is not
        // polled again, nor pooled.
        let mut ended = false;
        let answer = {
            let Connection { sender, driver } = &mut conn;
            let exchange = async move {
                sender.ready().await?;
                let resp = sender.send_request(req).await?;
                let code = resp.status();
                let body = resp.into_body().collect().await?.to_bytes();
                Ok::<_, hyper::Error>((code, body))
            };
            let mut exchange = std::pin::pin!(exchange);
            // The exchange and the connection's I/O in this task. A connection
            // that ends cleanly (`Connection: close`) has handed over what it
            // read already: the exchange finishes on its own.
            tokio::select! {
                biased;
                answer = &mut exchange => answer,
                result = driver.as_mut() => {
                    ended = true;
                    match result {
                        Ok(()) => exchange.await,
                        Err(e) => Err(e),
                    }
                }
            }
        };
        let answer = answer.map_err(|e| e.to_string())?;
        if !ended {
            self.put_idle(conn);
        }
        Ok(answer)
    }

    /// An idle connection that is still open.
    fn idle_connection(&self) -> Option<Connection> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(mut conn) = idle.pop() {
            if conn.alive() {
                return Some(conn);
            }
        }
        None
    }

    fn put_idle(&self, mut conn: Connection) {
        if !conn.alive() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < POOL_SIZE {
            idle.push(conn);
        }
    }

    async fn connect(&self) -> Result<Connection, String> {
        let name = self.uri.host().ok_or("no host")?.trim_matches(['[', ']']);
        let default_port = if self.tls.is_some() { 443 } else { 80 };
        let (host, port) = match &self.dial {
            Some(dial) => dial.dial().await?,
            None => (
                name.to_string(),
                self.uri.port_u16().unwrap_or(default_port),
            ),
        };
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => Self::handshake(TokioIo::new(tcp)).await,
            Some(tls) => {
                let name = rustls_pki_types::ServerName::try_from(name.to_string())
                    .map_err(|e| e.to_string())?;
                let stream = tls
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("tls: {e}"))?;
                Self::handshake(TokioIo::new(stream)).await
            }
        }
    }

    async fn handshake<I>(io: I) -> Result<Connection, String>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (sender, driver) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Connection {
            sender,
            driver: Box::pin(driver),
        })
    }
}

/// The authority of `uri` (`host:port`), empty when it has none.
fn authority(uri: &http::Uri) -> String {
    uri.authority().map(|a| a.to_string()).unwrap_or_default()
}

fn tls_connector(
    cluster: &Value,
    credentials: &UserCredentials,
    base: &Path,
) -> Result<tokio_rustls::TlsConnector, String> {
    if cluster
        .get("insecure-skip-tls-verify")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return Err("insecure-skip-tls-verify is not supported".into());
    }
    let ca = data_or_file(cluster, "certificate-authority", base)?
        .ok_or("an https webhook needs certificate-authority(-data)")?;
    let builder = client_config(roots(&ca, "certificate-authority")?)?;
    let config = with_client_cert(builder, credentials.client_cert.as_ref())?;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// A TLS client configuration for a backend the server proxies to (an
/// APIService's): trusting the PEM certificates of `ca_bundle` (the system
/// roots without one), or any certificate with `insecure` (as
/// `insecureSkipTLSVerify`), presenting `client_cert` (a PEM chain and key)
/// when given, offering `alpn` protocols.
pub fn backend_tls_config(
    ca_bundle: Option<&[u8]>,
    insecure: bool,
    client_cert: Option<&(Vec<u8>, Vec<u8>)>,
    alpn: &[&[u8]],
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = if insecure {
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
    } else {
        let roots = match ca_bundle.filter(|ca| !ca.is_empty()) {
            Some(ca) => roots(ca, "caBundle")?,
            None => system_roots()?,
        };
        client_config(roots)?
    };
    let mut config = with_client_cert(builder, client_cert)?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// Accepts every server certificate (`insecureSkipTLSVerify`); signatures
/// are still checked, so the handshake itself is sound.
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Finishes a TLS client configuration, presenting `cert` (a PEM chain and
/// key) when given.
fn with_client_cert(
    builder: rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>,
    cert: Option<&(Vec<u8>, Vec<u8>)>,
) -> Result<rustls::ClientConfig, String> {
    use rustls_pki_types::pem::PemObject;
    let Some((cert, key)) = cert else {
        return Ok(builder.with_no_client_auth());
    };
    let chain = rustls_pki_types::CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("client-certificate: {e}"))?;
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| format!("client-key: {e}"))?;
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("client certificate: {e}"))
}

/// The system's trust roots (read once), for webhooks without a
/// `caBundle`.
fn system_roots() -> Result<rustls::RootCertStore, String> {
    static ROOTS: std::sync::OnceLock<Result<rustls::RootCertStore, String>> =
        std::sync::OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let mut roots = rustls::RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "none found".into());
                return Err(format!("no system trust roots: {why}"));
            }
            Ok(roots)
        })
        .clone()
}

/// The PEM certificates of `ca` as a root store (`what` names it in errors).
fn roots(ca: &[u8], what: &str) -> Result<rustls::RootCertStore, String> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca) {
        roots
            .add(cert.map_err(|e| format!("{what}: {e}"))?)
            .map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(roots)
}

/// A TLS client configuration trusting `roots`, before client auth.
fn client_config(
    roots: rustls::RootCertStore,
) -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>, String> {
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots))
}

/// A time-bounded cache of webhook answers (upstream's LRU expiring
/// caches): entries live for the TTL they were stored with; expired
/// entries are dropped when the cache grows past its size.
#[derive(Debug)]
pub struct TtlCache<V> {
    entries: std::sync::Mutex<std::collections::HashMap<String, (tokio::time::Instant, V)>>,
}

/// How many entries a [`TtlCache`] holds before it evicts.
const CACHE_SIZE: usize = 4096;

impl<V> Default for TtlCache<V> {
    fn default() -> Self {
        TtlCache {
            entries: Default::default(),
        }
    }
}

impl<V: Clone> TtlCache<V> {
    /// The live value under `key`.
    pub fn get(&self, key: &str) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(key) {
            Some((expires, v)) if *expires > tokio::time::Instant::now() => Some(v.clone()),
            _ => None,
        }
    }

    /// Stores `value` under `key` for `ttl` (nothing for a zero TTL).
    pub fn set(&self, key: String, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = tokio::time::Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CACHE_SIZE {
            entries.retain(|_, (expires, _)| *expires > now);
            if entries.len() >= CACHE_SIZE {
                entries.clear();
            }
        }
        entries.insert(key, (now + ttl, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers each request with `Connection: close` and
    /// closes: every answer is read whole, and no closed connection is
    /// reused (each call dials anew).
    #[tokio::test]
    async fn answers_on_connections_the_server_closes_are_read_whole() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                // The whole request (head and Content-Length body) first,
                // so closing sends no reset.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                loop {
                    let n = sock.read(&mut chunk).await.unwrap();
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length: usize = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + length {
                            break;
                        }
                    }
                    assert!(n > 0, "request cut short");
                }
                sock.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{\"ok\":true}",
                )
                .await
                .unwrap();
            }
        });
        let client =
            Client::for_url(&format!("http://{addr}/hook"), None, Duration::from_secs(5)).unwrap();
        for _ in 0..3 {
            let (code, body) = client.post(Bytes::from_static(b"{}")).await.unwrap();
            assert_eq!(code, http::StatusCode::OK);
            assert_eq!(&body[..], b"{\"ok\":true}");
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn cache_expires_and_skips_zero_ttl() {
        let cache = TtlCache::default();
        cache.set("a".into(), 1, Duration::from_millis(50));
        cache.set("b".into(), 2, Duration::ZERO);
        assert_eq!(cache.get("a"), Some(1));
        assert_eq!(cache.get("b"), None);
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert_eq!(cache.get("a"), None);
    }

    #[test]
    fn retries_transport_errors_429_and_5xx_only() {
        let status = |code| Error::Status {
            code,
            kind: "tokenreviews.authentication.k8s.io".into(),
        };
        assert!(status(500).retryable() && status(429).retryable());
        assert!(!status(403).retryable());
        assert!(
            Error::Transport {
                url: "https://x".into(),
                message: "refused".into()
            }
            .retryable()
        );
        assert_eq!(
            status(500).to_string(),
            "the server responded with the status code 500 but did not return more information (post tokenreviews.authentication.k8s.io)"
        );
    }

    #[test]
    fn kubeconfig_current_context() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("kubeconfig");
        let text = r#"
apiVersion: v1
kind: Config
clusters:
- name: first
  cluster: {server: "http://127.0.0.1:1/first"}
- name: second
  cluster: {server: "http://127.0.0.1:2/second"}
users:
- name: u
  user: {token: secret}
contexts:
- name: ctx
  context: {cluster: second, user: u}
current-context: ctx
"#;
        std::fs::write(&path, text).expect("write");
        let client = Client::from_kubeconfig(&path).expect("client");
        assert_eq!(client.url(), "http://127.0.0.1:2/second");
        assert_eq!(client.authorization.as_deref(), Some("Bearer secret"));
        // API paths go under the server URL's own path, credentials kept.
        let reviews = client
            .at_path("/apis/authentication.k8s.io/v1/tokenreviews")
            .expect("at_path");
        assert_eq!(
            reviews.url(),
            "http://127.0.0.1:2/second/apis/authentication.k8s.io/v1/tokenreviews"
        );
        assert_eq!(reviews.authorization.as_deref(), Some("Bearer secret"));
        std::fs::write(
            &path,
            "clusters:\n- name: c\n  cluster: {server: \"https://h\"}\n",
        )
        .expect("write");
        assert_eq!(
            Client::from_kubeconfig(&path)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(format!(
                "webhook config file {path:?}: an https webhook needs certificate-authority(-data)"
            ))
        );
    }
}
