//! Passing a request on to an APIService's backend, as kube-aggregator's
//! proxy handler does: the path and query unchanged, the caller's identity
//! in the front-proxy headers (`X-Remote-User`, `X-Remote-Group`,
//! `X-Remote-Extra-<key>`, `X-Remote-Uid`) over a TLS connection that
//! presents the proxy client certificate, the answer streamed back (watches
//! stay open as long as the backend's), upgrades bridged byte for byte.
//!
//! One HTTP/2 connection per backend carries every request when the
//! backend offers `h2` (apiforge and Go servers do); a backend that only
//! speaks HTTP/1.1 gets pooled connections (one per concurrent request,
//! back to the pool once its response was read). An upgrade request always
//! gets its own HTTP/1.1 connection.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::request::user::UserInfo;

/// The headers that belong to one connection (RFC 9110 §7.6.1), never
/// passed on.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
];

/// The front-proxy header of the user name.
pub const REMOTE_USER: &str = "x-remote-user";
/// The front-proxy header of the groups (one per group).
pub const REMOTE_GROUP: &str = "x-remote-group";
/// The front-proxy header of the uid.
pub const REMOTE_UID: &str = "x-remote-uid";
/// The prefix of the front-proxy headers of the user's extra values.
pub const REMOTE_EXTRA_PREFIX: &str = "x-remote-extra-";

/// How to reach one backend: TLS settings, the name its certificate must
/// carry, and the shared HTTP/2 connection once one is open.
pub struct Transport {
    tls: tokio_rustls::TlsConnector,
    /// `<service>.<namespace>.svc`.
    server_name: rustls_pki_types::ServerName<'static>,
    h2: tokio::sync::Mutex<Option<hyper::client::conn::http2::SendRequest<Body>>>,
    /// Idle HTTP/1.1 connections (a backend that does not offer `h2`).
    idle: Arc<std::sync::Mutex<Vec<H1Sender>>>,
}

type H1Sender = hyper::client::conn::http1::SendRequest<Body>;

/// Idle HTTP/1.1 connections kept per backend.
const IDLE_H1: usize = 32;

/// A response body on a pooled HTTP/1.1 connection: the connection goes
/// back to the pool once the body has been read to its end (dropped
/// before, the connection closes).
struct Pooled {
    inner: hyper::body::Incoming,
    slot: Option<(H1Sender, Arc<std::sync::Mutex<Vec<H1Sender>>>)>,
}

impl hyper::body::Body for Pooled {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if let std::task::Poll::Ready(None) = &polled
            && let Some((sender, idle)) = self.slot.take()
        {
            let mut idle = idle
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if idle.len() < IDLE_H1 && !sender.is_closed() {
                idle.push(sender);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A connection to a backend, by the protocol it agreed on.
enum Connection {
    H2(hyper::client::conn::http2::SendRequest<Body>),
    H1(hyper::client::conn::http1::SendRequest<Body>),
}

impl Transport {
    /// A transport verifying the backend with `ca_bundle` (or not at all
    /// with `insecure`) as `server_name`, presenting `client_cert`.
    pub fn new(
        server_name: &str,
        ca_bundle: &[u8],
        insecure: bool,
        client_cert: Option<&(Vec<u8>, Vec<u8>)>,
    ) -> Result<Self, String> {
        let config = crate::webhook::backend_tls_config(
            Some(ca_bundle),
            insecure,
            client_cert,
            &[b"h2", b"http/1.1"],
        )?;
        let server_name = rustls_pki_types::ServerName::try_from(server_name.to_string())
            .map_err(|e| e.to_string())?;
        Ok(Transport {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
            h2: tokio::sync::Mutex::new(None),
            idle: Arc::default(),
        })
    }

    /// A TLS connection to `host_port` speaking what the backend chose
    /// (HTTP/1.1 only when `h1_only`, for upgrades).
    async fn connect(&self, host_port: &str, h1_only: bool) -> Result<Connection, String> {
        let tcp = tokio::net::TcpStream::connect(host_port)
            .await
            .map_err(|e| format!("dial tcp {host_port}: {}", go_io_error(&e)))?;
        let _ = tcp.set_nodelay(true);
        let mut tls = self.tls.clone();
        if h1_only {
            let mut config = (*tls.config().clone()).clone();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            tls = tokio_rustls::TlsConnector::from(Arc::new(config));
        }
        let stream = tls
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| format!("tls: {e}"))?;
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(stream);
        if h2 {
            let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .handshake(io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Connection::H2(sender))
        } else {
            let (sender, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(async move {
                let _ = conn.with_upgrades().await;
            });
            Ok(Connection::H1(sender))
        }
    }

    /// Sends `req` (its URI already the backend's) to `host_port`: over the
    /// shared HTTP/2 connection when the backend speaks it, else over an
    /// idle HTTP/1.1 connection or a new one; an upgrade over a connection
    /// of its own.
    async fn send(
        &self,
        host_port: &str,
        req: http::Request<Body>,
        upgrade: bool,
    ) -> Result<http::Response<Body>, String> {
        if upgrade {
            return match self.connect(host_port, true).await? {
                Connection::H1(sender) => self.send_h1(sender, req, false).await,
                Connection::H2(sender) => send_h2(sender, req).await,
            };
        }
        // A backend that speaks HTTP/1.1 only has idle connections here.
        if let Some(sender) = self.idle_h1().await {
            return self.send_h1(sender, req, true).await;
        }
        let connection = {
            let mut shared = self.h2.lock().await;
            match shared.as_ref() {
                Some(sender) if !sender.is_closed() => Connection::H2(sender.clone()),
                _ => {
                    *shared = None;
                    let connection = self.connect(host_port, false).await?;
                    if let Connection::H2(sender) = &connection {
                        *shared = Some(sender.clone());
                    }
                    connection
                }
            }
        };
        match connection {
            Connection::H2(sender) => send_h2(sender, req).await,
            Connection::H1(sender) => self.send_h1(sender, req, true).await,
        }
    }

    /// An idle HTTP/1.1 connection that is still open, once it finished its
    /// previous exchange.
    async fn idle_h1(&self) -> Option<H1Sender> {
        loop {
            let mut sender = self
                .idle
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop()?;
            if !sender.is_closed() && sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    /// Sends `req` on an HTTP/1.1 connection; with `pool`, the connection
    /// goes back to the idle ones after the response.
    async fn send_h1(
        &self,
        sender: H1Sender,
        req: http::Request<Body>,
        pool: bool,
    ) -> Result<http::Response<Body>, String> {
        let (sender, mut resp) = send_h1(sender, req).await?;
        if pool && resp.status() != StatusCode::SWITCHING_PROTOCOLS {
            let slot = Some((sender, self.idle.clone()));
            return Ok(resp.map(|inner| Body::new(Pooled { inner, slot })));
        }
        let upgrade = resp.extensions_mut().remove::<hyper::upgrade::OnUpgrade>();
        let mut resp = resp.map(Body::new);
        if let Some(upgrade) = upgrade {
            resp.extensions_mut().insert(upgrade);
        }
        Ok(resp)
    }
}

/// Sends `req` on a shared HTTP/2 connection.
async fn send_h2(
    mut sender: hyper::client::conn::http2::SendRequest<Body>,
    req: http::Request<Body>,
) -> Result<http::Response<Body>, String> {
    sender.ready().await.map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    Ok(resp.map(Body::new))
}

async fn send_h1(
    mut sender: H1Sender,
    mut req: http::Request<Body>,
) -> Result<(H1Sender, http::Response<hyper::body::Incoming>), String> {
    // HTTP/1.1 wants the path alone, the authority in `Host`.
    let authority = req.uri().authority().map(|a| a.to_string());
    if let Some(authority) = authority {
        let path = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|e: http::uri::InvalidUri| e.to_string())?;
        *req.uri_mut() = path;
        if let Ok(host) = HeaderValue::from_str(&authority) {
            req.headers_mut().insert(header::HOST, host);
        }
    }
    sender.ready().await.map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    Ok((sender, resp))
}

/// Go's wording of a dial error (`connect: connection refused`).
pub fn go_io_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".into(),
        std::io::ErrorKind::TimedOut => "i/o timeout".into(),
        _ => e.to_string(),
    }
}

/// Whether `headers` ask to switch protocols.
fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
}

/// The request headers passed on: the caller's, without the hop-by-hop
/// ones, credentials or any front-proxy identity it sent; with the
/// identity `user` in the front-proxy headers and the audit ID.
fn forwarded_headers(
    from: &HeaderMap,
    user: &UserInfo,
    audit_id: Option<&str>,
    upgrade: bool,
) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(from.len() + 4);
    let connection_tokens: Vec<String> = from
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    for (name, value) in from {
        let n = name.as_str();
        let hop = HOP_BY_HOP.contains(&n)
            || (connection_tokens.iter().any(|t| t == n) && !(upgrade && n == "upgrade"));
        if hop
            || n == "authorization"
            || n == "host"
            || n.starts_with("impersonate-")
            || n == REMOTE_USER
            || n == REMOTE_GROUP
            || n == REMOTE_UID
            || n.starts_with(REMOTE_EXTRA_PREFIX)
            || (n == "upgrade" && !upgrade)
        {
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    if upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    }
    set_identity(&mut headers, user);
    if let Some(id) = audit_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        headers.insert(HeaderName::from_static("audit-id"), id);
    }
    headers
}

/// Writes `user` into the front-proxy headers (client-go's
/// `SetAuthProxyHeaders`: extra keys escaped as URL path segments).
pub fn set_identity(headers: &mut HeaderMap, user: &UserInfo) {
    if let Ok(v) = HeaderValue::from_str(&user.name) {
        headers.insert(HeaderName::from_static(REMOTE_USER), v);
    }
    if !user.uid.is_empty()
        && let Ok(v) = HeaderValue::from_str(&user.uid)
    {
        headers.insert(HeaderName::from_static(REMOTE_UID), v);
    }
    for group in &user.groups {
        if let Ok(v) = HeaderValue::from_str(group) {
            headers.append(HeaderName::from_static(REMOTE_GROUP), v);
        }
    }
    for (key, values) in &user.extra {
        let name = format!("{REMOTE_EXTRA_PREFIX}{}", escape_extra_key(key));
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        for value in values {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.append(name.clone(), v);
            }
        }
    }
}

/// `url.PathEscape` of an extra key, as client-go writes it.
fn escape_extra_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        let keep = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.' | b'_' | b'~' | b'$' | b'&' | b'+' | b'=' | b':' | b'@'
            );
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A plain-text error answer, as Go's `http.Error` writes one (what
/// kube-aggregator's proxy answers with).
pub fn plain_error(code: StatusCode, message: &str) -> Response {
    let mut resp = Response::new(Body::from(format!("{message}\n")));
    *resp.status_mut() = code;
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// Passes `req` to the backend at `host_port` through `transport` as
/// `user`, and streams its answer back. A transport failure answers 503
/// with the error (upstream's responder); `discovery` requests (a group
/// version's resource list) must answer within 5 s, as upstream's.
pub async fn forward(
    transport: &Transport,
    host_port: &str,
    mut req: Request,
    user: &UserInfo,
    audit_id: Option<&str>,
    discovery: bool,
) -> Result<Response, String> {
    let upgrade = is_upgrade(req.headers());
    let client_upgrade = if upgrade {
        req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>()
    } else {
        None
    };
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let uri: http::Uri = format!("https://{host_port}{path}")
        .parse()
        .map_err(|e: http::uri::InvalidUri| e.to_string())?;
    let headers = forwarded_headers(req.headers(), user, audit_id, upgrade);
    let (parts, body) = req.into_parts();
    let mut out = http::Request::builder()
        .method(parts.method)
        .uri(uri)
        .body(body)
        .map_err(|e| e.to_string())?;
    *out.headers_mut() = headers;
    let sending = transport.send(host_port, out, upgrade);
    let mut resp = if discovery {
        tokio::time::timeout(Duration::from_secs(5), sending)
            .await
            .map_err(|_| "context deadline exceeded".to_string())??
    } else {
        sending.await?
    };
    if upgrade && resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        let backend = resp.extensions_mut().remove::<hyper::upgrade::OnUpgrade>();
        if let (Some(client), Some(backend)) = (client_upgrade, backend) {
            tokio::spawn(async move {
                let (Ok(client), Ok(backend)) = (client.await, backend.await) else {
                    return;
                };
                let mut client = TokioIo::new(client);
                let mut backend = TokioIo::new(backend);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
            });
        }
        let (parts, _) = resp.into_parts();
        return Ok(Response::from_parts(parts, Body::empty()));
    }
    let (mut parts, body) = resp.into_parts();
    for name in HOP_BY_HOP {
        parts.headers.remove(name);
    }
    Ok(Response::from_parts(parts, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_replaces_what_the_caller_sent() {
        let mut from = HeaderMap::new();
        from.insert("authorization", HeaderValue::from_static("Bearer secret"));
        from.insert("x-remote-user", HeaderValue::from_static("forged"));
        from.insert("x-remote-extra-scopes", HeaderValue::from_static("forged"));
        from.insert("impersonate-user", HeaderValue::from_static("someone"));
        from.insert("accept", HeaderValue::from_static("application/json"));
        from.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-custom"),
        );
        from.insert("x-custom", HeaderValue::from_static("hop"));
        let user = UserInfo {
            name: "alice".into(),
            uid: "42".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: [("example.org/scopes a".to_string(), vec!["x".to_string()])]
                .into_iter()
                .collect(),
        };
        let h = forwarded_headers(&from, &user, Some("abc"), false);
        assert_eq!(h.get("x-remote-user").unwrap(), "alice");
        assert_eq!(h.get("x-remote-uid").unwrap(), "42");
        let groups: Vec<_> = h.get_all("x-remote-group").iter().collect();
        assert_eq!(groups, ["devs", "system:authenticated"]);
        assert_eq!(
            h.get("x-remote-extra-example.org%2Fscopes%20a").unwrap(),
            "x"
        );
        assert!(h.get("x-remote-extra-scopes").is_none());
        assert!(h.get("authorization").is_none());
        assert!(h.get("impersonate-user").is_none());
        assert!(h.get("connection").is_none());
        assert!(h.get("x-custom").is_none());
        assert_eq!(h.get("accept").unwrap(), "application/json");
        assert_eq!(h.get("audit-id").unwrap(), "abc");
    }

    #[test]
    fn errors_are_plain_text_as_go_writes_them() {
        let resp = plain_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    }
}
