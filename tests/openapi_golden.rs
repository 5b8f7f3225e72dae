//! The OpenAPI documents checked in under `openapi/` must equal what the
//! binary generates. Regenerate with `cargo run -- openapi --out openapi`
//! (or run this test with `APIFORGE_UPDATE_OPENAPI=1`).

use std::path::Path;
use std::process::Command;

fn files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        out.push((name, std::fs::read_to_string(e.path()).unwrap_or_default()));
    }
    out.sort();
    out
}

#[test]
fn checked_in_openapi_is_current() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let update = std::env::var_os("APIFORGE_UPDATE_OPENAPI").is_some();
    let tmp = tempfile::tempdir().expect("tempdir");
    let out_dir = if update {
        repo.join("openapi")
    } else {
        tmp.path().to_path_buf()
    };
    if update {
        let _ = std::fs::remove_dir_all(out_dir.join("v3"));
        let _ = std::fs::remove_file(out_dir.join("swagger.json"));
    }
    let status = Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args(["openapi", "--out"])
        .arg(&out_dir)
        .status()
        .expect("run apiforge openapi");
    assert!(status.success());
    let fresh = files(&out_dir.join("v3"));
    let checked_in = files(&repo.join("openapi").join("v3"));
    assert!(!fresh.is_empty(), "no documents generated");
    let names = |v: &[(String, String)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&fresh),
        names(&checked_in),
        "openapi/v3 is stale: run `cargo run -- openapi --out openapi`"
    );
    for ((name, a), (_, b)) in fresh.iter().zip(&checked_in) {
        assert!(
            a == b,
            "openapi/v3/{name} is stale: run `cargo run -- openapi --out openapi`"
        );
    }
    let read = |dir: &Path| std::fs::read_to_string(dir.join("swagger.json")).unwrap_or_default();
    let fresh_v2 = read(&out_dir);
    assert!(!fresh_v2.is_empty(), "no swagger.json generated");
    assert!(
        fresh_v2 == read(&repo.join("openapi")),
        "openapi/swagger.json is stale: run `cargo run -- openapi --out openapi`"
    );
}
