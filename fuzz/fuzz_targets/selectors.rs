//! Label and field selectors (`labelSelector=`, `fieldSelector=`).
#![no_main]

use apiforge_runtime::registry::{FieldSelector, LabelSelector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = LabelSelector::parse(text);
    let _ = FieldSelector::parse(text, &["metadata.name", "metadata.namespace", "spec.x"]);
});
