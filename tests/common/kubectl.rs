//! Running the real kubectl against a test server: its own cache dir and
//! HOME, the server's admin kubeconfig, and a clear failure (never a skip)
//! when the binary is missing. Also: `-o json` output as a value, a
//! scripted `$EDITOR`, and reading a long-running `get -w` line by line.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Server;

/// The kubectl binary: `$KUBECTL`, else `kubectl` on PATH.
pub fn default_binary() -> String {
    checked(
        std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into()),
        "KUBECTL",
    )
}

/// A specific kubectl version shipped beside the default one
/// (`/usr/lib/google-cloud-sdk/bin/kubectl.<version>`), or
/// `$KUBECTL_<major>_<minor>`.
pub fn versioned_binary(version: &str) -> String {
    let var = format!("KUBECTL_{}", version.replace('.', "_"));
    let bin = std::env::var(&var)
        .unwrap_or_else(|_| format!("/usr/lib/google-cloud-sdk/bin/kubectl.{version}"));
    checked(bin, &var)
}

fn checked(bin: String, var: &str) -> String {
    match Command::new(&bin).args(["version", "--client"]).output() {
        Ok(out) if out.status.success() => bin,
        _ => panic!(
            "kubectl not found (tried {bin:?}): install kubectl or set {var}; this test does not skip"
        ),
    }
}

/// kubectl bound to one server, with a private cache dir and HOME.
pub struct Kubectl {
    bin: String,
    kubeconfig: String,
    cache: tempfile::TempDir,
}

impl Kubectl {
    /// The default kubectl for `server`.
    pub fn new(server: &Server) -> Self {
        Kubectl::with_binary(server, default_binary())
    }

    /// A given kubectl binary for `server`.
    pub fn with_binary(server: &Server, bin: String) -> Self {
        Kubectl {
            bin,
            kubeconfig: server.kubeconfig().display().to_string(),
            cache: tempfile::tempdir().expect("cache dir"),
        }
    }

    /// The command with the kubeconfig, cache dir and HOME set.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path())
            .args(args)
            .env("HOME", self.cache.path());
        cmd
    }

    /// Runs kubectl with extra environment variables.
    pub fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run kubectl")
    }

    /// Runs kubectl.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, &[])
    }

    /// Runs kubectl with extra environment variables; fails the test unless
    /// it succeeds; returns stdout.
    pub fn ok_with(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let out = self.run_with(args, env);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl; fails the test unless it succeeds; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, &[])
    }

    /// Runs kubectl with `-o json` appended; fails the test unless it
    /// succeeds; returns the parsed output.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut full = args.to_vec();
        full.extend(["-o", "json"]);
        let out = self.ok(&full);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {full:?}: {e}\n{out}"))
    }

    /// Starts a long-running kubectl (`get -w`, `wait`) whose stdout lines
    /// are read as they come; its stderr goes to a file.
    pub fn spawn(&self, args: &[&str]) -> Running {
        let stderr = tempfile::NamedTempFile::new().expect("stderr file");
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr.reopen().expect("stderr file")))
            .spawn()
            .expect("spawn kubectl");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines: rx,
            stderr: stderr.into_temp_path(),
        }
    }
}

/// A kubectl process started by [`Kubectl::spawn`]; killed on drop.
pub struct Running {
    child: Child,
    lines: Receiver<String>,
    stderr: tempfile::TempPath,
}

impl Running {
    /// Waits up to 20 s for a stdout line satisfying `pred` (skipping
    /// others) and returns it; fails the test naming `what` otherwise.
    pub fn line(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) if pred(&line) => return line,
                Ok(_) => {}
                Err(_) => panic!("kubectl: no {what} within 20s"),
            }
        }
    }

    /// Waits up to 20 s for `text` to appear on stderr (with `-v=6`,
    /// kubectl logs each request there once its response arrives).
    pub fn stderr_shows(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            if err.contains(text) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "kubectl stderr did not show {text:?} within 20s:\n{err}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits up to 60 s for the process to exit; returns whether it
    /// succeeded and the rest of its stdout and its stderr.
    pub fn finish(mut self) -> (bool, String, String) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait kubectl") {
                break status;
            }
            assert!(Instant::now() < deadline, "kubectl did not exit within 60s");
            std::thread::sleep(Duration::from_millis(50));
        };
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let mut stdout = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(1)) {
            stdout.push(line);
        }
        (status.success(), stdout.join("\n"), stderr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An `$EDITOR` script in `dir` that runs `sed -i <expr>` on the file
/// kubectl opens; returns its path.
pub fn sed_editor(dir: &Path, name: &str, expr: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("#!/bin/sh\nexec sed -i -e '{expr}' \"$1\"\n"),
    )
    .expect("write editor script");
    let status = Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status()
        .expect("chmod");
    assert!(status.success());
    path.display().to_string()
}
