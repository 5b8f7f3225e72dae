//! Running the real kubectl against a test server: its own cache dir and
//! HOME, the server's admin kubeconfig, and a clear failure (never a skip)
//! when the binary is missing.

use std::process::{Command, Output};

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
}
