//! The embedded store under faults of its disk: full, read-only, shared
//! with a second server. The store's directory (`<data-dir>/store`) is a
//! small tmpfs mounted by the test (these tests run as root, as CI does;
//! a failed mount fails the test, it does not skip).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

/// A tmpfs mounted at a directory; unmounted on drop.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, size: &str) -> Mount {
        std::fs::create_dir_all(at).expect("mount point");
        run_mount(&[
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size},mode=0700"),
            "tmpfs",
            at.to_str().expect("path"),
        ]);
        Mount(at.to_path_buf())
    }

    fn remount(&self, options: &str) {
        run_mount(&[
            "-o",
            &format!("remount,{options}"),
            self.0.to_str().expect("path"),
        ]);
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn run_mount(args: &[&str]) {
    let out = Command::new("mount")
        .args(args)
        .output()
        .expect("run mount");
    assert!(
        out.status.success(),
        "mount {args:?} failed (these tests need root): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn config_map(name: &str, blob: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"blob": blob},
    }))
    .expect("config map")
}

async fn names(cms: &Api<ConfigMap>) -> Vec<String> {
    let mut names: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.starts_with("big-"))
        .collect();
    names.sort();
    names
}

/// A full disk fails writes with a 5xx Status naming the cause (and a log
/// line) while reads go on; nothing acknowledged is lost, and writes
/// resume once there is space again, without a restart.
#[tokio::test]
async fn a_full_disk_fails_writes_cleanly_and_they_resume() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mount = Mount::tmpfs(&data.join("store"), "6m");
    let mut server = common::Server::start_in(&data, common::free_port(), &[]).await;
    let cms = Api::<ConfigMap>::namespaced(server.client_without_retries().await, "default");
    let blob = "x".repeat(300 * 1024);
    let mut acknowledged = Vec::new();
    let mut refusal = None;
    for i in 0..40 {
        let name = format!("big-{i:02}");
        match cms
            .create(&PostParams::default(), &config_map(&name, &blob))
            .await
        {
            Ok(_) => acknowledged.push(name),
            Err(kube::Error::Api(status)) => {
                refusal = Some(status);
                break;
            }
            Err(e) => panic!("create {name}: {e}"),
        }
    }
    let status = refusal.expect("the 6 MiB disk filled up");
    assert!(status.code >= 500, "{status:?}");
    assert!(
        status.message.contains("No space left on device"),
        "{status:?}"
    );
    assert!(
        server.log().contains("No space left on device"),
        "no log line:\n{}",
        server.log()
    );
    assert!(!acknowledged.is_empty());

    // Reads go on.
    assert_eq!(names(&cms).await, acknowledged);
    let first = cms.get(&acknowledged[0]).await.expect("get");
    assert_eq!(first.data.map(|d| d["blob"].len()), Some(blob.len()));

    // Space returns: writes resume on their own.
    mount.remount("size=64m");
    let deadline = Instant::now() + Duration::from_secs(20);
    let full_at = Instant::now();
    let resumed = loop {
        match cms
            .create(&PostParams::default(), &config_map("big-resumed", "small"))
            .await
        {
            Ok(_) => break Instant::now(),
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "writes did not resume: {e}\n{}",
                    server.log()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    println!(
        "writes resumed {:?} after space returned",
        resumed.duration_since(full_at)
    );
    acknowledged.push("big-resumed".into());
    acknowledged.sort();
    assert_eq!(names(&cms).await, acknowledged);

    // Everything acknowledged survives a restart, once each.
    server.terminate();
    let port = common::free_port();
    let again = common::Server::start_in(&data, port, &[]).await;
    let cms = Api::<ConfigMap>::namespaced(again.client().await, "default");
    assert_eq!(names(&cms).await, acknowledged);
    drop(again);
}

/// A store on a read-only disk: a clear start-up error and a non-zero exit;
/// a second server on a data directory in use: refused, the first one
/// unharmed.
#[tokio::test]
async fn a_read_only_or_shared_store_is_refused_at_start_up() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mount = Mount::tmpfs(&data.join("store"), "16m");
    let mut server = common::Server::start_in(&data, common::free_port(), &[]).await;
    let cms = Api::<ConfigMap>::namespaced(server.client().await, "default");
    cms.create(&PostParams::default(), &config_map("big-kept", "v"))
        .await
        .expect("create");

    let second = Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args(["serve", "--secure-port", &common::free_port().to_string()])
        .arg("--data-dir")
        .arg(&data)
        .output()
        .expect("run a second server");
    assert!(!second.status.success());
    let log = String::from_utf8_lossy(&second.stderr);
    assert!(log.contains("locked by another process"), "{log}");
    assert_eq!(
        cms.get("big-kept")
            .await
            .expect("still served")
            .metadata
            .name
            .as_deref(),
        Some("big-kept")
    );

    server.terminate();
    mount.remount("ro");
    let read_only = Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args(["serve", "--secure-port", &common::free_port().to_string()])
        .arg("--data-dir")
        .arg(&data)
        .output()
        .expect("run on a read-only store");
    assert!(!read_only.status.success());
    let log = String::from_utf8_lossy(&read_only.stderr);
    assert!(log.contains("Read-only file system"), "{log}");
}
