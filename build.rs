//! Generates the OpenAPI v3 and discovery documents of the compiled-in groups
//! into `OUT_DIR/documents.json`; the binary serves them from memory.

use std::path::PathBuf;

use serde_json::json;

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-changed=build.rs");
    let mut scheme = apiforge_apis::scheme();
    apiforge_runtime::builtin::install(&mut scheme);
    let documents = apiforge_runtime::openapi::v3_documents(&scheme);
    let mut openapi_v3 = serde_json::Map::new();
    for (path, doc) in documents {
        openapi_v3.insert(path, doc);
    }
    let rt = |f: fn(&apiforge_runtime::scheme::Scheme) -> serde_json::Value| f(&scheme);
    let mut group_docs = serde_json::Map::new();
    let mut resource_lists = serde_json::Map::new();
    for group in scheme.groups() {
        if !group.name.is_empty() {
            group_docs.insert(
                group.name.to_string(),
                apiforge_runtime::discovery::api_group_doc(group),
            );
        }
        for version in &group.versions {
            resource_lists.insert(
                apiforge_runtime::openapi::gv_path(group.name, version),
                apiforge_runtime::discovery::api_resource_list(group, version),
            );
        }
    }
    let bundle = json!({
        "openapi_v3": openapi_v3,
        "discovery": {
            "api": rt(apiforge_runtime::discovery::api_versions),
            "apis": rt(apiforge_runtime::discovery::api_group_list),
            "groups": group_docs,
            "resource_lists": resource_lists,
            "aggregated_api_v2": apiforge_runtime::discovery::aggregated(&scheme, true, "v2"),
            "aggregated_apis_v2": apiforge_runtime::discovery::aggregated(&scheme, false, "v2"),
            "aggregated_api_v2beta1": apiforge_runtime::discovery::aggregated(&scheme, true, "v2beta1"),
            "aggregated_apis_v2beta1": apiforge_runtime::discovery::aggregated(&scheme, false, "v2beta1"),
        },
    });
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("documents.json");
    std::fs::write(out, serde_json::to_vec(&bundle)?)?;
    Ok(())
}
