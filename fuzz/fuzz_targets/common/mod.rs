//! What several fuzz targets share: the `apiforge` binary's scheme (its
//! groups and the built-in kinds) and the schemas of its kinds.

use std::sync::{Arc, OnceLock};

use apiforge_runtime::patch::KindSchema;
use apiforge_runtime::scheme::Scheme;

/// The scheme of the `apiforge` binary, built once.
pub fn scheme() -> &'static Scheme {
    static SCHEME: OnceLock<Scheme> = OnceLock::new();
    SCHEME.get_or_init(|| {
        let mut scheme = apiforge_apis::scheme();
        apiforge_runtime::builtin::install(&mut scheme);
        scheme
    })
}

/// The schema of the served resource `plural` in `group`/`version`.
#[allow(dead_code)] // Not every target that includes this module uses it.
pub fn kind_schema(group: &str, version: &str, plural: &str) -> Arc<KindSchema> {
    let (kind, _) = scheme()
        .resource(group, version, plural)
        .expect("a served resource");
    KindSchema::cached(kind.version(version).expect("a served version"))
}
