//! The status-subresource rules of the store: create drops status, the
//! main resource keeps the stored status, `/status` keeps everything else,
//! generations, and the admission attributes' subresource.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Store;
use crate::admission::{
    self, AdmissionRegistry, Attributes, Chain, Context, NoLookup, Operation, Plugin, async_trait,
};
use apiforge_core::meta::ObjectMeta;
use apiforge_core::scheme::KindBuilder;
use apiforge_storage::Storage;
use apiforge_storage::embedded::{EmbeddedOptions, EmbeddedStore};

#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    apiforge_core::Resource,
)]
#[resource(
    group = "gadgets.example.com",
    version = "v1",
    namespaced,
    subresource_status,
    default_strategy
)]
struct Gadget {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: GadgetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<GadgetStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct GadgetSpec {
    #[serde(default)]
    size: i32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct GadgetStatus {
    #[serde(default)]
    ready: bool,
}

/// Records `<operation> <subresource>` of every mutating admission call.
struct Recorder(Arc<Mutex<Vec<String>>>);

#[async_trait]
impl Plugin for Recorder {
    fn name(&self) -> &str {
        "Recorder"
    }

    fn handles(&self, _: Operation) -> bool {
        true
    }

    async fn admit(&self, attrs: &mut Attributes, _: &Context) -> Result<(), admission::Error> {
        if let Ok(mut log) = self.0.lock() {
            log.push(format!("{} {}", attrs.operation(), attrs.subresource));
        }
        Ok(())
    }
}

fn store(dir: &tempfile::TempDir, log: &Arc<Mutex<Vec<String>>>) -> Store {
    let storage: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).expect("storage"));
    let kind = Arc::new(KindBuilder::<Gadget>::new().version::<Gadget>().build());
    let mut registry = AdmissionRegistry::new();
    registry.register(Recorder(log.clone()), true);
    let plugins = registry.select(&[], &[]).expect("plugins");
    Store::new(kind, storage, "/registry", None)
        .with_admission(Arc::new(Chain::new(plugins, Arc::new(NoLookup))))
}

fn hub(store: &Store, body: Value) -> Value {
    store.kind().decode("v1", body).expect("decode")
}

#[tokio::test]
async fn status_is_written_only_through_status() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Mutex::new(Vec::new()));
    let store = store(&dir, &log);

    let created = store
        .create(
            "ns",
            hub(
                &store,
                json!({"metadata": {"name": "g"}, "spec": {"size": 1}, "status": {"ready": true}}),
            ),
            false,
        )
        .await
        .expect("create");
    assert!(created.get("status").is_none(), "{created}");
    assert_eq!(created["metadata"]["generation"], 1);

    // /status: only status changes, the generation stays
    let mut body = created.clone();
    body["spec"]["size"] = json!(2);
    body["metadata"]["labels"] = json!({"a": "b"});
    body["status"] = json!({"ready": true});
    let status = store
        .subresource("status")
        .update("ns", "g", hub(&store, body), false)
        .await
        .expect("status update")
        .0;
    assert_eq!(status["status"], json!({"ready": true}));
    assert_eq!(status["spec"], created["spec"]);
    assert!(status["metadata"].get("labels").is_none(), "{status}");
    assert_eq!(status["metadata"]["generation"], 1);

    // main resource: status kept, spec change bumps the generation
    let mut body = status.clone();
    body["spec"]["size"] = json!(3);
    body["status"] = json!({"ready": false});
    let main = store
        .update("ns", "g", hub(&store, body), false)
        .await
        .expect("update")
        .0;
    assert_eq!(main["status"], json!({"ready": true}));
    assert_eq!(main["spec"]["size"], 3);
    assert_eq!(main["metadata"]["generation"], 2);

    // a subresource write never creates
    let err = store
        .subresource("status")
        .update(
            "ns",
            "missing",
            hub(&store, json!({"metadata": {"name": "missing"}})),
            false,
        )
        .await
        .expect_err("missing");
    assert_eq!(err.code(), 404);

    // scale writes follow the main rules, with their own admission attribute
    let mut body = main.clone();
    body["spec"]["size"] = json!(4);
    let scaled = store
        .subresource("scale")
        .update("ns", "g", hub(&store, body), false)
        .await
        .expect("scale update")
        .0;
    assert_eq!(scaled["metadata"]["generation"], 3);

    let log = log.lock().map(|l| l.clone()).unwrap_or_default();
    assert_eq!(log, ["CREATE ", "UPDATE status", "UPDATE ", "UPDATE scale"]);
}
