//! The HTTP surface: the route table ([`routes`]) that sends API paths to
//! resource handlers and everything else (health, version, discovery,
//! OpenAPI) to plain handlers, the delegation chain around it, and
//! response rendering.

mod compression;
pub mod delegation;
pub mod documents;
pub mod healthz;
mod openapi_v2;
pub mod routes;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};

use crate::handlers::negotiation::{self, Allowed, Format, Target};
use crate::handlers::reviews::Reviews;
use crate::handlers::{Served, Stored, respond};
use crate::registry::Stores;
use crate::request::response::{bytes_response, error_response};
use crate::request::{Query, RequestInfo};
use apiforge_core::meta::Status;
use apiforge_core::scheme::Scheme;
pub use documents::{Documents, LazyOpenApi, OpenApiDocuments};
use routes::{Resources, Route};

/// How long the served documents must stay unchanged before their OpenAPI
/// documents are built ahead of a request
/// ([`LazyOpenApi::prepare_after`]).
const OPENAPI_SETTLE: Duration = Duration::from_millis(250);

/// Build and version facts served at `/version`.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    /// Major version.
    pub major: String,
    /// Minor version.
    pub minor: String,
    /// `v<major>.<minor>.<patch>`.
    pub git_version: String,
    /// Commit.
    pub git_commit: String,
    /// `clean` or `dirty`.
    pub git_tree_state: String,
    /// Build date.
    pub build_date: String,
    /// Toolchain.
    pub go_version: String,
    /// Compiler.
    pub compiler: String,
    /// `os/arch`.
    pub platform: String,
}

/// Everything the handlers share.
pub struct ApiServer {
    scheme: Scheme,
    /// What the resource handlers share: the stores, the watch timeout,
    /// shutdown.
    served: Served,
    /// The documents served now: the compiled-in groups' and those of the
    /// custom resources served ([`ApiServer::publish_custom`]).
    docs: std::sync::RwLock<Arc<Documents>>,
    /// The documents of what this server serves itself (`docs` without
    /// the aggregator's remote group versions).
    local_docs: std::sync::RwLock<Arc<Documents>>,
    /// The aggregator's remote group versions, published with `local_docs`.
    remote: std::sync::RwLock<Arc<Vec<crate::aggregator::RemoteVersion>>>,
    /// The aggregator link's state.
    aggregator: Arc<crate::aggregator::Aggregator>,
    /// The versions of each group with a resource list (`docs`), for
    /// [`ApiServer::serves_version`].
    served_versions: HashMap<String, Vec<String>>,
    /// The route table of resource requests: every served resource.
    resources: Resources,
    /// The route table of the custom resources, with the generation of the
    /// served kinds it was built at ([`ApiServer::custom_store`]).
    custom: std::sync::RwLock<(u64, Arc<Resources>)>,
    authenticator: Arc<crate::authn::Authenticator>,
    authorizer: Arc<crate::authz::Authorizer>,
    version: VersionInfo,
    health: Arc<healthz::Health>,
}

/// What [`ApiServer::new`] is built from.
pub struct ApiServerParts {
    /// The kinds served.
    pub scheme: Scheme,
    /// The stores of the kinds served (with admission attached).
    pub stores: Stores,
    /// The generated documents.
    pub docs: Documents,
    /// Who requests are from (includes the admin bearer token).
    pub authenticator: crate::authn::Authenticator,
    /// What they may do.
    pub authorizer: crate::authz::Authorizer,
    /// What `/version` reports.
    pub version: VersionInfo,
    /// The health checks served at `/healthz`, `/livez`, `/readyz`.
    pub health: Arc<healthz::Health>,
    /// `--min-request-timeout`: watches without `timeoutSeconds` end after
    /// a random time in `[1x, 2x)` of it.
    pub min_request_timeout: Duration,
    /// The aggregator (APIServices and the proxy to their backends).
    pub aggregator: Arc<crate::aggregator::Aggregator>,
}

impl ApiServer {
    /// Builds the handlers' shared state.
    pub fn new(parts: ApiServerParts, shutdown: tokio::sync::watch::Receiver<bool>) -> Self {
        let ApiServerParts {
            scheme,
            stores,
            docs,
            authenticator,
            authorizer,
            version,
            health,
            min_request_timeout,
            aggregator,
        } = parts;
        let mut served_versions: HashMap<String, Vec<String>> = HashMap::new();
        for key in docs.resource_lists.keys() {
            let (group, version) = match key.split('/').collect::<Vec<_>>().as_slice() {
                ["api", version] => ("", *version),
                ["apis", group, version] => (*group, *version),
                _ => continue,
            };
            served_versions
                .entry(group.to_string())
                .or_default()
                .push(version.to_string());
        }
        let authenticator = Arc::new(authenticator);
        let authorizer = Arc::new(authorizer);
        let mut resources = Resources::default();
        for (store, info) in stores.iter() {
            resources.insert(
                (info.group, info.version, info.plural),
                Arc::new(Stored::new(store.clone(), info)),
            );
        }
        let reviews = Arc::new(Reviews::new(authenticator.clone(), authorizer.clone()));
        for key in Reviews::resources() {
            resources.insert(key, reviews.clone());
        }
        ApiServer {
            scheme,
            resources,
            custom: std::sync::RwLock::new((u64::MAX, Arc::new(Resources::default()))),
            served: Served {
                stores,
                min_request_timeout,
                shutdown,
            },
            local_docs: std::sync::RwLock::new(Arc::new(docs.clone())),
            docs: std::sync::RwLock::new(Arc::new(docs)),
            remote: std::sync::RwLock::new(Arc::new(Vec::new())),
            aggregator,
            served_versions,
            authenticator,
            authorizer,
            version,
            health,
        }
    }

    /// The stores of the kinds served.
    pub fn stores(&self) -> &Stores {
        &self.served.stores
    }

    /// The authenticator.
    pub fn authenticator(&self) -> &crate::authn::Authenticator {
        &self.authenticator
    }

    /// The authorizer (its RBAC part is fed from the stored objects).
    pub fn authorizer(&self) -> &crate::authz::Authorizer {
        &self.authorizer
    }

    /// The scheme served.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// The documents served now.
    pub fn documents(&self) -> Arc<Documents> {
        self.docs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Publishes the discovery and OpenAPI documents of the compiled-in
    /// groups together with `custom` (the groups of the custom resources
    /// served now): discovery and OpenAPI change, with their ETags.
    pub fn publish_custom(&self, custom: Vec<apiforge_core::scheme::Group>) {
        let mut scheme = self.scheme.clone();
        for group in custom {
            scheme.add_group(group);
        }
        match Documents::from_scheme(&scheme) {
            Ok(docs) => {
                *self
                    .local_docs
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(docs);
                self.republish();
                self.aggregator.set_local(self.local_versions());
            }
            Err(e) => {
                tracing::error!(error = %e, "the documents of the custom resources could not be built")
            }
        }
    }

    /// Serves the local documents merged with the aggregator's remote group
    /// versions ([`Documents::with_remote`]).
    fn republish(&self) {
        let local = self
            .local_docs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let remote = self
            .remote
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let merged = Arc::new(local.with_remote(&remote));
        merged.openapi.prepare_after(OPENAPI_SETTLE);
        *self
            .docs
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = merged;
    }

    /// The aggregator link's state.
    pub fn aggregator(&self) -> &Arc<crate::aggregator::Aggregator> {
        &self.aggregator
    }

    /// The group versions this server serves itself (each has a local
    /// APIService): those with a resource list in the local documents.
    pub fn local_versions(&self) -> Vec<crate::aggregator::LocalVersion> {
        let local = self
            .local_docs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut out: Vec<crate::aggregator::LocalVersion> = local
            .resource_lists
            .keys()
            .filter_map(|key| {
                let (group, version) = match key.split('/').collect::<Vec<_>>().as_slice() {
                    ["api", version] => ("", *version),
                    ["apis", group, version] => (*group, *version),
                    _ => return None,
                };
                Some(crate::aggregator::LocalVersion {
                    group: group.to_string(),
                    version: version.to_string(),
                    custom: !self.serves_version(group, version),
                })
            })
            .collect();
        out.sort();
        out
    }

    /// Publishes the backends' documents the aggregator reads, whenever
    /// they change, until `stop` turns true.
    pub async fn keep_remote_documents_current(
        self: Arc<Self>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut remote = self.aggregator.remote_documents();
        loop {
            let current = remote.borrow_and_update().clone();
            *self
                .remote
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = current;
            self.republish();
            tokio::select! {
                changed = remote.changed() => if changed.is_err() { return },
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    /// Publishes the documents of the custom resources served after every
    /// change of the served kinds, until `stop` turns true. Changes that come in a burst (definitions applied together)
    /// are published once.
    pub async fn keep_documents_current(
        self: Arc<Self>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut changes = self.served.stores.changes();
        // What the post-start hook published (a change since then is
        // published at once).
        let mut published = self.served.stores.published_generation();
        loop {
            if *changes.borrow_and_update() != published {
                tokio::time::sleep(Duration::from_millis(20)).await;
                published = *changes.borrow_and_update();
                self.publish_custom(self.custom_groups());
                self.served.stores.mark_published(published);
                continue;
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    /// The groups (with their kinds) of the kinds served that the compiled
    /// scheme does not have: the custom resources.
    pub fn custom_groups(&self) -> Vec<apiforge_core::scheme::Group> {
        let mut groups: Vec<apiforge_core::scheme::Group> = Vec::new();
        let mut seen: Vec<*const apiforge_core::scheme::Kind> = Vec::new();
        let mut served: Vec<_> = self.served.stores.iter().collect();
        served.sort_by_key(|(_, info)| (info.group, info.plural));
        for (store, info) in served {
            if self
                .resources
                .get(info.group, info.version, info.plural)
                .is_some()
            {
                continue;
            }
            let ptr = Arc::as_ptr(store.kind());
            if seen.contains(&ptr) {
                continue;
            }
            seen.push(ptr);
            let kind = store.kind().clone();
            let index = match groups.iter().position(|g| g.name == info.group) {
                Some(i) => i,
                None => {
                    groups.push(apiforge_core::scheme::Group::new(info.group, &[]));
                    groups.len() - 1
                }
            };
            let group = &mut groups[index];
            for v in kind.versions() {
                if !group.versions.contains(&v.info.version) {
                    group.versions.push(v.info.version);
                }
            }
            group.kinds.push(kind);
        }
        for group in &mut groups {
            group.versions.sort_by(|a, b| kube_version_order(a, b));
        }
        groups
    }

    /// The handler of a custom resource (a kind the compiled route table
    /// does not have): from a route table of the served kinds, rebuilt
    /// when they change.
    fn custom_store(&self, info: &RequestInfo) -> Option<Arc<dyn crate::handlers::Rest>> {
        let generation = self.served.stores.generation();
        {
            let custom = self
                .custom
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if custom.0 == generation {
                return custom.1.get(&info.group, &info.version, &info.resource);
            }
        }
        let mut table = Resources::default();
        for (store, kind_info) in self.served.stores.iter() {
            if self
                .resources
                .get(kind_info.group, kind_info.version, kind_info.plural)
                .is_none()
            {
                table.insert(
                    (kind_info.group, kind_info.version, kind_info.plural),
                    Arc::new(Stored::new(store, kind_info)),
                );
            }
        }
        let found = table.get(&info.group, &info.version, &info.resource);
        *self
            .custom
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (generation, Arc::new(table));
        found
    }

    /// Whether the definition of `plural` in `group` is being deleted (read
    /// from storage, so a create right after the definition's DELETE is
    /// refused).
    async fn definition_terminating(&self, group: &str, plural: &str) -> bool {
        let Some(definitions) = self
            .served
            .stores
            .find("apiextensions.k8s.io", "customresourcedefinitions")
        else {
            return false;
        };
        // Only `metadata.deletionTimestamp` of the stored bytes is read
        // (every other field skipped unparsed): a create pays little.
        #[derive(serde::Deserialize)]
        struct Definition {
            metadata: Meta,
        }
        #[derive(serde::Deserialize)]
        struct Meta {
            #[serde(rename = "deletionTimestamp")]
            deletion_timestamp: Option<serde::de::IgnoredAny>,
        }
        let key = definitions.key("", &format!("{plural}.{group}"));
        match definitions.storage().get(&key, 0).await {
            Ok(Some(kv)) => serde_json::from_slice::<Definition>(&kv.value)
                .is_ok_and(|d| d.metadata.deletion_timestamp.is_some()),
            _ => false,
        }
    }

    /// Marks the server as shutting down: `/readyz` fails from now on.
    pub fn begin_shutdown(&self) {
        self.health.begin_shutdown();
    }

    /// Counts objects per resource into `apiserver_storage_objects`.
    /// A consistent snapshot of the store (the embedded store's), as the
    /// answer's body; its revision in `X-Snapshot-Revision`. Authorized as
    /// any non-resource path (`get` on `/snapshot`: cluster admins).
    async fn snapshot(&self) -> Response {
        let Some((store, _)) = self.served.stores.iter().next() else {
            return error_response(&Status::internal("no store").into());
        };
        let storage = store.storage().clone();
        let file =
            std::env::temp_dir().join(format!("apiforge-snapshot-{}.db", uuid::Uuid::new_v4()));
        let taken = {
            let file = file.clone();
            tokio::task::spawn_blocking(move || {
                let info = storage.snapshot(&file)?;
                let bytes = std::fs::read(&file)
                    .map_err(|e| apiforge_storage::Error::Internal(e.to_string()));
                let _ = std::fs::remove_file(&file);
                bytes.map(|b| (info, b))
            })
            .await
        };
        match taken {
            Ok(Ok((info, bytes))) => {
                let mut resp = bytes_response(
                    StatusCode::OK,
                    "application/octet-stream",
                    Bytes::from(bytes),
                );
                if let Ok(v) = http::HeaderValue::from_str(&info.revision.to_string()) {
                    resp.headers_mut().insert("x-snapshot-revision", v);
                }
                resp
            }
            Ok(Err(e)) => {
                let _ = std::fs::remove_file(&file);
                error_response(&Status::internal(format!("snapshot failed: {e}")).into())
            }
            Err(e) => error_response(&Status::internal(format!("snapshot failed: {e}")).into()),
        }
    }

    async fn update_storage_objects(&self) {
        let mut seen = std::collections::HashSet::new();
        for (store, _) in self.served.stores.iter() {
            let info = store.kind().storage_info();
            let resource = if info.group.is_empty() {
                info.plural.to_string()
            } else {
                format!("{}.{}", info.plural, info.group)
            };
            if !seen.insert(resource.clone()) {
                continue;
            }
            let count = tokio::time::timeout(
                Duration::from_secs(2),
                store.storage().count(store.prefix()),
            )
            .await;
            // -1 when the count failed, as upstream.
            let n = match count {
                Ok(Ok(n)) => n,
                _ => -1,
            };
            let metrics = crate::metrics::global();
            metrics
                .storage_objects
                .with_label_values(&[resource.as_str()])
                .set(n);
            metrics
                .resource_objects
                .with_label_values(&[info.group, info.plural])
                .set(n);
        }
        let storage = self
            .served
            .stores
            .iter()
            .next()
            .map(|(s, _)| s.storage().clone());
        if let Some(storage) = storage
            && let Ok(Ok(Some((id, bytes)))) =
                tokio::time::timeout(Duration::from_secs(2), storage.size_bytes()).await
        {
            crate::metrics::global()
                .storage_size_bytes
                .with_label_values(&[id.as_str()])
                .set(bytes);
        }
    }

    /// Whether a resource list (`/api/<version>` or
    /// `/apis/<group>/<version>`) is served for `group` and `version`.
    pub fn serves_version(&self, group: &str, version: &str) -> bool {
        self.served_versions
            .get(group)
            .is_some_and(|versions| versions.iter().any(|v| v == version))
    }

    /// The whole API behind the filter chain: kube-apiserver's delegation
    /// chain ([`delegation::Chain::standard`]) with this server as its core
    /// link, and gzip response compression (the `compression` module's rules).
    pub fn director(self: Arc<Self>) -> Director {
        Director {
            chain: delegation::Chain::standard(self),
        }
    }
}

/// What the filter chain ([`crate::filters::build`]) ends in: the
/// delegation chain behind gzip compression.
pub struct Director {
    chain: delegation::Chain,
}

impl crate::filters::Handler for Director {
    /// Serves `req` (which passed the filter chain).
    async fn serve(&self, req: Request) -> Response {
        compression::gzip(req, |req| self.chain.serve(req)).await
    }
}

impl ApiServer {
    /// Answers a request along its [`Route`] (see [`ApiServer::route`]).
    async fn serve(&self, route: Route, req: Request) -> Response {
        let params = Query::parse(req.uri().query().unwrap_or_default());
        match route {
            Route::Resource(rest, info) => {
                let user = crate::request::user::user_of(&req)
                    .cloned()
                    .unwrap_or_default();
                let audit = req
                    .extensions()
                    .get::<crate::audit::AuditContext>()
                    .cloned();
                let scoped = info.clone();
                let serving = std::pin::pin!(rest.serve(&self.served, info, params, req));
                let serving = crate::request::info::with_info(scoped, serving);
                let serving = crate::request::user::with_user(user, serving);
                crate::audit::with_context(audit, serving).await
            }
            Route::NotFound => error_response(&Status::path_not_found().into()),
            Route::Health(endpoint) => {
                let path = req.uri().path();
                let check = path
                    .trim_start_matches('/')
                    .split_once('/')
                    .map(|(_, check)| check)
                    .filter(|c| !c.is_empty());
                self.health.serve(endpoint, check, &params).await
            }
            Route::Metrics => {
                self.update_storage_objects().await;
                bytes_response(
                    StatusCode::OK,
                    crate::metrics::CONTENT_TYPE,
                    Bytes::from(crate::metrics::global().render()),
                )
            }
            Route::Snapshot => self.snapshot().await,
            Route::Version => respond(
                StatusCode::OK,
                Format::Json,
                &serde_json::to_value(&self.version).unwrap_or_default(),
            ),
            Route::DiscoveryRoot(root) => discovery_root(self, &req, root),
            Route::OpenApiV3Index => {
                let openapi = self.documents().openapi.get().await;
                document(&req, openapi.v3_index.as_ref(), false)
            }
            Route::OpenApiV3(path) => {
                let openapi = self.documents().openapi.get().await;
                document(&req, openapi.v3.get(&path), params.get("hash").is_some())
            }
            Route::OpenApiV2 => {
                let openapi = self.documents().openapi.get().await;
                openapi_v2::serve(&req, &openapi)
            }
            Route::Document(doc) => document(&req, Some(&doc), false),
        }
    }
}

fn accept(req: &Request) -> Option<&str> {
    req.headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
}

fn document(req: &Request, doc: Option<&documents::Document>, immutable: bool) -> Response {
    let Some(doc) = doc else {
        return error_response(&Status::path_not_found().into());
    };
    if negotiation::negotiate(accept(req), Allowed::default())
        .is_none_or(|(f, _)| f != Format::Json)
    {
        return error_response(
            &Status::not_acceptable(
                "only the following media types are accepted: application/json",
            )
            .into(),
        );
    }
    serve_document(req, doc, immutable)
}

/// Writes an already negotiated document, with its ETag (and 304 when the
/// client's `If-None-Match` matches it) and cache headers.
fn serve_document(req: &Request, doc: &documents::Document, immutable: bool) -> Response {
    let etag = format!("\"{}\"", doc.hash);
    let mut resp = if req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        == Some(etag.as_str())
    {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        bytes_response(StatusCode::OK, "application/json", doc.body.clone())
    };
    if let Ok(v) = HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    let cache = if immutable {
        "public, immutable"
    } else {
        "no-cache, private"
    };
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    resp
}

fn discovery_root(server: &ApiServer, req: &Request, root: &str) -> Response {
    let allowed = Allowed {
        discovery: true,
        ..Default::default()
    };
    match negotiation::negotiate(accept(req), allowed) {
        Some((_, Target::Discovery(version))) => {
            // The Accept header was negotiated here (with discovery
            // allowed): a client asking only for the aggregated form gets it.
            let docs = server.documents();
            let Some(doc) = docs.aggregated.get(&(root.to_string(), version.clone())) else {
                return error_response(&Status::path_not_found().into());
            };
            let mut resp = serve_document(req, doc, false);
            let ct = format!(
                "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
            );
            if let Ok(v) = HeaderValue::from_str(&ct)
                && resp.status() == StatusCode::OK
            {
                resp.headers_mut().insert(header::CONTENT_TYPE, v);
            }
            resp.headers_mut()
                .insert(header::VARY, HeaderValue::from_static("Accept"));
            resp
        }
        Some((Format::Json, _)) => {
            let docs = server.documents();
            let doc = if root == "api" {
                docs.api.as_ref()
            } else {
                docs.apis.as_ref()
            };
            match doc {
                Some(doc) => serve_document(req, doc, false),
                None => error_response(&Status::path_not_found().into()),
            }
        }
        _ => error_response(
            &Status::not_acceptable(
                "only the following media types are accepted: application/json",
            )
            .into(),
        ),
    }
}

/// Orders Kubernetes versions as discovery does: GA before beta before
/// alpha, higher numbers first, others last alphabetically.
fn kube_version_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(v: &str) -> (u8, i64, i64, String) {
        let parse = |v: &str| -> Option<(u8, i64, i64)> {
            let rest = v.strip_prefix('v')?;
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let major: i64 = digits.parse().ok()?;
            let tail = &rest[digits.len()..];
            if tail.is_empty() {
                return Some((0, -major, 0));
            }
            let (level, num) = if let Some(n) = tail.strip_prefix("beta") {
                (1, n)
            } else if let Some(n) = tail.strip_prefix("alpha") {
                (2, n)
            } else {
                return None;
            };
            Some((level, -major, -num.parse::<i64>().ok()?))
        };
        match parse(v) {
            Some((level, major, minor)) => (level, major, minor, String::new()),
            None => (3, 0, 0, v.to_string()),
        }
    }
    key(a).cmp(&key(b))
}
