//! `apiforge snapshot save` / `restore` on the embedded store, as
//! `etcdctl snapshot save` and `etcdutl snapshot restore` are used: a
//! snapshot taken from a running server holds exactly what was written
//! before it; restored into an empty data directory, a server started there
//! serves it and takes new writes.

mod common;

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

fn config_map(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"v": value},
    }))
    .expect("config map")
}

/// Runs `apiforge snapshot <args>`: success, stdout and stderr.
fn snapshot(args: &[&str], data_dir: &Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .arg("snapshot")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("run apiforge snapshot");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn names(client: kube::Client) -> Vec<String> {
    let mut names: Vec<String> = Api::<ConfigMap>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.starts_with("cm-") || n == "late")
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn snapshots_of_a_running_server_restore_into_a_new_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut server = common::Server::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client().await, "default");
    for i in 0..20 {
        cms.create(
            &PostParams::default(),
            &config_map(&format!("cm-{i:02}"), "one"),
        )
        .await
        .expect("create");
    }
    let mut changed = config_map("cm-03", "two");
    changed.metadata.resource_version = cms
        .get("cm-03")
        .await
        .expect("get")
        .metadata
        .resource_version;
    let changed = cms
        .replace("cm-03", &PostParams::default(), &changed)
        .await
        .expect("update");
    cms.delete("cm-04", &DeleteParams::default())
        .await
        .expect("delete");

    // Taken while the server runs: through the server.
    let file = tmp.path().join("snap.db");
    let file_arg = file.to_str().expect("path");
    let (ok, out, err) = snapshot(&["save", file_arg], &server.data_dir);
    assert!(ok, "save failed: {out}{err}\nserver log:\n{}", server.log());
    assert!(out.contains("from the running server"), "{out}");
    cms.create(&PostParams::default(), &config_map("late", "x"))
        .await
        .expect("create after the snapshot");

    let restored = tmp.path().join("restored");
    let (ok, out, err) = snapshot(&["restore", file_arg], &restored);
    assert!(ok, "restore failed: {out}{err}");
    assert!(out.contains("restored"), "{out}");
    // A second restore into the same directory is refused.
    let (ok, _, err) = snapshot(&["restore", file_arg], &restored);
    assert!(!ok);
    assert!(err.contains("already holds a store"), "{err}");

    let second = common::Server::start_in(&restored, common::free_port(), &[]).await;
    let client = second.client().await;
    let expected: Vec<String> = (0..20)
        .filter(|i| *i != 4)
        .map(|i| format!("cm-{i:02}"))
        .collect();
    assert_eq!(names(client.clone()).await, expected);
    let cms2 = Api::<ConfigMap>::namespaced(client, "default");
    let got = cms2.get("cm-03").await.expect("get restored");
    assert_eq!(
        got.data.and_then(|d| d.get("v").cloned()).as_deref(),
        Some("two")
    );
    assert_eq!(
        got.metadata.resource_version,
        changed.metadata.resource_version
    );
    // Writes go on after the snapshot's revision.
    let created = cms2
        .create(&PostParams::default(), &config_map("cm-99", "new"))
        .await
        .expect("create on the restored server");
    let rv: u64 = created
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("rv");
    let before: u64 = changed
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("rv");
    assert!(rv > before, "{rv} after {before}");
    cms2.delete("cm-99", &DeleteParams::default())
        .await
        .expect("delete on the restored server");
    drop(second);

    // With no server running, save opens the store itself.
    server.terminate();
    let offline = tmp.path().join("offline.db");
    let (ok, out, err) = snapshot(&["save", offline.to_str().expect("path")], &server.data_dir);
    assert!(ok, "offline save failed: {out}{err}");
    assert!(!out.contains("running server"), "{out}");
    // A directory without a store has nothing to save.
    let (ok, _, err) = snapshot(
        &["save", offline.to_str().expect("path")],
        &tmp.path().join("none"),
    );
    assert!(!ok);
    assert!(err.contains("holds no embedded store"), "{err}");
}
