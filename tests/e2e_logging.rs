//! Request logging: from `-v 2` on (the span is at DEBUG level), every log
//! line of a request carries the request's span (audit ID, verb, resource,
//! namespace, user), in the text format and with `--logging-format=json`
//! (kube-apiserver's flag).

mod common;

use std::time::Duration;

use common::Server;
use common::raw::request;
use serde_json::Value;

/// A request whose handling logs a line at debug level: the admin
/// impersonating another user (`impersonating`), with a known audit ID.
async fn impersonated_list(server: &Server, audit_id: &str) {
    let resp = request(
        server,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[("Impersonate-User", "bob"), ("Audit-ID", audit_id)],
        b"",
    )
    .await;
    // bob has no RBAC grant: the request itself is refused after the
    // impersonation was logged.
    assert_eq!(resp.status, 403, "{}", resp.text());
}

/// The server's log once it contains `needle` (logs are written as they
/// happen, but give the writer a moment).
async fn log_with(server: &Server, needle: &str) -> String {
    for _ in 0..50 {
        let log = server.log();
        if log.contains(needle) {
            return log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no log line with {needle:?} in:\n{}", server.log());
}

#[tokio::test]
async fn json_log_lines_carry_the_request_span() {
    let server = Server::start_with(&["--logging-format=json", "-v", "2"]).await;
    impersonated_list(&server, "json-span-1").await;
    let log = log_with(&server, "json-span-1").await;
    let lines: Vec<Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let line = lines
        .iter()
        .find(|l| l["fields"]["message"] == "impersonating")
        .unwrap_or_else(|| panic!("no 'impersonating' line in:\n{log}"));
    let span = &line["span"];
    assert_eq!(span["name"], "request", "{line}");
    assert_eq!(span["audit_id"], "json-span-1", "{line}");
    assert_eq!(span["verb"], "list", "{line}");
    assert_eq!(span["resource"], "configmaps", "{line}");
    assert_eq!(span["namespace"], "default", "{line}");
    assert_eq!(span["user"], "apiforge-admin", "{line}");
}

/// `text` without ANSI escape sequences (the text format colours its
/// output).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC '[' parameters, ending with a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test]
async fn text_log_lines_carry_the_request_span() {
    let server = Server::start_with(&["-v", "2"]).await;
    impersonated_list(&server, "text-span-1").await;
    let log = strip_ansi(&log_with(&server, "text-span-1").await);
    let line = log
        .lines()
        .find(|l| l.contains("impersonating"))
        .unwrap_or_else(|| panic!("no 'impersonating' line in:\n{log}"));
    for field in [
        "request{",
        "audit_id=\"text-span-1\"",
        "verb=\"list\"",
        "resource=\"configmaps\"",
        "namespace=\"default\"",
        "user=\"apiforge-admin\"",
    ] {
        assert!(line.contains(field), "{field} missing from: {line}");
    }
}

#[tokio::test]
async fn unknown_logging_format_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args(["serve", "--logging-format=xml"])
        .output()
        .expect("run apiforge");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--logging-format"), "{err}");
}
