//! Generates the OpenAPI v2/v3 and discovery documents of the compiled-in
//! groups into `OUT_DIR/documents.json`; the binary serves them from memory.

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-changed=build.rs");
    let mut scheme = apiforge_apis::scheme();
    apiforge_runtime::builtin::install(&mut scheme);
    let bundle = apiforge_runtime::bundle::build(&scheme);
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("documents.json");
    std::fs::write(out, serde_json::to_vec(&bundle)?)?;
    Ok(())
}
