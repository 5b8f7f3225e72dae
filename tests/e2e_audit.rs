//! Auditing with the real binary: a policy with one rule per level, the
//! JSON log backend (with rotation) and the webhook backend (a small HTTP
//! receiver in the test collecting `EventList` batches).

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Server;
use common::auth::{Credential, client_with, token_file};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: None
    users: ["quiet"]
  - level: Metadata
    users: ["meta"]
  - level: Request
    users: ["req"]
  - level: RequestResponse
    users: ["full"]
"#;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is a JSON event"))
        .collect()
}

/// Waits until `pred` holds for the events read by `read`.
async fn wait_for(read: impl Fn() -> Vec<Value>, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let events = read();
        if pred(&events) || Instant::now() > deadline {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn of_user<'a>(events: &'a [Value], user: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["user"]["username"] == user)
        .collect()
}

/// Sends a request and returns (status, Audit-Id header, body).
async fn send(
    client: &kube::Client,
    method: http::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String, String) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(
            body.map(|b| serde_json::to_vec(&b).expect("json"))
                .unwrap_or_default(),
        ))
        .expect("request");
    let resp = client.send(req).await.expect("send");
    let code = resp.status().as_u16();
    let id = resp
        .headers()
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .expect("body")
        .to_bytes();
    (code, id, String::from_utf8_lossy(&bytes).to_string())
}

fn cm(name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": data}})
}

/// A plain-HTTP webhook receiver: every POST body (an `EventList`) is kept.
async fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/audit", listener.local_addr().expect("addr"));
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let sink = sink.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let header_end = loop {
                    let n = conn.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..header_end]).to_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while buf.len() < header_end + len {
                    let n = conn.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&buf[header_end..header_end + len]) {
                    sink.lock().expect("lock").push(v);
                }
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (url, got)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

#[tokio::test]
async fn levels_stages_audit_ids_watch_and_webhook() {
    let tmp = tempfile::tempdir().expect("tmp");
    let tokens = token_file(
        tmp.path(),
        &[
            "quiet-t,quiet,1,system:masters",
            "meta-t,meta,2,system:masters",
            "req-t,req,3,system:masters",
            "full-t,full,4,system:masters",
        ],
    );
    let policy = write(tmp.path(), "policy.yaml", POLICY);
    let log = tmp.path().join("logs/audit.log");
    let (url, batches) = receiver().await;
    let webhook = write(
        tmp.path(),
        "webhook.kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: audit\n  cluster:\n    server: {url}\ncontexts:\n- name: audit\n  context:\n    cluster: audit\n    user: audit\ncurrent-context: audit\nusers:\n- name: audit\n  user: {{}}\n"
        ),
    );
    let server = Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &[
            "--token-auth-file",
            tokens.to_str().expect("path"),
            "--audit-policy-file",
            policy.to_str().expect("path"),
            "--audit-log-path",
            log.to_str().expect("path"),
            "--audit-webhook-config-file",
            webhook.to_str().expect("path"),
            "--audit-webhook-batch-max-wait",
            "1s",
        ],
    )
    .await;
    let quiet = client_with(&server, &Credential::token("quiet-t")).await;
    let meta = client_with(&server, &Credential::token("meta-t")).await;
    let req = client_with(&server, &Credential::token("req-t")).await;
    let full = client_with(&server, &Credential::token("full-t")).await;

    // None: no event at all.
    let (code, _, _) = send(&quiet, http::Method::POST, CMS, Some(cm("q", "x"))).await;
    assert_eq!(code, 201);
    // Metadata: no objects.
    let (code, meta_id, _) = send(&meta, http::Method::POST, CMS, Some(cm("m", "x"))).await;
    assert_eq!(code, 201);
    assert!(!meta_id.is_empty(), "Audit-Id header");
    // Request: the request object only.
    let (code, req_id, _) = send(&req, http::Method::POST, CMS, Some(cm("r", "x"))).await;
    assert_eq!(code, 201);
    // RequestResponse: both; a failure records the Status.
    let (code, full_id, _) = send(&full, http::Method::GET, &format!("{CMS}/r"), None).await;
    assert_eq!(code, 200);
    let (code, missing_id, _) = send(&full, http::Method::GET, &format!("{CMS}/nope"), None).await;
    assert_eq!(code, 404);

    let events = wait_for(|| lines(&log), |e| of_user(e, "full").len() >= 4).await;
    assert!(
        of_user(&events, "quiet").is_empty(),
        "level None writes nothing"
    );

    let m = of_user(&events, "meta");
    assert_eq!(m.len(), 2, "{m:#?}");
    assert_eq!(m[0]["stage"], "RequestReceived");
    assert_eq!(m[1]["stage"], "ResponseComplete");
    for e in &m {
        assert_eq!(e["kind"], "Event");
        assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(e["level"], "Metadata");
        assert_eq!(e["auditID"], meta_id.as_str());
        assert_eq!(e["verb"], "create");
        assert_eq!(e["requestURI"], CMS);
        assert_eq!(e["user"]["uid"], "2");
        assert!(
            e["user"]["groups"]
                .as_array()
                .expect("groups")
                .iter()
                .any(|g| g == "system:masters")
        );
        assert_eq!(e["sourceIPs"][0], "127.0.0.1");
        assert_eq!(e["objectRef"]["resource"], "configmaps");
        assert_eq!(e["objectRef"]["namespace"], "default");
        assert_eq!(e["objectRef"]["apiVersion"], "v1");
        assert!(e.get("requestObject").is_none() && e.get("responseObject").is_none());
        let ts = e["stageTimestamp"].as_str().expect("ts");
        assert_eq!(ts.len(), "2024-01-02T03:04:05.123456Z".len(), "{ts}");
        assert!(e["requestReceivedTimestamp"].as_str().is_some());
    }
    assert_eq!(m[1]["responseStatus"]["code"], 201);
    assert_eq!(
        m[1]["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );

    let r = of_user(&events, "req");
    assert_eq!(r.len(), 2);
    assert!(
        r.iter()
            .all(|e| e["auditID"] == req_id.as_str() && e["level"] == "Request")
    );
    assert_eq!(r[1]["requestObject"]["metadata"]["name"], "r");
    assert_eq!(r[1]["objectRef"]["name"], "r");
    assert!(r[1].get("responseObject").is_none());

    let f = of_user(&events, "full");
    let ok: Vec<_> = f
        .iter()
        .filter(|e| e["auditID"] == full_id.as_str())
        .collect();
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[1]["level"], "RequestResponse");
    assert_eq!(ok[1]["verb"], "get");
    assert_eq!(ok[1]["responseObject"]["metadata"]["name"], "r");
    assert_eq!(ok[1]["responseObject"]["data"]["k"], "x");
    let missing: Vec<_> = f
        .iter()
        .filter(|e| e["auditID"] == missing_id.as_str())
        .collect();
    assert_eq!(missing[1]["responseStatus"]["code"], 404);
    assert_eq!(missing[1]["responseStatus"]["reason"], "NotFound");
    assert_eq!(missing[1]["responseStatus"]["status"], "Failure");

    // A watch: ResponseStarted when the stream starts, ResponseComplete at its end.
    let (code, watch_id, _) = send(
        &meta,
        http::Method::GET,
        &format!("{CMS}?watch=1&timeoutSeconds=1"),
        None,
    )
    .await;
    assert_eq!(code, 200);
    let events = wait_for(
        || lines(&log),
        |e| {
            e.iter()
                .filter(|e| e["auditID"] == watch_id.as_str())
                .count()
                >= 3
        },
    )
    .await;
    let stages: Vec<_> = events
        .iter()
        .filter(|e| e["auditID"] == watch_id.as_str())
        .map(|e| e["stage"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        stages,
        ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    );

    // The webhook received the same events in EventList batches.
    let all = wait_for(
        || {
            batches
                .lock()
                .expect("lock")
                .iter()
                .flat_map(|b| {
                    assert_eq!(b["kind"], "EventList");
                    assert_eq!(b["apiVersion"], "audit.k8s.io/v1");
                    b["items"].as_array().cloned().unwrap_or_default()
                })
                .collect()
        },
        |e| {
            e.iter()
                .any(|e| e["auditID"] == watch_id.as_str() && e["stage"] == "ResponseComplete")
        },
    )
    .await;
    let hooked: Vec<_> = all
        .iter()
        .filter(|e| e["auditID"] == meta_id.as_str())
        .collect();
    assert_eq!(hooked.len(), 2, "{all:#?}");
    assert!(of_user(&all, "quiet").is_empty());
    assert!(
        all.iter()
            .any(|e| e["auditID"] == watch_id.as_str() && e["stage"] == "ResponseComplete")
    );
}

#[tokio::test]
async fn log_rotates_at_max_size() {
    let tmp = tempfile::tempdir().expect("tmp");
    let policy = write(
        tmp.path(),
        "policy.json",
        r#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","omitStages":["RequestReceived"],"rules":[{"level":"RequestResponse","resources":[{"group":"","resources":["configmaps"]}]}]}"#,
    );
    let dir = tmp.path().join("logs");
    let log = dir.join("audit.log");
    let server = Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &[
            "--audit-policy-file",
            policy.to_str().expect("path"),
            "--audit-log-path",
            log.to_str().expect("path"),
            "--audit-log-maxsize",
            "1",
            "--audit-log-maxbackup",
            "2",
        ],
    )
    .await;
    let client = server.client().await;
    let big = "x".repeat(400 * 1024);
    for i in 0..6 {
        let (code, _, _) = send(
            &client,
            http::Method::POST,
            CMS,
            Some(cm(&format!("big{i}"), &big)),
        )
        .await;
        assert_eq!(code, 201);
    }
    let mut backups: Vec<String> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n != "audit.log")
        .collect();
    backups.sort();
    assert_eq!(backups.len(), 2, "maxbackup keeps two: {backups:?}");
    for b in &backups {
        // lumberjack's name: audit-2006-01-02T15-04-05.000.log
        let stamp = b
            .strip_prefix("audit-")
            .and_then(|s| s.strip_suffix(".log"))
            .expect("backup name");
        assert_eq!(stamp.len(), "2006-01-02T15-04-05.000".len(), "{b}");
        assert!(std::fs::metadata(dir.join(b)).expect("meta").len() <= 1024 * 1024);
        assert!(!lines(&dir.join(b)).is_empty());
    }
    let current = lines(&log);
    assert!(!current.is_empty());
    assert!(current.iter().all(|e| e["stage"] == "ResponseComplete"));
}

/// What the chain adds around the audit slot: a request failing
/// authentication is audited without a user (one `ResponseStarted` event
/// naming the credentials tried), authorization records its decision and
/// reason, impersonation the impersonated user; a client-chosen `Audit-ID`
/// is the event's `auditID`.
#[tokio::test]
async fn failed_authentication_decisions_and_impersonation() {
    let tmp = tempfile::tempdir().expect("tmp");
    let tokens = token_file(
        tmp.path(),
        &["boss-t,boss,1,system:masters", "nobody-t,nobody,2,"],
    );
    let policy = write(
        tmp.path(),
        "policy.yaml",
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n  - level: Metadata\n",
    );
    let log = tmp.path().join("audit.log");
    let server = Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &[
            "--token-auth-file",
            tokens.to_str().expect("path"),
            "--audit-policy-file",
            policy.to_str().expect("path"),
            "--audit-log-path",
            log.to_str().expect("path"),
        ],
    )
    .await;

    // A bad token: 401, audited with the client's Audit-ID.
    let resp = common::raw::request_as(
        &server,
        "not-a-token",
        "GET",
        CMS,
        &[("Audit-ID", "failed-authn-1")],
        b"",
    )
    .await;
    assert_eq!(resp.status, 401);
    assert_eq!(resp.header("audit-id"), Some("failed-authn-1"));

    // Authenticated but not authorized: 403.
    let nobody = client_with(&server, &Credential::token("nobody-t")).await;
    let (code, forbidden_id, _) = send(&nobody, http::Method::GET, CMS, None).await;
    assert_eq!(code, 403);

    // Impersonation: boss acts as alice (in system:masters).
    let boss = client_with(
        &server,
        &Credential::token("boss-t").impersonating("alice", &["system:masters"]),
    )
    .await;
    let (code, impersonated_id, _) = send(&boss, http::Method::GET, CMS, None).await;
    assert_eq!(code, 200);

    let events = wait_for(
        || lines(&log),
        |e| {
            ["failed-authn-1", &forbidden_id, &impersonated_id]
                .iter()
                .all(|id| e.iter().any(|e| e["auditID"] == *id))
        },
    )
    .await;
    let by_id =
        |id: &str| -> Vec<&Value> { events.iter().filter(|e| e["auditID"] == id).collect() };

    let failed = by_id("failed-authn-1");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["stage"], "ResponseStarted");
    assert_eq!(failed[0]["level"], "Metadata");
    assert_eq!(failed[0]["user"], json!({}));
    assert_eq!(failed[0]["verb"], "list");
    assert_eq!(failed[0]["responseStatus"]["code"], 401);
    assert_eq!(
        failed[0]["responseStatus"]["message"],
        "Authentication failed, attempted: bearer"
    );
    assert!(failed[0].get("annotations").is_none());

    let denied = by_id(&forbidden_id);
    assert_eq!(denied.len(), 1, "RequestReceived is omitted: {denied:#?}");
    assert_eq!(denied[0]["stage"], "ResponseComplete");
    assert_eq!(denied[0]["user"]["username"], "nobody");
    assert_eq!(denied[0]["responseStatus"]["code"], 403);
    assert_eq!(denied[0]["responseStatus"]["reason"], "Forbidden");
    assert_eq!(
        denied[0]["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    assert!(
        denied[0]["annotations"]["authorization.k8s.io/reason"]
            .as_str()
            .is_some()
    );

    let acted = by_id(&impersonated_id);
    assert_eq!(acted.len(), 1, "{acted:#?}");
    assert_eq!(acted[0]["user"]["username"], "boss");
    assert_eq!(acted[0]["impersonatedUser"]["username"], "alice");
    assert!(
        acted[0]["impersonatedUser"]["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .any(|g| g == "system:masters")
    );
    assert_eq!(
        acted[0]["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert_eq!(acted[0]["responseStatus"]["code"], 200);
}
