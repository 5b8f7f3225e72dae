//! Who makes a request: the [`UserInfo`] authentication puts into the
//! request (read with [`user_of`]) and the handlers run as (read below
//! them with [`current_user`]), the well-known users and groups, and the
//! client certificate of the connection.

use std::collections::BTreeMap;
use std::sync::Arc;

/// The user of unauthenticated requests.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The group of unauthenticated requests.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The group every authenticated user belongs to.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The superuser group: always authorized.
pub const MASTERS_GROUP: &str = "system:masters";
/// The user name the server's own admin token authenticates as.
pub const ADMIN_USER: &str = "apiforge-admin";
/// Prefix of service-account user names (`system:serviceaccount:<ns>:<name>`).
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// An authenticated (or anonymous) user, as handlers see it in the
/// request extensions.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UserInfo {
    /// The user name.
    #[serde(rename = "username", default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// A unique, stable identifier, if the authenticator knows one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The groups the user belongs to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Additional information the authenticator provided.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with a name and groups.
    pub fn new(name: impl Into<String>, groups: &[&str]) -> Self {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    /// The anonymous user.
    pub fn anonymous() -> Self {
        UserInfo::new(ANONYMOUS_USER, &[UNAUTHENTICATED_GROUP])
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Appends `system:authenticated` unless the user already has it or is
    /// unauthenticated.
    pub fn add_authenticated_group(&mut self) {
        if !self.in_group(AUTHENTICATED_GROUP) && !self.in_group(UNAUTHENTICATED_GROUP) {
            self.groups.push(AUTHENTICATED_GROUP.to_string());
        }
    }
}

tokio::task_local! {
    static CURRENT_USER: Arc<UserInfo>;
}

/// Runs `fut` (a request's handling) as `user`: code below the handlers
/// (admission, the registry) reads it with [`current_user`].
pub async fn with_user<F: std::future::Future>(user: Arc<UserInfo>, fut: F) -> F::Output {
    CURRENT_USER.scope(user, fut).await
}

/// The user of the request being handled, if any.
pub fn current_user() -> Option<UserInfo> {
    CURRENT_USER.try_with(|u| UserInfo::clone(u)).ok()
}

/// The TLS client certificate chain (leaf first) of a connection; the
/// listener puts it into every request's extensions. The handshake proved
/// the client holds its key but did not verify the chain: authenticators
/// verify it against their CAs ([`ClientCertificate::verified_by`]).
#[derive(Clone, Debug)]
pub struct ClientCertificate(pub Arc<Vec<rustls_pki_types::CertificateDer<'static>>>);

impl ClientCertificate {
    /// Whether `verifier` accepts the chain.
    pub(crate) fn verified_by(
        &self,
        verifier: &dyn rustls::server::danger::ClientCertVerifier,
    ) -> bool {
        let Some((leaf, intermediates)) = self.0.split_first() else {
            return false;
        };
        verifier
            .verify_client_cert(leaf, intermediates, rustls_pki_types::UnixTime::now())
            .is_ok()
    }

    /// The leaf certificate (DER).
    pub(crate) fn leaf(&self) -> &[u8] {
        self.0.first().map(|c| c.as_ref()).unwrap_or_default()
    }
}

/// The user the authentication (and impersonation) filters put into a
/// request's extensions, if any.
pub fn user_of<B>(req: &http::Request<B>) -> Option<&Arc<UserInfo>> {
    req.extensions().get::<Arc<UserInfo>>()
}
