//! Service-account tokens (`--service-account-issuer`,
//! `--service-account-key-file`): JWTs in the shape kube-apiserver's
//! TokenRequest issues (`pkg/serviceaccount`), verified with `ring`.
//!
//! A bearer token whose unverified `iss` is one of the issuers is this
//! authenticator's: its signature must verify with one of the keys (RS256/
//! 384/512 with RSA keys, ES256/ES384 with P-256/P-384 keys), its `aud`
//! must intersect the audiences asked for (`--api-audiences`, default the
//! issuers), `exp`/`nbf`/`iat` must hold with upstream's one-minute leeway,
//! and the private `kubernetes.io` claim must name a namespace and a
//! service account. The user is `system:serviceaccount:<ns>:<name>` (uid:
//! the service account's), in `system:serviceaccounts` and
//! `system:serviceaccounts:<ns>`, with the pod, node and `credential-id`
//! (`JTI=<jti>`) extras.
//!
//! Not done (there is no ServiceAccount kind): the lookup of the service
//! account, pod, secret or node the token is bound to, legacy
//! (`kubernetes/serviceaccount`) tokens, and issuing tokens (the signing
//! key only provides the default verification key).

use std::path::{Path, PathBuf};

use base64::Engine;
use ring::signature::{self, UnparsedPublicKey, VerificationAlgorithm};
use serde_json::Value;

use super::x509::{expect, read};
use super::{Error, UserInfo};

/// The group of all service accounts.
pub const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";

/// Service-account token settings.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--service-account-issuer`: accepted `iss` values.
    pub issuers: Vec<String>,
    /// `--service-account-key-file` (else the signing key file): PEM files
    /// with RSA or ECDSA public (or private) keys.
    pub key_files: Vec<PathBuf>,
}

/// A verification key.
#[derive(Clone, Debug)]
enum Key {
    /// An RSA public key (PKCS#1 `RSAPublicKey` DER).
    Rsa(Vec<u8>),
    /// An ECDSA public key: the curve (256 or 384) and the uncompressed
    /// point.
    Ec(u16, Vec<u8>),
}

/// The service-account token authenticator.
#[derive(Clone, Debug)]
pub struct ServiceAccountTokens {
    issuers: Vec<String>,
    keys: Vec<Key>,
}

const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

fn curve(oid: &[u8]) -> Option<u16> {
    match oid {
        OID_P256 => Some(256),
        OID_P384 => Some(384),
        _ => None,
    }
}

/// The PEM blocks of `text`: label and DER.
fn pem_blocks(text: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + 11..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = after[..label_end].to_string();
        let body = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = body.find(&end_marker) else {
            break;
        };
        let b64: String = body[..end]
            .lines()
            .filter(|l| !l.contains(':'))
            .flat_map(|l| l.trim().chars())
            .collect();
        if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(b64) {
            out.push((label, der));
        }
        rest = &body[end + end_marker.len()..];
    }
    out
}

/// A `SubjectPublicKeyInfo`.
fn spki(der: &[u8]) -> Option<Key> {
    let (seq, _) = expect(der, 0x30)?;
    let (alg, rest) = expect(seq, 0x30)?;
    let (bits, _) = expect(rest, 0x03)?;
    let (oid, params) = expect(alg, 0x06)?;
    let key = bits.strip_prefix(&[0])?.to_vec();
    match oid {
        OID_RSA => Some(Key::Rsa(key)),
        OID_EC => Some(Key::Ec(curve(expect(params, 0x06)?.0)?, key)),
        _ => None,
    }
}

/// A SEC1 `ECPrivateKey`'s public key; `curve` when the parameters are
/// not inside.
fn sec1_public(der: &[u8], curve_hint: Option<u16>) -> Option<Key> {
    let (seq, _) = expect(der, 0x30)?;
    let (_, mut rest) = expect(seq, 0x02)?;
    rest = expect(rest, 0x04)?.1;
    let mut curve_id = curve_hint;
    let mut point = None;
    while let Some((tlv, tail)) = read(rest) {
        match tlv.tag {
            0xa0 => curve_id = curve(expect(tlv.content, 0x06)?.0),
            0xa1 => point = Some(expect(tlv.content, 0x03)?.0.strip_prefix(&[0])?.to_vec()),
            _ => {}
        }
        rest = tail;
    }
    Some(Key::Ec(curve_id?, point?))
}

/// A PKCS#8 private key's public key.
fn pkcs8_public(der: &[u8]) -> Option<Key> {
    let (seq, _) = expect(der, 0x30)?;
    let (_, rest) = expect(seq, 0x02)?;
    let (alg, rest) = expect(rest, 0x30)?;
    let (inner, _) = expect(rest, 0x04)?;
    let (oid, params) = expect(alg, 0x06)?;
    match oid {
        OID_RSA => rsa_private_public(inner),
        OID_EC => sec1_public(inner, expect(params, 0x06).and_then(|p| curve(p.0))),
        _ => None,
    }
}

/// A PKCS#1 `RSAPrivateKey`'s public key.
fn rsa_private_public(der: &[u8]) -> Option<Key> {
    let pair = signature::RsaKeyPair::from_der(der).ok()?;
    Some(Key::Rsa(
        ring::signature::KeyPair::public_key(&pair)
            .as_ref()
            .to_vec(),
    ))
}

/// The keys of a PEM file, as upstream's `keyutil.ParsePublicKeysPEM`:
/// public keys, and the public halves of private keys; other blocks are
/// skipped.
fn parse_keys(text: &str) -> Vec<Key> {
    pem_blocks(text)
        .into_iter()
        .filter_map(|(label, der)| match label.as_str() {
            "PUBLIC KEY" => spki(&der),
            "RSA PUBLIC KEY" => Some(Key::Rsa(der)),
            "RSA PRIVATE KEY" => rsa_private_public(&der),
            "EC PRIVATE KEY" => sec1_public(&der, None),
            "PRIVATE KEY" => pkcs8_public(&der),
            _ => None,
        })
        .collect()
}

/// Decodes base64url (JWT segments; padding tolerated).
pub(super) fn b64url(part: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .ok()
}

/// Go's `%q` of a string slice: `["a" "b"]`.
fn go_quote(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|a| format!("{a:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// Upstream's leeway for `exp`, `nbf` and `iat` (go-jose's
/// `DefaultLeeway`).
const LEEWAY_SECONDS: i64 = 60;

impl ServiceAccountTokens {
    /// Reads the key files.
    pub fn new(options: &Options) -> Result<Self, Error> {
        let mut keys = Vec::new();
        for path in &options.key_files {
            keys.extend(load(path)?);
        }
        Ok(ServiceAccountTokens {
            issuers: options.issuers.clone(),
            keys,
        })
    }

    /// Authenticates `token` for `audiences` (`--api-audiences`, or a
    /// TokenReview's): `Ok(None)` when it is not a token of these issuers,
    /// the user and the token's audiences among those asked for, or why
    /// it is refused.
    pub fn authenticate(
        &self,
        token: &str,
        audiences: &[String],
        implicit_audiences: &[String],
    ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
        let parts: Vec<&str> = token.split('.').collect();
        let [header, payload, sig] = parts.as_slice() else {
            return Ok(None);
        };
        let Some(claims) = b64url(payload).and_then(|p| serde_json::from_slice::<Value>(&p).ok())
        else {
            return Ok(None);
        };
        let Some(issuer) = claims.get("iss").and_then(Value::as_str) else {
            return Ok(None);
        };
        if !self.issuers.iter().any(|i| i == issuer) {
            return Ok(None);
        }
        let Some(alg) = b64url(header)
            .and_then(|h| serde_json::from_slice::<Value>(&h).ok())
            .and_then(|h| h.get("alg").and_then(Value::as_str).map(str::to_string))
        else {
            return Ok(None);
        };
        let Some(signature) = b64url(sig) else {
            return Ok(None);
        };
        let signed = &token[..header.len() + 1 + payload.len()];
        if !self
            .keys
            .iter()
            .any(|k| verify(k, &alg, signed.as_bytes(), &signature))
        {
            return Err("square/go-jose: error in cryptographic primitive".into());
        }
        let token_audiences: Vec<String> = match claims.get("aud") {
            Some(Value::String(a)) => vec![a.clone()],
            Some(v) => serde_json::from_value(v.clone()).unwrap_or_default(),
            None => Vec::new(),
        };
        if token_audiences.is_empty() {
            return Err("token does not have audiences".into());
        }
        let requested = if audiences.is_empty() {
            implicit_audiences
        } else {
            audiences
        };
        let good: Vec<String> = token_audiences
            .iter()
            .filter(|a| requested.contains(a))
            .cloned()
            .collect();
        if good.is_empty() && !implicit_audiences.is_empty() {
            return Err(format!(
                "token audiences {} is invalid for the target audiences {}",
                go_quote(&token_audiences),
                go_quote(requested)
            ));
        }
        let now = jiff::Timestamp::now().as_second();
        let time = |key: &str| claims.get(key).and_then(Value::as_i64);
        if time("exp").is_some_and(|exp| now > exp + LEEWAY_SECONDS) {
            return Err("service account token has expired".into());
        }
        if time("nbf").is_some_and(|nbf| now + LEEWAY_SECONDS < nbf) {
            return Err("service account token is not valid yet".into());
        }
        if time("iat").is_some_and(|iat| now + LEEWAY_SECONDS < iat) {
            return Err("service account token is issued in the future".into());
        }
        let kube = claims.get("kubernetes.io");
        let text = |path: &str| {
            kube.and_then(|k| k.pointer(path))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (namespace, name) = (text("/namespace"), text("/serviceaccount/name"));
        if namespace.is_empty() || name.is_empty() {
            return Err("service account token claims could not be validated".into());
        }
        let mut user = UserInfo {
            name: format!("{}{namespace}:{name}", super::SERVICE_ACCOUNT_PREFIX),
            uid: text("/serviceaccount/uid"),
            groups: vec![
                SERVICE_ACCOUNTS_GROUP.to_string(),
                format!("{SERVICE_ACCOUNTS_GROUP}:{namespace}"),
            ],
            ..Default::default()
        };
        let mut extra = |key: &str, value: String| {
            if !value.is_empty() {
                user.extra
                    .insert(format!("authentication.kubernetes.io/{key}"), vec![value]);
            }
        };
        extra("pod-name", text("/pod/name"));
        extra("pod-uid", text("/pod/uid"));
        extra("node-name", text("/node/name"));
        extra("node-uid", text("/node/uid"));
        if let Some(jti) = claims.get("jti").and_then(Value::as_str) {
            extra("credential-id", format!("JTI={jti}"));
        }
        Ok(Some((user, good)))
    }
}

fn load(path: &Path) -> Result<Vec<Key>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io(path.to_path_buf(), e))?;
    let keys = parse_keys(&text);
    if keys.is_empty() {
        return Err(Error::ServiceAccount(format!(
            "failed to parse key file {:?}: data does not contain any valid RSA or ECDSA public keys",
            path.display().to_string()
        )));
    }
    Ok(keys)
}

fn verify(key: &Key, alg: &str, message: &[u8], sig: &[u8]) -> bool {
    let algorithm: &'static dyn VerificationAlgorithm = match (key, alg) {
        (Key::Rsa(_), "RS256") => &signature::RSA_PKCS1_2048_8192_SHA256,
        (Key::Rsa(_), "RS384") => &signature::RSA_PKCS1_2048_8192_SHA384,
        (Key::Rsa(_), "RS512") => &signature::RSA_PKCS1_2048_8192_SHA512,
        (Key::Ec(256, _), "ES256") => &signature::ECDSA_P256_SHA256_FIXED,
        (Key::Ec(384, _), "ES384") => &signature::ECDSA_P384_SHA384_FIXED,
        _ => return false,
    };
    let der = match key {
        Key::Rsa(der) | Key::Ec(_, der) => der,
    };
    UnparsedPublicKey::new(algorithm, der)
        .verify(message, sig)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_blocks_and_go_quote() {
        let text = "junk\n-----BEGIN PUBLIC KEY-----\nAAEC\n-----END PUBLIC KEY-----\n-----BEGIN CERTIFICATE-----\nAw==\n-----END CERTIFICATE-----\n";
        let blocks = pem_blocks(text);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0], ("PUBLIC KEY".to_string(), vec![0, 1, 2]));
        assert_eq!(blocks[1].0, "CERTIFICATE");
        assert!(parse_keys(text).is_empty());
        assert_eq!(go_quote(&["a".into(), "b".into()]), "[\"a\" \"b\"]");
    }

    /// An RS256 token made with openssl (`testdata/`, public keys only),
    /// expiring in 2100.
    #[test]
    fn rsa_tokens() {
        let token = include_str!("testdata/sa-rsa-rs256.jwt").trim();
        let api = vec!["api".to_string()];
        for pem in [
            include_str!("testdata/sa-rsa-spki.pem"),
            include_str!("testdata/sa-rsa-pkcs1.pem"),
        ] {
            let sa = ServiceAccountTokens {
                issuers: vec!["https://issuer.test".into()],
                keys: parse_keys(pem),
            };
            assert_eq!(sa.keys.len(), 1);
            let (user, auds) = sa
                .authenticate(token, &api, &api)
                .ok()
                .flatten()
                .unwrap_or_default();
            assert_eq!(user.name, "system:serviceaccount:ns1:sa1");
            assert_eq!(user.uid, "u1");
            assert_eq!(
                user.groups,
                [SERVICE_ACCOUNTS_GROUP, "system:serviceaccounts:ns1"]
            );
            assert_eq!(auds, api);
            let other = vec!["other".to_string()];
            assert_eq!(
                sa.authenticate(token, &other, &api).map(|_| ()),
                Err(
                    "token audiences [\"api\"] is invalid for the target audiences [\"other\"]"
                        .into()
                )
            );
            let mut forged = token.to_string();
            forged.push('A');
            assert!(sa.authenticate(&forged, &api, &api).is_err());
        }
        let other_issuer = ServiceAccountTokens {
            issuers: vec!["https://elsewhere.test".into()],
            keys: parse_keys(include_str!("testdata/sa-rsa-spki.pem")),
        };
        assert_eq!(other_issuer.authenticate(token, &[], &[]), Ok(None));
    }
}
