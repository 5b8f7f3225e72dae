//! The benchmark's HTTP client: HTTP/1.1 keep-alive connections over
//! rustls (ring), one connection per task, requests sent sequentially.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use base64::Engine;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use tokio::net::TcpSocket;
use tokio_rustls::TlsConnector;

/// Where and how to reach one server.
#[derive(Clone)]
pub(crate) struct Target {
    /// Socket address.
    pub(crate) addr: SocketAddr,
    /// Bearer token (may be empty).
    pub(crate) token: String,
    /// TLS settings trusting the server's CA.
    pub(crate) tls: Arc<ClientConfig>,
}

/// What the benchmark needs from an admin kubeconfig.
pub(crate) struct Kubeconfig {
    /// PEM of the CA.
    pub(crate) ca_pem: Vec<u8>,
    /// The bearer token.
    pub(crate) token: String,
}

/// Reads `certificate-authority-data` and `token` from a
/// kubeconfig with simple line parsing (apiforge writes a fixed layout).
pub(crate) fn read_kubeconfig(path: &Path) -> anyhow::Result<Kubeconfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name).map(|v| v.trim().to_string()))
            .ok_or_else(|| anyhow!("{} has no {name}", path.display()))
    };
    let ca = field("certificate-authority-data:")?;
    let token = field("token:")?;
    let ca_pem = base64::engine::general_purpose::STANDARD
        .decode(ca.as_bytes())
        .context("certificate-authority-data is not base64")?;
    Ok(Kubeconfig { ca_pem, token })
}

/// The rustls crypto provider used everywhere (ring).
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client config trusting the certificates in `ca_pem`, HTTP/1.1 ALPN.
pub(crate) fn tls_config(ca_pem: &[u8]) -> anyhow::Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(cert.context("parsing CA PEM")?)
            .context("adding CA")?;
    }
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A client config that accepts any certificate: only for polling
/// `/readyz` of a server whose CA does not exist yet.
pub(crate) fn insecure_tls_config() -> anyhow::Result<Arc<ClientConfig>> {
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider())))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
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
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One HTTP/1.1 keep-alive connection.
pub(crate) struct Conn {
    target: Target,
    sender: http1::SendRequest<Full<Bytes>>,
}

/// One HTTP/2 connection (ALPN `h2`), as client-go and kubectl open
/// them: requests are streams on it.
pub(crate) struct H2Conn {
    target: Target,
    sender: http2::SendRequest<Full<Bytes>>,
}

impl H2Conn {
    /// Connects to `target` over HTTP/2.
    pub(crate) async fn connect(target: &Target) -> anyhow::Result<H2Conn> {
        let mut tls = (*target.tls).clone();
        tls.alpn_protocols = vec![b"h2".to_vec()];
        let h2_target = Target {
            tls: Arc::new(tls),
            ..target.clone()
        };
        let stream = open_stream(&h2_target, None).await?;
        if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
            bail!("the server did not negotiate HTTP/2");
        }
        let (sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .context("HTTP/2 handshake")?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(H2Conn {
            target: target.clone(),
            sender,
        })
    }

    /// Sends a GET on a new stream and returns the response head with a
    /// streaming body.
    pub(crate) async fn get_streaming(&mut self, path: &str) -> anyhow::Result<Response<Incoming>> {
        let mut b = Request::builder()
            .method(Method::GET)
            .uri(format!("https://{}{path}", self.target.addr))
            .header(header::ACCEPT, "application/json");
        if !self.target.token.is_empty() {
            b = b.header(
                header::AUTHORIZATION,
                format!("Bearer {}", self.target.token),
            );
        }
        let req = b.body(Full::new(Bytes::new()))?;
        self.sender.ready().await.context("connection not ready")?;
        Ok(self.sender.send_request(req).await?)
    }
}

/// A response read completely.
pub(crate) struct Reply {
    /// Status code.
    pub(crate) status: StatusCode,
    /// Body.
    pub(crate) body: Bytes,
}

impl Reply {
    /// Fails unless the status is 2xx, quoting the body.
    pub(crate) fn ok(self) -> anyhow::Result<Bytes> {
        if self.status.is_success() {
            Ok(self.body)
        } else {
            bail!(
                "HTTP {}: {}",
                self.status,
                String::from_utf8_lossy(&self.body[..self.body.len().min(300)])
            )
        }
    }
}

/// Opens a TCP + TLS connection; `recv_buffer` shrinks the socket's
/// receive buffer (used for the stalled watcher).
async fn open_stream(
    target: &Target,
    recv_buffer: Option<u32>,
) -> anyhow::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let socket = if target.addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(size) = recv_buffer {
        socket.set_recv_buffer_size(size)?;
    }
    let tcp = socket
        .connect(target.addr)
        .await
        .with_context(|| format!("connecting to {}", target.addr))?;
    tcp.set_nodelay(true)?;
    let name = ServerName::IpAddress(target.addr.ip().into());
    let tls = TlsConnector::from(target.tls.clone())
        .connect(name, tcp)
        .await
        .context("TLS handshake")?;
    Ok(tls)
}

impl Conn {
    /// Connects to `target`.
    pub(crate) async fn connect(target: &Target) -> anyhow::Result<Conn> {
        Self::connect_with(target, None).await
    }

    /// Connects with an optional small receive buffer.
    pub(crate) async fn connect_with(
        target: &Target,
        recv_buffer: Option<u32>,
    ) -> anyhow::Result<Conn> {
        let tls = open_stream(target, recv_buffer).await?;
        let (sender, conn) = http1::handshake(TokioIo::new(tls))
            .await
            .context("HTTP/1.1 handshake")?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            target: target.clone(),
            sender,
        })
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
        self.request_typed(method, path, "application/json", body)
    }

    fn request_typed(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
        let mut b = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, self.target.addr.to_string())
            .header(header::ACCEPT, "application/json");
        if !self.target.token.is_empty() {
            b = b.header(
                header::AUTHORIZATION,
                format!("Bearer {}", self.target.token),
            );
        }
        if body.is_some() {
            b = b.header(header::CONTENT_TYPE, content_type);
        }
        Ok(b.body(Full::new(body.unwrap_or_default()))?)
    }

    /// Sends a request and returns the response head with a streaming body.
    pub(crate) async fn send_streaming(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Response<Incoming>> {
        let req = self.request(method, path, body)?;
        self.sender.ready().await.context("connection not ready")?;
        Ok(self.sender.send_request(req).await?)
    }

    /// Sends a request and reads the whole response.
    pub(crate) async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Reply> {
        let resp = self.send_streaming(method, path, body).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok(Reply { status, body })
    }

    /// Sends a request whose body has `content_type` (a patch) and reads
    /// the whole response.
    pub(crate) async fn send_typed(
        &mut self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> anyhow::Result<Reply> {
        let req = self.request_typed(method, path, content_type, Some(body))?;
        self.sender.ready().await.context("connection not ready")?;
        let resp = self.sender.send_request(req).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok(Reply { status, body })
    }

    /// Whether the connection is gone (the peer closed it or it failed).
    pub(crate) fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// GET.
    pub(crate) async fn get(&mut self, path: &str) -> anyhow::Result<Reply> {
        self.send(Method::GET, path, None).await
    }
}

/// Finds the string value of the first `"key":"value"` in `buf`
/// (no unescaping; for resourceVersion, continue tokens and annotations).
pub(crate) fn find_str<'a>(buf: &'a [u8], key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":\"");
    let start = memchr::memmem::find(buf, pat.as_bytes())? + pat.len();
    let len = memchr::memchr(b'"', &buf[start..])?;
    std::str::from_utf8(&buf[start..start + len]).ok()
}
