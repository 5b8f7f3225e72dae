//! The webhook backend (`--audit-webhook-config-file`): events are POSTed
//! as `audit.k8s.io/v1` `EventList`s to the server a kubeconfig names.
//!
//! In `batch` mode events go to a bounded queue (never blocking a request;
//! when the queue is full the event is dropped and logged, as upstream) and
//! a task sends a batch when `--audit-webhook-batch-max-size` events are
//! queued or `--audit-webhook-batch-max-wait` passed since the first. In
//! `blocking` mode every event is sent before the request goes on.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;

use crate::audit::event::{Event, EventList};

/// How events are sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WebhookMode {
    /// Buffered and sent asynchronously in batches.
    #[default]
    Batch,
    /// Sent one by one while the request waits.
    Blocking,
}

/// Webhook backend settings.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    /// The kubeconfig naming the server.
    pub config_file: PathBuf,
    /// The mode.
    pub mode: WebhookMode,
    /// Queue capacity (`--audit-webhook-batch-buffer-size`).
    pub buffer_size: usize,
    /// Events per batch at most.
    pub batch_max_size: usize,
    /// Longest wait before a partial batch is sent.
    pub batch_max_wait: Duration,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            config_file: PathBuf::new(),
            mode: WebhookMode::Batch,
            buffer_size: 10000,
            batch_max_size: 400,
            batch_max_wait: Duration::from_secs(30),
        }
    }
}

/// Where and how to POST.
struct Target {
    uri: http::Uri,
    tls: Option<tokio_rustls::TlsConnector>,
    bearer: Option<String>,
}

/// The webhook backend.
pub struct WebhookBackend {
    target: Arc<Target>,
    mode: WebhookMode,
    queue: Option<mpsc::Sender<Event>>,
}

fn field<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(serde_json::Value::as_str)
}

fn read_file(base: &Path, file: &str) -> Result<Vec<u8>, String> {
    let p = base.join(file);
    std::fs::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))
}

fn decode_b64(data: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| e.to_string())
}

fn load_target(path: &Path) -> Result<Target, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let config: serde_json::Value = serde_saphyr::from_str(&text).map_err(|e| e.to_string())?;
    let base = path.parent().unwrap_or(Path::new("."));
    let cluster = config
        .get("clusters")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("cluster"))
        .ok_or("the kubeconfig names no cluster")?;
    let server = field(cluster, "server").ok_or("the kubeconfig's cluster has no server")?;
    let uri: http::Uri = server
        .parse()
        .map_err(|e| format!("server {server:?}: {e}"))?;
    let user = config
        .get("users")
        .and_then(|u| u.get(0))
        .and_then(|u| u.get("user"));
    let bearer = user.and_then(|u| field(u, "token")).map(str::to_string);
    let tls = match uri.scheme_str() {
        Some("http") => None,
        Some("https") => {
            let mut roots = rustls::RootCertStore::empty();
            let ca = match (
                field(cluster, "certificate-authority-data"),
                field(cluster, "certificate-authority"),
            ) {
                (Some(data), _) => Some(decode_b64(data)?),
                (None, Some(file)) => Some(read_file(base, file)?),
                _ => None,
            };
            let Some(ca) = ca else {
                return Err("an https webhook needs certificate-authority(-data)".into());
            };
            for cert in rustls_pemfile_certs(&ca)? {
                roots.add(cert).map_err(|e| e.to_string())?;
            }
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
            Some(tokio_rustls::TlsConnector::from(Arc::new(config)))
        }
        _ => return Err(format!("server {server:?} is not an http(s) URL")),
    };
    Ok(Target { uri, tls, bearer })
}

fn rustls_pemfile_certs(
    pem: &[u8],
) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>, String> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

impl Target {
    async fn post(&self, body: Bytes) -> Result<(), String> {
        let host = self.uri.host().ok_or("no host")?.trim_matches(['[', ']']);
        let port = self
            .uri
            .port_u16()
            .unwrap_or(if self.tls.is_some() { 443 } else { 80 });
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| e.to_string())?;
        match &self.tls {
            None => self.send(TokioIo::new(tcp), body).await,
            Some(tls) => {
                let name = rustls_pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| e.to_string())?;
                let stream = tls.connect(name, tcp).await.map_err(|e| e.to_string())?;
                self.send(TokioIo::new(stream), body).await
            }
        }
    }

    async fn send<I>(&self, io: I, body: Bytes) -> Result<(), String>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let path = self
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let mut req = http::Request::post(path)
            .header(
                http::header::HOST,
                self.uri.authority().map_or("", |a| a.as_str()),
            )
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json");
        if let Some(token) = &self.bearer {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let req = req
            .body(http_body_util::Full::new(body))
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(format!("the webhook answered {}", resp.status()))
        }
    }

    async fn send_events(&self, events: &[Event]) {
        let body = match serde_json::to_vec(&EventList::new(events)) {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                tracing::error!(error = %e, "audit: encoding events failed");
                return;
            }
        };
        if let Err(e) = self.post(body).await {
            tracing::error!(
                "Error in audit plugin 'webhook' affecting {} audit events: {e}",
                events.len()
            );
        }
    }
}

impl WebhookBackend {
    /// Reads the kubeconfig and, in batch mode, starts the sending task.
    pub fn new(options: &WebhookOptions) -> Result<Self, String> {
        let target = Arc::new(load_target(&options.config_file).map_err(|e| {
            format!(
                "invalid audit webhook config file {:?}: {e}",
                options.config_file
            )
        })?);
        let queue = match options.mode {
            WebhookMode::Blocking => None,
            WebhookMode::Batch => {
                let (tx, rx) = mpsc::channel(options.buffer_size.max(1));
                tokio::spawn(run_batches(
                    target.clone(),
                    rx,
                    options.batch_max_size.max(1),
                    options.batch_max_wait,
                ));
                Some(tx)
            }
        };
        Ok(WebhookBackend {
            target,
            mode: options.mode,
            queue,
        })
    }

    /// Queues (batch) or sends (blocking) an event.
    pub async fn process(&self, event: &Event) {
        match (&self.queue, self.mode) {
            (Some(queue), _) => {
                if queue.try_send(event.clone()).is_err() {
                    tracing::error!(
                        audit_id = %event.audit_id,
                        "Error in audit plugin 'webhook' affecting 1 audit events: audit buffer queue blocked"
                    );
                }
            }
            (None, _) => self.target.send_events(std::slice::from_ref(event)).await,
        }
    }
}

async fn run_batches(
    target: Arc<Target>,
    mut rx: mpsc::Receiver<Event>,
    max_size: usize,
    max_wait: Duration,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + max_wait;
        while batch.len() < max_size {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(ev)) => batch.push(ev),
                Ok(None) | Err(_) => break,
            }
        }
        target.send_events(&batch).await;
    }
}
