//! The server-side apply scenario: apply-create and apply-update of 1 KiB
//! Flunders against the same writes without apply (POST for the create, a
//! JSON merge patch for the update), alternated run by run on one server,
//! 16 clients; rate and server CPU per request of each.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::json;

use crate::client::Conn;
use crate::fixtures::{collection, fresh, pad_for_1kib};
use crate::load::{Op, alternate, median};
use crate::procs::Backend;
use crate::report::{Figure, Target as Goal};
use crate::{Settings, progress};

/// Clients of the scenario.
const CLIENTS: usize = 16;
const APPLY: &str = "application/apply-patch+yaml";
const MERGE: &str = "application/merge-patch+json";
const COUNTER: &str = "bench/counter";

/// The full configuration an applier sends: a 1 KiB Flunder.
fn config(name: &str, pad: usize, counter: usize) -> Bytes {
    let obj = json!({
        "apiVersion": "wardle.example.com/v1beta1",
        "kind": "Flunder",
        "metadata": {"name": name, "annotations": {
            "bench/pad": "x".repeat(pad), COUNTER: counter.to_string()}},
        "spec": {"referenceType": "Flunder", "flunderReference": "bench"},
    });
    Bytes::from(serde_json::to_vec(&obj).unwrap_or_default())
}

/// Creates a new object per call: by apply, or by POST.
struct CreateOp {
    apply: bool,
    pad: usize,
    next: AtomicUsize,
}

impl Op for CreateOp {
    async fn call(&self, _worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-{n}", if self.apply { "a" } else { "p" });
        let reply = if self.apply {
            conn.send_typed(
                Method::PATCH,
                &format!("{}/{name}?fieldManager=bench", collection("default")),
                APPLY,
                config(&name, self.pad, 0),
            )
            .await?
        } else {
            conn.send(
                Method::POST,
                &collection("default"),
                Some(config(&name, self.pad, 0)),
            )
            .await?
        };
        anyhow::ensure!(
            reply.status == StatusCode::CREATED,
            "create answered {}",
            reply.status
        );
        Ok(reply.body.len() as u64)
    }
}

/// Changes one annotation of the worker's object per call: by applying
/// the whole configuration again, or by a merge patch of the annotation.
struct UpdateOp {
    apply: bool,
    pad: usize,
    counters: Vec<AtomicUsize>,
}

impl Op for UpdateOp {
    async fn call(&self, worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        let n = self
            .counters
            .get(worker)
            .context("no counter for worker")?
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        // Appliers and merge patchers write objects of their own (a merge
        // patch of a field the applier owns would make its next apply
        // conflict).
        let name = format!("{}-{worker}", if self.apply { "wa" } else { "wm" });
        let path = format!("{}/{name}?fieldManager=bench", collection("default"));
        let reply = if self.apply {
            conn.send_typed(Method::PATCH, &path, APPLY, config(&name, self.pad, n))
                .await?
        } else {
            let patch = json!({"metadata": {"annotations": {COUNTER: n.to_string()}}});
            conn.send_typed(
                Method::PATCH,
                &path,
                MERGE,
                Bytes::from(serde_json::to_vec(&patch)?),
            )
            .await?
        };
        Ok(reply.ok()?.len() as u64)
    }
}

/// The apply scenario.
pub(crate) async fn apply(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    const S: &str = "apply";
    progress!("{S}: server-side apply vs POST / merge patch, 1 KiB objects, {CLIENTS} clients");
    let f = fresh(settings, &Backend::Embedded).await?;
    let target = &f.server.target;
    let pid = f.server.pid()?.to_string();
    let pad = pad_for_1kib(target, "default").await?;

    let creates = alternate(
        settings,
        CLIENTS,
        ("apply-create", "apply", "without apply"),
        target,
        &pid,
        Arc::new(CreateOp {
            apply: true,
            pad,
            next: AtomicUsize::new(0),
        }),
        Arc::new(CreateOp {
            apply: false,
            pad,
            next: AtomicUsize::new(0),
        }),
    )
    .await?;

    let mut conn = Conn::connect(target).await?;
    for name in (0..CLIENTS).flat_map(|i| [format!("wa-{i}"), format!("wm-{i}")]) {
        conn.send_typed(
            Method::PATCH,
            &format!("{}/{name}?fieldManager=bench", collection("default")),
            APPLY,
            config(&name, pad, 0),
        )
        .await?
        .ok()?;
    }
    let counters = || (0..CLIENTS).map(|_| AtomicUsize::new(0)).collect();
    let updates = alternate(
        settings,
        CLIENTS,
        ("apply-update", "apply", "without apply"),
        target,
        &pid,
        Arc::new(UpdateOp {
            apply: true,
            pad,
            counters: counters(),
        }),
        Arc::new(UpdateOp {
            apply: false,
            pad,
            counters: counters(),
        }),
    )
    .await?;

    let mut out = Vec::new();
    for (what, without, pair) in [
        ("create", "POST", &creates),
        ("update", "merge patch", &updates),
    ] {
        out.push(Figure::vs(
            S,
            &format!("apply-{what}/s (ref: {without})"),
            median(&pair.rate[0]),
            median(&pair.rate[1]),
            Goal::RatioAtLeast(0.6),
        ));
        out.push(Figure::vs(
            S,
            &format!("server CPU µs per apply-{what} (ref: {without})"),
            median(&pair.cpu_us[0]),
            median(&pair.cpu_us[1]),
            Goal::Info,
        ));
    }
    Ok(out)
}
