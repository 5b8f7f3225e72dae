//! The bundle of generated documents of a [`Scheme`]: OpenAPI v2 and v3 and
//! every discovery document, as one JSON value.
//!
//! The `apiforge` binary's `build.rs` writes it into `OUT_DIR` so that the
//! server does no document work at start-up
//! (`endpoints::Documents::from_bundle`); a program that builds its scheme
//! at run time uses `endpoints::Documents::from_scheme`, which goes through
//! the same function.

use serde_json::{Map, Value, json};

use crate::scheme::Scheme;
use crate::{discovery, openapi};

/// Every generated document of `scheme`, in the bundle layout
/// `endpoints::Documents` reads:
///
/// - `openapi_v2`: the Swagger 2.0 document of `/openapi/v2`;
/// - `openapi_v3`: `{"apis/<g>/<v>": document, ...}`;
/// - `discovery`: `api`, `apis`, `groups`, `resource_lists` and the
///   aggregated (`v2`, `v2beta1`) documents of `/api` and `/apis`.
pub fn build(scheme: &Scheme) -> Value {
    let (openapi_v2, openapi_v3) = openapi_documents(scheme);
    json!({
        "openapi_v2": openapi_v2,
        "openapi_v3": openapi_v3,
        "discovery": discovery_documents(scheme),
    })
}

/// The OpenAPI documents of `scheme`: the Swagger 2.0 document and the v3
/// documents by group version path (the `openapi_v2` and `openapi_v3`
/// members of [`build`]).
pub fn openapi_documents(scheme: &Scheme) -> (Value, Value) {
    let mut openapi_v3 = Map::new();
    for (path, doc) in openapi::v3_documents(scheme) {
        openapi_v3.insert(path, doc);
    }
    let openapi_v2 = openapi::v2::from_v3(openapi_v3.values());
    (openapi_v2, Value::Object(openapi_v3))
}

/// The discovery documents of `scheme` (the `discovery` member of
/// [`build`]).
pub fn discovery_documents(scheme: &Scheme) -> Value {
    let mut group_docs = Map::new();
    let mut resource_lists = Map::new();
    for group in scheme.groups() {
        if !group.name.is_empty() {
            group_docs.insert(group.name.to_string(), discovery::api_group_doc(group));
        }
        for version in &group.versions {
            resource_lists.insert(
                openapi::gv_path(group.name, version),
                discovery::api_resource_list(group, version),
            );
        }
    }
    let (review_groups, review_lists) = discovery::review_documents(scheme);
    group_docs.extend(review_groups);
    resource_lists.extend(review_lists);
    json!({
        "api": discovery::api_versions(scheme),
        "apis": discovery::api_group_list(scheme),
        "groups": group_docs,
        "resource_lists": resource_lists,
        "aggregated_api_v2": discovery::aggregated(scheme, true, "v2"),
        "aggregated_apis_v2": discovery::aggregated(scheme, false, "v2"),
        "aggregated_api_v2beta1": discovery::aggregated(scheme, true, "v2beta1"),
        "aggregated_apis_v2beta1": discovery::aggregated(scheme, false, "v2beta1"),
    })
}
