//! Handler tests that need no server: a request goes straight to
//! [`handle`](super::handle) with a store on the embedded backend.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use serde_json::{Value, json};

use super::{Served, handle};
use crate::admission::{self, Attributes, Context, Plugin, Plugins, async_trait};
use crate::registry::Stores;
use crate::request::Query;
use apiforge_core::scheme::{Scheme, typed_decodes};
use apiforge_storage::Storage;
use apiforge_storage::embedded::{EmbeddedOptions, EmbeddedStore};

struct Fixture {
    _dir: tempfile::TempDir,
    served: Served,
    _shutdown: tokio::sync::watch::Sender<bool>,
}

/// The core group's kinds on a fresh embedded store, without a watch cache
/// (whose event decoding would run on the test's thread too), behind
/// `plugins`.
fn fixture(plugins: Plugins) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).expect("open"));
    let mut scheme = Scheme::new();
    apiforge_core::builtin::core_v1::install(&mut scheme);
    let (tx, rx) = tokio::sync::watch::channel(false);
    Fixture {
        _dir: dir,
        served: Served {
            stores: Stores::new(&scheme, storage, "/registry", None, plugins),
            min_request_timeout: Duration::from_secs(1800),
            shutdown: rx,
        },
        _shutdown: tx,
    }
}

/// Serves `req` on the test's thread and returns the response's status,
/// its JSON body and how many typed decodes serving it took.
async fn serve(f: &Fixture, req: Request) -> (u16, Value, u64) {
    let ri = crate::request::info::of(&req);
    let query = Query::parse(req.uri().query().unwrap_or_default());
    let store = f
        .served
        .stores
        .get(&ri.group, &ri.version, &ri.resource)
        .expect("a served resource");
    let before = typed_decodes();
    let resp = handle(&f.served, (&store.0, store.1), ri.clone(), query, req).await;
    let decodes = typed_decodes() - before;
    let code = resp.status().as_u16();
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("body");
    let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (code, value, decodes)
}

fn create(content_type: &str, body: impl Into<Body>) -> Request {
    http::Request::post("/api/v1/namespaces/default/configmaps")
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(body.into())
        .expect("request")
}

fn config_map(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "demo"}},
        "data": {"key": "value"},
    })
}

#[tokio::test]
async fn a_create_decodes_its_body_once_in_every_encoding() {
    let f = fixture(Plugins::default());
    let json_body = serde_json::to_vec(&config_map("from-json")).expect("json");
    let yaml_body =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  key: value\n";
    let ops = f
        .served
        .stores
        .get("", "v1", "configmaps")
        .and_then(|(store, _)| store.kind().version("v1")?.protobuf().copied())
        .expect("ConfigMap has a protobuf codec");
    let proto_body =
        apiforge_core::protobuf::encode_body(&ops, &config_map("from-protobuf")).expect("pb");
    for (content_type, body, name) in [
        ("application/json", json_body, "from-json"),
        (
            "application/yaml",
            yaml_body.as_bytes().to_vec(),
            "from-yaml",
        ),
        (
            apiforge_core::protobuf::MEDIA_TYPE,
            proto_body,
            "from-protobuf",
        ),
    ] {
        let (code, created, decodes) = serve(&f, create(content_type, body)).await;
        assert_eq!(code, 201, "{content_type}: {created}");
        assert_eq!(created["metadata"]["name"], name);
        assert_eq!(created["data"]["key"], "value");
        assert_eq!(created["metadata"]["namespace"], "default");
        assert!(created["metadata"]["resourceVersion"].is_string());
        assert_eq!(decodes, 1, "typed decodes of one {content_type} create");
    }
    // A dry run takes the same single decode.
    let req = http::Request::post("/api/v1/namespaces/default/configmaps?dryRun=All")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            serde_json::to_vec(&config_map("dry")).expect("json"),
        ))
        .expect("request");
    let (code, _, decodes) = serve(&f, req).await;
    assert_eq!((code, decodes), (201, 1));
}

/// A mutating plugin that labels ConfigMaps, and one that only looks.
struct Labeller(bool);

#[async_trait]
impl Plugin for Labeller {
    fn name(&self) -> &str {
        "Labeller"
    }

    async fn admit(&self, attrs: &mut Attributes, _ctx: &Context) -> Result<(), admission::Error> {
        if self.0
            && let Some(labels) = attrs
                .object
                .as_mut()
                .and_then(|o| o.pointer_mut("/metadata/labels"))
                .and_then(Value::as_object_mut)
        {
            labels.insert("admitted".into(), Value::from("yes"));
        }
        Ok(())
    }
}

#[tokio::test]
async fn admission_sees_the_object_and_only_a_change_decodes_it_again() {
    let looking = fixture(Plugins::default().with(Arc::new(Labeller(false))));
    let (code, created, decodes) = serve(
        &looking,
        create(
            "application/json",
            serde_json::to_vec(&config_map("looked-at")).expect("json"),
        ),
    )
    .await;
    assert_eq!((code, decodes), (201, 1), "{created}");
    assert!(created["metadata"]["labels"].get("admitted").is_none());

    let mutating = fixture(Plugins::default().with(Arc::new(Labeller(true))));
    let (code, created, decodes) = serve(
        &mutating,
        create(
            "application/json",
            serde_json::to_vec(&config_map("labelled")).expect("json"),
        ),
    )
    .await;
    assert_eq!((code, decodes), (201, 2), "{created}");
    assert_eq!(created["metadata"]["labels"]["admitted"], "yes");
    assert_eq!(created["metadata"]["labels"]["app"], "demo");
}
