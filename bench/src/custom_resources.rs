//! The custom resources scenario. The Flunder kind is installed a second
//! time as a CustomResourceDefinition (`apiforge crd wardle.example.com
//! --as-group ...`: the same schema and validation rules), so a custom
//! resource is measured against the compiled-in kind of the same size, in
//! one run on one server: GET, LIST and create, alternated; then the time
//! from a definition's create to `Established` and to its kind being
//! served; then start-up to ready with 100 definitions and 10,000 custom
//! resources, and the RSS each cached custom resource costs (between
//! 10,000 and 100,000 of them: the store's page cache, up to 32 MiB, is
//! a fixed cost that the first 10,000 carry).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::client::{Conn, Target};
use crate::fixtures::{collection, fresh, pad_for_1kib};
use crate::load::{Op, alternate, median};
use crate::procs::{Apiforge, Backend};
use crate::report::{Figure, Target as Goal};
use crate::{Settings, progress};

const S: &str = "crd";
/// The group the Flunder definition is installed under.
const GROUP: &str = "bench.crd.example.com";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
/// Clients of the load runs.
const CLIENTS: usize = 16;
/// Objects each LIST returns.
const LIST_OBJECTS: usize = 500;
/// Definitions and objects of the start-up figure.
const DEFINITIONS: usize = 100;
const PER_DEFINITION: usize = 100;
/// Objects per definition added for the memory figure (100,000 in all, so
/// the store's fixed page cache, up to 32 MiB, weighs little per object;
/// 20,000 in the quick run, which must stay short).
fn more_per_definition(settings: &Settings) -> usize {
    if settings.big_objects < 100_000 {
        100
    } else {
        900
    }
}

/// 10000 → "10,000".
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The Flunder definition, served under `group`.
fn definition(binary: &std::path::Path, group: &str) -> anyhow::Result<Value> {
    let out = std::process::Command::new(binary)
        .args(["crd", "wardle.example.com", "--as-group", group])
        .output()
        .context("running apiforge crd")?;
    anyhow::ensure!(out.status.success(), "apiforge crd failed");
    let text = String::from_utf8(out.stdout)?;
    text.split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(serde_json::from_str::<Value>)
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .find(|d| d["spec"]["names"]["plural"] == "flunders")
        .context("no flunders definition")
}

fn cr_collection(group: &str, ns: &str) -> String {
    format!("/apis/{group}/v1beta1/namespaces/{ns}/flunders")
}

/// A Flunder of `group` (the compiled-in one for `wardle.example.com`).
fn object(group: &str, name: &str, pad: usize) -> Bytes {
    let obj = json!({
        "apiVersion": format!("{group}/v1beta1"),
        "kind": "Flunder",
        "metadata": {"name": name, "annotations": {"bench/pad": "x".repeat(pad)}},
        "spec": {"referenceType": "Flunder", "flunderReference": "bench"},
    });
    Bytes::from(serde_json::to_vec(&obj).unwrap_or_default())
}

/// Creates `crd` and waits until it is Established and its collection
/// answers; returns both times.
async fn install(target: &Target, crd: &Value) -> anyhow::Result<(Duration, Duration)> {
    let mut conn = Conn::connect(target).await?;
    let name = crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let group = crd["spec"]["group"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let started = Instant::now();
    conn.send(
        Method::POST,
        CRDS,
        Some(Bytes::from(serde_json::to_vec(crd)?)),
    )
    .await?
    .ok()?;
    let mut established = None;
    let deadline = started + Duration::from_secs(30);
    loop {
        anyhow::ensure!(Instant::now() < deadline, "{name} not served after 30 s");
        if established.is_none() {
            let body = conn.get(&format!("{CRDS}/{name}")).await?.ok()?;
            let crd: Value = serde_json::from_slice(&body)?;
            let done = crd["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True");
            if done {
                established = Some(started.elapsed());
            }
        }
        if let Some(at) = established {
            let reply = conn.get(&cr_collection(&group, "default")).await?;
            if reply.status == StatusCode::OK {
                return Ok((at, started.elapsed()));
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

struct GetOp {
    path: String,
}

impl Op for GetOp {
    async fn call(&self, _worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        Ok(conn.get(&self.path).await?.ok()?.len() as u64)
    }
}

struct CreateOp {
    group: &'static str,
    collection: String,
    pad: usize,
    next: AtomicUsize,
}

impl Op for CreateOp {
    async fn call(&self, _worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let reply = conn
            .send(
                Method::POST,
                &self.collection,
                Some(object(self.group, &format!("c-{n}"), self.pad)),
            )
            .await?;
        anyhow::ensure!(
            reply.status == StatusCode::CREATED,
            "create answered {}",
            reply.status
        );
        Ok(reply.body.len() as u64)
    }
}

/// Creates `count` objects named `<prefix>-<i>` in `collection`, 16 at a
/// time.
async fn fill(
    target: &Target,
    group: &str,
    collection: &str,
    prefix: &str,
    count: usize,
    pad: usize,
) -> anyhow::Result<()> {
    fill_each(
        target,
        &[(group.to_string(), collection.to_string())],
        prefix,
        count,
        pad,
    )
    .await
}

/// Creates `count` objects named `<prefix>-<i>` in each of `collections`
/// (group, collection path), 16 at a time over 16 connections shared by
/// all of them (a connection per collection would cost a TLS handshake
/// per 100 objects).
async fn fill_each(
    target: &Target,
    collections: &[(String, String)],
    prefix: &str,
    count: usize,
    pad: usize,
) -> anyhow::Result<()> {
    let next = Arc::new(AtomicUsize::new(0));
    let collections: Arc<[(String, String)]> = collections.into();
    let total = count * collections.len();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (target, next) = (target.clone(), next.clone());
        let (collections, prefix) = (collections.clone(), prefix.to_string());
        tasks.spawn(async move {
            let mut conn = Conn::connect(&target).await?;
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    return anyhow::Ok(());
                }
                let (group, collection) = &collections[n / count];
                let i = n % count;
                conn.send(
                    Method::POST,
                    collection,
                    Some(object(group, &format!("{prefix}-{i}"), pad)),
                )
                .await?
                .ok()?;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

/// The scenario.
pub(crate) async fn custom_resources(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    progress!(
        "{S}: a custom resource vs the compiled-in kind of the same schema, {CLIENTS} clients"
    );
    let crd = definition(&settings.binary, GROUP)?;
    let f = fresh(settings, &Backend::Embedded).await?;
    let target = &f.server.target;
    let pid = f.server.pid()?.to_string();
    let (established, served) = install(target, &crd).await?;
    progress!(
        "  definition created → Established {:.1} ms, → served {:.1} ms",
        established.as_secs_f64() * 1e3,
        served.as_secs_f64() * 1e3
    );
    let pad = pad_for_1kib(target, "default").await?;
    let mut out = vec![
        Figure::new(
            S,
            "ms from definition create to Established",
            established.as_secs_f64() * 1e3,
            Goal::AtMost(1000.0),
        ),
        Figure::new(
            S,
            "ms from definition create to its kind served",
            served.as_secs_f64() * 1e3,
            Goal::Info,
        ),
    ];

    // GET one object of each.
    let mut conn = Conn::connect(target).await?;
    let compiled = collection("default");
    let custom = cr_collection(GROUP, "default");
    for (group, coll) in [("wardle.example.com", &compiled), (GROUP, &custom)] {
        conn.send(Method::POST, coll, Some(object(group, "bench-get", pad)))
            .await?
            .ok()?;
    }
    let sizes = (
        conn.get(&format!("{custom}/bench-get")).await?.ok()?.len(),
        conn.get(&format!("{compiled}/bench-get"))
            .await?
            .ok()?
            .len(),
    );
    progress!(
        "  objects are {} (custom) and {} (compiled) bytes",
        sizes.0,
        sizes.1
    );
    let gets = alternate(
        settings,
        CLIENTS,
        ("crd-get", "custom", "compiled"),
        target,
        &pid,
        Arc::new(GetOp {
            path: format!("{custom}/bench-get"),
        }),
        Arc::new(GetOp {
            path: format!("{compiled}/bench-get"),
        }),
    )
    .await?;

    // LIST 500 of each (in a namespace of their own).
    conn.send(
        Method::POST,
        "/api/v1/namespaces",
        Some(Bytes::from_static(br#"{"metadata":{"name":"list"}}"#)),
    )
    .await?
    .ok()?;
    for (group, coll) in [
        ("wardle.example.com", collection("list")),
        (GROUP, cr_collection(GROUP, "list")),
    ] {
        fill(target, group, &coll, "l", LIST_OBJECTS, pad).await?;
    }
    let lists = alternate(
        settings,
        4,
        ("crd-list", "custom", "compiled"),
        target,
        &pid,
        Arc::new(GetOp {
            path: cr_collection(GROUP, "list"),
        }),
        Arc::new(GetOp {
            path: collection("list"),
        }),
    )
    .await?;

    // Creates.
    let creates = alternate(
        settings,
        CLIENTS,
        ("crd-create", "custom", "compiled"),
        target,
        &pid,
        Arc::new(CreateOp {
            group: GROUP,
            collection: cr_collection(GROUP, "default"),
            pad,
            next: AtomicUsize::new(0),
        }),
        Arc::new(CreateOp {
            group: "wardle.example.com",
            collection: collection("default"),
            pad,
            next: AtomicUsize::new(0),
        }),
    )
    .await?;
    for (what, pair, goal) in [
        ("GET", &gets, 0.9),
        ("LIST of 500", &lists, 0.8),
        ("create", &creates, 0.7),
    ] {
        out.push(Figure::vs(
            S,
            &format!("custom resource {what}/s (ref: compiled-in kind)"),
            median(&pair.rate[0]),
            median(&pair.rate[1]),
            Goal::RatioAtLeast(goal),
        ));
        out.push(Figure::vs(
            S,
            &format!("server CPU µs per {what} (ref: compiled-in kind)"),
            median(&pair.cpu_us[0]),
            median(&pair.cpu_us[1]),
            Goal::Info,
        ));
    }
    drop(f);
    out.extend(startup_with_many(settings, &crd, pad).await?);
    Ok(out)
}

/// Start-up to ready with [`DEFINITIONS`] definitions and
/// [`DEFINITIONS`] × [`PER_DEFINITION`] custom resources, and the RSS per
/// cached custom resource (against a restart with the definitions alone).
async fn startup_with_many(
    settings: &Settings,
    crd: &Value,
    pad: usize,
) -> anyhow::Result<Vec<Figure>> {
    progress!(
        "  start-up with {DEFINITIONS} definitions and {} custom resources",
        DEFINITIONS * PER_DEFINITION
    );
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("data");
    let server = Apiforge::start(&settings.binary, &dir, &Backend::Embedded).await?;
    let groups: Vec<String> = (0..DEFINITIONS).map(|i| format!("g{i}.{GROUP}")).collect();
    // Installed 10 at a time, as `kubectl apply -f` of a directory would.
    let mut installs = futures::stream::iter(groups.iter().map(|group| {
        let mut def = crd.clone();
        def["metadata"]["name"] = json!(format!("flunders.{group}"));
        def["spec"]["group"] = json!(group);
        let target = server.target.clone();
        async move { install(&target, &def).await }
    }))
    .buffer_unordered(10);
    while let Some(installed) = installs.next().await {
        installed?;
    }
    drop(installs);
    progress!("    {DEFINITIONS} definitions installed");
    drop(server);
    // The definitions alone.
    let server = Apiforge::start(&settings.binary, &dir, &Backend::Embedded).await?;
    let empty_start = server.startup;
    let base_rss = server.settled_rss().await?;
    progress!("    restarted with the definitions alone, RSS settled");
    let collections: Vec<(String, String)> = groups
        .iter()
        .map(|g| (g.clone(), cr_collection(g, "default")))
        .collect();
    fill_each(&server.target, &collections, "o", PER_DEFINITION, pad).await?;
    progress!(
        "    {} custom resources created",
        DEFINITIONS * PER_DEFINITION
    );
    let mut conn = Conn::connect(&server.target).await?;
    let one = conn
        .get(&format!("{}/o-0", cr_collection(&groups[0], "default")))
        .await?
        .ok()?;
    drop(server);
    let server = Apiforge::start(&settings.binary, &dir, &Backend::Embedded).await?;
    let full_start = server.startup;
    // Ready means served: the first GET after /readyz finds the kind.
    let mut conn = Conn::connect(&server.target).await?;
    conn.get(&format!(
        "{}/o-1",
        cr_collection(&groups[DEFINITIONS - 1], "default")
    ))
    .await?
    .ok()?;
    let full_rss = server.settled_rss().await?;
    progress!("    restarted with them, RSS settled");
    // 90,000 more, then the marginal RSS per object between the two.
    fill_each(
        &server.target,
        &collections,
        "m",
        more_per_definition(settings),
        pad,
    )
    .await?;
    progress!(
        "    {} more created",
        DEFINITIONS * more_per_definition(settings)
    );
    drop(server);
    let server = Apiforge::start(&settings.binary, &dir, &Backend::Embedded).await?;
    let big_start = server.startup;
    let big_rss = server.settled_rss().await?;
    let total = (DEFINITIONS * PER_DEFINITION) as f64;
    let more = (DEFINITIONS * more_per_definition(settings)) as f64;
    let (first, big) = (
        thousands(DEFINITIONS * PER_DEFINITION),
        thousands(DEFINITIONS * (PER_DEFINITION + more_per_definition(settings))),
    );
    let next = thousands(DEFINITIONS * more_per_definition(settings));
    let per_object = (full_rss as f64 - base_rss as f64) / total;
    let marginal = (big_rss as f64 - full_rss as f64) / more;
    progress!(
        "  ready in {:.0} ms ({:.0} ms without objects, {:.0} ms with {big}); RSS per {}-byte object: {:.0} bytes (first {first}, with the store's page cache), {:.0} bytes (next {next})",
        full_start.as_secs_f64() * 1e3,
        empty_start.as_secs_f64() * 1e3,
        big_start.as_secs_f64() * 1e3,
        one.len(),
        per_object,
        marginal
    );
    drop(server);
    let compiled = compiled_marginal_rss(settings, pad).await?;
    progress!(
        "  the compiled-in Flunder, same objects and counts: {compiled:.0} bytes RSS per object (next {next})"
    );
    Ok(vec![
        Figure::vs(
            S,
            &format!("RSS bytes per cached object, {first} → {big} (ref: compiled-in Flunder)"),
            marginal,
            compiled,
            Goal::Info,
        ),
        Figure::new(
            S,
            "start-up to ready with 100 CRDs and 10,000 CRs, s",
            full_start.as_secs_f64(),
            Goal::AtMost(2.0),
        ),
        Figure::new(
            S,
            "start-up to ready with 100 CRDs and no CRs, s",
            empty_start.as_secs_f64(),
            Goal::Info,
        ),
        Figure::new(
            S,
            &format!("start-up to ready with 100 CRDs and {big} CRs, s"),
            big_start.as_secs_f64(),
            Goal::Info,
        ),
        Figure::new(
            S,
            &format!("RSS per cached CR / its JSON size ({first} → {big} CRs)"),
            marginal / one.len() as f64,
            Goal::AtMost(2.0),
        ),
        Figure::new(
            S,
            "RSS per cached CR / its JSON size (0 → 10,000 CRs, store page cache included)",
            per_object / one.len() as f64,
            Goal::Info,
        ),
    ])
}

/// The same RSS measure for the compiled-in Flunder: 10,000 objects, a
/// restart, 90,000 more (quick: 10,000), a restart; RSS bytes per object
/// between the two.
async fn compiled_marginal_rss(settings: &Settings, pad: usize) -> anyhow::Result<f64> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("data");
    let mut rss = Vec::new();
    for (prefix, count) in [
        ("o", DEFINITIONS * PER_DEFINITION),
        ("m", DEFINITIONS * more_per_definition(settings)),
    ] {
        let server = Apiforge::start(&settings.binary, &dir, &Backend::Embedded).await?;
        fill(
            &server.target,
            "wardle.example.com",
            &collection("default"),
            prefix,
            count,
            pad,
        )
        .await?;
        drop(server);
        let server = Apiforge::start(&settings.binary, &dir, &Backend::Embedded).await?;
        rss.push(server.settled_rss().await? as f64);
    }
    Ok((rss[1] - rss[0]) / (DEFINITIONS * more_per_definition(settings)) as f64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands() {
        assert_eq!(super::thousands(100_000), "100,000");
        assert_eq!(super::thousands(20_000), "20,000");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1_000_000), "1,000,000");
    }
}
