//! Processes the benchmark starts: `apiforge serve` and a throwaway etcd.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::client::{self, Conn, Target};

/// Extra arguments for every `apiforge serve` (`--server-arg`).
static SERVER_ARGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Sets the extra arguments of every `apiforge serve` (once, at start).
pub(crate) fn set_server_args(args: Vec<String>) {
    let _ = SERVER_ARGS.set(args);
}

/// How long [`Apiforge::settled_rss`] waits after the garbage collector
/// synced (2 s unless set).
static RSS_SETTLE: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

/// Sets how long RSS figures wait to settle (once, at start).
pub(crate) fn set_rss_settle(settle: Duration) {
    let _ = RSS_SETTLE.set(settle);
}

/// A free loopback port (bind to 0, read, release).
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Resident set size of a process in bytes (`VmRSS` of `/proc/PID/status`).
pub(crate) fn rss_bytes(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS")?;
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib * 1024)
}

/// CPU time (user + system) of a process in seconds, from
/// `/proc/PID/stat` (clock ticks of 1/100 s, Linux's `CLK_TCK`).
pub(crate) fn cpu_seconds(pid: &str) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(") ").context("malformed stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: f64 = fields.get(11).context("no utime")?.parse()?;
    let stime: f64 = fields.get(12).context("no stime")?.parse()?;
    Ok((utime + stime) / 100.0)
}

/// The storage backend an apiforge server uses.
#[derive(Clone, Debug)]
pub(crate) enum Backend {
    /// The embedded store in the data directory.
    Embedded,
    /// etcd at these client URLs (`--etcd-servers`).
    Etcd(String),
}

impl Backend {
    /// Short name for reports.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Backend::Embedded => "embedded",
            Backend::Etcd(_) => "etcd",
        }
    }
}

/// A running `apiforge serve`; killed on drop.
pub(crate) struct Apiforge {
    child: Option<Child>,
    /// Data directory.
    pub(crate) data_dir: PathBuf,
    /// How to reach it.
    pub(crate) target: Target,
    /// Time from spawn to the first 200 on `/readyz`.
    pub(crate) startup: Duration,
    log: PathBuf,
}

impl Apiforge {
    /// Starts `binary serve` on a free port with `data_dir` and waits until
    /// `/readyz` answers 200 (polled every 5 ms).
    pub(crate) async fn start(
        binary: &Path,
        data_dir: &Path,
        backend: &Backend,
    ) -> anyhow::Result<Apiforge> {
        Self::start_with(binary, data_dir, backend, &[]).await
    }

    /// [`Apiforge::start`] with `extra` flags.
    pub(crate) async fn start_with(
        binary: &Path,
        data_dir: &Path,
        backend: &Backend,
        extra: &[String],
    ) -> anyhow::Result<Apiforge> {
        std::fs::create_dir_all(data_dir)?;
        let port = free_port()?;
        let log = data_dir.with_extension(format!("{port}.log"));
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(binary);
        cmd.arg("serve")
            .arg("--secure-port")
            .arg(port.to_string())
            .arg("--data-dir")
            .arg(data_dir);
        if let Backend::Etcd(urls) = backend {
            cmd.arg("--etcd-servers").arg(urls);
        }
        cmd.args(SERVER_ARGS.get().into_iter().flatten());
        cmd.args(extra);
        let started = Instant::now();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("spawning {}", binary.display()))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut server = Apiforge {
            child: Some(child),
            data_dir: data_dir.to_path_buf(),
            target: Target {
                addr,
                token: String::new(),
                tls: client::insecure_tls_config()?,
            },
            startup: Duration::ZERO,
            log,
        };
        server.startup = server.wait_ready(started).await?;
        let kc = client::read_kubeconfig(&data_dir.join("admin.kubeconfig"))?;
        server.target.token = kc.token;
        server.target.tls = client::tls_config(&kc.ca_pem)?;
        Ok(server)
    }

    async fn wait_ready(&mut self, started: Instant) -> anyhow::Result<Duration> {
        let deadline = started + Duration::from_secs(120);
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                bail!(
                    "apiforge exited with {status} during start-up; log:\n{}",
                    self.log_tail()
                );
            }
            let attempt = async {
                let mut conn = Conn::connect(&self.target).await?;
                conn.get("/readyz").await
            };
            if let Ok(Ok(reply)) = tokio::time::timeout(Duration::from_secs(2), attempt).await
                && reply.status.is_success()
            {
                return Ok(started.elapsed());
            }
            if Instant::now() > deadline {
                bail!("apiforge not ready after 120 s; log:\n{}", self.log_tail());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The process id.
    pub(crate) fn pid(&self) -> anyhow::Result<u32> {
        self.child
            .as_ref()
            .map(Child::id)
            .context("server not running")
    }

    /// Current RSS in bytes.
    pub(crate) fn rss(&self) -> anyhow::Result<u64> {
        rss_bytes(self.pid()?)
    }

    /// The RSS once the server has settled: the garbage collector's graph
    /// (one node per object) is built (it starts once the collector holds
    /// its lease, up to its 15 s duration after a killed predecessor), then
    /// 2 s more (1 s in the quick run).
    pub(crate) async fn settled_rss(&self) -> anyhow::Result<u64> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if log.contains("graph synced") {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "garbage collector not synced after 60 s; log:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(*RSS_SETTLE.get_or_init(|| Duration::from_secs(2))).await;
        self.rss()
    }

    /// The last lines of the server log.
    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Kills the server and waits for it.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Apiforge {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether `binary serve --help` lists `--etcd-servers`.
pub(crate) fn supports_etcd(binary: &Path) -> bool {
    Command::new(binary)
        .args(["serve", "--help"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("--etcd-servers"))
        .unwrap_or(false)
}

/// A throwaway etcd on free loopback ports; killed on drop.
pub(crate) struct Etcd {
    child: Option<Child>,
    /// Client URL.
    pub(crate) url: String,
    _dir: tempfile::TempDir,
}

impl Etcd {
    /// Path of the etcd binary.
    pub(crate) const BINARY: &'static str = "/usr/bin/etcd";

    /// Starts etcd and waits until its client port accepts connections.
    pub(crate) async fn start() -> anyhow::Result<Etcd> {
        let dir = tempfile::tempdir()?;
        let client_port = free_port()?;
        let peer_port = free_port()?;
        let url = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log = std::fs::File::create(dir.path().join("etcd.log"))?;
        let child = Command::new(Self::BINARY)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--name", "bench"])
            .args([
                "--listen-client-urls",
                &url,
                "--advertise-client-urls",
                &url,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("bench={peer}")])
            .args(["--log-level", "error"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("spawning etcd")?;
        let etcd = Etcd {
            child: Some(child),
            url,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", client_port))
                .await
                .is_ok()
            {
                // The port opens slightly before etcd serves; give it a moment.
                tokio::time::sleep(Duration::from_millis(300)).await;
                return Ok(etcd);
            }
            if Instant::now() > deadline {
                bail!("etcd did not start within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
