//! Credentials for authentication and authorization tests: a test CA that
//! mints client certificates, token files, and kube clients that present a
//! given credential (or none) to a running [`Server`](super::Server).

use std::path::{Path, PathBuf};

use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A certificate authority for client certificates.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate (PEM).
    pub cert_pem: String,
}

impl TestCa {
    /// A fresh self-signed CA.
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("ca key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("ca cert");
        TestCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// The issuer, to sign other certificates with.
    pub fn issuer(&self) -> &Issuer<'static, KeyPair> {
        &self.issuer
    }

    /// Writes the CA certificate to `dir/<file>` and returns the path.
    pub fn write(&self, dir: &Path, file: &str) -> PathBuf {
        let path = dir.join(file);
        std::fs::write(&path, &self.cert_pem).expect("write ca");
        path
    }

    /// Mints a client certificate for user `cn` in groups `orgs` (only the
    /// first is used: rcgen keeps one value per attribute type); writes
    /// `<dir>/<cn>.crt` and `.key` and returns their paths.
    pub fn client_cert(&self, dir: &Path, cn: &str, org: Option<&str>) -> (PathBuf, PathBuf) {
        self.mint(dir, cn, org, false)
    }

    /// Like [`TestCa::client_cert`], but the certificate expired in 2020.
    pub fn expired_client_cert(&self, dir: &Path, cn: &str) -> (PathBuf, PathBuf) {
        self.mint(dir, cn, None, true)
    }

    fn mint(&self, dir: &Path, cn: &str, org: Option<&str>, expired: bool) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().expect("client key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params.distinguished_name.push(DnType::CommonName, cn);
        if let Some(org) = org {
            params
                .distinguished_name
                .push(DnType::OrganizationName, org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if expired {
            params.not_before = rcgen::date_time_ymd(2019, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        }
        let cert = params.signed_by(&key, &self.issuer).expect("client cert");
        let name = cn.replace(':', "_");
        let (crt, key_path) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&crt, cert.pem()).expect("write cert");
        std::fs::write(&key_path, key.serialize_pem()).expect("write key");
        (crt, key_path)
    }
}

/// Writes a `--token-auth-file` with `lines` into `dir`.
pub fn token_file(dir: &Path, lines: &[&str]) -> PathBuf {
    let path = dir.join("tokens.csv");
    std::fs::write(&path, lines.join("\n")).expect("write tokens");
    path
}

/// What a client presents.
#[derive(Clone, Debug, Default)]
pub struct Credential {
    /// A bearer token.
    pub token: Option<String>,
    /// A client certificate and key (PEM files).
    pub cert: Option<(PathBuf, PathBuf)>,
    /// `Impersonate-User`.
    pub impersonate: Option<String>,
    /// `Impersonate-Group`s.
    pub impersonate_groups: Vec<String>,
}

impl Credential {
    /// A bearer token.
    pub fn token(token: &str) -> Self {
        Credential {
            token: Some(token.into()),
            ..Default::default()
        }
    }

    /// A client certificate.
    pub fn cert(paths: (PathBuf, PathBuf)) -> Self {
        Credential {
            cert: Some(paths),
            ..Default::default()
        }
    }

    /// Acts as `user` (and `groups`).
    pub fn impersonating(mut self, user: &str, groups: &[&str]) -> Self {
        self.impersonate = Some(user.into());
        self.impersonate_groups = groups.iter().map(|g| g.to_string()).collect();
        self
    }
}

/// A kube client for `server` presenting `cred` instead of the admin token.
pub async fn client_with(server: &super::Server, cred: &Credential) -> kube::Client {
    let kc = Kubeconfig::read_from(server.kubeconfig()).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    let mut auth = AuthInfo {
        token: cred.token.clone().map(Into::into),
        impersonate: cred.impersonate.clone(),
        ..Default::default()
    };
    if !cred.impersonate_groups.is_empty() {
        auth.impersonate_groups = Some(cred.impersonate_groups.clone());
    }
    if let Some((crt, key)) = &cred.cert {
        auth.client_certificate = Some(crt.display().to_string());
        auth.client_key = Some(key.display().to_string());
    }
    config.auth_info = auth;
    kube::Client::try_from(config).expect("client")
}

/// The admin token of `server`.
pub fn admin_token(server: &super::Server) -> String {
    std::fs::read_to_string(server.data_dir.join("admin.token"))
        .expect("admin token")
        .trim()
        .to_string()
}

/// GETs `path` and returns the status code and body (errors: their
/// Status code and message; transport failures: code 0).
pub async fn get(client: &kube::Client, path: &str) -> (u16, String) {
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    match client.request_text(req).await {
        Ok(body) => (200, body),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(other) => (0, other.to_string()),
    }
}

/// Sends `method path` with a JSON `body` and returns the status code and
/// message (200/201 successes report 200 and the body).
pub async fn send(
    client: &kube::Client,
    method: http::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, String) {
    let content_type = if method == http::Method::PATCH {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(
            body.map(|b| serde_json::to_vec(&b).expect("json"))
                .unwrap_or_default(),
        )
        .expect("request");
    match client.request_text(req).await {
        Ok(body) => (200, body),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(other) => (0, other.to_string()),
    }
}

/// Repeats `get` until it answers `code` (RBAC changes apply after the
/// server's cache saw them); returns the last answer.
pub async fn eventually(client: &kube::Client, path: &str, code: u16) -> (u16, String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let got = get(client, path).await;
        if got.0 == code || std::time::Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

impl TestCa {
    /// Mints a serving certificate for `sans` (DNS names or IP addresses);
    /// writes `<dir>/<file>.crt` (with this CA after it) and `.key` and
    /// returns their paths.
    pub fn server_cert(&self, dir: &Path, file: &str, sans: &[&str]) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().expect("server key");
        let names: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("server params");
        params.distinguished_name.push(DnType::CommonName, file);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let cert = params.signed_by(&key, &self.issuer).expect("server cert");
        let (crt, key_path) = (
            dir.join(format!("{file}.crt")),
            dir.join(format!("{file}.key")),
        );
        // The chain, CA last: the server's admin kubeconfig trusts this file.
        std::fs::write(&crt, format!("{}{}", cert.pem(), self.cert_pem)).expect("write cert");
        std::fs::write(&key_path, key.serialize_pem()).expect("write key");
        (crt, key_path)
    }
}
