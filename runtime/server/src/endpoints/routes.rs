//! The route table of the core API server: which handler answers a
//! request, decided once. The delegation chain asks [`ApiServer::route`]
//! whether the core link serves a request, and the link then serves the
//! [`Route`] it got, so nothing is looked up twice.
//!
//! Resource requests go through [`Resources`], the one map from group,
//! version and resource to a [`Rest`] handler (stored kinds and the review
//! kinds alike); everything else is one of the server's own paths.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::Request;

use super::{ApiServer, documents, healthz};
use crate::handlers::Rest;
use crate::request::RequestInfo;

/// Key of [`Resources`]: group, version and plural.
type Key = (&'static str, &'static str, &'static str);

/// Every served resource by group, version and plural.
#[derive(Default)]
pub struct Resources(HashMap<Key, Arc<dyn Rest>>);

impl Resources {
    /// Serves `group`/`version`/`plural` with `rest` (replacing what served
    /// it before).
    pub fn insert(&mut self, key: Key, rest: Arc<dyn Rest>) {
        self.0.insert(key, rest);
    }

    /// The handler of `group`, `version` and `plural`.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<dyn Rest>> {
        // The map is covariant in its keys: look up with shorter-lived
        // `&str`s without allocating owned keys.
        let map: &HashMap<(&str, &str, &str), Arc<dyn Rest>> = &self.0;
        map.get(&(group, version, plural)).cloned()
    }
}

/// What answers a request the core server serves.
pub(super) enum Route {
    /// A served resource, with the request's parsed info.
    Resource(Arc<dyn Rest>, Arc<RequestInfo>),
    /// A path of the server's that names nothing: a resource of a served
    /// group version that does not exist, or a non-read of one of the
    /// server's own paths (404).
    NotFound,
    /// `/healthz`, `/livez`, `/readyz` and their checks.
    Health(healthz::Endpoint),
    /// `/metrics`.
    Metrics,
    /// `/version`.
    Version,
    /// `/snapshot`: a consistent copy of the embedded store (what
    /// `apiforge snapshot save` asks a running server for).
    Snapshot,
    /// `/api` or `/apis` (`"api"` or `"apis"`).
    DiscoveryRoot(&'static str),
    /// `/openapi/v3`.
    OpenApiV3Index,
    /// `/openapi/v3/<group version path>` (the path after `/openapi/v3/`).
    OpenApiV3(String),
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/apis/<group>`, `/apis/<group>/<version>` or `/api/<version>`.
    Document(documents::Document),
}

impl ApiServer {
    /// The route of `req` if this server serves it: a resource of a served
    /// group version (or a review kind), or one of the server's own paths.
    /// `None` hands the request on along the delegation chain.
    pub(super) fn route(&self, req: &Request) -> Option<Route> {
        let info = crate::request::info::of(req);
        if info.is_resource_request {
            if let Some(rest) = self
                .resources
                .get(&info.group, &info.version, &info.resource)
            {
                return Some(Route::Resource(rest, info));
            }
            return self
                .serves_version(&info.group, &info.version)
                .then_some(Route::NotFound);
        }
        let path = req.uri().path();
        let route = match self.path_route(path) {
            Some(route) => route,
            // The server's fixed paths with a trailing slash are its own,
            // and name nothing.
            None if FIXED_PATHS.contains(&path.trim_end_matches('/')) => Route::NotFound,
            None => return None,
        };
        if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
            return Some(Route::NotFound);
        }
        Some(route)
    }

    /// The route of one of the server's own (non-resource) paths; `None`
    /// when the path is not the server's.
    fn path_route(&self, path: &str) -> Option<Route> {
        let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
        if let Some(endpoint) = healthz::Endpoint::from_name(first) {
            return Some(Route::Health(endpoint));
        }
        let route = match path {
            "/metrics" => Route::Metrics,
            "/version" => Route::Version,
            "/snapshot" => Route::Snapshot,
            "/api" => Route::DiscoveryRoot("api"),
            "/apis" => Route::DiscoveryRoot("apis"),
            "/openapi/v3" => Route::OpenApiV3Index,
            "/openapi/v2" => Route::OpenApiV2,
            _ => {
                if let Some(rest) = path.strip_prefix("/openapi/v3/") {
                    return Some(Route::OpenApiV3(rest.to_string()));
                }
                let docs = self.documents();
                let trimmed = path.trim_matches('/');
                let doc = match trimmed.split('/').collect::<Vec<_>>().as_slice() {
                    ["apis", group] => docs.groups.get(*group),
                    ["apis", _, _] | ["api", _] => docs.resource_lists.get(trimmed),
                    _ => None,
                };
                Route::Document(doc?.clone())
            }
        };
        Some(route)
    }
}

/// The server's paths that are matched exactly.
const FIXED_PATHS: [&str; 7] = [
    "/metrics",
    "/version",
    "/snapshot",
    "/api",
    "/apis",
    "/openapi/v3",
    "/openapi/v2",
];
