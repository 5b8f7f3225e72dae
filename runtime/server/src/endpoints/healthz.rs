//! Health checks served at `/healthz`, `/livez` and `/readyz` (the generic
//! apiserver's `healthz` package).
//!
//! - `GET /<endpoint>` runs every check of that endpoint: 200 `ok`, or with
//!   `?verbose` one `[+]<name> ok` line per check and
//!   `<endpoint> check passed`; any failure gives 500 with every line
//!   (failures as `[-]<name> failed: reason withheld`, the reason is only
//!   logged) and `<endpoint> check failed`. `?exclude=<name>` (repeatable)
//!   skips a check.
//! - `GET /<endpoint>/<name>` runs one check: 200 `ok` or 500
//!   `internal server error: <reason>`.
//!
//! Checks: `ping` and `log` everywhere; the storage check (`etcd`, or
//! `embedded-store`) everywhere, and `etcd-readiness` on `/readyz` when on
//! etcd; `poststarthook/<hook>` everywhere (failing
//! until the hook finished); `shutdown` on `/readyz` only (failing once
//! shutdown started).

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::response::Response;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderValue, StatusCode, header};

use crate::request::Query;
use apiforge_storage::Storage;

/// One check: completes with `Err(reason)` when unhealthy.
pub type CheckFn = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// The three endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/healthz` (deprecated, still served).
    Healthz,
    /// `/livez`.
    Livez,
    /// `/readyz`.
    Readyz,
}

impl Endpoint {
    /// The endpoint of a path's first segment.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "healthz" => Some(Endpoint::Healthz),
            "livez" => Some(Endpoint::Livez),
            "readyz" => Some(Endpoint::Readyz),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Endpoint::Healthz => "healthz",
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
        }
    }
}

struct Check {
    name: String,
    readyz_only: bool,
    run: CheckFn,
}

/// The registered checks.
pub struct Health {
    checks: Vec<Check>,
    shutting_down: Arc<AtomicBool>,
}

impl Default for Health {
    fn default() -> Self {
        let mut health = Health {
            checks: Vec::new(),
            shutting_down: Arc::new(AtomicBool::new(false)),
        };
        health.add("ping", false, Arc::new(|| Box::pin(async { Ok(()) })));
        health.add("log", false, Arc::new(|| Box::pin(async { Ok(()) })));
        health
    }
}

impl Health {
    /// Adds a check to all endpoints (`readyz_only`: to `/readyz` only).
    pub fn add(&mut self, name: impl Into<String>, readyz_only: bool, run: CheckFn) {
        self.checks.push(Check {
            name: name.into(),
            readyz_only,
            run,
        });
    }

    /// Adds a storage check: a current-revision round trip within 2 s.
    pub fn add_storage(&mut self, name: &str, readyz_only: bool, storage: Arc<dyn Storage>) {
        self.add(
            name,
            readyz_only,
            Arc::new(move || {
                let storage = storage.clone();
                Box::pin(async move {
                    match tokio::time::timeout(Duration::from_secs(2), storage.current_revision())
                        .await
                    {
                        Ok(Ok(_)) => Ok(()),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err("storage did not answer within 2s".into()),
                    }
                })
            }),
        );
    }

    /// Adds a check that fails until the returned flag is set.
    pub fn add_flag(&mut self, name: impl Into<String>, pending: &str) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        let done = flag.clone();
        let pending = pending.to_string();
        self.add(
            name,
            false,
            Arc::new(move || {
                let ok = done.load(Ordering::SeqCst);
                let pending = pending.clone();
                Box::pin(async move { if ok { Ok(()) } else { Err(pending) } })
            }),
        );
        flag
    }

    /// Adds the `shutdown` check (last, `/readyz` only).
    pub fn add_shutdown(&mut self) {
        let flag = self.shutting_down.clone();
        self.add(
            "shutdown",
            true,
            Arc::new(move || {
                let down = flag.load(Ordering::SeqCst);
                Box::pin(async move {
                    if down {
                        Err("process is shutting down".into())
                    } else {
                        Ok(())
                    }
                })
            }),
        );
    }

    /// Makes the `shutdown` check fail from now on.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    fn checks_of(&self, endpoint: Endpoint) -> impl Iterator<Item = &Check> {
        self.checks
            .iter()
            .filter(move |c| endpoint == Endpoint::Readyz || !c.readyz_only)
    }

    /// Serves `/<endpoint>` (`check` `None`) or `/<endpoint>/<check>`.
    pub async fn serve(&self, endpoint: Endpoint, check: Option<&str>, query: &Query) -> Response {
        match check {
            Some(name) => self.serve_one(endpoint, name).await,
            None => self.serve_all(endpoint, query).await,
        }
    }

    async fn serve_one(&self, endpoint: Endpoint, name: &str) -> Response {
        let Some(check) = self.checks_of(endpoint).find(|c| c.name == name) else {
            return not_found();
        };
        match (check.run)().await {
            Ok(()) => text(StatusCode::OK, "ok".into()),
            Err(e) => error(format!("internal server error: {e}")),
        }
    }

    async fn serve_all(&self, endpoint: Endpoint, query: &Query) -> Response {
        let mut excluded: Vec<String> = query
            .all("exclude")
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        let mut lines = String::new();
        let mut failed = Vec::new();
        for check in self.checks_of(endpoint) {
            if excluded.contains(&check.name) {
                excluded.retain(|e| *e != check.name);
                let _ = writeln!(lines, "[+]{} excluded: ok", check.name);
                continue;
            }
            match (check.run)().await {
                Ok(()) => {
                    let _ = writeln!(lines, "[+]{} ok", check.name);
                }
                Err(e) => {
                    let _ = writeln!(lines, "[-]{} failed: reason withheld", check.name);
                    failed.push(format!("[-]{} failed: {e}", check.name));
                }
            }
        }
        if !excluded.is_empty() {
            excluded.sort();
            excluded.dedup();
            let quoted: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
            let _ = writeln!(
                lines,
                "warn: some health checks cannot be excluded: no matches for {}",
                quoted.join(",")
            );
        }
        let name = endpoint.name();
        if !failed.is_empty() {
            tracing::info!(endpoint = name, failed = %failed.join("; "), "health check failed");
            return error(format!("{lines}{name} check failed"));
        }
        if query.get("verbose").is_none() {
            return text(StatusCode::OK, "ok".into());
        }
        text(StatusCode::OK, format!("{lines}{name} check passed\n"))
    }
}

fn text(code: StatusCode, body: String) -> Response {
    let mut resp = crate::request::response::bytes_response(
        code,
        "text/plain; charset=utf-8",
        Bytes::from(body),
    );
    resp.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// Go's `http.Error`: text plus a newline, status 500.
fn error(body: String) -> Response {
    text(StatusCode::INTERNAL_SERVER_ERROR, format!("{body}\n"))
}

fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "404 page not found\n".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(resp: Response) -> (u16, String) {
        let code = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap_or_default();
        (code, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test]
    async fn verbose_exclude_and_failures() {
        let mut health = Health::default();
        let hook = health.add_flag("poststarthook/x", "not finished");
        health.add_shutdown();
        let q = |s: &str| Query::parse(s);
        let (code, text) = body(health.serve(Endpoint::Readyz, None, &q("")).await).await;
        assert_eq!(code, 500);
        assert_eq!(
            text,
            "[+]ping ok\n[+]log ok\n[-]poststarthook/x failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"
        );
        hook.store(true, Ordering::SeqCst);
        assert_eq!(
            body(health.serve(Endpoint::Readyz, None, &q("")).await).await,
            (200, "ok".into())
        );
        let (code, text) = body(
            health
                .serve(
                    Endpoint::Livez,
                    None,
                    &q("verbose&exclude=log&exclude=nope"),
                )
                .await,
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(
            text,
            "[+]ping ok\n[+]log excluded: ok\n[+]poststarthook/x ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nlivez check passed\n"
        );
        health.begin_shutdown();
        assert_eq!(
            body(
                health
                    .serve(Endpoint::Readyz, Some("shutdown"), &q(""))
                    .await
            )
            .await,
            (
                500,
                "internal server error: process is shutting down\n".into()
            )
        );
        assert_eq!(
            body(
                health
                    .serve(Endpoint::Livez, Some("shutdown"), &q(""))
                    .await
            )
            .await
            .0,
            404
        );
        assert_eq!(
            body(health.serve(Endpoint::Livez, None, &q("")).await).await,
            (200, "ok".into())
        );
    }
}
