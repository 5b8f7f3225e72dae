//! OpenID Connect ID tokens (`--oidc-*`), as kube-apiserver's OIDC
//! authenticator: a bearer token that is a JWT whose `iss` is
//! `--oidc-issuer-url` is verified against the issuer's signing keys (its
//! JWKS, found through `<issuer>/.well-known/openid-configuration`), must
//! name `--oidc-client-id` in `aud`, must not be expired (`exp`) or not yet
//! valid (`nbf`, five minutes of clock skew allowed), must be signed with
//! one of `--oidc-signing-algs` (default RS256), and must carry every
//! `--oidc-required-claim`.
//!
//! The user name is the `--oidc-username-claim` (default `sub`) with
//! `--oidc-username-prefix`: by default the issuer URL and `#` unless the
//! claim is `email`, `-` for none. With the `email` claim, an
//! `email_verified` claim that is present must be true. Groups come from
//! `--oidc-groups-claim` (a string or a list of strings) with
//! `--oidc-groups-prefix`.
//!
//! Keys are fetched on first use and again (at most every ten seconds) when
//! a token names a key id the cached set lacks; the issuer's certificate is
//! checked against `--oidc-ca-file`, or the host's CA bundle.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hyper_util::rt::TokioIo;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::Value;

use super::UserInfo;
use super::service_account::b64url;

/// Clock skew allowed for `nbf` (go-oidc's).
const NOT_BEFORE_SKEW: u64 = 5 * 60;
/// The least time between two key fetches.
const REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// How long one discovery or key request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Where Debian-like hosts keep their CA bundle.
const HOST_CA_BUNDLES: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// The `--oidc-*` settings.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--oidc-issuer-url` (https); OIDC is off without it.
    pub issuer_url: Option<String>,
    /// `--oidc-client-id`: the audience tokens must carry.
    pub client_id: String,
    /// `--oidc-username-claim` (default `sub`).
    pub username_claim: String,
    /// `--oidc-username-prefix`; `None` = the default rule, `-` = none.
    pub username_prefix: Option<String>,
    /// `--oidc-groups-claim`.
    pub groups_claim: Option<String>,
    /// `--oidc-groups-prefix`.
    pub groups_prefix: String,
    /// `--oidc-ca-file`.
    pub ca_file: Option<PathBuf>,
    /// `--oidc-required-claim` (`key=value`, repeatable).
    pub required_claims: Vec<(String, String)>,
    /// `--oidc-signing-algs` (default `RS256`).
    pub signing_algs: Vec<String>,
}

/// The OIDC configuration problems found when starting (each names its
/// flag).
pub fn validate(options: &Options) -> Vec<String> {
    let mut errs = Vec::new();
    let Some(issuer) = &options.issuer_url else {
        return errs;
    };
    if !issuer.starts_with("https://") {
        errs.push(format!(
            "--oidc-issuer-url: {issuer:?} must be an https URL"
        ));
    }
    if options.client_id.is_empty() {
        errs.push("--oidc-client-id: must be set when --oidc-issuer-url is".to_string());
    }
    for alg in &options.signing_algs {
        if algorithm(alg).is_none() {
            errs.push(format!(
                "--oidc-signing-algs: unsupported algorithm {alg:?} (supported: RS256, RS384, RS512, ES256, ES384, PS256, PS384, PS512)"
            ));
        }
    }
    errs
}

/// The verification algorithm of a JWS `alg`.
fn algorithm(alg: &str) -> Option<Alg> {
    Some(match alg {
        "RS256" => Alg::Rsa(&signature::RSA_PKCS1_2048_8192_SHA256),
        "RS384" => Alg::Rsa(&signature::RSA_PKCS1_2048_8192_SHA384),
        "RS512" => Alg::Rsa(&signature::RSA_PKCS1_2048_8192_SHA512),
        "PS256" => Alg::Rsa(&signature::RSA_PSS_2048_8192_SHA256),
        "PS384" => Alg::Rsa(&signature::RSA_PSS_2048_8192_SHA384),
        "PS512" => Alg::Rsa(&signature::RSA_PSS_2048_8192_SHA512),
        "ES256" => Alg::Ec("P-256", &signature::ECDSA_P256_SHA256_FIXED),
        "ES384" => Alg::Ec("P-384", &signature::ECDSA_P384_SHA384_FIXED),
        _ => return None,
    })
}

#[derive(Clone, Copy)]
enum Alg {
    Rsa(&'static signature::RsaParameters),
    Ec(&'static str, &'static signature::EcdsaVerificationAlgorithm),
}

/// One key of the issuer's JWKS.
#[derive(Clone, Debug, PartialEq)]
struct Jwk {
    kid: Option<String>,
    key: PublicKey,
}

#[derive(Clone, Debug, PartialEq)]
enum PublicKey {
    /// Modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The curve (`P-256`, `P-384`) and the uncompressed point.
    Ec { crv: String, point: Vec<u8> },
}

impl PublicKey {
    fn verify(&self, alg: Alg, message: &[u8], sig: &[u8]) -> bool {
        match (self, alg) {
            (PublicKey::Rsa { n, e }, Alg::Rsa(params)) => RsaPublicKeyComponents { n, e }
                .verify(params, message, sig)
                .is_ok(),
            (PublicKey::Ec { crv, point }, Alg::Ec(curve, verify)) if crv == curve => {
                UnparsedPublicKey::new(verify, point)
                    .verify(message, sig)
                    .is_ok()
            }
            _ => false,
        }
    }
}

/// The keys of a JWKS document (keys of other types or uses are skipped).
fn parse_jwks(doc: &Value) -> Vec<Jwk> {
    let Some(keys) = doc.get("keys").and_then(Value::as_array) else {
        return Vec::new();
    };
    let text = |k: &Value, f: &str| k.get(f).and_then(Value::as_str).map(str::to_string);
    keys.iter()
        .filter(|k| text(k, "use").is_none_or(|u| u == "sig"))
        .filter_map(|k| {
            let key = match text(k, "kty")?.as_str() {
                "RSA" => PublicKey::Rsa {
                    n: b64url(&text(k, "n")?)?,
                    e: b64url(&text(k, "e")?)?,
                },
                "EC" => {
                    let crv = text(k, "crv")?;
                    let (x, y) = (b64url(&text(k, "x")?)?, b64url(&text(k, "y")?)?);
                    let mut point = Vec::with_capacity(1 + x.len() + y.len());
                    point.push(4);
                    point.extend_from_slice(&x);
                    point.extend_from_slice(&y);
                    PublicKey::Ec { crv, point }
                }
                _ => return None,
            };
            Some(Jwk {
                kid: text(k, "kid"),
                key,
            })
        })
        .collect()
}

/// A JWT split and decoded, not yet verified.
struct Jwt {
    alg: String,
    kid: Option<String>,
    claims: Value,
    signed: String,
    signature: Vec<u8>,
}

impl Jwt {
    fn parse(token: &str) -> Option<Jwt> {
        let mut parts = token.split('.');
        let (header_b64, payload_b64, sig_b64) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let header: Value = serde_json::from_slice(&b64url(header_b64)?).ok()?;
        let claims: Value = serde_json::from_slice(&b64url(payload_b64)?).ok()?;
        Some(Jwt {
            alg: header.get("alg")?.as_str()?.to_string(),
            kid: header
                .get("kid")
                .and_then(Value::as_str)
                .map(str::to_string),
            claims,
            signed: format!("{header_b64}.{payload_b64}"),
            signature: b64url(sig_b64)?,
        })
    }
}

/// The keys fetched so far.
#[derive(Default)]
struct KeySet {
    keys: Vec<Jwk>,
    fetched: Option<Instant>,
}

/// The OIDC token authenticator.
pub struct Oidc {
    options: Options,
    issuer: String,
    tls: tokio_rustls::TlsConnector,
    keys: tokio::sync::Mutex<KeySet>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn read_roots(path: &Path) -> Result<rustls::RootCertStore, String> {
    use rustls_pki_types::pem::PemObject;
    let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("{}: {e}", path.display()))?;
        // A host bundle may hold certificates rustls cannot use; skip them.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(format!("{}: no usable CA certificate", path.display()));
    }
    Ok(roots)
}

impl Oidc {
    /// The authenticator, or `None` when `--oidc-issuer-url` is not set.
    pub fn new(options: &Options) -> Result<Option<Oidc>, String> {
        let Some(issuer) = options.issuer_url.clone() else {
            return Ok(None);
        };
        let errs = validate(options);
        if !errs.is_empty() {
            return Err(errs.join("; "));
        }
        let roots = match &options.ca_file {
            Some(path) => read_roots(path)?,
            None => HOST_CA_BUNDLES
                .iter()
                .find_map(|p| read_roots(Path::new(p)).ok())
                .ok_or("--oidc-ca-file: not set and no host CA bundle found")?,
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut options = options.clone();
        if options.username_claim.is_empty() {
            options.username_claim = "sub".into();
        }
        if options.signing_algs.is_empty() {
            options.signing_algs = vec!["RS256".into()];
        }
        Ok(Some(Oidc {
            options,
            issuer,
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            keys: tokio::sync::Mutex::new(KeySet::default()),
        }))
    }

    /// Authenticates `token`: `Ok(None)` when it is not a JWT of this
    /// issuer (another authenticator's), the user when it verifies, and why
    /// not otherwise.
    pub async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let Some(jwt) = Jwt::parse(token) else {
            return Ok(None);
        };
        if jwt.claims.get("iss").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Ok(None);
        }
        let err = |m: String| Err(format!("oidc: verify token: {m}"));
        if !self.options.signing_algs.contains(&jwt.alg) {
            return err(format!("unsupported signing algorithm {:?}", jwt.alg));
        }
        let Some(alg) = algorithm(&jwt.alg) else {
            return err(format!("unsupported signing algorithm {:?}", jwt.alg));
        };
        if !self.verify_signature(&jwt, alg).await? {
            return err("failed to verify signature".into());
        }
        self.claims_to_user(&jwt.claims, now_secs())
            .map(Some)
            .or_else(err)
    }

    /// Verifies the signature with the cached keys, fetching them again
    /// once when none verifies (the issuer may have rotated its keys).
    async fn verify_signature(&self, jwt: &Jwt, alg: Alg) -> Result<bool, String> {
        let mut keys = self.keys.lock().await;
        for attempt in 0..2 {
            let stale = keys.fetched.is_none_or(|t| t.elapsed() >= REFETCH_INTERVAL);
            if keys.fetched.is_none() || (attempt == 1 && stale) {
                match tokio::time::timeout(FETCH_TIMEOUT * 2, self.fetch_keys()).await {
                    Ok(Ok(fetched)) => keys.keys = fetched,
                    Ok(Err(e)) => {
                        tracing::warn!(issuer = %self.issuer, error = %e, "oidc: fetching the signing keys failed")
                    }
                    Err(_) => {
                        tracing::warn!(issuer = %self.issuer, "oidc: fetching the signing keys timed out")
                    }
                }
                keys.fetched = Some(Instant::now());
            }
            let verified = keys
                .keys
                .iter()
                .filter(|k| jwt.kid.is_none() || k.kid.is_none() || k.kid == jwt.kid)
                .any(|k| k.key.verify(alg, jwt.signed.as_bytes(), &jwt.signature));
            if verified {
                return Ok(true);
            }
            if !stale {
                break;
            }
        }
        Ok(false)
    }

    /// The discovery document, then the JWKS it names.
    async fn fetch_keys(&self) -> Result<Vec<Jwk>, String> {
        let discovery_url = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let discovery = self.get_json(&discovery_url).await?;
        let issuer = discovery.get("issuer").and_then(Value::as_str);
        if issuer != Some(self.issuer.as_str()) {
            return Err(format!(
                "oidc: issuer did not match the issuer returned by provider, expected {:?} got {:?}",
                self.issuer,
                issuer.unwrap_or_default()
            ));
        }
        let jwks_uri = discovery
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or("the discovery document has no jwks_uri")?;
        Ok(parse_jwks(&self.get_json(jwks_uri).await?))
    }

    /// GETs an https URL and decodes its JSON body.
    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
        if uri.scheme_str() != Some("https") {
            return Err(format!("{url}: not an https URL"));
        }
        let host = uri
            .host()
            .ok_or("no host")?
            .trim_matches(['[', ']'])
            .to_string();
        let port = uri.port_u16().unwrap_or(443);
        let fetch = async {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            let name =
                rustls_pki_types::ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
            let tls = self
                .tls
                .connect(name, tcp)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            let req = http::Request::get(uri.path_and_query().map_or("/", |p| p.as_str()))
                .header(
                    http::header::HOST,
                    uri.authority().map_or("", |a| a.as_str()),
                )
                .header(http::header::ACCEPT, "application/json")
                .body(http_body_util::Empty::<bytes::Bytes>::new())
                .map_err(|e| e.to_string())?;
            let resp = sender
                .send_request(req)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            let status = resp.status();
            let body = http_body_util::BodyExt::collect(http_body_util::Limited::new(
                resp.into_body(),
                1 << 20,
            ))
            .await
            .map_err(|e| format!("{url}: {e}"))?
            .to_bytes();
            if !status.is_success() {
                return Err(format!("{url}: {status}"));
            }
            serde_json::from_slice(&body).map_err(|e| format!("{url}: {e}"))
        };
        tokio::time::timeout(FETCH_TIMEOUT, fetch)
            .await
            .map_err(|_| format!("{url}: timed out"))?
    }

    /// Checks the verified claims and maps them to the user.
    fn claims_to_user(&self, claims: &Value, now: u64) -> Result<UserInfo, String> {
        let o = &self.options;
        let audience_ok = match claims.get("aud") {
            Some(Value::String(a)) => *a == o.client_id,
            Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(&o.client_id)),
            _ => false,
        };
        if !audience_ok {
            return Err(format!(
                "expected audience {:?} got {}",
                o.client_id,
                claims.get("aud").unwrap_or(&Value::Null)
            ));
        }
        match claims.get("exp").and_then(Value::as_u64) {
            Some(exp) if exp > now => {}
            Some(exp) => return Err(format!("token is expired (Token Expiry: {exp})")),
            None => return Err("token has no expiry".into()),
        }
        if let Some(nbf) = claims.get("nbf").and_then(Value::as_u64)
            && nbf > now + NOT_BEFORE_SKEW
        {
            return Err(format!(
                "current time {now} before the nbf (not before) time: {nbf}"
            ));
        }
        for (key, want) in &o.required_claims {
            match claims.get(key).and_then(Value::as_str) {
                Some(v) if v == want => {}
                Some(v) => {
                    return Err(format!(
                        "required claim {key} value does not match. Got = {v}, want = {want}"
                    ));
                }
                None => return Err(format!("required claim {key} not present in ID token")),
            }
        }
        let claim = o.username_claim.as_str();
        let Some(username) = claims.get(claim).and_then(Value::as_str) else {
            return Err(format!("claim not present: {claim}"));
        };
        if claim == "email"
            && let Some(verified) = claims.get("email_verified")
            && verified != &Value::Bool(true)
        {
            return Err(format!("email not verified: {username}"));
        }
        let prefix = match o.username_prefix.as_deref() {
            Some("-") => String::new(),
            Some(p) => p.to_string(),
            None if claim == "email" => String::new(),
            None => format!("{}#", self.issuer),
        };
        let mut user = UserInfo {
            name: format!("{prefix}{username}"),
            ..Default::default()
        };
        if let Some(groups_claim) = &o.groups_claim {
            let groups: Vec<String> = match claims.get(groups_claim) {
                None => Vec::new(),
                Some(Value::String(g)) => vec![g.clone()],
                Some(Value::Array(list)) => list
                    .iter()
                    .map(|g| {
                        g.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| format!("claim {groups_claim}: not a string list"))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(format!("claim {groups_claim}: not a string or a list")),
            };
            user.groups = groups
                .into_iter()
                .map(|g| format!("{}{g}", o.groups_prefix))
                .collect();
        }
        Ok(user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    use serde_json::json;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    /// A P-256 key, its JWK, and a signer of JWTs with it.
    fn es256_key() -> (EcdsaKeyPair, Value) {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let point = pair.public_key().as_ref();
        let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig",
            "x": b64(&point[1..33]), "y": b64(&point[33..65])});
        (pair, jwk)
    }

    fn sign(pair: &EcdsaKeyPair, kid: &str, claims: &Value) -> String {
        let header = b64(json!({"alg": "ES256", "kid": kid, "typ": "JWT"})
            .to_string()
            .as_bytes());
        let payload = b64(claims.to_string().as_bytes());
        let signed = format!("{header}.{payload}");
        let sig = pair.sign(&SystemRandom::new(), signed.as_bytes()).unwrap();
        format!("{signed}.{}", b64(sig.as_ref()))
    }

    fn authenticator(options: Options, keys: Vec<Jwk>) -> Oidc {
        let ca = tempfile::NamedTempFile::new().unwrap();
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(ca.path(), cert.cert.pem()).unwrap();
        let oidc = Oidc::new(&Options {
            ca_file: Some(ca.path().to_path_buf()),
            ..options
        })
        .unwrap()
        .unwrap();
        oidc.keys.try_lock().unwrap().keys = keys;
        oidc.keys.try_lock().unwrap().fetched = Some(Instant::now());
        oidc
    }

    fn options() -> Options {
        Options {
            issuer_url: Some("https://issuer.example".into()),
            client_id: "apiforge".into(),
            signing_algs: vec!["ES256".into()],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn verifies_signature_audience_expiry_and_maps_the_user() {
        let (pair, jwk) = es256_key();
        let keys = parse_jwks(&json!({"keys": [jwk]}));
        assert_eq!(keys.len(), 1);
        let oidc = authenticator(
            Options {
                groups_claim: Some("groups".into()),
                groups_prefix: "oidc:".into(),
                required_claims: vec![("tier".into(), "gold".into())],
                ..options()
            },
            keys,
        );
        let exp = now_secs() + 600;
        let good = json!({"iss": "https://issuer.example", "aud": ["x", "apiforge"],
            "sub": "jane", "exp": exp, "groups": ["dev", "ops"], "tier": "gold"});
        let user = oidc
            .authenticate(&sign(&pair, "k1", &good))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(user.name, "https://issuer.example#jane");
        assert_eq!(user.groups, ["oidc:dev", "oidc:ops"]);

        // Another issuer's token is not ours; garbage is not a JWT.
        let other =
            json!({"iss": "https://other.example", "aud": "apiforge", "sub": "x", "exp": exp});
        assert_eq!(
            oidc.authenticate(&sign(&pair, "k1", &other)).await,
            Ok(None)
        );
        assert_eq!(oidc.authenticate("not-a-jwt").await, Ok(None));

        let refused = |claims: Value| {
            let token = sign(&pair, "k1", &claims);
            let oidc = &oidc;
            async move { oidc.authenticate(&token).await.unwrap_err() }
        };
        let mut expired = good.clone();
        expired["exp"] = json!(now_secs() - 1);
        assert!(refused(expired).await.contains("token is expired"));
        let mut wrong_aud = good.clone();
        wrong_aud["aud"] = json!("someone-else");
        assert!(refused(wrong_aud).await.contains("expected audience"));
        let mut future = good.clone();
        future["nbf"] = json!(now_secs() + 3600);
        assert!(refused(future).await.contains("not before"));
        let mut missing = good.clone();
        missing["tier"] = json!("silver");
        assert!(refused(missing).await.contains("required claim tier"));

        // A token signed by another key fails verification (the key set was
        // fetched just now, so no refetch).
        let (other_pair, _) = es256_key();
        let forged = sign(&other_pair, "k1", &good);
        assert!(
            oidc.authenticate(&forged)
                .await
                .unwrap_err()
                .contains("signature")
        );
        // A tampered payload fails too.
        let token = sign(&pair, "k1", &good);
        let mut parts: Vec<&str> = token.split('.').collect();
        let tampered = b64(
            json!({"iss": "https://issuer.example", "aud": "apiforge", "sub": "root", "exp": exp})
                .to_string()
                .as_bytes(),
        );
        parts[1] = &tampered;
        assert!(
            oidc.authenticate(&parts.join("."))
                .await
                .unwrap_err()
                .contains("signature")
        );
    }

    #[tokio::test]
    async fn username_prefix_rules_and_email_verification() {
        let oidc = authenticator(
            Options {
                username_claim: "email".into(),
                ..options()
            },
            vec![],
        );
        let exp = now_secs() + 60;
        let claims = json!({"aud": "apiforge", "exp": exp, "email": "jane@example.com"});
        assert_eq!(
            oidc.claims_to_user(&claims, now_secs()).unwrap().name,
            "jane@example.com"
        );
        let mut unverified = claims.clone();
        unverified["email_verified"] = json!(false);
        assert!(
            oidc.claims_to_user(&unverified, now_secs())
                .unwrap_err()
                .contains("email not verified")
        );

        let oidc = authenticator(
            Options {
                username_prefix: Some("-".into()),
                ..options()
            },
            vec![],
        );
        let claims = json!({"aud": "apiforge", "exp": exp, "sub": "jane"});
        assert_eq!(
            oidc.claims_to_user(&claims, now_secs()).unwrap().name,
            "jane"
        );
        let oidc = authenticator(
            Options {
                username_prefix: Some("corp:".into()),
                ..options()
            },
            vec![],
        );
        assert_eq!(
            oidc.claims_to_user(&claims, now_secs()).unwrap().name,
            "corp:jane"
        );
    }

    #[test]
    fn flags_are_validated() {
        let errs = validate(&Options {
            issuer_url: Some("http://issuer".into()),
            signing_algs: vec!["HS256".into()],
            ..Default::default()
        });
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(validate(&Options::default()).is_empty());
    }
}
