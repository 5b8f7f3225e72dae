//! A small HTTPS webhook server for authentication and authorization tests:
//! it serves with a certificate of its own CA (optionally requiring client
//! certificates from another), records every request body and
//! `Authorization` header, and answers with a handler.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};
use rustls_pki_types::pem::PemObject;
use serde_json::Value;

use super::auth::TestCa;

/// Answers a request body with a status code and a JSON body.
pub type Handler = Arc<dyn Fn(&Value) -> (u16, Value) + Send + Sync>;

/// A received request: its JSON body and `Authorization` header.
pub type Received = (Value, Option<String>);

/// A running webhook; stops (closing its connections) when dropped.
pub struct Webhook {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    calls: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Received>>>,
    /// The CA of its serving certificate.
    pub ca: TestCa,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Webhook {
    /// Starts a webhook answering with `handler`; with `client_ca`, the TLS
    /// handshake requires a client certificate of that CA.
    pub async fn start(handler: Handler, client_ca: Option<&TestCa>) -> Webhook {
        Self::start_named(handler, client_ca, &[]).await
    }

    /// [`Webhook::start`] with a serving certificate that also names
    /// `names` (e.g. a service's `<name>.<namespace>.svc`).
    pub async fn start_named(
        handler: Handler,
        client_ca: Option<&TestCa>,
        names: &[&str],
    ) -> Webhook {
        Self::start_on(handler, client_ca, names, "127.0.0.1").await
    }

    /// [`Webhook::start_named`] listening on `ip` instead of 127.0.0.1.
    pub async fn start_on(
        handler: Handler,
        client_ca: Option<&TestCa>,
        names: &[&str],
        ip: &str,
    ) -> Webhook {
        let ca = TestCa::new("webhook-ca");
        let key = KeyPair::generate().expect("key");
        let mut sans = vec!["127.0.0.1".to_string()];
        sans.extend(names.iter().map(|n| n.to_string()));
        let mut params = CertificateParams::new(sans).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "webhook");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, ca.issuer()).expect("cert");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("versions");
        let builder = match client_ca {
            Some(client_ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in
                    rustls_pki_types::CertificateDer::pem_slice_iter(client_ca.cert_pem.as_bytes())
                {
                    roots.add(c.expect("ca pem")).expect("root");
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .expect("verifier");
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(
                vec![cert.der().clone()],
                rustls_pki_types::PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes())
                    .expect("key pem"),
            )
            .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let calls = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (c, r) = (calls.clone(), requests.clone());
        let task = tokio::spawn(async move {
            // Connections live in this set, so stopping the webhook (aborting
            // this task) also closes the connections clients keep open.
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                while connections.try_join_next().is_some() {}
                let (acceptor, handler, calls, requests) =
                    (acceptor.clone(), handler.clone(), c.clone(), r.clone());
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            let (handler, calls, requests) =
                                (handler.clone(), calls.clone(), requests.clone());
                            async move {
                                let auth = req
                                    .headers()
                                    .get("authorization")
                                    .and_then(|v| v.to_str().ok())
                                    .map(str::to_string);
                                let body = req
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes())
                                    .unwrap_or_default();
                                let body: Value = serde_json::from_slice(&body).unwrap_or_default();
                                calls.fetch_add(1, Ordering::SeqCst);
                                let (code, answer) = handler(&body);
                                requests.lock().expect("lock").push((body, auth));
                                let mut resp = http::Response::new(http_body_util::Full::new(
                                    bytes_of(&answer),
                                ));
                                *resp.status_mut() =
                                    http::StatusCode::from_u16(code).expect("code");
                                resp.headers_mut().insert(
                                    "content-type",
                                    http::HeaderValue::from_static("application/json"),
                                );
                                Ok::<_, std::convert::Infallible>(resp)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Webhook {
            port,
            calls,
            requests,
            ca,
            task,
        }
    }

    /// How many requests it answered so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The bodies and `Authorization` headers it received.
    pub fn requests(&self) -> Vec<Received> {
        self.requests.lock().expect("lock").clone()
    }

    /// Writes a kubeconfig naming this webhook (its CA as a file next to
    /// it), with a bearer `token` and/or a client certificate.
    pub fn kubeconfig(
        &self,
        dir: &Path,
        name: &str,
        token: Option<&str>,
        client_cert: Option<&(PathBuf, PathBuf)>,
    ) -> PathBuf {
        let ca = self.ca.write(dir, &format!("{name}-ca.crt"));
        let mut user = serde_json::Map::new();
        if let Some(token) = token {
            user.insert("token".into(), token.into());
        }
        if let Some((crt, key)) = client_cert {
            user.insert(
                "client-certificate".into(),
                crt.display().to_string().into(),
            );
            user.insert("client-key".into(), key.display().to_string().into());
        }
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "webhook", "cluster": {
                "server": format!("https://127.0.0.1:{}/review", self.port),
                "certificate-authority": ca.file_name().and_then(|f| f.to_str()).expect("name"),
            }}],
            "users": [{"name": "apiserver", "user": user}],
            "contexts": [{"name": "webhook", "context": {"cluster": "webhook", "user": "apiserver"}}],
            "current-context": "webhook",
        });
        let path = dir.join(format!("{name}.kubeconfig"));
        std::fs::write(&path, serde_json::to_vec_pretty(&config).expect("json")).expect("write");
        path
    }
}

fn bytes_of(v: &Value) -> bytes::Bytes {
    bytes::Bytes::from(serde_json::to_vec(v).expect("json"))
}
