//! Health checks, `Audit-Id`, and `/metrics` against the real binary.

mod common;

use common::raw;

const READYZ_VERBOSE: &str = "[+]ping ok\n[+]log ok\n[+]embedded-store ok\n\
[+]poststarthook/bootstrap-system-namespaces ok\n[+]poststarthook/rbac/bootstrap-roles ok\n[+]poststarthook/start-kube-apiserver-identity-lease-controller ok\n[+]poststarthook/start-apiextensions-controllers ok\n[+]poststarthook/start-namespace-controller ok\n[+]poststarthook/priority-and-fairness-config-producer ok\n\
[+]shutdown ok\nreadyz check passed\n";

#[tokio::test]
async fn health_endpoints_list_named_checks() {
    let server = common::Server::start().await;

    for path in ["/healthz", "/livez", "/readyz"] {
        let resp = raw::anonymous(&server, "GET", path).await;
        assert_eq!((resp.status, resp.text().as_str()), (200, "ok"), "{path}");
        assert_eq!(
            resp.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(resp.header("x-content-type-options"), Some("nosniff"));
    }

    let resp = raw::anonymous(&server, "GET", "/readyz?verbose").await;
    assert_eq!((resp.status, resp.text().as_str()), (200, READYZ_VERBOSE));

    let resp = raw::anonymous(&server, "GET", "/livez?verbose=1").await;
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.text(),
        "[+]ping ok\n[+]log ok\n[+]embedded-store ok\n\
[+]poststarthook/bootstrap-system-namespaces ok\n[+]poststarthook/rbac/bootstrap-roles ok\n[+]poststarthook/start-kube-apiserver-identity-lease-controller ok\n[+]poststarthook/start-apiextensions-controllers ok\n[+]poststarthook/start-namespace-controller ok\n[+]poststarthook/priority-and-fairness-config-producer ok\n\
livez check passed\n"
    );

    let resp = raw::anonymous(
        &server,
        "GET",
        "/healthz?verbose&exclude=log&exclude=nonexistent",
    )
    .await;
    assert_eq!(resp.status, 200);
    assert!(
        resp.text().contains("[+]log excluded: ok\n"),
        "{}",
        resp.text()
    );
    assert!(
        resp.text().contains(
            "warn: some health checks cannot be excluded: no matches for \"nonexistent\"\n"
        ),
        "{}",
        resp.text()
    );

    // Single checks are not public (system:public-info-viewer grants the
    // endpoints only): ask as the admin.
    for path in [
        "/livez/ping",
        "/readyz/embedded-store",
        "/readyz/shutdown",
        "/readyz/poststarthook/bootstrap-system-namespaces",
        "/healthz/poststarthook/start-namespace-controller",
    ] {
        let resp = raw::request(&server, "GET", path, &[], b"").await;
        assert_eq!((resp.status, resp.text().as_str()), (200, "ok"), "{path}");
    }
    // `shutdown` is a readiness check only.
    assert_eq!(
        raw::request(&server, "GET", "/livez/shutdown", &[], b"")
            .await
            .status,
        404
    );
    assert_eq!(
        raw::request(&server, "GET", "/readyz/nonexistent", &[], b"")
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn audit_id_on_every_response() {
    let server = common::Server::start().await;
    let resp = raw::anonymous(&server, "GET", "/readyz").await;
    let id = resp.header("audit-id").expect("Audit-Id").to_string();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    assert_eq!(id.matches('-').count(), 4, "a UUID: {id}");
    // Errors carry one too, and a client-chosen ID is echoed.
    let resp = raw::anonymous(&server, "GET", "/api/v1/namespaces").await;
    assert_eq!(resp.status, 403);
    assert!(resp.header("audit-id").is_some());
    let resp = raw::request(
        &server,
        "GET",
        "/api/v1/namespaces/default",
        &[("Audit-ID", "my-audit-id-1")],
        b"",
    )
    .await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("audit-id"), Some("my-audit-id-1"));
    let other = raw::anonymous(&server, "GET", "/readyz").await;
    assert_ne!(other.header("audit-id"), Some(id.as_str()));
}

#[tokio::test]
async fn metrics_in_prometheus_text_format() {
    let server = common::Server::start().await;
    // Some traffic to count.
    for _ in 0..3 {
        let resp = raw::request(&server, "GET", "/api/v1/namespaces", &[], b"").await;
        assert_eq!(resp.status, 200);
    }
    let resp = raw::request(&server, "GET", "/api/v1/namespaces/nope", &[], b"").await;
    assert_eq!(resp.status, 404);

    assert_eq!(raw::anonymous(&server, "GET", "/metrics").await.status, 403);
    // The bootstrap `system:monitoring` role lets its group scrape.
    let as_user = |groups: &'static [&'static str]| {
        let server = &server;
        async move {
            let mut headers = vec![("Impersonate-User", "prometheus")];
            headers.extend(groups.iter().map(|g| ("Impersonate-Group", *g)));
            raw::request(server, "GET", "/metrics", &headers, b"")
                .await
                .status
        }
    };
    assert_eq!(as_user(&["system:monitoring"]).await, 200);
    assert_eq!(as_user(&[]).await, 403);
    let resp = raw::request(&server, "GET", "/metrics", &[], b"").await;
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = resp.text();
    let has = |needle: &str| assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    has("# TYPE apiserver_request_total counter");
    has(
        "apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"namespaces\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 3",
    );
    has(
        "apiserver_request_total{code=\"404\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"namespaces\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 1",
    );
    has("# TYPE apiserver_request_duration_seconds histogram");
    has(
        "apiserver_request_duration_seconds_bucket{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"namespaces\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\",le=\"0.005\"}",
    );
    has("apiserver_current_inflight_requests{request_kind=\"mutating\"} 0");
    // This scrape itself is a read-only request in flight.
    // The admin is in system:masters, which the limiter neither limits nor
    // counts (kube-apiserver's max-in-flight), so its own scrape is not in
    // flight.
    has("apiserver_current_inflight_requests{request_kind=\"readOnly\"} 0");
    // The three system namespaces.
    has("apiserver_storage_objects{resource=\"namespaces\"} 3");
    has("# TYPE etcd_request_duration_seconds histogram");
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_open_fds",
    ] {
        has(&format!("\n{name} "));
    }
}

/// The data directory's secrets and the store are readable by the server's
/// owner only (0600 files, a 0700 store directory), as etcd keeps its data
/// directory and kube-apiserver its keys.
#[tokio::test]
async fn credentials_and_the_store_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let server = common::Server::start().await;
    let mode = |path: &str| {
        let path = server.data_dir.join(path);
        std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("store"), 0o700, "store directory");
    assert_eq!(mode("store/store.redb"), 0o600, "database file");
    assert_eq!(mode("admin.token"), 0o600, "admin token");
    assert_eq!(mode("admin.kubeconfig"), 0o600, "admin kubeconfig");
    assert_eq!(mode("apiserver.key"), 0o600, "serving key");
}
