//! Test harness: starts the real `apiforge` binary on a free loopback port
//! with a temporary data directory, and builds clients for it.

#![allow(dead_code, unreachable_pub)]

pub mod auth;
pub mod etcd_cluster;
pub mod kubectl;
pub mod raw;
pub mod tls;
pub mod webhook;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// The `p` quantile (0..=1, nearest rank) of `sorted` durations; zero when
/// there are none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A running `apiforge serve`. Killed (SIGKILL) on drop.
pub struct Server {
    child: Option<Child>,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The HTTPS port.
    pub port: u16,
    _tmp: Option<tempfile::TempDir>,
    log: PathBuf,
}

/// This machine's non-loopback IPv4 address (the source address of its
/// default route, else the first of `hostname -I`).
pub fn host_address() -> String {
    let routed = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:9").map(|()| s))
        .and_then(|s| s.local_addr())
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
    if let Some(ip) = routed {
        return ip.to_string();
    }
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .expect("hostname -I");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|a| {
            a.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| !ip.is_loopback())
        })
        .expect("a non-loopback IPv4 address on this machine")
        .to_string()
}

/// The first port [`free_port`] hands out (below Linux's ephemeral range,
/// 32768–60999, from which outgoing connections take their source ports).
const FIRST_TEST_PORT: u16 = 20_000;
/// How many ports [`free_port`] cycles through.
const TEST_PORTS: u16 = 12_000;

/// A free loopback port for a child process to listen on.
///
/// Ports come from below the ephemeral range, each handed out once per
/// process (a counter starting at an offset taken from the process id) and
/// checked free by binding it: a port bound to 0 and released is ephemeral,
/// so any outgoing connection of a parallel test could take it before the
/// child binds it (CI saw etcd fail so with "address already in use").
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(u16::MAX);
    let _ = NEXT.compare_exchange(
        u16::MAX,
        (std::process::id() % u32::from(TEST_PORTS)) as u16,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..TEST_PORTS {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed) % TEST_PORTS;
        let port = FIRST_TEST_PORT + offset;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!(
        "no free loopback port in {FIRST_TEST_PORT}..{}",
        FIRST_TEST_PORT + TEST_PORTS
    )
}

/// A loopback port that refuses connections for as long as the returned
/// socket lives: bound but not listening, so no other test can take the
/// port meanwhile (a port from [`free_port`] that is meant to stay closed
/// can be reused by a parallel test's listener, whose silence then looks
/// like a timeout).
pub fn refused_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("bind");
    let port = socket.local_addr().expect("local address").port();
    (socket, port)
}

impl Server {
    /// Starts a server on a fresh temporary data directory.
    pub async fn start() -> Server {
        Server::start_with(&[]).await
    }

    /// Starts a server on a fresh temporary data directory with extra flags.
    /// A free port can be taken by another process between
    /// [`free_port`] and the server's bind: then it starts again on
    /// another port.
    pub async fn start_with(extra: &[&str]) -> Server {
        for _ in 0..5 {
            let tmp = tempfile::tempdir().expect("tempdir");
            let dir = tmp.path().join("data");
            let mut s = Server::spawn_in(&dir, free_port(), extra);
            match s.wait_ready().await {
                Ok(()) => {
                    s._tmp = Some(tmp);
                    return s;
                }
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("server did not become ready; log:\n{log}"),
            }
        }
        panic!("no free port for the server after 5 attempts");
    }

    /// Starts a server on `data_dir` and `port` with extra flags.
    pub async fn start_in(data_dir: &Path, port: u16, extra: &[&str]) -> Server {
        let mut server = Server::spawn_in(data_dir, port, extra);
        if let Err(log) = server.wait_ready().await {
            panic!("server did not become ready; log:\n{log}");
        }
        server
    }

    fn spawn_in(data_dir: &Path, port: u16, extra: &[&str]) -> Server {
        std::fs::create_dir_all(data_dir).expect("data dir");
        let log = data_dir.with_extension(format!("{port}.log"));
        let child = spawn(data_dir, port, extra, &log);
        Server {
            child: Some(child),
            data_dir: data_dir.to_path_buf(),
            port,
            _tmp: None,
            log,
        }
    }

    /// The admin kubeconfig path.
    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir.join("admin.kubeconfig")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The warnings and errors in the server's log so far: short enough
    /// that a failure message quoting them survives CI's truncation.
    pub fn warnings(&self) -> String {
        self.log()
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A kube client from the admin kubeconfig.
    pub async fn client(&self) -> kube::Client {
        let kc = Kubeconfig::read_from(self.kubeconfig()).expect("read kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("kubeconfig");
        kube::Client::try_from(config).expect("client")
    }

    /// A kube client from the admin kubeconfig that does not retry 5xx
    /// answers itself (kube-rs retries 503s up to 15 times with a backoff of
    /// up to 1000 s): for tests that look at those answers.
    pub async fn client_without_retries(&self) -> kube::Client {
        let kc = Kubeconfig::read_from(self.kubeconfig()).expect("read kubeconfig");
        let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("kubeconfig");
        config.default_retry = false;
        kube::Client::try_from(config).expect("client")
    }

    /// Waits for `/readyz`; the log when the server exited or did not
    /// become ready in 30 s.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                self.child = None;
                return Err(self.log());
            }
            if self.kubeconfig().exists()
                && let Ok(client) =
                    tokio::time::timeout(Duration::from_secs(2), self.client()).await
            {
                let req = http::Request::get("/readyz")
                    .body(Vec::new())
                    .expect("request");
                if let Ok(Ok(body)) =
                    tokio::time::timeout(Duration::from_secs(2), client.request_text(req)).await
                    && body == "ok"
                {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(self.log());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running server").id()
    }

    /// Kills the server with SIGKILL and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM without waiting.
    pub fn send_sigterm(&self) {
        let child = self.child.as_ref().expect("running server");
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill -TERM");
    }

    /// Waits (up to `limit`) for the process to exit; its exit status.
    pub async fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            let child = self.child.as_mut().expect("running server");
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit within {limit:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running server");
        let pid = child.id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill -TERM");
        child.wait().expect("wait")
    }
}

fn spawn(data_dir: &Path, port: u16, extra: &[&str], log: &Path) -> Child {
    let log_file = std::fs::File::create(log).expect("log file");
    let err_file = log_file.try_clone().expect("log file");
    Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .arg("serve")
        .arg("--secure-port")
        .arg(port.to_string())
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(err_file)
        .spawn()
        .expect("spawn apiforge")
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A throwaway etcd on free loopback ports. Killed on drop.
pub struct Etcd {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// Client URL (`http://127.0.0.1:PORT`).
    pub url: String,
    client_port: u16,
    peer_port: u16,
}

fn etcd_binary() -> &'static str {
    if Path::new("/usr/bin/etcd").exists() {
        "/usr/bin/etcd"
    } else {
        panic!(
            "etcd is not installed: run scripts/install-deps.sh (Debian's etcd-server); this test does not skip"
        )
    }
}

impl Etcd {
    /// Starts etcd and waits until it answers.
    pub async fn start() -> Etcd {
        let dir = tempfile::tempdir().expect("tempdir");
        let (client_port, peer_port) = (free_port(), free_port());
        let mut etcd = Etcd {
            child: None,
            dir,
            url: format!("http://127.0.0.1:{client_port}"),
            client_port,
            peer_port,
        };
        etcd.spawn().await;
        etcd
    }

    async fn spawn(&mut self) {
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::File::create(self.dir.path().join("etcd.log")).expect("etcd log");
        let child = Command::new(etcd_binary())
            .arg("--name=apiforge-test")
            .arg(format!(
                "--data-dir={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--listen-client-urls={}", self.url))
            .arg(format!("--advertise-client-urls={}", self.url))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=apiforge-test={peer}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.client_port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "etcd did not start; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// etcd's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }

    /// Kills etcd with SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on the same data directory and ports.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How long [`eventually`] waits (generous: no timing is asserted).
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `check` every 100 ms until it holds; fails with the server log
/// after [`DEADLINE`].
pub async fn eventually<F, Fut>(server: &Server, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        if check().await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not after {DEADLINE:?}; log:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
