//! Authentication: who is making a request.
//!
//! A union of authenticators is tried in kube-apiserver's order — x509
//! client certificates (`--client-ca-file`), bearer tokens (the static
//! token file `--token-auth-file`, the server's own admin token,
//! service-account tokens, bootstrap tokens, [`oidc`] ID tokens, then the
//! token [`webhook`]) —
//! and the first that recognises the request wins. Every authenticated user
//! gets the group `system:authenticated`. When nothing recognises the
//! request, it is anonymous (`system:anonymous` in `system:unauthenticated`)
//! if `--anonymous-auth` is on; a credential that was presented but is not
//! valid (an unknown bearer token) is always a 401, never anonymous.
//!
//! [`impersonation`] then lets an authorized user act as another one.

pub mod bootstrap_token;
pub mod client_ca;
pub mod delegated;
pub mod oidc;
pub mod request_header;
pub mod service_account;
mod token_file;
pub mod webhook;
pub(crate) mod x509;

use std::path::PathBuf;
use std::sync::Arc;

use http::{HeaderMap, header};

use crate::error::ApiError;
pub use crate::request::user::{
    ADMIN_USER, ANONYMOUS_USER, AUTHENTICATED_GROUP, ClientCertificate, MASTERS_GROUP,
    SERVICE_ACCOUNT_PREFIX, UNAUTHENTICATED_GROUP, UserInfo,
};
use apiforge_core::meta::Status;
pub use token_file::TokenFile;

type Verifier = Arc<dyn rustls::server::danger::ClientCertVerifier>;

/// Authentication settings (kube-apiserver flags).
#[derive(Clone, Debug)]
pub struct Options {
    /// `--client-ca-file`: client certificates verified against this CA
    /// authenticate as their subject (CN = user, O = groups).
    pub client_ca_file: Option<PathBuf>,
    /// `--token-auth-file`: static bearer tokens (CSV).
    pub token_auth_file: Option<PathBuf>,
    /// `--anonymous-auth`: requests no authenticator recognises are
    /// anonymous instead of 401.
    pub anonymous: bool,
    /// `--enable-bootstrap-token-auth`: bootstrap-token Secrets in
    /// `kube-system` authenticate bearer tokens.
    pub bootstrap_tokens: bool,
    /// The `--requestheader-*` front-proxy settings.
    pub request_header: request_header::Options,
    /// `--authentication-token-webhook-*`, when a config file is given.
    pub webhook: Option<webhook::Options>,
    /// `--api-audiences`: the audiences tokens must be meant for (none: no
    /// audience check).
    pub api_audiences: Vec<String>,
    /// `--service-account-issuer` and `--service-account-key-file`
    /// (service-account tokens are off without issuers).
    pub service_accounts: service_account::Options,
    /// `--oidc-*` (OIDC is off without an issuer URL).
    pub oidc: oidc::Options,
    /// `--authentication-kubeconfig` and the other delegating flags: bearer
    /// tokens are reviewed by the main server, and missing settings looked
    /// up there ([`delegated`]).
    pub delegated: Option<delegated::Options>,
    /// What [`delegated::Lookup::start`] manages (filled in by it).
    pub looked_up: Option<delegated::LookedUp>,
}

impl Options {
    /// The CA files client certificates may be verified against (the TLS
    /// layer trusts all of them; authentication tells them apart).
    pub fn client_ca_files(&self) -> Vec<&std::path::Path> {
        self.client_ca_file
            .iter()
            .chain(self.request_header.client_ca_file.iter())
            .map(PathBuf::as_path)
            .collect()
    }

    /// The CA files the delegated lookup writes (they may be absent or
    /// empty).
    pub fn optional_client_ca_files(&self) -> Vec<PathBuf> {
        self.looked_up
            .as_ref()
            .map(delegated::LookedUp::ca_files)
            .unwrap_or_default()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            client_ca_file: None,
            token_auth_file: None,
            anonymous: true,
            bootstrap_tokens: false,
            request_header: Default::default(),
            webhook: None,
            api_audiences: Vec::new(),
            service_accounts: Default::default(),
            oidc: Default::default(),
            delegated: None,
            looked_up: None,
        }
    }
}

/// Errors of loading authentication configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    /// A CA file could not be used.
    #[error("{0}")]
    Ca(String),
    /// The service-account key files are unusable.
    #[error("{0}")]
    ServiceAccount(String),
    /// The token webhook is misconfigured.
    #[error("{0}")]
    Webhook(String),
    /// The OIDC settings are unusable.
    #[error("{0}")]
    Oidc(String),
    /// The token file is malformed.
    #[error("{path}: line {line}: {message}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// The union of the configured authenticators.
#[derive(Clone)]
pub struct Authenticator {
    x509: Option<Verifier>,
    request_header: Option<request_header::RequestHeader>,
    tokens: TokenFile,
    admin_token: String,
    anonymous: bool,
    bootstrap_tokens: bool,
    secrets: Option<crate::registry::Store>,
    webhook: Option<Arc<webhook::TokenWebhook>>,
    api_audiences: Vec<String>,
    service_accounts: Option<Arc<service_account::ServiceAccountTokens>>,
    oidc: Option<Arc<oidc::Oidc>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("x509", &self.x509.is_some())
            .field("request_header", &self.request_header.is_some())
            .field("anonymous", &self.anonymous)
            .field("bootstrap_tokens", &self.bootstrap_tokens)
            .field("webhook", &self.webhook.is_some())
            .field("oidc", &self.oidc.is_some())
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Builds the union from the options; `admin_token` is the server's own
    /// admin credential (user [`ADMIN_USER`] in `system:masters`).
    pub fn new(options: &Options, admin_token: String) -> Result<Self, Error> {
        let tokens = match &options.token_auth_file {
            Some(path) => TokenFile::load(path)?,
            None => TokenFile::default(),
        };
        let verifier =
            |path: &PathBuf| client_ca::client_verifier(path).map_err(|e| Error::Ca(e.to_string()));
        let looked_up = options.looked_up.clone().unwrap_or_default();
        let request_header = match (
            &looked_up.request_header,
            &options.request_header.client_ca_file,
        ) {
            (Some((path, shared)), _) => Some(request_header::RequestHeader::new(
                &options.request_header,
                Some(shared),
                client_ca::optional_client_verifier(path),
            )),
            (None, Some(path)) => Some(request_header::RequestHeader::new(
                &options.request_header,
                None,
                verifier(path)?,
            )),
            (None, None) => None,
        };
        let x509 = match &looked_up.client_ca_file {
            Some(path) => Some(client_ca::optional_client_verifier(path)),
            None => options.client_ca_file.as_ref().map(verifier).transpose()?,
        };
        let webhook = match (&options.delegated, &options.webhook) {
            (Some(delegated), _) => Some(webhook::TokenWebhook::delegated(
                delegated,
                &options.api_audiences,
            )?),
            (None, Some(w)) => Some(webhook::TokenWebhook::new(w, &options.api_audiences)?),
            (None, None) => None,
        };
        Ok(Authenticator {
            x509,
            request_header,
            tokens,
            admin_token,
            anonymous: options.anonymous,
            bootstrap_tokens: options.bootstrap_tokens,
            secrets: None,
            webhook: webhook.map(Arc::new),
            api_audiences: options.api_audiences.clone(),
            service_accounts: if options.service_accounts.issuers.is_empty() {
                None
            } else {
                Some(Arc::new(service_account::ServiceAccountTokens::new(
                    &options.service_accounts,
                )?))
            },
            oidc: oidc::Oidc::new(&options.oidc)
                .map_err(Error::Oidc)?
                .map(Arc::new),
        })
    }

    /// Gives bootstrap-token authentication the core `v1` Secret store (it
    /// is off without one).
    pub fn set_secrets(&mut self, secrets: crate::registry::Store) {
        self.secrets = Some(secrets);
    }

    /// Authenticates a request from its headers and verified client
    /// certificate; removes a
    /// bearer token it accepted from the headers. Errors are 401 Statuses.
    pub async fn authenticate(
        &self,
        headers: &mut HeaderMap,
        cert: Option<&ClientCertificate>,
    ) -> Result<UserInfo, ApiError> {
        let mut failed = false;
        if let (Some(rh), Some(cert)) = (&self.request_header, cert) {
            match rh.authenticate(cert, headers) {
                Ok(Some(mut user)) => {
                    user.add_authenticated_group();
                    return Ok(user);
                }
                Ok(None) => {}
                Err(()) => failed = true,
            }
        }
        if let (Some(verifier), Some(cert)) = (&self.x509, cert) {
            let verified = cert.verified_by(verifier.as_ref());
            if verified {
                observe_certificate_expiration(cert);
            }
            let subject = verified.then(|| x509::subject(cert.leaf())).flatten();
            match subject {
                Some(subject) if !subject.common_name.is_empty() => {
                    let mut user = UserInfo {
                        name: subject.common_name,
                        groups: subject.organizations,
                        ..Default::default()
                    };
                    user.add_authenticated_group();
                    return Ok(user);
                }
                _ => failed = true,
            }
        }
        if let Some(token) = bearer_token(headers) {
            match self.authenticate_token(&token, &self.api_audiences).await {
                Ok((mut user, _)) => {
                    headers.remove(header::AUTHORIZATION);
                    user.add_authenticated_group();
                    return Ok(user);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "bearer token rejected");
                    failed = true;
                }
            }
        }
        if failed || !self.anonymous {
            return Err(Status::unauthorized().into());
        }
        Ok(UserInfo::anonymous())
    }
}

impl Authenticator {
    /// Runs the bearer-token authenticators in kube-apiserver's order
    /// (token file, admin token, service-account tokens, bootstrap tokens,
    /// webhook) on `token`,
    /// for `audiences` (empty: no audience check). The user (without
    /// `system:authenticated`) and the audiences the token is good for, or
    /// why the token is refused: the authenticators' errors, or upstream's
    /// `invalid bearer token`.
    ///
    /// The token file, admin and bootstrap tokens are audience-agnostic:
    /// with audiences asked for, they are good for those of the
    /// `--api-audiences` (and not tried when there are none), as
    /// upstream's `WrapAudienceAgnosticToken`.
    pub async fn authenticate_token(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<(UserInfo, Vec<String>), String> {
        let implicit: Vec<String> = audiences
            .iter()
            .filter(|a| self.api_audiences.contains(a))
            .cloned()
            .collect();
        let agnostic = audiences.is_empty() || !implicit.is_empty();
        if agnostic {
            if let Some(user) = self.tokens.lookup(token) {
                return Ok((user.clone(), implicit));
            }
            if constant_time_eq(token.as_bytes(), self.admin_token.as_bytes()) {
                return Ok((UserInfo::new(ADMIN_USER, &[MASTERS_GROUP]), implicit));
            }
        }
        // The authenticators below that wait (on storage or the network)
        // are boxed: their futures are large, and this one is part of
        // every request's chain future.
        let mut errors = Vec::new();
        if let Some(sa) = &self.service_accounts {
            match sa.authenticate(token, audiences, &self.api_audiences) {
                Ok(Some(found)) => return Ok(found),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if agnostic
            && self.bootstrap_tokens
            && let Some(secrets) = &self.secrets
            && let Some(user) = Box::pin(bootstrap_token::authenticate(secrets, token)).await
        {
            return Ok((user, implicit));
        }
        // OIDC ID tokens are audience-agnostic too (their `aud` is the
        // client id), as upstream wraps them.
        if agnostic && let Some(oidc) = &self.oidc {
            match Box::pin(oidc.authenticate(token)).await {
                Ok(Some(user)) => return Ok((user, implicit)),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if let Some(webhook) = &self.webhook {
            match Box::pin(webhook.authenticate(token, audiences)).await {
                Ok(Some(found)) => return Ok(found),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        Err(match errors.len() {
            0 => "invalid bearer token".to_string(),
            1 => errors.remove(0),
            _ => format!("[{}]", errors.join(", ")),
        })
    }

    /// `--api-audiences`.
    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
    }

    /// Authenticates `token` as a TokenReview does: with `system:authenticated`
    /// appended, for `audiences`.
    pub async fn review_token(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<(UserInfo, Vec<String>), String> {
        let (mut user, audiences) = self.authenticate_token(token, audiences).await?;
        user.add_authenticated_group();
        Ok((user, audiences))
    }
}

/// The token of an `Authorization: Bearer <token>` header; `None` when
/// absent, of another scheme, or empty.
fn bearer_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then(|| token.to_string())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `apiserver_client_certificate_expiration_seconds`: how long the verified
/// client certificate of a request has left.
fn observe_certificate_expiration(cert: &ClientCertificate) {
    if let Some(not_after) = x509::not_after(cert.leaf()) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        crate::metrics::global()
            .client_certificate_expiration
            .observe(not_after.saturating_sub(now) as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authn(anonymous: bool) -> Authenticator {
        Authenticator {
            x509: None,
            request_header: None,
            tokens: TokenFile::parse("t1,alice,1,\"dev,ops\"\n", "tokens.csv".as_ref())
                .unwrap_or_default(),
            admin_token: "admin".into(),
            anonymous,
            bootstrap_tokens: false,
            secrets: None,
            webhook: None,
            api_audiences: Vec::new(),
            service_accounts: None,
            oidc: None,
        }
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Ok(v) = format!("Bearer {token}").parse() {
            h.insert(header::AUTHORIZATION, v);
        }
        h
    }

    #[tokio::test]
    async fn union() {
        let a = authn(true);
        let ext = None;
        let mut h = bearer("t1");
        let u = a.authenticate(&mut h, ext).await.unwrap_or_default();
        assert_eq!(u.name, "alice");
        assert_eq!(u.uid, "1");
        assert_eq!(u.groups, ["dev", "ops", AUTHENTICATED_GROUP]);
        assert!(h.get(header::AUTHORIZATION).is_none());
        let u = a
            .authenticate(&mut bearer("admin"), ext)
            .await
            .unwrap_or_default();
        assert_eq!(u.groups, [MASTERS_GROUP, AUTHENTICATED_GROUP]);
        assert_eq!(
            a.authenticate(&mut bearer("nope"), ext)
                .await
                .map_err(|e| e.code()),
            Err(401)
        );
        assert_eq!(
            a.authenticate(&mut HeaderMap::new(), ext)
                .await
                .ok()
                .map(|u| u.name),
            Some(ANONYMOUS_USER.to_string())
        );
        assert_eq!(
            authn(false)
                .authenticate(&mut HeaderMap::new(), ext)
                .await
                .map_err(|e| e.code()),
            Err(401)
        );
    }
}
