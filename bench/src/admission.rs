//! The admission scenario: what admission webhooks (and policies) add to a
//! create. One server, one run: a webhook server in this process (the
//! apiforge serving certificate, its CA as `caBundle`) answers
//! `AdmissionReview`s on loopback; a validating and a mutating webhook
//! configuration select objects by label, so creates with no label (no
//! webhook), with the validating label and with the mutating label (the
//! webhook adds an annotation with a JSON patch) are alternated against
//! each other on the same server. Latency is measured with one client
//! (the p50 difference is the added latency per webhook call); throughput
//! and server CPU per create with 16 clients. Then 1 and 10
//! ValidatingAdmissionPolicies (bound by label) against none.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use base64::Engine;
use bytes::Bytes;
use futures::FutureExt;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::client::Conn;
use crate::fixtures::{collection, fresh, pad_for_1kib};
use crate::load::{Op, alternate, interleave, median};
use crate::procs::Backend;
use crate::reference::{Handler, Reference, json_response};
use crate::report::{Figure, Target as Goal};
use crate::{Settings, progress};

const S: &str = "admission";
/// Clients of the throughput runs.
const CLIENTS: usize = 16;
/// The label that selects a webhook.
const LABEL: &str = "bench-hook";

/// A 1 KiB Flunder named `name`, labelled for `hook` (none for `""`).
fn object(name: &str, hook: &str, pad: usize) -> Bytes {
    let mut meta = json!({"name": name, "annotations": {"bench/pad": "x".repeat(pad)}});
    if !hook.is_empty() {
        meta["labels"] = json!({ LABEL: hook });
    }
    let obj = json!({
        "apiVersion": "wardle.example.com/v1beta1",
        "kind": "Flunder",
        "metadata": meta,
        "spec": {},
    });
    Bytes::from(serde_json::to_vec(&obj).unwrap_or_default())
}

struct CreateOp {
    collection: String,
    hook: &'static str,
    /// Distinguishes the names of this op's objects from other ops'.
    prefix: String,
    pad: usize,
    next: AtomicU64,
}

impl Op for CreateOp {
    async fn call(&self, _worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-{n}", self.prefix);
        let reply = conn
            .send(
                Method::POST,
                &self.collection,
                Some(object(&name, self.hook, self.pad)),
            )
            .await?;
        anyhow::ensure!(
            reply.status == StatusCode::CREATED,
            "create answered {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        Ok(reply.body.len() as u64)
    }
}

/// The part of an `AdmissionReview` the bench webhook reads.
#[derive(serde::Deserialize)]
struct Review {
    request: ReviewRequest,
}

/// The part of an `AdmissionRequest` the bench webhook reads.
#[derive(serde::Deserialize)]
struct ReviewRequest {
    uid: String,
}

/// The webhook: `/validate` allows; `/mutate` allows with a patch adding an
/// annotation. Counts the reviews it answers.
fn webhook(calls: Arc<AtomicUsize>) -> Handler {
    let patch = base64::engine::general_purpose::STANDARD.encode(
        json!([{"op": "add", "path": "/metadata/annotations/bench~1mutated", "value": "yes"}])
            .to_string(),
    );
    Arc::new(move |req: http::Request<hyper::body::Incoming>| {
        let calls = calls.clone();
        let patch = patch.clone();
        async move {
            let mutate = req.uri().path() == "/mutate";
            let body = req
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            // Only the uid is read (the rest is skipped unparsed), as a
            // webhook that decides from little would: the figure is what
            // apiforge adds, not what the webhook spends.
            let uid = serde_json::from_slice::<Review>(&body)
                .map(|r| r.request.uid)
                .unwrap_or_default();
            calls.fetch_add(1, Ordering::Relaxed);
            let mut response = json!({"uid": uid, "allowed": true});
            if mutate {
                response["patchType"] = json!("JSONPatch");
                response["patch"] = json!(patch);
            }
            let answer = json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": response,
            });
            json_response(
                StatusCode::OK,
                Bytes::from(serde_json::to_vec(&answer).unwrap_or_default()),
            )
        }
        .boxed()
    })
}

/// A webhook configuration of `kind` calling `path` for flunders labelled
/// `hook`.
fn configuration(kind: &str, hook: &str, url: &str, ca: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": format!("bench-{hook}")},
        "webhooks": [{
            "name": format!("{hook}.bench.example.com"),
            "clientConfig": {
                "url": url,
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
            },
            "rules": [{
                "operations": ["CREATE"],
                "apiGroups": ["wardle.example.com"],
                "apiVersions": ["*"],
                "resources": ["flunders"],
            }],
            "objectSelector": {"matchLabels": { LABEL: hook }},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    })
}

/// The scenario.
pub(crate) async fn admission(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    progress!("{S}: creates with 0 and 1 webhooks on loopback, 1 and {CLIENTS} clients");
    let f = fresh(settings, &Backend::Embedded).await?;
    let target = &f.server.target;
    let pid = f.server.pid()?.to_string();
    let pad = pad_for_1kib(target, "default").await?;
    let calls = Arc::new(AtomicUsize::new(0));
    let hook_server = Reference::serve(&f.server.data_dir, target, webhook(calls.clone())).await?;
    let ca = std::fs::read_to_string(f.server.data_dir.join("apiserver-ca.crt"))
        .context("reading the server CA")?;
    let base = format!("https://127.0.0.1:{}", hook_server.target.addr.port());
    let mut conn = Conn::connect(target).await?;
    for (resource, kind, hook, path) in [
        (
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            "validate",
            "/validate",
        ),
        (
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
            "mutate",
            "/mutate",
        ),
    ] {
        let body = configuration(kind, hook, &format!("{base}{path}"), &ca);
        conn.send(
            Method::POST,
            &format!("/apis/admissionregistration.k8s.io/v1/{resource}"),
            Some(Bytes::from(serde_json::to_vec(&body)?)),
        )
        .await?
        .ok()?;
    }
    // Both configurations in effect: a mutated probe comes back annotated.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    loop {
        anyhow::ensure!(
            Instant::now() < deadline,
            "webhooks not in effect after 30 s"
        );
        n += 1;
        let reply = conn
            .send(
                Method::POST,
                &collection("default"),
                Some(object(&format!("probe-{n}"), "mutate", pad)),
            )
            .await?
            .ok()?;
        let created: Value = serde_json::from_slice(&reply)?;
        let mutated = created["metadata"]["annotations"]["bench/mutated"] == "yes";
        let validated_before = calls.load(Ordering::Relaxed);
        conn.send(
            Method::POST,
            &collection("default"),
            Some(object(&format!("probe-v-{n}"), "validate", pad)),
        )
        .await?
        .ok()?;
        if mutated && calls.load(Ordering::Relaxed) > validated_before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let ops = AtomicUsize::new(0);
    let op = |hook: &'static str| {
        let id = ops.fetch_add(1, Ordering::Relaxed);
        Arc::new(CreateOp {
            collection: collection("default"),
            hook,
            prefix: format!("{}{id}", if hook.is_empty() { "plain" } else { hook }),
            pad,
            next: AtomicU64::new(0),
        })
    };
    let mut out = Vec::new();
    for (hook, what) in [("validate", "validating"), ("mutate", "mutating")] {
        let calls_before = calls.load(Ordering::Relaxed);
        let (sum_before, count_before) = webhook_seconds(target, hook).await?;
        // Request by request in turn, so both sides see the same disk
        // flushes: the create's own p50 (~1 ms, mostly the fsync) drifts
        // by more than the webhook adds between separate runs.
        let single = interleave(
            settings,
            &format!("{what}-1"),
            target,
            op(hook).as_ref(),
            op("").as_ref(),
        )
        .await?;
        anyhow::ensure!(
            calls.load(Ordering::Relaxed) > calls_before,
            "the {what} webhook was not called"
        );
        let (sum_after, count_after) = webhook_seconds(target, hook).await?;
        let (with, without) = (single.quantile_ms(0, 0.5), single.quantile_ms(1, 0.5));
        let added = with - without;
        progress!("  {what}: p50 {with:.3} ms vs {without:.3} ms without (in turn)");
        out.push(Figure::new(
            S,
            &format!("added p50 ms per create with 1 {what} webhook (1 client)"),
            added,
            Goal::AtMost(0.3),
        ));
        if count_after > count_before {
            out.push(Figure::new(
                S,
                &format!("server-measured {what} webhook call, mean ms (1 client)"),
                (sum_after - sum_before) * 1e3 / (count_after - count_before),
                Goal::Info,
            ));
        }
        let many = alternate(
            settings,
            CLIENTS,
            (&format!("{what}-{CLIENTS}"), what, "none"),
            target,
            &pid,
            op(hook),
            op(""),
        )
        .await?;
        out.push(Figure::vs(
            S,
            &format!("creates/s with 1 {what} webhook, {CLIENTS} clients (ref: no webhook)"),
            median(&many.rate[0]),
            median(&many.rate[1]),
            Goal::Info,
        ));
        out.push(Figure::vs(
            S,
            &format!("server CPU µs per create with 1 {what} webhook (ref: no webhook)"),
            median(&many.cpu_us[0]),
            median(&many.cpu_us[1]),
            Goal::Info,
        ));
    }
    drop(hook_server);
    // The setup connection sat idle through the webhook runs, longer than
    // the server keeps an idle connection open: a fresh one.
    let mut conn = Conn::connect(target).await?;

    // ValidatingAdmissionPolicies: 1 and 10 policies (each with its
    // binding) select flunders by label; every one passes.
    for (label, count) in [("one", 1), ("ten", 10)] {
        for i in 0..count {
            let name = format!("bench-{label}-{i}");
            let policy = json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{
                        "apiGroups": ["wardle.example.com"], "apiVersions": ["*"],
                        "operations": ["CREATE"], "resources": ["flunders"],
                    }]},
                    "validations": [{
                        "expression": "object.metadata.name.size() < 200 && !has(object.spec.flunderReference)",
                        "message": "flunders may not reference flunders here",
                    }],
                },
            });
            let binding = json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {
                    "policyName": name,
                    "validationActions": ["Deny"],
                    "matchResources": {"objectSelector": {"matchLabels": { POLICY_LABEL: label }}},
                },
            });
            for (resource, body) in [
                ("validatingadmissionpolicies", policy),
                ("validatingadmissionpolicybindings", binding),
            ] {
                conn.send(
                    Method::POST,
                    &format!("/apis/admissionregistration.k8s.io/v1/{resource}"),
                    Some(Bytes::from(serde_json::to_vec(&body)?)),
                )
                .await?
                .ok()?;
            }
        }
    }
    // In effect: a flunder that breaks the rule is refused under both.
    let deadline = Instant::now() + Duration::from_secs(30);
    for label in ["one", "ten"] {
        let mut n = 0;
        loop {
            anyhow::ensure!(
                Instant::now() < deadline,
                "policies not in effect after 30 s"
            );
            n += 1;
            let obj = json!({
                "apiVersion": "wardle.example.com/v1beta1",
                "kind": "Flunder",
                "metadata": {"name": format!("probe-{label}-{n}"), "labels": { POLICY_LABEL: label }},
                "spec": {"flunderReference": "x", "referenceType": "Flunder"},
            });
            let reply = conn
                .send(
                    Method::POST,
                    &collection("default"),
                    Some(Bytes::from(serde_json::to_vec(&obj)?)),
                )
                .await?;
            if reply.status == StatusCode::UNPROCESSABLE_ENTITY {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let policy_op = |label: &'static str| {
        let id = ops.fetch_add(1, Ordering::Relaxed);
        Arc::new(LabelledCreateOp {
            collection: collection("default"),
            label,
            prefix: format!("policy-{label}-{id}"),
            pad,
            next: AtomicU64::new(0),
        })
    };
    for (label, what) in [("one", "1 policy"), ("ten", "10 policies")] {
        let runs = alternate(
            settings,
            CLIENTS,
            (&format!("policies-{label}"), what, "none"),
            target,
            &pid,
            policy_op(label),
            // The same objects, labelled alike, that no binding selects: the
            // label's own cost is not the policies'.
            policy_op("none"),
        )
        .await?;
        out.push(Figure::vs(
            S,
            &format!("creates/s with {what}, {CLIENTS} clients (ref: no binding selects)"),
            median(&runs.rate[0]),
            median(&runs.rate[1]),
            if label == "ten" {
                Goal::RatioAtLeast(0.9)
            } else {
                Goal::Info
            },
        ));
        out.push(Figure::vs(
            S,
            &format!("server CPU µs per create with {what} (ref: no binding selects)"),
            median(&runs.cpu_us[0]),
            median(&runs.cpu_us[1]),
            Goal::Info,
        ));
    }
    Ok(out)
}

/// The label that selects the policies' bindings.
const POLICY_LABEL: &str = "bench-policy";

/// Creates 1 KiB Flunders labelled `bench-policy: <label>` (no label for
/// `""`).
struct LabelledCreateOp {
    collection: String,
    label: &'static str,
    prefix: String,
    pad: usize,
    next: AtomicU64,
}

impl Op for LabelledCreateOp {
    async fn call(&self, _worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut meta = json!({
            "name": format!("{}-{n}", self.prefix),
            "annotations": {"bench/pad": "x".repeat(self.pad)},
        });
        if !self.label.is_empty() {
            meta["labels"] = json!({ POLICY_LABEL: self.label });
        }
        let obj = json!({
            "apiVersion": "wardle.example.com/v1beta1",
            "kind": "Flunder",
            "metadata": meta,
            "spec": {},
        });
        let reply = conn
            .send(
                Method::POST,
                &self.collection,
                Some(Bytes::from(serde_json::to_vec(&obj)?)),
            )
            .await?;
        anyhow::ensure!(
            reply.status == StatusCode::CREATED,
            "create answered {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        Ok(reply.body.len() as u64)
    }
}

/// The server's own `apiserver_admission_webhook_admission_duration_seconds`
/// sum and count for the bench webhook `hook`, over all its label sets.
async fn webhook_seconds(target: &crate::client::Target, hook: &str) -> anyhow::Result<(f64, f64)> {
    let mut conn = Conn::connect(target).await?;
    let body = conn.get("/metrics").await?.ok()?;
    let text = std::str::from_utf8(&body).context("/metrics is not UTF-8")?;
    let name = format!("name=\"{hook}.bench.example.com\"");
    let (mut sum, mut count) = (0.0, 0.0);
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        if !series.contains(&name) {
            continue;
        }
        let value: f64 = value.parse().unwrap_or(0.0);
        if series.starts_with("apiserver_admission_webhook_admission_duration_seconds_sum{") {
            sum += value;
        } else if series
            .starts_with("apiserver_admission_webhook_admission_duration_seconds_count{")
        {
            count += value;
        }
    }
    Ok((sum, count))
}
