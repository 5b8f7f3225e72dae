//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`:
//! the `k8s\0` envelope and the kind's message) for every kind that has a
//! protobuf encoding.
#![no_main]

use std::sync::OnceLock;

use apiforge_runtime::scheme::ProtobufOps;
use libfuzzer_sys::fuzz_target;

fn ops() -> &'static [ProtobufOps] {
    static OPS: OnceLock<Vec<ProtobufOps>> = OnceLock::new();
    OPS.get_or_init(|| {
        let mut scheme = apiforge_runtime::scheme::Scheme::new();
        apiforge_runtime::builtin::install(&mut scheme);
        let mut ops = Vec::new();
        for group in scheme.groups() {
            for version in &group.versions {
                for (_, v) in group.kinds_in(version) {
                    if let Some(p) = v.protobuf() {
                        ops.push(*p);
                    }
                }
            }
        }
        ops
    })
}

fuzz_target!(|data: &[u8]| {
    for ops in ops() {
        if let Ok(value) = apiforge_runtime::protobuf::decode_body(ops, data) {
            let _ = apiforge_runtime::protobuf::encode_body(ops, &value);
        }
        let _ = (ops.decode)(data);
    }
});
