//! What several scenarios share: the Flunder collection, a fresh server
//! on a temporary data directory, and 1 KiB objects.

use bytes::Bytes;
use http::Method;
use serde_json::json;

use crate::Settings;
use crate::client::{Conn, Target};
use crate::procs::{Apiforge, Backend};

/// The served version of the Flunders the scenarios write.
pub(crate) const GROUP_PATH: &str = "/apis/wardle.example.com/v1beta1";

/// The Flunder collection of `ns`.
pub(crate) fn collection(ns: &str) -> String {
    format!("{GROUP_PATH}/namespaces/{ns}/flunders")
}

/// A fresh apiforge on a temporary data directory (kept alive with it).
pub(crate) struct Fresh {
    pub(crate) server: Apiforge,
    _tmp: tempfile::TempDir,
}

/// Starts a fresh apiforge with `backend`.
pub(crate) async fn fresh(settings: &Settings, backend: &Backend) -> anyhow::Result<Fresh> {
    let tmp = tempfile::tempdir()?;
    let server = Apiforge::start(&settings.binary, &tmp.path().join("data"), backend).await?;
    Ok(Fresh { server, _tmp: tmp })
}

/// A Flunder with `annotations` plus a `bench/pad` annotation of `pad` bytes.
pub(crate) fn flunder(name: &str, pad: usize, annotations: &[(&str, String)]) -> Bytes {
    let mut ann = serde_json::Map::new();
    for (k, v) in annotations {
        ann.insert((*k).to_string(), json!(v));
    }
    if pad > 0 {
        ann.insert("bench/pad".into(), json!("x".repeat(pad)));
    }
    let obj = json!({
        "apiVersion": "wardle.example.com/v1beta1",
        "kind": "Flunder",
        "metadata": {"name": name, "annotations": ann},
        "spec": {},
    });
    Bytes::from(serde_json::to_vec(&obj).unwrap_or_default())
}

/// The pad that makes a served object about 1 KiB: creates a probe object
/// and measures it.
pub(crate) async fn pad_for_1kib(target: &Target, ns: &str) -> anyhow::Result<usize> {
    let mut conn = Conn::connect(target).await?;
    let body = conn
        .send(
            Method::POST,
            &collection(ns),
            Some(flunder("bench-probe", 1, &[])),
        )
        .await?
        .ok()?;
    let _ = conn
        .send(
            Method::DELETE,
            &format!("{}/bench-probe", collection(ns)),
            None,
        )
        .await?;
    Ok(1024usize.saturating_sub(body.len()).max(1) + 1)
}
