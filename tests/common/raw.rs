//! A raw HTTP/1.1-over-TLS client for tests that need control a normal
//! client does not give: requests whose body never arrives (to hold a
//! handler open), exact headers, exact bodies.

use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::Server;

/// A parsed response.
#[derive(Debug)]
pub struct RawResponse {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The (de-chunked) body.
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// The admin bearer token of a server.
pub fn token(server: &Server) -> String {
    std::fs::read_to_string(server.data_dir.join("admin.token"))
        .expect("admin token")
        .trim()
        .to_string()
}

/// Opens a TLS connection to the server (HTTP/1.1, no ALPN).
pub async fn connect(server: &Server) -> TlsStream<TcpStream> {
    connect_with_recv_buffer(server, None).await
}

/// Opens a TLS connection whose socket receive buffer is `recv_buffer`
/// bytes (the kernel's default when `None`): a small one makes a client
/// that stops reading push back on the server at once.
pub async fn connect_with_recv_buffer(
    server: &Server,
    recv_buffer: Option<u32>,
) -> TlsStream<TcpStream> {
    let ca = server.data_dir.join("apiserver-ca.crt");
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&ca).expect("CA file") {
        roots.add(cert.expect("CA cert")).expect("add CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    if let Some(size) = recv_buffer {
        socket.set_recv_buffer_size(size).expect("SO_RCVBUF");
    }
    let tcp = socket
        .connect(([127, 0, 0, 1], server.port).into())
        .await
        .expect("connect");
    TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("TLS handshake")
}

/// Writes a request head (`Host`, `Connection: close` and the given
/// headers are sent; add `Authorization` yourself) and `body`.
pub async fn send(
    stream: &mut TlsStream<TcpStream>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(body).await.expect("write body");
    stream.flush().await.expect("flush");
}

/// Reads a whole response (the server closes the connection after it).
pub async fn read_response(stream: &mut TlsStream<TcpStream>) -> RawResponse {
    let mut raw = Vec::new();
    // A close_notify-less close is fine here: keep what was read.
    let _ = tokio::time::timeout(Duration::from_secs(120), stream.read_to_end(&mut raw))
        .await
        .expect("response within 120s");
    parse(&raw)
}

/// Reads one response whose body has a `Content-Length`, leaving the
/// connection open for the next request.
pub async fn read_one_response(stream: &mut TlsStream<TcpStream>) -> RawResponse {
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let read = async {
        loop {
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or_else(|| panic!("no Content-Length in {head:?}"));
                if raw.len() >= end + 4 + len {
                    return;
                }
            }
            let n = stream.read(&mut buf).await.expect("read response");
            assert!(
                n > 0,
                "the connection closed within a response: {:?}",
                String::from_utf8_lossy(&raw)
            );
            raw.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("response within 60s");
    parse(&raw)
}

/// One request on a fresh connection, with the admin token.
pub async fn request(
    server: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> RawResponse {
    request_as(server, &token(server), method, path, headers, body).await
}

/// Sends one request with bearer `token`, the given headers and body.
pub async fn request_as(
    server: &Server,
    token: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> RawResponse {
    let auth = format!("Bearer {token}");
    let len = body.len().to_string();
    let mut all: Vec<(&str, &str)> = vec![("Authorization", &auth)];
    if !body.is_empty() {
        all.push(("Content-Length", &len));
    }
    all.extend_from_slice(headers);
    let mut stream = connect(server).await;
    send(&mut stream, method, path, &all, body).await;
    read_response(&mut stream).await
}

/// POSTs `body` as JSON with bearer `token`.
pub async fn post_json_as(
    server: &Server,
    token: &str,
    path: &str,
    body: &serde_json::Value,
) -> RawResponse {
    request_as(
        server,
        token,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        &serde_json::to_vec(body).expect("json"),
    )
    .await
}

/// One request without credentials.
pub async fn anonymous(server: &Server, method: &str, path: &str) -> RawResponse {
    let mut stream = connect(server).await;
    send(&mut stream, method, path, &[], b"").await;
    read_response(&mut stream).await
}

fn parse(raw: &[u8]) -> RawResponse {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    RawResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        data = &data[eol + 2..];
        if size == 0 || data.len() < size {
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[(size + 2).min(data.len())..];
    }
    out
}

/// A POST to `path` whose announced body never arrives: its handler waits
/// for the body, holding its in-flight seat (or its place in a flow-control
/// queue) until the request times out or the connection is dropped.
pub async fn stalled_post(server: &Server, path: &str, token: &str) -> TlsStream<TcpStream> {
    let auth = format!("Bearer {token}");
    let mut stream = connect(server).await;
    send(
        &mut stream,
        "POST",
        path,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Content-Length", "1000"),
        ],
        b"{",
    )
    .await;
    stream
}
