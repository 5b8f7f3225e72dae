//! Encryption at rest (`--encryption-provider-config`) on both stores: a
//! Secret is stored as kube-apiserver stores it (`k8s:enc:<provider>:v1:
//! <key>:` and ciphertext), reads give it back unchanged, rotating keys and
//! re-writing the Secret (`kubectl get … -o json | kubectl replace -f -`)
//! re-encrypts it with the new first key, and a server without the old key
//! answers upstream's 500.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use apiforge_runtime::storage::Storage;
use apiforge_runtime::storage::embedded::{EmbeddedOptions, EmbeddedStore};
use apiforge_runtime::storage::etcd3::{Etcd3Options, Etcd3Store};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;

/// The key of upstream's integration tests ("secret is secure").
const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZQ==";
const KEY2: &str = "e0/+tts8FS254BZimFZWtUsOCOUDSkvzB72PyimMlkY=";
/// The value of upstream's test Secret.
const API_KEY: &str = "086a7ffc-0225-11e8-ba89-0ed5f89f718b";
const API_KEY_B64: &str = "MDg2YTdmZmMtMDIyNS0xMWU4LWJhODktMGVkNWY4OWY3MThi";

fn write_config(dir: &Path, name: &str, providers: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n{providers}"
        ),
    )
    .expect("write config");
    path
}

fn aescbc(keys: &[(&str, &str)]) -> String {
    keyed("aescbc", keys)
}

fn keyed(kind: &str, keys: &[(&str, &str)]) -> String {
    let mut out = format!("      - {kind}:\n          keys:\n");
    for (name, secret) in keys {
        out.push_str(&format!(
            "            - name: {name}\n              secret: {secret}\n"
        ));
    }
    out
}

const IDENTITY: &str = "      - identity: {}\n";

fn secret(name: &str) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name},
        "data": {"api_key": API_KEY_B64},
    }))
    .expect("secret")
}

fn api_key(s: &Secret) -> Vec<u8> {
    s.data
        .as_ref()
        .and_then(|d| d.get("api_key"))
        .map(|b: &ByteString| b.0.clone())
        .unwrap_or_default()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The raw stored value of `key` in the embedded store of a stopped
/// server.
async fn embedded_raw(data_dir: &Path, key: &str) -> Vec<u8> {
    let store = EmbeddedStore::open(&data_dir.join("store"), EmbeddedOptions::default())
        .expect("open the stopped server's store");
    let kv = store.get(key, 0).await.expect("get").expect("stored");
    kv.value.to_vec()
}

/// The raw stored value of `key` in etcd.
async fn etcd_raw(url: &str, key: &str) -> Vec<u8> {
    let store = Etcd3Store::connect(Etcd3Options {
        endpoints: vec![url.to_string()],
        prefix: "/registry".into(),
        ..Default::default()
    })
    .await
    .expect("connect to etcd");
    let kv = store.get(key, 0).await.expect("get").expect("stored");
    kv.value.to_vec()
}

fn assert_encrypted(raw: &[u8], prefix: &str) {
    assert!(
        raw.starts_with(prefix.as_bytes()),
        "stored value does not start with {prefix}: {:?}",
        String::from_utf8_lossy(&raw[..raw.len().min(40)])
    );
    assert!(!contains(raw, API_KEY.as_bytes()));
    assert!(!contains(raw, API_KEY_B64.as_bytes()));
    assert!(!contains(raw, b"test-secret"));
}

/// `kubectl get secret NAME -o json | kubectl replace -f -`: the object
/// unchanged, written again.
fn replace_unchanged(server: &common::Server, name: &str) {
    let kubectl = common::kubectl::Kubectl::new(server);
    let json = kubectl.ok(&["get", "secret", name, "-n", "default", "-o", "json"]);
    let mut child = kubectl
        .command(&["replace", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl replace");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(json.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("kubectl replace");
    assert!(
        out.status.success(),
        "kubectl replace: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn secrets_are_encrypted_on_the_embedded_store_and_keys_rotate() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let port = common::free_port();
    let first = write_config(
        tmp.path(),
        "key1.yaml",
        &format!("{}{IDENTITY}", aescbc(&[("key1", KEY1)])),
    );
    let args = [
        "--encryption-provider-config",
        first.to_str().expect("path"),
    ];
    let mut server = common::Server::start_in(&dir, port, &args).await;
    let client = server.client().await;
    let secrets = Api::<Secret>::namespaced(client.clone(), "default");
    let created = secrets
        .create(&PostParams::default(), &secret("test-secret"))
        .await
        .expect("create");
    secrets
        .create(&PostParams::default(), &secret("old-secret"))
        .await
        .expect("create");
    let got = secrets.get("test-secret").await.expect("get");
    assert_eq!(api_key(&got), API_KEY.as_bytes());
    let kubectl = common::kubectl::Kubectl::new(&server);
    assert_eq!(
        kubectl.ok(&[
            "get",
            "secret",
            "test-secret",
            "-n",
            "default",
            "-o",
            "jsonpath={.data.api_key}"
        ]),
        API_KEY_B64
    );
    // Resources no rule names are stored as they were.
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "plain"}, "data": {"k": "visible-value"},
    }))
    .expect("config map");
    Api::<ConfigMap>::namespaced(client, "default")
        .create(&PostParams::default(), &cm)
        .await
        .expect("create config map");
    let metrics = common::raw::request(&server, "GET", "/metrics", &[], b"").await;
    let metrics = metrics.text();
    assert!(
        metrics.contains(
            r#"apiserver_storage_transformation_operations_total{resource="secrets",status="OK",transformation_type="to_storage",transformer_prefix="k8s:enc:aescbc:v1:"}"#
        ),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("transformation"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    server.kill();

    let raw = embedded_raw(&dir, "/registry/secrets/default/test-secret").await;
    assert_encrypted(&raw, "k8s:enc:aescbc:v1:key1:");
    let raw_cm = embedded_raw(&dir, "/registry/configmaps/default/plain").await;
    assert!(contains(&raw_cm, b"visible-value"));

    // Rotation: the new key first, the old one second.
    let rotated = write_config(
        tmp.path(),
        "key2.yaml",
        &format!("{}{IDENTITY}", aescbc(&[("key2", KEY2), ("key1", KEY1)])),
    );
    let args = [
        "--encryption-provider-config",
        rotated.to_str().expect("path"),
    ];
    let mut server = common::Server::start_in(&dir, port, &args).await;
    let secrets = Api::<Secret>::namespaced(server.client().await, "default");
    let before = secrets.get("test-secret").await.expect("get");
    assert_eq!(api_key(&before), API_KEY.as_bytes());
    assert_eq!(
        before.metadata.resource_version,
        created.metadata.resource_version
    );
    replace_unchanged(&server, "test-secret");
    let after = secrets.get("test-secret").await.expect("get");
    assert_eq!(api_key(&after), API_KEY.as_bytes());
    assert_ne!(
        after.metadata.resource_version, before.metadata.resource_version,
        "an unchanged replace of a stale value writes it"
    );
    // Written with the current key, it is no longer stale: replacing it
    // again changes nothing.
    replace_unchanged(&server, "test-secret");
    let again = secrets.get("test-secret").await.expect("get");
    assert_eq!(
        again.metadata.resource_version,
        after.metadata.resource_version
    );
    server.kill();
    let raw = embedded_raw(&dir, "/registry/secrets/default/test-secret").await;
    assert_encrypted(&raw, "k8s:enc:aescbc:v1:key2:");
    let raw_old = embedded_raw(&dir, "/registry/secrets/default/old-secret").await;
    assert!(raw_old.starts_with(b"k8s:enc:aescbc:v1:key1:"));

    // Only the new key: the re-written Secret reads, the other does not.
    let only_new = write_config(tmp.path(), "only-key2.yaml", &aescbc(&[("key2", KEY2)]));
    let args = [
        "--encryption-provider-config",
        only_new.to_str().expect("path"),
    ];
    let server = common::Server::start_in(&dir, port, &args).await;
    let secrets = Api::<Secret>::namespaced(server.client_without_retries().await, "default");
    let got = secrets.get("test-secret").await.expect("get");
    assert_eq!(api_key(&got), API_KEY.as_bytes());
    let status = common::raw::request(
        &server,
        "GET",
        "/api/v1/namespaces/default/secrets/old-secret",
        &[],
        b"",
    )
    .await;
    assert_eq!(status.status, 500, "{}", status.text());
    let body: serde_json::Value = serde_json::from_str(&status.text()).expect("status");
    assert_eq!(body["reason"], "InternalError");
    assert_eq!(
        body["message"],
        "Internal error occurred: no matching key was found for the provided AES transformer"
    );
    // A LIST names the key it cannot read.
    let list = common::raw::request(
        &server,
        "GET",
        "/api/v1/namespaces/default/secrets",
        &[],
        b"",
    )
    .await;
    assert_eq!(list.status, 500, "{}", list.text());
    assert_eq!(
        list.json()["message"],
        "Internal error occurred: unable to transform key \"/registry/secrets/default/old-secret\": no matching key was found for the provided AES transformer"
    );
}

#[tokio::test]
async fn secrets_are_encrypted_on_etcd() {
    let etcd = common::Etcd::start().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let port = common::free_port();
    let gcm = write_config(tmp.path(), "gcm.yaml", &keyed("aesgcm", &[("key1", KEY1)]));
    let args = [
        "--etcd-servers",
        &etcd.url,
        "--encryption-provider-config",
        gcm.to_str().expect("path"),
    ];
    let mut server = common::Server::start_in(&dir, port, &args).await;
    let secrets = Api::<Secret>::namespaced(server.client().await, "default");
    secrets
        .create(&PostParams::default(), &secret("test-secret"))
        .await
        .expect("create");
    assert_eq!(
        api_key(&secrets.get("test-secret").await.expect("get")),
        API_KEY.as_bytes()
    );
    let key = "/registry/secrets/default/test-secret";
    assert_encrypted(&etcd_raw(&etcd.url, key).await, "k8s:enc:aesgcm:v1:key1:");
    server.kill();

    // Rotation to secretbox, aesgcm still readable.
    let rotated = write_config(
        tmp.path(),
        "secretbox.yaml",
        &format!(
            "{}{}",
            keyed("secretbox", &[("key2", KEY2)]),
            keyed("aesgcm", &[("key1", KEY1)])
        ),
    );
    let args = [
        "--etcd-servers",
        &etcd.url,
        "--encryption-provider-config",
        rotated.to_str().expect("path"),
    ];
    let mut server = common::Server::start_in(&dir, port, &args).await;
    let secrets = Api::<Secret>::namespaced(server.client().await, "default");
    let before = secrets.get("test-secret").await.expect("get");
    replace_unchanged(&server, "test-secret");
    let after = secrets.get("test-secret").await.expect("get");
    assert_ne!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    assert_eq!(api_key(&after), API_KEY.as_bytes());
    assert_encrypted(
        &etcd_raw(&etcd.url, key).await,
        "k8s:enc:secretbox:v1:key2:",
    );
    server.kill();

    // aescbc alone cannot read secretbox data.
    let cbc = write_config(tmp.path(), "cbc.yaml", &aescbc(&[("key1", KEY1)]));
    let args = [
        "--etcd-servers",
        &etcd.url,
        "--encryption-provider-config",
        cbc.to_str().expect("path"),
    ];
    let server = common::Server::start_in(&dir, port, &args).await;
    let status = common::raw::request(
        &server,
        "GET",
        "/api/v1/namespaces/default/secrets/test-secret",
        &[],
        b"",
    )
    .await;
    assert_eq!(status.status, 500, "{}", status.text());
    let body: serde_json::Value = serde_json::from_str(&status.text()).expect("status");
    assert_eq!(
        body["message"],
        "Internal error occurred: no matching prefix found"
    );
}

#[tokio::test]
async fn a_bad_configuration_stops_start_up_naming_the_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bad = write_config(
        tmp.path(),
        "bad.yaml",
        &keyed("secretbox", &[("key1", KEY1)]),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args(["serve", "--secure-port", "0", "--data-dir"])
        .arg(tmp.path().join("data"))
        .arg("--encryption-provider-config")
        .arg(&bad)
        .output()
        .expect("run apiforge serve");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "--encryption-provider-config {}: error while parsing file: resources[0].providers[0].secretbox.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 16, expected one of [32]",
            bad.display()
        )),
        "{stderr}"
    );
}
