//! A YAML request body, as the handlers decode it (depth and alias
//! expansion bounded), on a thread with the handlers' YAML stack; then
//! the JSON checks every body gets. Must never panic, and an accepted
//! document must encode as JSON that decodes again (within the JSON
//! decoder's depth limit; floats may differ in the last digit, as
//! serde_json's fast float parsing rounds).
#![no_main]

use apiforge_runtime::handlers::{YAML_DECODE_STACK_BYTES, yaml_to_json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let text = text.to_owned();
    let decoded = std::thread::Builder::new()
        .stack_size(YAML_DECODE_STACK_BYTES)
        .spawn(move || yaml_to_json(&text))
        .expect("a decoding thread")
        .join()
        .expect("the YAML decoder does not panic");
    if let Ok(value) = decoded {
        let _ = apiforge_runtime::go_errors::not_an_object(&value);
        let bytes = serde_json::to_vec(&value).expect("a decoded value encodes");
        serde_json::from_slice::<serde_json::Value>(&bytes)
            .expect("its JSON decodes within the depth limit");
    }
});
