//! The HTTP surface: request parsing, the director that routes API paths to
//! resource handlers and everything else (health, version, discovery,
//! OpenAPI) to plain handlers, and response rendering.

mod compression;
pub mod delegation;
pub mod documents;
pub mod negotiation;
mod openapi_v2;
mod protobuf;
pub mod request_info;
mod resource;
pub mod table;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::Value;

use crate::error::ApiError;
use crate::meta::Status;
use crate::registry::{CacheOptions, Caches, Store};
use crate::resource::KindInfo;
use crate::scheme::Scheme;
use crate::storage::Storage;
pub use documents::Documents;
use negotiation::{Allowed, Format, Target};

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
    /// The store and kind of each served (group, version, plural); the
    /// keys are the scheme's static names, so requests look them up with
    /// borrowed strings.
    stores: HashMap<(&'static str, &'static str, &'static str), (Store, &'static KindInfo)>,
    docs: Documents,
    /// The versions of each group with a resource list (`docs`), for
    /// [`ApiServer::serves_version`].
    served_versions: HashMap<String, Vec<String>>,
    authenticator: crate::authn::Authenticator,
    authorizer: crate::authz::Authorizer,
    version: VersionInfo,
    health: Arc<crate::server::healthz::Health>,
    min_request_timeout: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

/// What [`ApiServer::new`] is built from.
pub struct ApiServerParts {
    /// The kinds served.
    pub scheme: Scheme,
    /// The storage backend.
    pub storage: Arc<dyn Storage>,
    /// Storage key prefix (`/registry`).
    pub storage_prefix: String,
    /// The generated documents.
    pub docs: Documents,
    /// Who requests are from (includes the admin bearer token).
    pub authenticator: crate::authn::Authenticator,
    /// What they may do.
    pub authorizer: crate::authz::Authorizer,
    /// What `/version` reports.
    pub version: VersionInfo,
    /// Watch cache settings; `None` serves reads from storage.
    pub watch_cache: Option<CacheOptions>,
    /// The enabled admission plugins, in order.
    pub admission: crate::admission::Plugins,
    /// The health checks served at `/healthz`, `/livez`, `/readyz`.
    pub health: Arc<crate::server::healthz::Health>,
    /// `--min-request-timeout`: watches without `timeoutSeconds` end after
    /// a random time in `[1x, 2x)` of it.
    pub min_request_timeout: Duration,
}

/// Maximum request body size (kube-apiserver's 3 MiB default).
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

impl ApiServer {
    /// Builds the handlers' shared state: one registry store per kind.
    pub fn new(parts: ApiServerParts, shutdown: tokio::sync::watch::Receiver<bool>) -> Self {
        let ApiServerParts {
            scheme,
            storage,
            storage_prefix,
            docs,
            mut authenticator,
            authorizer,
            version,
            watch_cache,
            admission,
            health,
            min_request_timeout,
        } = parts;
        let mut stores = HashMap::new();
        let caches = Caches::default();
        for group in scheme.groups() {
            for kind in &group.kinds {
                let store = Store::new(
                    kind.clone(),
                    storage.clone(),
                    &storage_prefix,
                    watch_cache.as_ref().map(|opts| (&caches, opts)),
                );
                for v in kind.versions() {
                    stores.insert(
                        (
                            group.name.to_string(),
                            v.info.version.to_string(),
                            v.info.plural.to_string(),
                        ),
                        (store.clone(), v.info),
                    );
                }
            }
        }
        let admission = match authorizer.rbac() {
            Some(rbac) => admission.with(Arc::new(crate::authz::escalation::EscalationCheck::new(
                authorizer.clone(),
                rbac.clone(),
            ))),
            None => admission,
        };
        let stores: HashMap<_, _> = crate::registry::attach_admission(stores, admission)
            .into_iter()
            .filter_map(|((group, _, _), (store, info))| {
                let group = scheme.groups().iter().find(|g| g.name == group)?.name;
                Some(((group, info.version, info.plural), (store, info)))
            })
            .collect();
        if let Some((secrets, _)) = stores.get(&("", "v1", "secrets")) {
            authenticator.set_secrets(secrets.clone());
        }
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
        ApiServer {
            scheme,
            stores,
            docs,
            served_versions,
            authenticator,
            authorizer,
            version,
            health,
            min_request_timeout,
            shutdown,
        }
    }

    /// Creates the system namespaces (`default`, `kube-system`,
    /// `kube-public`) when the core Namespace kind is served and they do not
    /// exist yet.
    pub async fn bootstrap(&self) -> Result<(), ApiError> {
        let Some((store, info)) = self.stores.get(&("", "v1", "namespaces")) else {
            return Ok(());
        };
        for name in crate::builtin::core_v1::SYSTEM_NAMESPACES {
            let body = serde_json::json!({"metadata": {"name": name}});
            let hub = store
                .kind()
                .decode(info.version, body)
                .map_err(|e| ApiError::from(Status::internal(e.to_string())))?;
            match store.create("", hub, false).await {
                Ok(_) => tracing::info!(namespace = name, "created system namespace"),
                Err(e) if e.code() == 409 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Every served store with the facts of one of its versions (one entry
    /// per kind and served version).
    pub fn stores(&self) -> impl Iterator<Item = (&Store, &'static KindInfo)> {
        self.stores.values().map(|(store, info)| (store, *info))
    }

    /// One store per kind of `group` named in `kinds` (`(plural, kind)`
    /// pairs), with its kind name: what controllers that read a whole
    /// built-in group (RBAC, flow control) work on.
    pub fn stores_of(
        &self,
        group: &str,
        kinds: &[(&str, &'static str)],
    ) -> Vec<(Store, &'static str)> {
        let mut out: Vec<(Store, &'static str)> = Vec::new();
        for (store, info) in self.stores() {
            if info.group != group {
                continue;
            }
            if let Some((_, kind)) = kinds.iter().find(|(plural, _)| *plural == info.plural)
                && !out.iter().any(|(s, _)| Arc::ptr_eq(s.kind(), store.kind()))
            {
                out.push((store.clone(), kind));
            }
        }
        out
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

    /// Marks the server as shutting down: `/readyz` fails from now on.
    pub fn begin_shutdown(&self) {
        self.health.begin_shutdown();
    }

    /// How long a watch without `timeoutSeconds` lasts: a random time in
    /// `[1x, 2x)` of `--min-request-timeout`.
    pub(crate) fn default_watch_timeout(&self) -> Duration {
        use rand::Rng;
        let base = self.min_request_timeout.as_secs_f64();
        Duration::from_secs_f64(base * (1.0 + rand::rng().random_range(0.0..1.0)))
    }

    /// Counts objects per resource into `apiserver_storage_objects`.
    async fn update_storage_objects(&self) {
        let mut seen = std::collections::HashSet::new();
        for (store, _) in self.stores() {
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
            if let Ok(Ok(n)) = count {
                crate::metrics::global()
                    .storage_objects
                    .with_label_values(&[resource.as_str()])
                    .set(n);
            }
        }
    }

    /// The store and kind serving `group`, `version` and `plural`.
    fn store<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
        plural: &'a str,
    ) -> Option<&'a (Store, &'static KindInfo)> {
        // The map is covariant in its keys: look up with shorter-lived
        // `&str`s without allocating owned keys.
        let stores: &HashMap<(&str, &str, &str), _> = &self.stores;
        stores.get(&(group, version, plural))
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

impl Director {
    /// Serves `req` (which passed the filter chain).
    pub async fn serve(&self, req: Request) -> Response {
        compression::gzip(req, |req| self.chain.serve(req)).await
    }
}

/// A JSON (or YAML) response with a status code.
pub(crate) fn respond(code: StatusCode, format: Format, value: &Value) -> Response {
    let body = match format {
        Format::Json => serde_json::to_vec(value)
            .map(Bytes::from)
            .map_err(|e| e.to_string()),
        Format::Yaml => serde_saphyr::to_string(value)
            .map(Bytes::from)
            .map_err(|e| e.to_string()),
        // Only a Status has a kind-independent protobuf form; objects go
        // through their kind's codec (`protobuf::respond_object`).
        Format::Protobuf => match value.get("kind").and_then(Value::as_str) {
            Some("Status") => serde_json::from_value::<Status>(value.clone())
                .map(|s| Bytes::from(crate::protobuf::status_body(&s)))
                .map_err(|e| e.to_string()),
            _ => Err("no protobuf serializer for this object".into()),
        },
    };
    match body {
        Ok(body) => bytes_response(code, format.content_type(), body),
        Err(e) => error_response(&Status::internal(e).into()),
    }
}

pub(crate) fn bytes_response(code: StatusCode, content_type: &str, body: Bytes) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = code;
    // The usual type without copying it into a new header value.
    let ct = match content_type {
        "application/json" => Ok(HeaderValue::from_static("application/json")),
        other => HeaderValue::from_str(other),
    };
    if let Ok(ct) = ct {
        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    resp
}

/// Renders an API error as its Status (always JSON).
pub(crate) fn error_response(err: &ApiError) -> Response {
    let code = StatusCode::from_u16(err.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(&*err.0).unwrap_or_default();
    let mut resp = bytes_response(code, "application/json", Bytes::from(body));
    if let Some(retry) = err.0.details.as_ref().and_then(|d| d.retry_after_seconds)
        && let Ok(v) = HeaderValue::from_str(&retry.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// Routes every request the core server owns (behind the filter chain,
/// [`crate::filters`], and the delegation chain, [`delegation`]).
async fn director(server: &ApiServer, req: Request) -> Response {
    let params = Query::parse(req.uri().query().unwrap_or_default());
    let info = crate::filters::request_info::of(&req);
    if info.is_resource_request {
        let user = crate::authn::user_of(&req).cloned().unwrap_or_default();
        if crate::authz::reviews::is_review(&info) {
            return crate::authz::reviews::handle(
                &server.authenticator,
                &server.authorizer,
                &user,
                &info,
                req,
            )
            .await;
        }
        let handler = std::pin::pin!(resource::handle(server, info, params, req));
        return crate::authn::with_user(user, handler).await;
    }
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return error_response(&Status::path_not_found().into());
    }
    let path = req.uri().path().to_string();
    let mut segments = path.trim_start_matches('/').splitn(2, '/');
    if let Some(endpoint) = segments
        .next()
        .and_then(crate::server::healthz::Endpoint::from_name)
    {
        let check = segments.next().filter(|c| !c.is_empty());
        return server.health.serve(endpoint, check, &params).await;
    }
    match path.as_str() {
        "/metrics" => {
            server.update_storage_objects().await;
            bytes_response(
                StatusCode::OK,
                crate::metrics::CONTENT_TYPE,
                Bytes::from(crate::metrics::global().render()),
            )
        }
        "/version" => respond(
            StatusCode::OK,
            Format::Json,
            &serde_json::to_value(&server.version).unwrap_or_default(),
        ),
        "/api" | "/apis" => discovery_root(server, &req, path.trim_start_matches('/')),
        "/openapi/v3" => document(&req, server.docs.openapi_v3_index.as_ref(), false),
        "/openapi/v2" => openapi_v2::serve(&req, &server.docs),
        _ => {
            if let Some(rest) = path.strip_prefix("/openapi/v3/") {
                return document(
                    &req,
                    server.docs.openapi_v3.get(rest),
                    params.get("hash").is_some(),
                );
            }
            let trimmed = path.trim_matches('/');
            let parts: Vec<&str> = trimmed.split('/').collect();
            match parts.as_slice() {
                ["apis", group] => document(&req, server.docs.groups.get(*group), false),
                ["apis", _, _] | ["api", _] => {
                    document(&req, server.docs.resource_lists.get(trimmed), false)
                }
                _ => error_response(&Status::path_not_found().into()),
            }
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
            let Some(doc) = server
                .docs
                .aggregated
                .get(&(root.to_string(), version.clone()))
            else {
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
            let doc = if root == "api" {
                server.docs.api.as_ref()
            } else {
                server.docs.apis.as_ref()
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

/// Decoded query parameters (first value wins).
#[derive(Clone, Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parses a raw query string.
    pub fn parse(raw: &str) -> Self {
        Query(
            form_urlencoded::parse(raw.as_bytes())
                .into_owned()
                .collect(),
        )
    }

    /// Every value of `key`, in order.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}
