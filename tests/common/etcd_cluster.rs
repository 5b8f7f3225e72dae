//! A real multi-member etcd cluster on loopback (Debian's etcd, installed by
//! `scripts/install-deps.sh`): each member with its own data directory,
//! client and peer ports from [`super::free_port`], and a log. Members can
//! be killed (`kill -9`), restarted on their data, paused (`SIGSTOP`, a
//! member cut off as by a partition) and resumed. Killed on drop. Clients
//! may be required to use TLS with client certificates ([`EtcdTls`]);
//! health and leadership are read from each member's plain-HTTP metrics
//! port either way.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One member.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    metrics_port: u16,
    data: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// TLS for the members' client URLs: etcd serves `cert`/`key` and requires
/// client certificates signed by `ca`.
#[derive(Clone)]
pub struct EtcdTls {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A running etcd cluster.
pub struct EtcdCluster {
    members: Vec<Member>,
    token: String,
    tls: Option<EtcdTls>,
    _dir: tempfile::TempDir,
}

impl EtcdCluster {
    /// Starts a cluster of `size` members and waits until every member
    /// reports itself healthy (a leader elected, the cluster serving).
    pub async fn start(size: usize) -> EtcdCluster {
        EtcdCluster::start_with(size, None).await
    }

    /// Starts a cluster whose client URLs are `https://` with `tls`.
    pub async fn start_tls(size: usize, tls: EtcdTls) -> EtcdCluster {
        EtcdCluster::start_with(size, Some(tls)).await
    }

    async fn start_with(size: usize, tls: Option<EtcdTls>) -> EtcdCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let members = (0..size)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: super::free_port(),
                peer_port: super::free_port(),
                metrics_port: super::free_port(),
                data: dir.path().join(format!("m{i}.data")),
                log: dir.path().join(format!("m{i}.log")),
                child: None,
            })
            .collect();
        let mut cluster = EtcdCluster {
            members,
            token: format!("apiforge-test-{}", std::process::id()),
            tls,
            _dir: dir,
        };
        for i in 0..size {
            cluster.spawn(i);
        }
        for i in 0..size {
            cluster.wait_healthy(i).await;
        }
        cluster
    }

    fn spawn(&mut self, i: usize) {
        let initial_cluster = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let m = &mut self.members[i];
        let client = format!("{scheme}://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&m.log)
            .expect("etcd log");
        let mut command = Command::new(super::etcd_binary());
        if let Some(tls) = &self.tls {
            command
                .arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()))
                .arg(format!("--trusted-ca-file={}", tls.ca.display()))
                .arg("--client-cert-auth");
        }
        let child = command
            .arg(format!("--name={}", m.name))
            .arg(format!(
                "--listen-metrics-urls=http://127.0.0.1:{}",
                m.metrics_port
            ))
            .arg(format!("--data-dir={}", m.data.display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster={initial_cluster}"))
            .arg(format!("--initial-cluster-token={}", self.token))
            .arg("--initial-cluster-state=new")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        m.child = Some(child);
    }

    /// Waits until member `i` answers `/health` with `"health":"true"`.
    async fn wait_healthy(&mut self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(Ok(Some(status))) = self.members[i].child.as_mut().map(Child::try_wait) {
                panic!("etcd member {i} exited ({status}); log:\n{}", self.log(i));
            }
            let port = self.members[i].metrics_port;
            let health = tokio::task::spawn_blocking(move || http_get(port, "/health"))
                .await
                .ok()
                .flatten();
            if health.is_some_and(|h| h.contains("\"health\":\"true\"")) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "etcd member {i} not healthy after 30 s; log:\n{}",
                self.log(i)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `--etcd-servers` for every member.
    pub fn servers(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let scheme = if self.tls.is_some() { "https" } else { "http" };
                format!("{scheme}://127.0.0.1:{}", m.client_port)
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// The member that is the raft leader now (from each running member's
    /// `etcd_server_is_leader` metric), waiting up to 30 s for one.
    pub async fn leader(&self) -> usize {
        self.leader_other_than(usize::MAX).await
    }

    /// The leader among the members but `excluded` (a paused member still
    /// believes it leads), waiting up to 30 s for one.
    pub async fn leader_other_than(&self, excluded: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            for (i, m) in self.members.iter().enumerate() {
                if m.child.is_none() || i == excluded {
                    continue;
                }
                let port = m.metrics_port;
                let metrics = tokio::task::spawn_blocking(move || http_get(port, "/metrics"))
                    .await
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                if metrics
                    .lines()
                    .any(|l| l.trim() == "etcd_server_is_leader 1")
                {
                    return i;
                }
            }
            assert!(Instant::now() < deadline, "no etcd leader after 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills member `i` with SIGKILL.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data directory and waits until it is
    /// healthy.
    pub async fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        self.wait_healthy(i).await;
    }

    /// Stops member `i` with SIGSTOP (it keeps its sockets but answers
    /// nothing, as a partitioned member).
    pub fn pause(&self, i: usize) {
        self.signal(i, "-STOP");
    }

    /// Resumes a paused member (SIGCONT).
    pub fn resume(&self, i: usize) {
        self.signal(i, "-CONT");
    }

    fn signal(&self, i: usize, signal: &str) {
        if let Some(child) = &self.members[i].child {
            let status = Command::new("kill")
                .arg(signal)
                .arg(child.id().to_string())
                .status()
                .expect("kill");
            assert!(status.success(), "kill {signal} failed");
        }
    }

    /// Member `i`'s log.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.members[i].log).unwrap_or_default()
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            // A paused member must be resumed to die promptly.
            self.resume(i);
            self.kill(i);
        }
    }
}

/// A plain-HTTP GET on loopback; the body, or `None` on any failure (a
/// paused member times out after a second).
fn http_get(port: u16, path: &str) -> Option<String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(1)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then(|| body.to_string())
}
