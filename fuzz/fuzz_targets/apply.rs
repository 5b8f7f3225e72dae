//! Server-side apply: the input is an apply configuration (JSON) applied
//! by two managers, in turn and forced, over a ConfigMap and a showcase
//! Database with their schemas (the merge, the ownership and conflict
//! bookkeeping), and read as `managedFields` entries. Must never panic,
//! and what one apply produced must encode and decode again.
#![no_main]

use std::sync::{Arc, OnceLock};

use apiforge_runtime::patch::KindSchema;
use apiforge_runtime::patch::fieldpath::Set;
use apiforge_runtime::patch::managed::{self, FieldManager, Managed, Versions};
use libfuzzer_sys::fuzz_target;

#[path = "common/mod.rs"]
mod common;

use common::kind_schema;
use serde_json::{Value, json};

struct Target {
    live: Value,
    api_version: &'static str,
    schema: Arc<KindSchema>,
}

impl Versions for Target {
    fn schema(&self, api_version: &str) -> Option<Arc<KindSchema>> {
        (api_version == self.api_version).then(|| self.schema.clone())
    }
    fn convert(&self, obj: &Value, _from: &str, to: &str) -> Option<Value> {
        (to == self.api_version).then(|| obj.clone())
    }
}

fn targets() -> &'static [Target] {
    static TARGETS: OnceLock<Vec<Target>> = OnceLock::new();
    TARGETS.get_or_init(|| {
        vec![
            Target {
                live: json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "c", "namespace": "default", "labels": {"a": "b"}},
                    "data": {"k": "v", "l": "w"}
                }),
                api_version: "v1",
                schema: kind_schema("", "v1", "configmaps"),
            },
            Target {
                live: json!({
                    "apiVersion": "showcase.apiforge.dev/v1", "kind": "Database",
                    "metadata": {"name": "d", "namespace": "default"},
                    "spec": {"engine": "postgres", "replicas": 1,
                             "users": [{"name": "a", "role": "admin"}, {"name": "b"}]}
                }),
                api_version: "showcase.apiforge.dev/v1",
                schema: kind_schema("showcase.apiforge.dev", "v1", "databases"),
            },
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(config) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let _ = managed::decode(Some(&config));
    for target in targets() {
        let fm = FieldManager {
            versions: target,
            api_version: target.api_version.into(),
            subresource: "",
            reset_fields: Set::new(),
        };
        let mut live = target.live.clone();
        let mut ownership = Managed::default();
        for (manager, force) in [("first", false), ("second", false), ("second", true)] {
            if let Ok((merged, next)) = fm.apply(&live, &config, ownership.clone(), manager, force)
            {
                if let Some(merged) = merged {
                    live = merged;
                }
                let entries = managed::encode(&next);
                managed::decode(Some(&entries)).expect("encoded ownership decodes");
                ownership = next;
            }
        }
        let _ = fm.update(&target.live, &live, ownership, "updater");
    }
});
