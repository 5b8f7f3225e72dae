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
        self.inner()
            .ok_or_else(no_ca)?
            .verify_client_cert(end_entity, intermediates, now)
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
