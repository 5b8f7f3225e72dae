//! A JSON request body, as the handlers read it: parsed (a parse error is
//! described as upstream's), then decoded into the hub by every kind and
//! version of the `apiforge` binary's scheme. Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common/mod.rs"]
mod common;

use common::scheme;

fuzz_target!(|data: &[u8]| {
    let value: serde_json::Value = match serde_json::from_slice(data) {
        Ok(v) => v,
        Err(e) => {
            let _ = apiforge_runtime::go_errors::json_error(&e, data);
            return;
        }
    };
    let _ = apiforge_runtime::go_errors::not_an_object(&value);
    for group in scheme().groups() {
        for version in &group.versions {
            for (kind, _) in group.kinds_in(version) {
                if let Ok(object) = kind.decode_object(version, value.clone()) {
                    let _ = kind.validate_create_object(&object);
                    let _ = kind.encode_object(version, &object);
                }
            }
        }
    }
});
