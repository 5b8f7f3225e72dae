//! Reference servers in processes of their own, so that their CPU time is
//! their own: [`RefProcess::fixed`] answers every request from memory,
//! [`RefProcess::etcd_proxy`] is the bare etcd proxy of
//! [`EtcdProxy`]. The process is this binary again, started with the hidden
//! `reference-server` subcommand ([`child_main`]), on the stack of
//! [`reference::listen`].

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use bytes::Bytes;
use futures::FutureExt;
use http::Request;
use hyper::body::Incoming;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::client::Target;
use crate::etcd_raw::EtcdProxy;
use crate::reference::{Handler, json_response, listen};

/// What a reference process serves (the hidden `reference-server`
/// subcommand's arguments).
#[derive(Debug, clap::Args)]
pub(crate) struct ChildArgs {
    /// The apiforge data dir whose serving certificate it uses.
    #[arg(long)]
    data_dir: PathBuf,
    /// A JSON file of the fixed answers: `{"default": b64, "bodies":
    /// {"<path?query>": b64}}`.
    #[arg(long, conflicts_with = "etcd")]
    bodies: Option<PathBuf>,
    /// Be the bare etcd proxy on this etcd client URL.
    #[arg(long, requires = "prefix")]
    etcd: Option<String>,
    /// The key prefix of the bare etcd proxy.
    #[arg(long)]
    prefix: Option<String>,
}

/// The fixed answers of [`RefProcess::fixed`], as written for the child.
#[derive(serde::Deserialize, serde::Serialize)]
struct FixedBodies {
    default: String,
    bodies: HashMap<String, String>,
}

/// The line a reference process prints when it listens.
const LISTENING: &str = "listening ";

/// Runs a reference server until its standard input closes (the benchmark
/// ended, however it ended); prints `listening <addr>` once it accepts.
pub(crate) async fn child_main(args: ChildArgs) -> anyhow::Result<()> {
    let b64 = base64::engine::general_purpose::STANDARD;
    // Held for as long as the server runs (the proxy's watch).
    let mut _proxy = None;
    let handler: Handler = match (&args.bodies, &args.etcd, &args.prefix) {
        (Some(file), None, _) => {
            let fixed: FixedBodies = serde_json::from_slice(&std::fs::read(file)?)?;
            let default = Bytes::from(b64.decode(&fixed.default)?);
            let bodies: HashMap<String, Bytes> = fixed
                .bodies
                .into_iter()
                .map(|(k, v)| Ok((k, Bytes::from(b64.decode(v)?))))
                .collect::<anyhow::Result<_>>()?;
            let bodies = Arc::new(bodies);
            Arc::new(move |req: Request<Incoming>| {
                let body = req
                    .uri()
                    .path_and_query()
                    .and_then(|pq| bodies.get(pq.as_str()))
                    .cloned()
                    .unwrap_or_else(|| default.clone());
                async move { json_response(http::StatusCode::OK, body) }.boxed()
            })
        }
        (None, Some(url), Some(prefix)) => {
            let client = etcd_client::Client::connect([url.as_str()], None)
                .await
                .context("connecting to etcd")?;
            let proxy = EtcdProxy::start(client, prefix.clone()).await?;
            let handler = proxy.handler.clone();
            _proxy = Some(proxy);
            handler
        }
        _ => anyhow::bail!("reference-server needs --bodies, or --etcd and --prefix"),
    };
    let (addr, _task) = listen(&args.data_dir, handler).await?;
    println!("{LISTENING}{addr}");
    // Until the benchmark closes our stdin.
    let mut sink = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    Ok(())
}

/// A reference server in a process of its own; killed on drop.
pub(crate) struct RefProcess {
    /// How to reach it (same CA as the apiforge server whose cert it uses).
    pub(crate) target: Target,
    /// Its process id, for its CPU time.
    pub(crate) pid: u32,
    _child: tokio::process::Child,
    _bodies: Option<tempfile::NamedTempFile>,
}

impl RefProcess {
    /// Answers `bodies` (keyed by path and query; `default` for anything
    /// else) with the serving certificate of the apiforge data dir
    /// `data_dir`, trusted through the same client settings as `apiforge`.
    pub(crate) async fn fixed(
        data_dir: &Path,
        apiforge: &Target,
        bodies: HashMap<String, Bytes>,
        default: Bytes,
    ) -> anyhow::Result<RefProcess> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let fixed = FixedBodies {
            default: b64.encode(&default),
            bodies: bodies
                .into_iter()
                .map(|(k, v)| (k, b64.encode(&v)))
                .collect(),
        };
        let mut file = tempfile::NamedTempFile::new()?;
        serde_json::to_writer(&mut file, &fixed)?;
        file.flush()?;
        let path = file.path().to_string_lossy().into_owned();
        let mut started = Self::spawn(data_dir, apiforge, &["--bodies", &path]).await?;
        started._bodies = Some(file);
        Ok(started)
    }

    /// The bare etcd proxy ([`EtcdProxy`]) on the etcd at `url`, writing
    /// under `prefix`.
    pub(crate) async fn etcd_proxy(
        data_dir: &Path,
        apiforge: &Target,
        url: &str,
        prefix: &str,
    ) -> anyhow::Result<RefProcess> {
        Self::spawn(data_dir, apiforge, &["--etcd", url, "--prefix", prefix]).await
    }

    async fn spawn(
        data_dir: &Path,
        apiforge: &Target,
        args: &[&str],
    ) -> anyhow::Result<RefProcess> {
        let exe = std::env::current_exe().context("finding the benchmark's own binary")?;
        let mut child = tokio::process::Command::new(exe)
            .arg("reference-server")
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting a reference server process")?;
        let pid = child.id().context("reference server exited at once")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .context("reference server did not listen within 30 s")??
            .context("reference server exited before listening")?;
        let addr: SocketAddr = line
            .strip_prefix(LISTENING)
            .with_context(|| format!("reference server said {line:?}"))?
            .parse()?;
        Ok(RefProcess {
            target: Target {
                addr,
                token: apiforge.token.clone(),
                tls: apiforge.tls.clone(),
            },
            pid,
            _child: child,
            _bodies: None,
        })
    }
}
