//! HTTP/2 rapid reset (CVE-2023-44487): a client that opens streams and
//! cancels each at once (HEADERS then RST_STREAM) must not make the server
//! do unbounded work. The server (hyper's HTTP/2, which counts streams
//! reset before they were accepted) answers with GOAWAY
//! `ENHANCE_YOUR_CALM` and closes the connection long before the client
//! is through; other clients are served meanwhile; the CPU and memory the
//! attack cost are printed.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Server;
use common::tls::{AcceptAny, provider};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

/// An HTTP/2 connection to the server over TLS.
async fn h2_connection(
    port: u16,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider())))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").expect("name"), tcp)
        .await
        .expect("TLS");
    let (send, connection) = h2::client::handshake(tls).await.expect("h2 handshake");
    (send, tokio::spawn(connection))
}

/// User + system CPU seconds and resident MiB of a process.
fn usage(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the name.
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let rss_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    (ticks / 100.0, rss_kib / 1024.0)
}

#[tokio::test]
async fn rapid_reset_is_cut_off_and_others_are_served() {
    let server = Server::start().await;
    let pid = server.pid();
    let normal = server.client().await;
    // Warm up, so that the figures are the attack's.
    normal
        .request_text(http::Request::get("/readyz").body(Vec::new()).expect("req"))
        .await
        .expect("readyz");
    let (cpu_before, rss_before) = usage(pid);

    const PAIRS: usize = 100_000;
    let (mut send, connection) = h2_connection(server.port).await;
    let started = Instant::now();
    let mut sent = 0;
    let uri = format!(
        "https://127.0.0.1:{}/api/v1/namespaces/default/configmaps",
        server.port
    );
    // Batches of 50: the HEADERS go out (the connection task runs while
    // this one yields), then dropping the response futures cancels the
    // streams (RST_STREAM CANCEL), as the attack's clients do.
    'attack: while sent < PAIRS {
        let mut batch = Vec::with_capacity(50);
        for _ in 0..50 {
            send = match send.clone().ready().await {
                Ok(s) => s,
                Err(_) => break 'attack,
            };
            let request = http::Request::get(uri.as_str()).body(()).expect("request");
            match send.send_request(request, true) {
                Ok((response, _)) => batch.push(response),
                Err(_) => break 'attack,
            }
            sent += 1;
        }
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        drop(batch);
    }
    drop(send);
    let ended = tokio::time::timeout(Duration::from_secs(30), connection)
        .await
        .expect("the connection ends")
        .expect("join");
    let attack = started.elapsed();
    let (cpu_after, rss_after) = usage(pid);

    // The server cut the attacker off before it got through its streams.
    // The server cut the attacker off (GOAWAY ENHANCE_YOUR_CALM and
    // close; the client, still writing, may see the close first) before
    // it got through its streams.
    assert!(
        sent < PAIRS && ended.is_err(),
        "after {sent} of {PAIRS} streams the connection ended with {ended:?}"
    );
    // Others are served.
    let ready = normal
        .request_text(http::Request::get("/readyz").body(Vec::new()).expect("req"))
        .await
        .expect("readyz after the attack");
    assert_eq!(ready, "ok");
    eprintln!(
        "rapid reset: the connection was closed after {sent} HEADERS+RST_STREAM pairs \
         ({:.3} s; {ended:?}); server CPU {:.3} s, RSS {rss_before:.1} -> {rss_after:.1} MiB",
        attack.as_secs_f64(),
        cpu_after - cpu_before
    );
}
