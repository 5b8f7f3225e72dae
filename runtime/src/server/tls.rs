//! Serving certificates: loaded from files, or a self-signed CA and a
//! serving certificate generated into the data directory on first start and
//! reused afterwards.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::Error;

/// Where the serving certificate material lives.
#[derive(Clone, Debug)]
pub struct CertPaths {
    /// The CA certificate (PEM) clients trust.
    pub ca: PathBuf,
    /// The serving certificate chain (PEM).
    pub cert: PathBuf,
    /// The serving key (PEM).
    pub key: PathBuf,
}

/// Generates a self-signed CA and a serving certificate for `localhost`,
/// `127.0.0.1` and `extra` names into `dir`, unless they already exist.
pub fn ensure_self_signed(dir: &Path, extra: &[String]) -> Result<CertPaths, Error> {
    let paths = CertPaths {
        ca: dir.join("apiserver-ca.crt"),
        cert: dir.join("apiserver.crt"),
        key: dir.join("apiserver.key"),
    };
    if paths.ca.exists() && paths.cert.exists() && paths.key.exists() {
        return Ok(paths);
    }
    let tls = |e: rcgen::Error| Error::Tls(e.to_string());
    let ca_key = KeyPair::generate().map_err(tls)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(
        DnType::CommonName,
        format!("apiforge-ca@{}", jiff::Timestamp::now().as_second()),
    );
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::CrlSign,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls)?;

    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    for n in extra {
        if !n.is_empty() && !names.contains(n) {
            names.push(n.clone());
        }
    }
    let key = KeyPair::generate().map_err(tls)?;
    let mut params = CertificateParams::new(names).map_err(tls)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "apiforge");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let issuer = Issuer::new(ca_params, ca_key);
    let cert = params.signed_by(&key, &issuer).map_err(tls)?;

    std::fs::create_dir_all(dir).map_err(|e| Error::Io(dir.to_path_buf(), e))?;
    write_file(&paths.ca, ca_cert.pem().as_bytes(), 0o644)?;
    write_file(
        &paths.cert,
        format!("{}{}", cert.pem(), ca_cert.pem()).as_bytes(),
        0o644,
    )?;
    write_file(&paths.key, key.serialize_pem().as_bytes(), 0o600)?;
    Ok(paths)
}

/// Writes a file atomically (temp file + rename) with the given mode.
pub fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let io = |e| Error::Io(path.to_path_buf(), e);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(contents).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// A rustls server configuration (ring, TLS 1.2+, ALPN h2 and http/1.1).
/// With `client_cas`, client certificates are requested (not required) and
/// must verify against one of those CAs.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_cas: &[&Path],
) -> Result<Arc<ServerConfig>, Error> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| Error::Tls(format!("reading {}: {e}", cert.display())))?
        .collect::<Result<_, _>>()
        .map_err(|e| Error::Tls(format!("reading {}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(Error::Tls(format!(
            "{} holds no certificate",
            cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| Error::Tls(format!("reading {}: {e}", key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| Error::Tls(e.to_string()))?;
    let builder = if client_cas.is_empty() {
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for ca in client_cas {
            for c in read_certs(ca)? {
                roots
                    .add(c)
                    .map_err(|e| Error::Tls(format!("{}: {e}", ca.display())))?;
            }
        }
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| Error::Tls(format!("client CAs: {e}")))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| Error::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The host name or IP to put in URLs for `addr` (loopback for unspecified).
pub fn advertised_host(addr: IpAddr) -> String {
    let addr = if addr.is_unspecified() {
        IpAddr::from([127, 0, 0, 1])
    } else {
        addr
    };
    match addr {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// Reads the certificates of a PEM file (at least one).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let read =
        |e: rustls_pki_types::pem::Error| Error::Tls(format!("reading {}: {e}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(read)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    if certs.is_empty() {
        return Err(Error::Tls(format!(
            "{} holds no certificate",
            path.display()
        )));
    }
    Ok(certs)
}

/// A verifier of client certificates against the CAs in `path` (client
/// authentication usage), for checking which CA signed a certificate the
/// TLS layer accepted.
pub fn client_verifier(
    path: &Path,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for c in read_certs(path)? {
        roots
            .add(c)
            .map_err(|e| Error::Tls(format!("{}: {e}", path.display())))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| Error::Tls(format!("{}: {e}", path.display())))
}
