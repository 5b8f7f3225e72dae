//! Serving certificates: loaded from files, or a self-signed CA and a
//! serving certificate generated into the data directory on first start and
//! reused afterwards; SNI certificates (`--tls-sni-cert-key`); and reloading
//! of serving certificates and client CAs when their files change.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::server::ResolvesServerCert;
use rustls::sign::CertifiedKey;
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
        // Generated certificates are renewed (CA included: the admin
        // kubeconfig is rewritten at every start) when they near expiry.
        match read_certs(&paths.cert)
            .ok()
            .and_then(|chain| chain.first().and_then(|c| not_after(c)))
        {
            Some(end) if end - jiff::Timestamp::now().as_second() > RENEW_BEFORE_SECONDS => {
                return Ok(paths);
            }
            Some(end) => tracing::warn!(
                cert = %paths.cert.display(),
                not_after = %format_unix(end),
                "the generated serving certificate expires within 30 days or has expired; generating a new CA and serving certificate"
            ),
            None => tracing::warn!(
                cert = %paths.cert.display(),
                "cannot read the validity of the generated serving certificate; generating a new CA and serving certificate"
            ),
        }
    }
    let tls = |e: rcgen::Error| Error::Tls(e.to_string());
    let (not_before, not_after) = self_signed_validity()?;
    let ca_key = KeyPair::generate().map_err(tls)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
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
    params.not_before = not_before;
    params.not_after = not_after;
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

/// How long generated certificates are valid: one year from an hour
/// before their creation, as client-go's `certutil` makes kube-apiserver's
/// self-signed serving certificates.
const SELF_SIGNED_VALIDITY_SECONDS: i64 = 365 * 24 * 3600;

/// Generated certificates are renewed at start-up, and every serving
/// certificate is warned about, this long before they expire.
const RENEW_BEFORE_SECONDS: i64 = 30 * 24 * 3600;

fn self_signed_validity() -> Result<(time::OffsetDateTime, time::OffsetDateTime), Error> {
    let from = jiff::Timestamp::now().as_second() - 3600;
    let at = |secs| {
        time::OffsetDateTime::from_unix_timestamp(secs).map_err(|e| Error::Tls(e.to_string()))
    };
    Ok((at(from)?, at(from + SELF_SIGNED_VALIDITY_SECONDS)?))
}

/// The end of a DER certificate's validity (`notAfter`), in Unix seconds;
/// `None` when it does not parse as an X.509 certificate.
pub fn not_after(cert: &CertificateDer<'_>) -> Option<i64> {
    crate::authn::x509::not_after(cert.as_ref())
}

fn format_unix(secs: i64) -> String {
    jiff::Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| secs.to_string())
}

/// Logs a warning when the serving certificate in `path` expires within 30
/// days, an error when it has expired (clients then refuse the server).
pub fn warn_on_expiry(path: &Path) {
    let Ok(chain) = read_certs(path) else { return };
    let Some(end) = chain.first().and_then(|c| not_after(c)) else {
        return;
    };
    let left = end - jiff::Timestamp::now().as_second();
    if left <= 0 {
        tracing::error!(cert = %path.display(), not_after = %format_unix(end), "the serving certificate has expired; clients will refuse this server");
    } else if left <= RENEW_BEFORE_SECONDS {
        tracing::warn!(cert = %path.display(), not_after = %format_unix(end), days_left = left / 86_400, "the serving certificate expires soon");
    }
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

/// One `--tls-sni-cert-key` value: a certificate and key served to clients
/// asking (by SNI) for one of `names`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SniCertKey {
    /// The certificate chain file (PEM).
    pub cert: PathBuf,
    /// The key file (PEM).
    pub key: PathBuf,
    /// The names (possibly `*.` wildcards) this pair serves; empty means
    /// the certificate's DNS/IP SANs, or its CN without SANs.
    pub names: Vec<String>,
}

impl std::str::FromStr for SniCertKey {
    type Err = String;

    /// Parses kube-apiserver's format: `cert,key` or `cert,key:name1,name2`.
    fn from_str(value: &str) -> Result<Self, String> {
        let (files, names) = match value.split_once(':') {
            Some((files, names)) => (files, names),
            None => (value, ""),
        };
        let (cert, key) = files
            .split_once(',')
            .filter(|(c, k)| !c.trim().is_empty() && !k.trim().is_empty() && !k.contains(','))
            .ok_or_else(|| {
                format!("expected comma separated certificate and key file paths in {value:?}")
            })?;
        let names = names
            .split(',')
            .map(|n| n.trim().to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect();
        Ok(SniCertKey {
            cert: PathBuf::from(cert.trim()),
            key: PathBuf::from(key.trim()),
            names,
        })
    }
}

/// Every file the serving TLS configuration is built from.
#[derive(Clone, Debug)]
pub struct ServingFiles {
    /// The default serving certificate chain.
    pub cert: PathBuf,
    /// The default serving key.
    pub key: PathBuf,
    /// SNI certificates, tried before the default.
    pub sni: Vec<SniCertKey>,
    /// CAs client certificates are verified against.
    pub client_cas: Vec<PathBuf>,
    /// CA files that may be absent or empty (a delegating server's, written
    /// from the looked-up ConfigMap); those that hold CAs join
    /// `client_cas`.
    pub optional_client_cas: Vec<PathBuf>,
}

impl ServingFiles {
    /// Every path, in a fixed order.
    fn paths(&self) -> Vec<&Path> {
        let mut paths = vec![self.cert.as_path(), self.key.as_path()];
        for s in &self.sni {
            paths.push(&s.cert);
            paths.push(&s.key);
        }
        paths.extend(self.client_cas.iter().map(PathBuf::as_path));
        paths.extend(self.optional_client_cas.iter().map(PathBuf::as_path));
        paths
    }

    /// The contents of every file (unreadable files contribute nothing but
    /// their position), for detecting changes.
    fn fingerprint(&self) -> Vec<Vec<u8>> {
        self.paths()
            .into_iter()
            .map(|p| std::fs::read(p).unwrap_or_default())
            .collect()
    }
}

/// Loads a certificate chain and key into a signing [`CertifiedKey`].
fn certified_key(
    cert: &Path,
    key: &Path,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<CertifiedKey, Error> {
    let certs = read_certs(cert)?;
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| Error::Tls(format!("reading {}: {e}", key.display())))?;
    let certified = CertifiedKey::from_der(certs, key_der, provider)
        .map_err(|e| Error::Tls(format!("{} and {}: {e}", cert.display(), key.display())))?;
    Ok(certified)
}

/// Picks the serving certificate by the SNI name the client sent: an exact
/// name, then a `*.` wildcard matching the first label, else the default.
#[derive(Debug)]
struct SniResolver {
    default: Arc<CertifiedKey>,
    exact: HashMap<String, Arc<CertifiedKey>>,
    wildcard: HashMap<String, Arc<CertifiedKey>>,
}

impl SniResolver {
    fn lookup(&self, name: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = name.map(|n| n.trim_end_matches('.').to_ascii_lowercase()) else {
            return self.default.clone();
        };
        if let Some(k) = self.exact.get(&name) {
            return k.clone();
        }
        if let Some((_, parent)) = name.split_once('.')
            && let Some(k) = self.wildcard.get(parent)
        {
            return k.clone();
        }
        self.default.clone()
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.lookup(hello.server_name()))
    }
}

/// A rustls server configuration (ring, TLS 1.2+, ALPN h2 and http/1.1)
/// serving the default certificate, or an SNI certificate to clients asking
/// for one of its names. With client CAs, client certificates are requested
/// (not required) with those CAs as hints, and verified by the
/// authenticators ([`RequestClientCert`]).
pub fn server_config(files: &ServingFiles) -> Result<Arc<ServerConfig>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let default = Arc::new(certified_key(&files.cert, &files.key, &provider)?);
    let mut resolver = SniResolver {
        default,
        exact: HashMap::new(),
        wildcard: HashMap::new(),
    };
    // Earlier flags win for the same name, as in kube-apiserver.
    for sni in files.sni.iter().rev() {
        let key = Arc::new(certified_key(&sni.cert, &sni.key, &provider)?);
        let names = if sni.names.is_empty() {
            key.cert
                .first()
                .map(|leaf| crate::authn::x509::serving_names(leaf))
                .unwrap_or_default()
        } else {
            sni.names.clone()
        };
        for name in names {
            let name = name.to_ascii_lowercase();
            match name.strip_prefix("*.") {
                Some(parent) => resolver.wildcard.insert(parent.to_string(), key.clone()),
                None => resolver.exact.insert(name, key.clone()),
            };
        }
    }
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| Error::Tls(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in &files.client_cas {
        for c in read_certs(ca)? {
            roots
                .add(c)
                .map_err(|e| Error::Tls(format!("{}: {e}", ca.display())))?;
        }
    }
    for ca in &files.optional_client_cas {
        if std::fs::metadata(ca).map_or(true, |m| m.len() == 0) {
            continue;
        }
        match read_certs(ca) {
            Ok(certs) => {
                let (_, ignored) = roots.add_parsable_certificates(certs);
                if ignored > 0 {
                    tracing::warn!(file = %ca.display(), ignored, "client CA certificates ignored");
                }
            }
            Err(e) => tracing::error!(error = %e, "client CA file unusable"),
        }
    }
    let builder = if roots.is_empty() {
        builder.with_no_client_auth()
    } else {
        builder.with_client_cert_verifier(Arc::new(RequestClientCert::new(&roots, &provider)))
    };
    let mut config = builder.with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Asks for a client certificate, naming the client CAs as hints, and
/// accepts any: as Go's `tls.RequestClientCert`, which kube-apiserver
/// uses, the chain is verified per request by the authenticators (x509,
/// request header), so that an expired or unknown certificate is a failed
/// credential (401 when it is the only one) rather than a failed handshake
/// that also loses a valid bearer token sent with it. The handshake still
/// checks the client's signature, so a client presents only certificates
/// whose keys it holds.
#[derive(Debug)]
struct RequestClientCert {
    hints: Vec<rustls::DistinguishedName>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl RequestClientCert {
    fn new(roots: &rustls::RootCertStore, provider: &rustls::crypto::CryptoProvider) -> Self {
        RequestClientCert {
            hints: roots.subjects(),
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

impl rustls::server::danger::ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// How often serving certificate and client CA files are checked for
/// changes.
pub use crate::authn::client_ca::RELOAD_INTERVAL;

/// The serving TLS configuration, rebuilt when its files change on disk
/// (as kube-apiserver's dynamic serving certificate and client CA
/// controllers do): new connections get the new configuration; a new file
/// that does not load is logged and the previous configuration kept.
#[derive(Debug)]
pub struct DynamicServerConfig {
    files: ServingFiles,
    current: RwLock<Arc<ServerConfig>>,
    seen: Mutex<Vec<Vec<u8>>>,
}

impl DynamicServerConfig {
    /// Loads the configuration; fails when the files do not load now.
    pub fn load(files: ServingFiles) -> Result<Arc<Self>, Error> {
        let seen = files.fingerprint();
        let config = server_config(&files)?;
        Ok(Arc::new(DynamicServerConfig {
            files,
            current: RwLock::new(config),
            seen: Mutex::new(seen),
        }))
    }

    /// The configuration for a new connection.
    pub fn current(&self) -> Arc<ServerConfig> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Rebuilds the configuration when any file changed since the last
    /// check; returns whether a new configuration is in use.
    pub fn reload_if_changed(&self) -> bool {
        let now = self.files.fingerprint();
        {
            let mut seen = match self.seen.lock() {
                Ok(s) => s,
                Err(poisoned) => poisoned.into_inner(),
            };
            if *seen == now {
                return false;
            }
            *seen = now;
        }
        match server_config(&self.files) {
            Ok(config) => {
                match self.current.write() {
                    Ok(mut c) => *c = config,
                    Err(poisoned) => *poisoned.into_inner() = config,
                }
                tracing::info!("serving certificates or client CAs changed on disk; reloaded");
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "reloading serving certificates or client CAs failed; keeping the previous ones");
                false
            }
        }
    }

    /// Checks the files every [`RELOAD_INTERVAL`] until `stop` turns true.
    /// Also logs, at start and every 12 hours, when the serving
    /// certificate nears expiry.
    pub async fn watch(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(RELOAD_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut expiry = tokio::time::interval(std::time::Duration::from_secs(12 * 3600));
        expiry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let this = self.clone();
                    let _ = tokio::task::spawn_blocking(move || this.reload_if_changed()).await;
                }
                _ = expiry.tick() => {
                    let cert = self.files.cert.clone();
                    let _ = tokio::task::spawn_blocking(move || warn_on_expiry(&cert)).await;
                }
                r = stop.changed() => if r.is_err() || *stop.borrow() { return },
            }
        }
    }
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

/// Reads the PEM certificates of `path` (at least one).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    crate::authn::client_ca::read_certs(path).map_err(|e| Error::Tls(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificates_are_valid_for_one_year() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = ensure_self_signed(dir.path(), &[]).expect("generated");
        let now = jiff::Timestamp::now().as_second();
        for file in [&paths.ca, &paths.cert] {
            let chain = read_certs(file).expect("certs");
            let end = not_after(&chain[0]).expect("a notAfter");
            // one year from an hour ago, within a minute
            let expected = now - 3600 + SELF_SIGNED_VALIDITY_SECONDS;
            assert!(
                (end - expected).abs() < 60,
                "{}: {end} vs {expected}",
                file.display()
            );
        }
        // Reused while valid.
        let before = std::fs::read(&paths.cert).expect("cert");
        ensure_self_signed(dir.path(), &[]).expect("reused");
        assert_eq!(std::fs::read(&paths.cert).expect("cert"), before);
    }

    #[test]
    fn generated_certificates_near_expiry_are_renewed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = ensure_self_signed(dir.path(), &[]).expect("generated");
        // Replace the serving certificate with one that ends in 10 days.
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        let soon = jiff::Timestamp::now().as_second() + 10 * 86_400;
        params.not_after = time::OffsetDateTime::from_unix_timestamp(soon).expect("time");
        let cert = params.self_signed(&key).expect("cert");
        write_file(&paths.cert, cert.pem().as_bytes(), 0o644).expect("write");
        let chain = read_certs(&paths.cert).expect("certs");
        assert_eq!(not_after(&chain[0]), Some(soon));
        ensure_self_signed(dir.path(), &[]).expect("renewed");
        let chain = read_certs(&paths.cert).expect("certs");
        let end = not_after(&chain[0]).expect("a notAfter");
        assert!(end > soon + 300 * 86_400, "renewed for a year: {end}");
    }

    #[test]
    fn not_after_of_garbage_is_none() {
        assert_eq!(
            not_after(&CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x01])),
            None
        );
        assert_eq!(not_after(&CertificateDer::from(Vec::new())), None);
    }

    #[test]
    fn sni_cert_key_flag() {
        let plain: Result<SniCertKey, _> = "a.crt,a.key".parse();
        assert_eq!(
            plain,
            Ok(SniCertKey {
                cert: "a.crt".into(),
                key: "a.key".into(),
                names: vec![],
            })
        );
        let named: Result<SniCertKey, _> = "a.crt,a.key:*.Example.com,foo.org".parse();
        assert_eq!(
            named.map(|s| s.names),
            Ok(vec!["*.example.com".to_string(), "foo.org".to_string()])
        );
        assert!("a.crt".parse::<SniCertKey>().is_err());
        assert!("a.crt,b,c".parse::<SniCertKey>().is_err());
    }
}
