//! TLS of the real binary: protocol versions, ALPN, the self-signed
//! certificate's names, SNI certificates (`--tls-sni-cert-key`) and
//! serving certificates reloaded from disk without a restart.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::tls::{AcceptAny, Ca, provider, write_atomically};
use common::{Server, free_port};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What a handshake negotiated.
struct Handshake {
    alpn: Option<Vec<u8>>,
    leaf: Vec<u8>,
    version: Option<rustls::ProtocolVersion>,
}

/// Connects to 127.0.0.1:`port` asking for `name` (SNI for DNS names) and
/// offering `alpn`; `roots` verifies the server, or anything is accepted.
async fn handshake(
    port: u16,
    name: &str,
    alpn: &[&[u8]],
    roots: Option<&Path>,
) -> Result<Handshake, std::io::Error> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let mut config = match roots {
        Some(path) => {
            let mut store = rustls::RootCertStore::empty();
            for c in read_pem_certs(path) {
                store.add(c).expect("root");
            }
            builder.with_root_certificates(store).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider())))
            .with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    let server_name = ServerName::try_from(name.to_string()).expect("server name");
    let tls = connector.connect(server_name, tcp).await?;
    let conn = tls.get_ref().1;
    Ok(Handshake {
        alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
        leaf: conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.to_vec())
            .unwrap_or_default(),
        version: conn.protocol_version(),
    })
}

fn read_pem_certs(path: &Path) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_file_iter(path)
        .expect("pem")
        .collect::<Result<Vec<_>, _>>()
        .expect("certs")
}

/// A TLS 1.1 ClientHello (no supported_versions extension).
fn tls11_client_hello() -> Vec<u8> {
    let mut body = vec![0x03, 0x02];
    body.extend([7u8; 32]);
    body.push(0); // session id
    // ECDHE-ECDSA/RSA-AES128-GCM-SHA256, ECDHE-ECDSA/RSA-AES128-SHA.
    body.extend([0x00, 0x08, 0xc0, 0x2b, 0xc0, 0x2f, 0xc0, 0x09, 0xc0, 0x13]);
    body.extend([0x01, 0x00]); // null compression
    body.extend([0x00, 0x1c]);
    body.extend([0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17]); // groups
    body.extend([0x00, 0x0b, 0x00, 0x02, 0x01, 0x00]); // point formats
    body.extend([
        0x00, 0x0d, 0x00, 0x08, 0x00, 0x06, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01,
    ]);
    let mut hs = vec![0x01, 0, 0, u8::try_from(body.len()).expect("len")];
    hs.extend(body);
    let mut record = vec![0x16, 0x03, 0x01, 0, u8::try_from(hs.len()).expect("len")];
    record.extend(hs);
    record
}

#[tokio::test]
async fn tls_versions_alpn_and_self_signed_names() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let server = Server::start_in(
        &data,
        free_port(),
        &[
            "--bind-address",
            "0.0.0.0",
            "--advertise-address",
            "127.0.0.1",
        ],
    )
    .await;
    let ca = data.join("apiserver-ca.crt");

    // TLS 1.1 (and older) is refused with a protocol_version alert.
    let mut tcp = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .expect("connect");
    tcp.write_all(&tls11_client_hello()).await.expect("write");
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut reply)).await;
    assert!(reply.len() >= 7, "expected an alert, got {reply:?}");
    assert_eq!(reply[0], 0x15, "not an alert record: {reply:?}");
    assert_eq!(reply[6], 70, "not protocol_version: {reply:?}");

    // ALPN negotiates h2 and http/1.1; TLS 1.2 and 1.3 both work.
    let h2 = handshake(server.port, "localhost", &[b"h2", b"http/1.1"], Some(&ca))
        .await
        .expect("h2");
    assert_eq!(h2.alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(h2.version, Some(rustls::ProtocolVersion::TLSv1_3));
    let h1 = handshake(server.port, "localhost", &[b"http/1.1"], Some(&ca))
        .await
        .expect("http/1.1");
    assert_eq!(h1.alpn.as_deref(), Some(&b"http/1.1"[..]));
    let tls12 = {
        let mut store = rustls::RootCertStore::empty();
        for c in read_pem_certs(&ca) {
            store.add(c).expect("root");
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS12])
            .expect("versions")
            .with_root_certificates(store)
            .with_no_client_auth();
        let tcp = TcpStream::connect(("127.0.0.1", server.port))
            .await
            .expect("connect");
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
            .expect("TLS 1.2 handshake")
    };
    assert_eq!(
        tls12.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );

    // The generated certificate is valid for localhost and 127.0.0.1.
    for name in ["localhost", "127.0.0.1"] {
        handshake(server.port, name, &[], Some(&ca))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert!(
        handshake(server.port, "elsewhere.example", &[], Some(&ca))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn self_signed_certificate_covers_the_advertise_address() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // 127.0.0.2 is loopback too: bind to every address and advertise it.
    let server = Server::start_in(
        &data,
        free_port(),
        &[
            "--bind-address",
            "0.0.0.0",
            "--advertise-address",
            "127.0.0.2",
        ],
    )
    .await;
    let ca = data.join("apiserver-ca.crt");
    handshake(server.port, "127.0.0.2", &[], Some(&ca))
        .await
        .expect("127.0.0.2 is a name of the serving certificate");
}

async fn served_leaf(port: u16, name: &str) -> Vec<u8> {
    handshake(port, name, &[b"h2"], None)
        .await
        .unwrap_or_else(|e| panic!("handshake for {name}: {e}"))
        .leaf
}

#[tokio::test]
async fn sni_certificates_and_reloading_from_disk() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let ca1 = Ca::new("test-ca-1");
    let (crt, key, default_leaf) = ca1.serving(dir, "default", &["localhost", "127.0.0.1"]);
    // Names from the certificate's SANs.
    let (sni_crt, sni_key, sni_leaf) = ca1.serving(dir, "sni", &["foo.example.com"]);
    // Names given on the flag (a wildcard), overriding the SANs.
    let (w_crt, w_key, w_leaf) = ca1.serving(dir, "wild", &["ignored.example.org"]);
    let sni_flag = format!("{},{}", sni_crt.display(), sni_key.display());
    let wild_flag = format!("{},{}:*.wild.test", w_crt.display(), w_key.display());
    let server = Server::start_in(
        &dir.join("data"),
        free_port(),
        &[
            "--tls-cert-file",
            crt.to_str().expect("path"),
            "--tls-private-key-file",
            key.to_str().expect("path"),
            "--tls-sni-cert-key",
            &sni_flag,
            "--tls-sni-cert-key",
            &wild_flag,
        ],
    )
    .await;

    assert_eq!(served_leaf(server.port, "foo.example.com").await, sni_leaf);
    assert_eq!(served_leaf(server.port, "FOO.example.com").await, sni_leaf);
    assert_eq!(served_leaf(server.port, "a.wild.test").await, w_leaf);
    assert_eq!(
        served_leaf(server.port, "a.b.wild.test").await,
        default_leaf
    );
    assert_eq!(
        served_leaf(server.port, "ignored.example.org").await,
        default_leaf
    );
    assert_eq!(served_leaf(server.port, "other.test").await, default_leaf);
    // No SNI (an IP address) gets the default certificate.
    assert_eq!(served_leaf(server.port, "127.0.0.1").await, default_leaf);

    // A new certificate from another CA is served to new connections
    // within a few seconds, without a restart.
    let ca2 = Ca::new("test-ca-2");
    let (_, _, new_leaf) = ca2.serving(dir, "default", &["localhost", "127.0.0.1"]);
    assert_ne!(new_leaf, default_leaf);
    let deadline = Instant::now() + Duration::from_secs(15);
    while served_leaf(server.port, "127.0.0.1").await != new_leaf {
        assert!(
            Instant::now() < deadline,
            "new certificate not served; log:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // SNI certificates are unaffected.
    assert_eq!(served_leaf(server.port, "foo.example.com").await, sni_leaf);

    // A broken replacement keeps the previous certificate and is logged.
    write_atomically(&crt, b"-----BEGIN CERTIFICATE-----\nnot a certificate\n");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !server.log().contains("keeping the previous") {
        assert!(
            Instant::now() < deadline,
            "broken certificate not reported; log:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(served_leaf(server.port, "127.0.0.1").await, new_leaf);
    assert_eq!(served_leaf(server.port, "localhost").await, new_leaf);
}
