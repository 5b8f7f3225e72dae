//! OpenID Connect ID tokens (`--oidc-*`): an HTTPS issuer in the test
//! serves its discovery document and signing keys; tokens signed in the test
//! authenticate (user and group prefixes, required claims) or are refused
//! with 401 (expired, another audience, another key, a missing required
//! claim), and `kubectl auth whoami` shows the user.

mod common;

use std::sync::{Arc, OnceLock};

use base64::Engine;
use common::Server;
use common::raw::{RawResponse, request_as};
use common::webhook::Webhook;
use rcgen::KeyPair;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

fn ecdsa(key: &KeyPair) -> EcdsaKeyPair {
    EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        &key.serialize_der(),
        &ring::rand::SystemRandom::new(),
    )
    .expect("pkcs8")
}

/// The key's JWK (P-256), with key id `kid`.
fn jwk(key: &KeyPair, kid: &str) -> Value {
    let pair = ecdsa(key);
    let point = pair.public_key().as_ref();
    json!({"kty": "EC", "crv": "P-256", "use": "sig", "kid": kid,
        "x": b64(&point[1..33]), "y": b64(&point[33..65])})
}

/// An ES256 JWT over `claims`, signed with `key` and naming `kid`.
fn sign(key: &KeyPair, kid: &str, claims: &Value) -> String {
    let header = b64(json!({"alg": "ES256", "kid": kid, "typ": "JWT"})
        .to_string()
        .as_bytes());
    let payload = b64(&serde_json::to_vec(claims).expect("json"));
    let signed = format!("{header}.{payload}");
    let sig = ecdsa(key)
        .sign(&ring::rand::SystemRandom::new(), signed.as_bytes())
        .expect("sign");
    format!("{signed}.{}", b64(sig.as_ref()))
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

async fn whoami(server: &Server, token: &str) -> RawResponse {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    request_as(
        server,
        token,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &[("Content-Type", "application/json")],
        &serde_json::to_vec(&body).expect("json"),
    )
    .await
}

#[tokio::test]
async fn oidc_id_tokens() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (key, stranger) = (
        KeyPair::generate().expect("key"),
        KeyPair::generate().expect("key"),
    );
    // The test webhook server answers every request with one handler and
    // does not see paths: one JSON document serves as the discovery
    // document (issuer, jwks_uri) and as the key set (keys).
    let issuer: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let document = {
        let (issuer, jwk) = (issuer.clone(), jwk(&key, "k1"));
        Arc::new(move |_: &Value| {
            let issuer = issuer.get().cloned().unwrap_or_default();
            (
                200,
                json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys"), "keys": [jwk]}),
            )
        })
    };
    let provider = Webhook::start(document, None).await;
    let issuer_url = format!("https://127.0.0.1:{}", provider.port);
    issuer.set(issuer_url.clone()).expect("once");
    let ca = tmp.path().join("oidc-ca.pem");
    std::fs::write(&ca, &provider.ca.cert_pem).expect("write");

    let server = Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &[
            "--oidc-issuer-url",
            &issuer_url,
            "--oidc-client-id",
            "apiforge",
            "--oidc-ca-file",
            ca.to_str().expect("path"),
            "--oidc-signing-algs",
            "ES256",
            "--oidc-username-prefix",
            "oidc:",
            "--oidc-groups-claim",
            "groups",
            "--oidc-groups-prefix",
            "oidc:",
            "--oidc-required-claim",
            "hd=example.com",
        ],
    )
    .await;

    let claims = |aud: &str, exp_offset: i64| {
        json!({"iss": issuer_url, "aud": aud, "sub": "jane", "exp": now() + exp_offset,
            "iat": now() - 10, "groups": ["dev", "ops"], "hd": "example.com"})
    };
    let good = sign(&key, "k1", &claims("apiforge", 600));
    let resp = whoami(&server, &good).await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    assert_eq!(
        resp.json()["status"]["userInfo"],
        json!({"username": "oidc:jane", "groups": ["oidc:dev", "oidc:ops", "system:authenticated"]})
    );
    // The keys were fetched once (discovery, then keys) and are cached.
    let fetched = provider.calls();
    assert_eq!(fetched, 2);
    assert_eq!(whoami(&server, &good).await.status, 201);
    assert_eq!(provider.calls(), fetched);

    // RBAC sees the prefixed user.
    let resp = request_as(
        &server,
        &good,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[],
        b"",
    )
    .await;
    assert_eq!(resp.status, 403);
    assert_eq!(
        resp.json()["message"],
        "configmaps is forbidden: User \"oidc:jane\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );

    let unauthorized = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401});
    let mut missing_claim = claims("apiforge", 600);
    missing_claim["hd"] = json!("elsewhere.com");
    for (what, token) in [
        ("expired", sign(&key, "k1", &claims("apiforge", -5))),
        (
            "another audience",
            sign(&key, "k1", &claims("someone-else", 600)),
        ),
        (
            "an unknown key",
            sign(&stranger, "k1", &claims("apiforge", 600)),
        ),
        ("a wrong required claim", sign(&key, "k1", &missing_claim)),
    ] {
        let resp = whoami(&server, &token).await;
        assert_eq!(resp.status, 401, "{what}: {}", resp.text());
        assert_eq!(resp.json(), unauthorized, "{what}");
    }

    // kubectl with the ID token as its bearer token.
    let kubectl = common::kubectl::Kubectl::new(&server);
    let me = kubectl.json(&["--token", &good, "auth", "whoami"]);
    assert_eq!(me["status"]["userInfo"]["username"], "oidc:jane");
}
