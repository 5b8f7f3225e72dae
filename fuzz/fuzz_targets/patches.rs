//! JSON, merge and strategic merge patches applied to a ConfigMap and a
//! showcase Database (list maps with merge keys), with their schemas. The
//! first byte picks the patch type; the rest is the patch.
#![no_main]

use std::sync::{Arc, OnceLock};

use apiforge_runtime::patch::KindSchema;
use libfuzzer_sys::fuzz_target;

#[path = "common/mod.rs"]
mod common;

use common::kind_schema;
use serde_json::{Value, json};

struct Target {
    doc: Value,
    schema: Arc<KindSchema>,
}

fn targets() -> &'static [Target] {
    static TARGETS: OnceLock<Vec<Target>> = OnceLock::new();
    TARGETS.get_or_init(|| {
        vec![
            Target {
                doc: json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "c", "namespace": "default", "labels": {"a": "b"},
                                 "finalizers": ["x"], "ownerReferences": [
                                     {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}]},
                    "data": {"k": "v", "l": "w"}
                }),
                schema: kind_schema("", "v1", "configmaps"),
            },
            Target {
                doc: json!({
                    "apiVersion": "showcase.apiforge.dev/v1", "kind": "Database",
                    "metadata": {"name": "d", "namespace": "default"},
                    "spec": {"engine": "postgres", "replicas": 1,
                             "users": [{"name": "a", "role": "admin"}, {"name": "b"}]}
                }),
                schema: kind_schema("showcase.apiforge.dev", "v1", "databases"),
            },
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, patch)) = data.split_first() else {
        return;
    };
    for target in targets() {
        let _ = match which % 3 {
            0 => apiforge_runtime::patch::apply_json_patch(&target.doc, patch),
            1 => apiforge_runtime::patch::apply_merge_patch(&target.doc, patch),
            _ => apiforge_runtime::patch::apply_strategic_patch(
                &target.doc,
                patch,
                &target.schema.root(),
            ),
        };
    }
});
