//! The filter chain against the real binary: request timeouts, watch
//! timeouts, max-in-flight limits, CORS, HSTS, and option validation.

mod common;

use std::time::{Duration, Instant};

use common::raw;

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn config_map(name: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}
    }))
    .expect("json")
}

#[tokio::test]
async fn limits_and_timeouts() {
    // system:masters (the admin) is never limited: the limited requests are
    // made by a user of the token file, allowed by an ABAC policy.
    let files = tempfile::tempdir().expect("tmp");
    let tokens = files.path().join("tokens.csv");
    std::fs::write(&tokens, "limited-token,limited,1\n").expect("tokens");
    let policy = files.path().join("policy.jsonl");
    std::fs::write(
        &policy,
        concat!(
            r#"{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"limited","namespace":"*","resource":"*","apiGroup":"*"}}"#,
            "\n",
            r#"{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"system:unauthenticated","nonResourcePath":"*","readonly":true}}"#,
        ),
    )
    .expect("policy");
    let server = common::Server::start_with(&[
        "--request-timeout",
        "4s",
        "--max-mutating-requests-inflight",
        "1",
        "--max-requests-inflight",
        "1",
        "--min-request-timeout",
        "1",
        "--token-auth-file",
        tokens.to_str().expect("path"),
        "--authorization-mode=ABAC",
        "--authorization-policy-file",
        policy.to_str().expect("path"),
        "--enable-priority-and-fairness=false",
    ])
    .await;

    // A request holding the only mutating slot.
    let started = Instant::now();
    let mut stalled = raw::stalled_post(&server, CONFIGMAPS, "limited-token").await;
    let mut rejected = None;
    while started.elapsed() < Duration::from_secs(3) {
        let resp = raw::request_as(
            &server,
            "limited-token",
            "POST",
            CONFIGMAPS,
            &[("Content-Type", "application/json")],
            &config_map("second"),
        )
        .await;
        if resp.status == 429 {
            rejected = Some(resp);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rejected = rejected.expect("a second mutating request is rejected while the slot is held");
    assert_eq!(rejected.header("retry-after"), Some("1"));
    let status = rejected.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["code"], 429);
    assert_eq!(
        status["message"],
        "Too many requests, please try again later."
    );
    assert_eq!(status["details"]["retryAfterSeconds"], 1);

    // Health checks are never limited; read-only requests have their own
    // bucket.
    for path in ["/readyz", "/livez", "/healthz"] {
        let resp = raw::anonymous(&server, "GET", path).await;
        assert_eq!((resp.status, resp.text().as_str()), (200, "ok"), "{path}");
    }
    let resp = raw::request(&server, "GET", CONFIGMAPS, &[], b"").await;
    assert_eq!(resp.status, 200, "{}", resp.text());

    // The stalled request times out after --request-timeout.
    let resp = raw::read_response(&mut stalled).await;
    let elapsed = started.elapsed();
    assert_eq!(resp.status, 504, "{}", resp.text());
    assert!(
        elapsed >= Duration::from_secs(4) && elapsed < Duration::from_secs(10),
        "{elapsed:?}"
    );
    assert_eq!(
        resp.json(),
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Timeout: request did not complete within the allotted timeout",
            "reason": "Timeout", "details": {}, "code": 504
        })
    );

    // The slot is free again.
    let resp = raw::request(
        &server,
        "POST",
        CONFIGMAPS,
        &[("Content-Type", "application/json")],
        &config_map("third"),
    )
    .await;
    assert_eq!(resp.status, 201, "{}", resp.text());

    // `?timeout=` may shorten the deadline; a malformed one is a 400.
    let started = Instant::now();
    let auth = format!("Bearer {}", raw::token(&server));
    let mut stream = raw::connect(&server).await;
    raw::send(
        &mut stream,
        "POST",
        &format!("{CONFIGMAPS}?timeout=1s"),
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Content-Length", "1000"),
        ],
        b"{",
    )
    .await;
    let resp = raw::read_response(&mut stream).await;
    assert_eq!(resp.status, 504);
    assert!(started.elapsed() < Duration::from_secs(3));
    let resp = raw::request(
        &server,
        "GET",
        &format!("{CONFIGMAPS}?timeout=abc"),
        &[],
        b"",
    )
    .await;
    assert_eq!(resp.status, 400);
    assert_eq!(
        resp.json()["message"],
        "invalid timeout specified in the request URL - time: invalid duration \"abc\""
    );

    // Watches are long-running: no 4s deadline, no read-only slot; without
    // timeoutSeconds they end after [1x, 2x) --min-request-timeout.
    let started = Instant::now();
    let watches: Vec<_> = (0..3)
        .map(|_| raw::request(&server, "GET", "/api/v1/namespaces?watch=true", &[], b""))
        .collect();
    let results = futures::future::join_all(watches).await;
    let elapsed = started.elapsed();
    for resp in results {
        assert_eq!(resp.status, 200, "{}", resp.text());
        // The initial ADDED events of the three system namespaces.
        assert_eq!(resp.text().lines().count(), 3, "{}", resp.text());
    }
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(4),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn cors_and_hsts() {
    let server = common::Server::start_with(&[
        "--cors-allowed-origins",
        "^https://ui\\.example\\.com$,//localhost(:|$)",
        "--strict-transport-security-directives",
        "max-age=31536000,includeSubDomains",
    ])
    .await;

    // Preflight from an allowed origin: answered here, without credentials.
    let mut stream = raw::connect(&server).await;
    raw::send(
        &mut stream,
        "OPTIONS",
        CONFIGMAPS,
        &[
            ("Origin", "https://ui.example.com"),
            ("Access-Control-Request-Method", "POST"),
        ],
        b"",
    )
    .await;
    let resp = raw::read_response(&mut stream).await;
    assert_eq!(resp.status, 204);
    assert_eq!(
        resp.header("access-control-allow-origin"),
        Some("https://ui.example.com")
    );
    assert_eq!(
        resp.header("access-control-allow-methods"),
        Some("POST, GET, OPTIONS, PUT, DELETE, PATCH")
    );
    assert_eq!(
        resp.header("access-control-allow-headers"),
        Some(
            "Content-Type, Content-Length, Accept-Encoding, X-CSRF-Token, Authorization, X-Requested-With, If-Modified-Since"
        )
    );
    assert_eq!(resp.header("access-control-expose-headers"), Some("Date"));
    assert_eq!(
        resp.header("access-control-allow-credentials"),
        Some("true")
    );

    // A real request from an allowed origin gets the headers too.
    let resp = raw::request(
        &server,
        "GET",
        CONFIGMAPS,
        &[("Origin", "https://localhost:8443")],
        b"",
    )
    .await;
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("access-control-allow-origin"),
        Some("https://localhost:8443")
    );
    assert_eq!(
        resp.header("strict-transport-security"),
        Some("max-age=31536000; includeSubDomains")
    );

    // Other origins get nothing; their preflight is not answered by CORS.
    let resp = raw::request(
        &server,
        "GET",
        CONFIGMAPS,
        &[("Origin", "https://evil.example.com")],
        b"",
    )
    .await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("access-control-allow-origin"), None);
    let mut stream = raw::connect(&server).await;
    raw::send(
        &mut stream,
        "OPTIONS",
        CONFIGMAPS,
        &[("Origin", "https://ui.example.com.evil.org")],
        b"",
    )
    .await;
    let resp = raw::read_response(&mut stream).await;
    assert_ne!(resp.status, 204);
    assert_eq!(resp.header("access-control-allow-origin"), None);

    // HSTS on every response, errors included.
    // (anonymous requests are authenticated as system:anonymous, whom RBAC forbids this)
    let resp = raw::anonymous(&server, "GET", "/api/v1/namespaces").await;
    assert_eq!(resp.status, 403);
    assert_eq!(
        resp.header("strict-transport-security"),
        Some("max-age=31536000; includeSubDomains")
    );
}

fn apiforge(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args(args)
        .output()
        .expect("run apiforge")
}

#[test]
fn options_report_every_error_and_group_help() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = apiforge(&[
        "serve",
        "--data-dir",
        dir.path().to_str().expect("utf-8"),
        "--max-requests-inflight=-1",
        "--min-request-timeout=-5",
        "--request-timeout=-1s",
        "--cors-allowed-origins=example.com",
        "--strict-transport-security-directives=max-age=x",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "--max-requests-inflight can not be negative value",
        "--min-request-timeout can not be negative value",
        "--request-timeout can not be negative value",
        "--cors-allowed-origins has an invalid regular expression \"example.com\"",
        "--strict-transport-security-directives invalid",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }

    let out = apiforge(&["serve", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "Generic:",
        "Secure serving:",
        "Storage:",
        "--request-timeout <REQUEST_TIMEOUT>",
        "[default: 1m0s]",
        "--min-request-timeout <MIN_REQUEST_TIMEOUT>",
        "[default: 1800]",
        "--max-requests-inflight <MAX_REQUESTS_INFLIGHT>",
        "[default: 400]",
        "--max-mutating-requests-inflight <MAX_MUTATING_REQUESTS_INFLIGHT>",
        "[default: 200]",
        "--cors-allowed-origins",
        "--strict-transport-security-directives",
        "--shutdown-delay-duration",
    ] {
        assert!(help.contains(needle), "missing {needle:?} in:\n{help}");
    }

    let out = apiforge(&["--version"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("apiforge "));
}

/// HTTP/1.1 header limits as kube-apiserver's (Go's 1 MiB of header bytes):
/// many header lines and large headers are accepted; beyond the limits,
/// 431 and nothing else happens.
#[tokio::test]
async fn header_limits_follow_the_byte_size() {
    let server = common::Server::start().await;
    // 300 lines (hyper's default limit was 100).
    let names: Vec<String> = (0..300).map(|i| format!("X-Pad-{i}")).collect();
    let lines: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "v")).collect();
    let resp = raw::request(&server, "GET", "/version", &lines, b"").await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    // 600 KiB in one header (Go accepts up to 1 MiB).
    let big = "a".repeat(600 << 10);
    let resp = raw::request(&server, "GET", "/version", &[("X-Big", &big)], b"").await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    // A head that reaches 1 MiB + 4 KiB without ending: 431. (Exactly that
    // many bytes, so the server has read everything when it answers and
    // closes; unread bytes would make the close a reset.)
    {
        use tokio::io::AsyncWriteExt;
        let limit = (1 << 20) + 4096;
        let mut head = b"GET /version HTTP/1.1\r\nHost: localhost\r\nX-Big: ".to_vec();
        head.resize(limit, b'a');
        let mut conn = raw::connect(&server).await;
        conn.write_all(&head).await.expect("head");
        conn.flush().await.expect("flush");
        let resp = raw::read_response(&mut conn).await;
        assert_eq!(resp.status, 431);
    }
    // Far more lines than any client sends: 431.
    let names: Vec<String> = (0..2000).map(|i| format!("X-Pad-{i}")).collect();
    let lines: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "v")).collect();
    let resp = raw::request(&server, "GET", "/version", &lines, b"").await;
    assert_eq!(resp.status, 431);
}

/// A client that sends its headers slowly (slowloris) is disconnected after
/// kube-apiserver's 32 s `ReadHeaderTimeout`; others are served meanwhile.
#[tokio::test]
async fn slow_headers_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = common::Server::start().await;
    let started = std::time::Instant::now();
    let mut slow = Vec::new();
    for _ in 0..20 {
        let mut conn = raw::connect(&server).await;
        conn.write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\nX-Slow: 1\r\n")
            .await
            .expect("partial head");
        conn.flush().await.expect("flush");
        slow.push(conn);
    }
    // Other clients are served while the slow ones hold their connections.
    let resp = raw::request(&server, "GET", "/version", &[], b"").await;
    assert_eq!(resp.status, 200);
    for conn in &mut slow {
        // One more header line every few seconds would not help: the clock
        // runs for the whole head.
        let _ = conn.write_all(b"X-More: 1\r\n").await;
    }
    for mut conn in slow {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            conn.read_to_end(&mut rest),
        )
        .await;
        assert!(read.is_ok(), "a slow client was still connected after 60 s");
    }
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(31),
        "closed after {waited:?}, before the 32 s header timeout"
    );
}
