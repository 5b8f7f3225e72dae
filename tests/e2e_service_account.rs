//! Service-account tokens (`--service-account-issuer`,
//! `--service-account-key-file`, `--api-audiences`): JWTs signed in the
//! test with ECDSA keys, sent as bearer tokens and in TokenReviews.

mod common;

use base64::Engine;
use common::Server;
use common::raw::{RawResponse, post_json_as as post, request_as};
use rcgen::KeyPair;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use serde_json::{Value, json};

const ISSUER: &str = "https://issuer.apiforge.test";

fn unauthorized() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

/// An ES256 JWT over `claims`, signed with `key`.
fn sign(key: &KeyPair, claims: &Value) -> String {
    let rng = ring::rand::SystemRandom::new();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &key.serialize_der(), &rng)
            .expect("pkcs8");
    let header = b64(br#"{"alg":"ES256","kid":"test"}"#);
    let payload = b64(&serde_json::to_vec(claims).expect("json"));
    let signed = format!("{header}.{payload}");
    let sig = pair.sign(&rng, signed.as_bytes()).expect("sign");
    format!("{signed}.{}", b64(sig.as_ref()))
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// The claims kube-apiserver's TokenRequest puts into a pod-bound token.
fn claims(aud: &str, exp_offset: i64) -> Value {
    let now = now();
    json!({
        "aud": [aud], "exp": now + exp_offset, "iat": now - 10, "nbf": now - 10,
        "iss": ISSUER, "jti": "jti-1", "sub": "system:serviceaccount:team-a:builder",
        "kubernetes.io": {
            "namespace": "team-a",
            "serviceaccount": {"name": "builder", "uid": "sa-uid-1"},
            "pod": {"name": "builder-pod", "uid": "pod-uid-1"},
        },
    })
}

async fn whoami(server: &Server, token: &str) -> RawResponse {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    post(
        server,
        token,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &body,
    )
    .await
}

#[tokio::test]
async fn service_account_tokens() {
    let tmp = tempfile::tempdir().expect("tmp");
    // One key as a public key file, one as a private key (its public half
    // is used), and one the server does not know.
    let (key1, key2, stranger) = (
        KeyPair::generate().expect("key"),
        KeyPair::generate().expect("key"),
        KeyPair::generate().expect("key"),
    );
    let pub1 = tmp.path().join("sa1.pub");
    std::fs::write(&pub1, key1.public_key_pem()).expect("write");
    let priv2 = tmp.path().join("sa2.key");
    std::fs::write(&priv2, key2.serialize_pem()).expect("write");
    let server = Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &[
            "--service-account-issuer",
            ISSUER,
            "--service-account-key-file",
            pub1.to_str().expect("path"),
            "--service-account-key-file",
            priv2.to_str().expect("path"),
        ],
    )
    .await;

    let expected = json!({"username": "system:serviceaccount:team-a:builder", "uid": "sa-uid-1",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:team-a",
            "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": ["JTI=jti-1"],
            "authentication.kubernetes.io/pod-name": ["builder-pod"],
            "authentication.kubernetes.io/pod-uid": ["pod-uid-1"]}});
    for key in [&key1, &key2] {
        let resp = whoami(&server, &sign(key, &claims(ISSUER, 3600))).await;
        assert_eq!(resp.status, 201, "{}", resp.text());
        assert_eq!(resp.json()["status"]["userInfo"], expected);
    }
    let good = sign(&key1, &claims(ISSUER, 3600));
    let resp = request_as(
        &server,
        &good,
        "GET",
        "/api/v1/namespaces/team-a/configmaps",
        &[],
        b"",
    )
    .await;
    assert_eq!(resp.status, 403);
    assert_eq!(
        resp.json()["message"],
        "configmaps is forbidden: User \"system:serviceaccount:team-a:builder\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
    );

    // Refused: expired (beyond the minute of leeway), another audience, an
    // unknown key, a tampered payload, another issuer.
    let expired = sign(&key1, &claims(ISSUER, -120));
    let other_aud = sign(&key1, &claims("https://elsewhere.test", 3600));
    let unknown_key = sign(&stranger, &claims(ISSUER, 3600));
    let mut parts: Vec<String> = good.split('.').map(str::to_string).collect();
    let mut forged = claims(ISSUER, 3600);
    forged["kubernetes.io"]["namespace"] = json!("kube-system");
    parts[1] = b64(&serde_json::to_vec(&forged).expect("json"));
    let tampered = parts.join(".");
    let mut foreign = claims(ISSUER, 3600);
    foreign["iss"] = json!("https://other-issuer.test");
    let foreign = sign(&key1, &foreign);
    for token in [&expired, &other_aud, &unknown_key, &tampered, &foreign] {
        let resp = request_as(&server, token, "GET", "/version", &[], b"").await;
        assert_eq!((resp.status, resp.json()), (401, unauthorized()));
    }

    // TokenReview reports why.
    let admin = common::raw::token(&server);
    let review = |token: &str, audiences: &[&str]| {
        let mut r = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}});
        if !audiences.is_empty() {
            r["spec"]["audiences"] = json!(audiences);
        }
        r
    };
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let status = async |token: &str, audiences: &[&str]| {
        let resp = post(&server, &admin, path, &review(token, audiences)).await;
        assert_eq!(resp.status, 201, "{}", resp.text());
        resp.json()["status"].clone()
    };
    assert_eq!(
        status(&good, &[]).await,
        json!({"authenticated": true, "user": expected, "audiences": [ISSUER]})
    );
    assert_eq!(
        status(&expired, &[]).await,
        json!({"user": {}, "error": "service account token has expired"})
    );
    assert_eq!(
        status(&other_aud, &[]).await,
        json!({"user": {}, "error": format!("token audiences [\"https://elsewhere.test\"] is invalid for the target audiences [\"{ISSUER}\"]")})
    );
    assert_eq!(
        status(&unknown_key, &[]).await,
        json!({"user": {}, "error": "square/go-jose: error in cryptographic primitive"})
    );
    assert_eq!(
        status(&foreign, &[]).await,
        json!({"user": {}, "error": "invalid bearer token"})
    );
    // A TokenReview may ask for other audiences.
    let st = status(&other_aud, &["https://elsewhere.test"]).await;
    assert_eq!(st["authenticated"], true);
    assert_eq!(st["audiences"], json!(["https://elsewhere.test"]));
}

#[tokio::test]
async fn service_account_flags_are_validated() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args(["serve", "--service-account-issuer", ISSUER])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--service-account-issuer requires --service-account-key-file or --service-account-signing-key-file"),
        "{err}"
    );
}
