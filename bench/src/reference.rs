//! The reference servers: the same stack as apiforge (tokio-rustls with ring,
//! hyper-util's auto HTTP/1.1 + HTTP/2 builder, the same certificate) with
//! no API logic at all. [`Reference::serve`] hands each request to a
//! handler inside the benchmark's process (the admission webhook);
//! [`listen`] is the server loop both that and the reference processes of
//! `ref_process` run.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use http::{Request, Response, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::client::{self, Target};

/// Answers one request of a reference server.
pub(crate) type Handler =
    Arc<dyn Fn(Request<Incoming>) -> BoxFuture<'static, Response<Full<Bytes>>> + Send + Sync>;

/// A reference server running in the benchmark's process; stopped on drop.
pub(crate) struct Reference {
    /// How to reach it (same CA as the apiforge server whose cert it uses).
    pub(crate) target: Target,
    task: JoinHandle<()>,
}

impl Drop for Reference {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Reference {
    /// Serves every request with `handler`, with the serving certificate of
    /// the apiforge data dir `data_dir`, trusted through the same client
    /// settings as `apiforge`.
    pub(crate) async fn serve(
        data_dir: &Path,
        apiforge: &Target,
        handler: Handler,
    ) -> anyhow::Result<Reference> {
        let (addr, task) = listen(data_dir, handler).await?;
        Ok(Reference {
            target: Target {
                addr,
                token: apiforge.token.clone(),
                tls: apiforge.tls.clone(),
            },
            task,
        })
    }
}

/// Binds a loopback port and serves every connection on it with `handler`
/// over TLS with the serving certificate of the apiforge data dir
/// `data_dir`; returns the address and the accepting task.
pub(crate) async fn listen(
    data_dir: &Path,
    handler: Handler,
) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let certs = CertificateDer::pem_file_iter(data_dir.join("apiserver.crt"))
        .context("reading apiserver.crt")?
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(data_dir.join("apiserver.key"))
        .context("reading apiserver.key")?;
    let mut cfg = ServerConfig::builder_with_provider(client::provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(cfg));
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let builder = auto::Builder::new(TokioExecutor::new());
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let builder = builder.clone();
            let handler = handler.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service =
                    service_fn(move |req: Request<Incoming>| handler(req).map(Ok::<_, Infallible>));
                let _ = builder
                    .serve_connection_with_upgrades(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok((addr, task))
}

/// A JSON response with `status` and `body`.
pub(crate) fn json_response(status: http::StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}
