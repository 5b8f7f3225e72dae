//! The admin credentials and the kubeconfig written for them.

use std::path::Path;

use base64::Engine;

use super::Error;
use super::tls::write_file;

/// Reads the admin token from `path`, creating a random one on first start.
pub fn ensure_admin_token(path: &Path) -> Result<String, Error> {
    if let Ok(existing) = std::fs::read_to_string(path) {
        let token = existing.trim().to_string();
        if !token.is_empty() {
            return Ok(token);
        }
    }
    use rand::Rng;
    let bytes: [u8; 32] = rand::rng().random();
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    write_file(path, token.as_bytes(), 0o600)?;
    Ok(token)
}

/// Writes a kubeconfig for `server` (an `https://` URL) trusting `ca_pem`
/// and authenticating with `token`.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &[u8],
    token: &str,
) -> Result<(), Error> {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let text = format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: apiforge\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
         users:\n\
         - name: apiforge-admin\n  user:\n    token: {token}\n\
         contexts:\n\
         - name: apiforge\n  context:\n    cluster: apiforge\n    user: apiforge-admin\n    namespace: default\n\
         current-context: apiforge\n\
         preferences: {{}}\n"
    );
    write_file(path, text.as_bytes(), 0o600)
}
