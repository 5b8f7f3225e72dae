//! Client CA files: reading PEM certificates and verifying client
//! certificate chains against a CA file that is re-read when it changes
//! (`--client-ca-file`, `--requestheader-client-ca-file`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// How often a CA file is checked for changes when used.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// How long a successful verification of a chain is remembered (a
/// connection's certificate is checked again on every request: a front
/// proxy's requests would otherwise each pay a signature check).
const VERIFIED_TTL: Duration = Duration::from_secs(10);

/// Chains remembered at most (the memory is emptied when full).
const VERIFIED_MAX: usize = 1024;

/// Successful verifications: chain digest → the CAs it verified against
/// (kept alive, so a reloaded CA file never matches an old entry) and when.
type Verified = std::collections::HashMap<
    [u8; 32],
    (Arc<dyn rustls::server::danger::ClientCertVerifier>, Instant),
>;

/// Why a CA file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    /// The file holds no usable certificate.
    #[error("{0}")]
    Pem(String),
}

/// Reads the certificates of a PEM file (at least one).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let read =
        |e: rustls_pki_types::pem::Error| Error::Pem(format!("reading {}: {e}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(read)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    if certs.is_empty() {
        return Err(Error::Pem(format!(
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
    let contents = std::fs::read(path).map_err(|e| Error::Io(path.to_path_buf(), e))?;
    let inner = Some(static_client_verifier(path)?);
    Ok(Arc::new(ReloadingClientVerifier {
        path: path.to_path_buf(),
        state: Mutex::new(VerifierState {
            checked: Instant::now(),
            contents,
            inner,
        }),
        verified: Mutex::default(),
    }))
}

/// [`client_verifier`] for a CA file that may be absent or empty (a
/// delegating server's, written from the
/// `kube-system/extension-apiserver-authentication` ConfigMap): until it
/// holds CAs, no client certificate verifies against it.
pub fn optional_client_verifier(
    path: &Path,
) -> Arc<dyn rustls::server::danger::ClientCertVerifier> {
    let contents = std::fs::read(path).unwrap_or_default();
    let inner = if contents.is_empty() {
        None
    } else {
        static_client_verifier(path)
            .map_err(|e| tracing::error!(error = %e, "client CA file unusable; no client certificate verifies against it"))
            .ok()
    };
    Arc::new(ReloadingClientVerifier {
        path: path.to_path_buf(),
        state: Mutex::new(VerifierState {
            checked: Instant::now(),
            contents,
            inner,
        }),
        verified: Mutex::default(),
    })
}

/// Builds a verifier from the CAs in `path` as it is now.
fn static_client_verifier(
    path: &Path,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for c in read_certs(path)? {
        roots
            .add(c)
            .map_err(|e| Error::Pem(format!("{}: {e}", path.display())))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| Error::Pem(format!("{}: {e}", path.display())))
}

/// The verifier of a CA file as it was last read, and when it was checked.
struct VerifierState {
    checked: Instant,
    contents: Vec<u8>,
    /// `None` while the file holds no CA (optional files only).
    inner: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
}

/// A client certificate verifier that re-reads its CA file at most every
/// [`RELOAD_INTERVAL`] when used; a file that does not load keeps the
/// previous CAs. It gives no CA hints: it is used to attribute accepted
/// certificates, not in a TLS handshake.
struct ReloadingClientVerifier {
    path: PathBuf,
    state: Mutex<VerifierState>,
    /// Chains that verified recently (for up to [`VERIFIED_TTL`], against
    /// the CAs of the time; a reload starts over).
    verified: Mutex<Verified>,
}

impl std::fmt::Debug for ReloadingClientVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingClientVerifier")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ReloadingClientVerifier {
    fn inner(&self) -> Option<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
        let mut state = match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        if state.checked.elapsed() >= RELOAD_INTERVAL {
            state.checked = Instant::now();
            if let Ok(contents) = std::fs::read(&self.path)
                && contents != state.contents
            {
                let empty = contents.is_empty();
                state.contents = contents;
                match static_client_verifier(&self.path) {
                    Ok(v) => state.inner = Some(v),
                    // An optional file emptied: no CA any more.
                    Err(_) if empty && state.inner.is_some() => state.inner = None,
                    Err(e) => {
                        tracing::error!(error = %e, "reloading client CA file failed; keeping the previous CAs");
                    }
                }
            }
        }
        state.inner.clone()
    }
}

impl rustls::server::danger::ClientCertVerifier for ReloadingClientVerifier {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        use sha2::{Digest, Sha256};
        let inner = self.inner().ok_or_else(no_ca)?;
        let mut digest = Sha256::new();
        for cert in std::iter::once(end_entity).chain(intermediates) {
            digest.update((cert.len() as u64).to_be_bytes());
            digest.update(cert.as_ref());
        }
        let key: [u8; 32] = digest.finalize().into();
        let lock = || self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((ca, at)) = lock().get(&key)
            && Arc::ptr_eq(ca, &inner)
            && at.elapsed() < VERIFIED_TTL
        {
            return Ok(rustls::server::danger::ClientCertVerified::assertion());
        }
        let verified = inner.verify_client_cert(end_entity, intermediates, now)?;
        let mut memory = lock();
        if memory.len() >= VERIFIED_MAX {
            memory.clear();
        }
        memory.insert(key, (inner, Instant::now()));
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner()
            .ok_or_else(no_ca)?
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner()
            .ok_or_else(no_ca)?
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        match self.inner() {
            Some(inner) => inner.supported_verify_schemes(),
            None => rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes(),
        }
    }
}

/// The error of verifying against a CA file that holds no CA.
fn no_ca() -> rustls::Error {
    rustls::Error::General("no client CA".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

    /// A CA (PEM) and a client certificate (DER) it signed.
    fn ca_and_client(name: &str) -> (String, CertificateDer<'static>) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let ca = params.self_signed(&key).expect("ca");
        let issuer = Issuer::new(params, key);
        let client_key = KeyPair::generate().expect("key");
        let mut client = CertificateParams::new(Vec::<String>::new()).expect("params");
        client.distinguished_name.push(DnType::CommonName, "user");
        client.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = client.signed_by(&client_key, &issuer).expect("client");
        (ca.pem(), cert.der().clone())
    }

    /// A remembered verification does not outlive the CAs it was made
    /// against: once the file holds another CA, the same certificate fails.
    #[test]
    fn remembered_verifications_follow_a_reloaded_ca_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ca.crt");
        let (ca1, cert1) = ca_and_client("one");
        let (ca2, _) = ca_and_client("two");
        std::fs::write(&path, &ca1).expect("write");
        let verifier = client_verifier(&path).expect("verifier");
        let now = rustls_pki_types::UnixTime::now();
        assert!(verifier.verify_client_cert(&cert1, &[], now).is_ok());
        assert!(
            verifier.verify_client_cert(&cert1, &[], now).is_ok(),
            "remembered"
        );
        std::fs::write(&path, &ca2).expect("write");
        std::thread::sleep(RELOAD_INTERVAL + Duration::from_millis(100));
        assert!(verifier.verify_client_cert(&cert1, &[], now).is_err());
    }
}
