//! The handlers of resource requests, one file per verb: [`get`],
//! [`list`], [`watch`], [`create`], [`update`], [`patch`] (and
//! deletecollection), [`delete`], and the `/status` and `/scale`
//! [`subresources`]; [`body`] decodes request bodies, [`negotiation`],
//! [`table`] and [`protobuf`] render responses. They serve a kind through
//! its registry [`Store`].
//!
//! Every resource is served behind the [`Rest`] trait: a stored kind as
//! [`Stored`] (the verb handlers above), the review kinds, which are not
//! stored, as [`reviews::Reviews`]. The route table (`endpoints::routes`)
//! maps each served group, version and resource to one.

mod apply;
mod body;
mod create;
mod delete;
mod get;
mod list;
mod managed_fields;
pub mod negotiation;
mod patch;
pub mod protobuf;
pub mod reviews;
mod subresources;
pub mod table;
#[cfg(test)]
mod tests;
mod update;
mod watch;

use body::read_body_limited;
pub use body::{YAML_DECODE_STACK_BYTES, yaml_to_json};
use create::create;
use delete::{delete, delete_options};
use get::get;
use list::{list, namespace_scope};
use update::update;
use watch::watch;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use http::{StatusCode, header};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::registry::Stores;
use crate::registry::{FieldSelector, LabelSelector, ListParams, Store};
use crate::request::Query;
use crate::request::RequestInfo;
use crate::request::response::{bytes_response, error_response};
use apiforge_core::meta::{Status, StatusDetails};
use apiforge_core::resource::KindInfo;
use apiforge_core::scheme::Object;
use apiforge_core::validation::{ErrorList, FieldError};
use negotiation::{Allowed, Format, Target};
use table::IncludeObject;

/// Fields every kind can be selected by.
const META_FIELDS: [&str; 2] = ["metadata.name", "metadata.namespace"];

/// What every resource handler shares, whatever the resource.
pub struct Served {
    /// The stores of the kinds served (a body's apiVersion and kind are
    /// checked against them).
    pub stores: Stores,
    /// `--min-request-timeout`: watches without `timeoutSeconds` end after
    /// a random time in `[1x, 2x)` of it.
    pub min_request_timeout: Duration,
    /// Turns true when the server shuts down: watches end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

impl Served {
    /// How long a watch without `timeoutSeconds` lasts: a random time in
    /// `[1x, 2x)` of `--min-request-timeout`.
    fn default_watch_timeout(&self) -> Duration {
        use rand::Rng;
        let base = self.min_request_timeout.as_secs_f64();
        Duration::from_secs_f64(base * (1.0 + rand::rng().random_range(0.0..1.0)))
    }
}

/// A resource served at `/api[s]/<group>/<version>/<resource>`: what the
/// route table hands a resource request to, whether the kind is stored or
/// answered some other way (the review kinds now; proxies and kinds defined
/// at run time fit the same slot).
#[crate::admission::async_trait]
pub trait Rest: Send + Sync {
    /// Serves a resource request for this resource (`ri` is the request's
    /// parsed info, `query` its query string).
    async fn serve(
        &self,
        served: &Served,
        ri: Arc<RequestInfo>,
        query: Query,
        req: Request,
    ) -> Response;
}

/// A stored kind in one version, served by the verb handlers through its
/// registry store.
pub struct Stored {
    store: Store,
    info: &'static KindInfo,
}

impl Stored {
    /// The resource of `info`'s version of the kind `store` serves.
    pub fn new(store: Store, info: &'static KindInfo) -> Self {
        Stored { store, info }
    }
}

#[crate::admission::async_trait]
impl Rest for Stored {
    async fn serve(
        &self,
        served: &Served,
        ri: Arc<RequestInfo>,
        query: Query,
        req: Request,
    ) -> Response {
        handle(served, (&self.store, self.info), ri, query, req).await
    }
}

/// One resource request's context.
struct Ctx<'a> {
    served: &'a Served,
    store: &'a Store,
    info: &'static KindInfo,
    ri: &'a RequestInfo,
    query: &'a Query,
    accept: Option<String>,
    /// The client's `User-Agent` (the manager of writes without
    /// `fieldManager`).
    user_agent: Option<String>,
}

/// Serves a resource request for the kind `info` through `store` (the
/// store of the request's group, version and resource).
pub async fn handle(
    served: &Served,
    (store, info): (&Store, &'static KindInfo),
    ri: Arc<RequestInfo>,
    query: Query,
    req: Request,
) -> Response {
    let unserved_subresource = !ri.subresource.is_empty() && !subresources::served(info, &ri);
    if unserved_subresource || (!info.namespaced() && !ri.namespace.is_empty()) {
        return error_response(&Status::path_not_found().into());
    }
    if info.namespaced() && ri.namespace.is_empty() && !matches!(ri.verb.as_str(), "list" | "watch")
    {
        return error_response(&Status::path_not_found().into());
    }
    if let Some(warning) = info.warning() {
        crate::request::warning::add(warning);
    }
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let ctx = Ctx {
        served,
        store,
        info,
        ri: &ri,
        query: &query,
        accept,
        user_agent,
    };
    let result = match ri.verb.as_str() {
        _ if !ri.subresource.is_empty() => subresources::handle(&ctx, req).await,
        "get" => get(&ctx).await,
        "list" => list(&ctx).await,
        "watch" => watch(&ctx).await,
        "create" => create(&ctx, req).await,
        "update" => update(&ctx, req).await,
        "patch" => patch::patch(&ctx, req).await,
        "delete" => delete(&ctx, req).await,
        "deletecollection" => patch::delete_collection(&ctx, req).await,
        _ => Err(Status::method_not_allowed(req.method().as_str(), info.group, info.plural).into()),
    };
    result.unwrap_or_else(|e| {
        protobuf::error_negotiated(&e, ctx.accept.as_deref(), ctx.protobuf().is_some())
    })
}

fn not_acceptable() -> ApiError {
    Status::not_acceptable(
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    )
    .into()
}

impl Ctx<'_> {
    /// The store writes go through: the main resource's, or the request's
    /// subresource's (`/status` writes change only status).
    fn writer(&self) -> std::borrow::Cow<'_, Store> {
        if self.ri.subresource.is_empty() {
            std::borrow::Cow::Borrowed(self.store)
        } else {
            std::borrow::Cow::Owned(self.store.subresource(&self.ri.subresource))
        }
    }

    fn negotiate(&self, list: bool) -> ApiResult<(Format, Target)> {
        negotiation::negotiate(
            self.accept.as_deref(),
            Allowed {
                meta_targets: true,
                discovery: false,
                list,
                protobuf: self.protobuf().is_some(),
            },
        )
        .ok_or_else(not_acceptable)
    }

    /// The protobuf codec of the requested version, if the kind has one.
    fn protobuf(&self) -> Option<&apiforge_core::scheme::ProtobufOps> {
        let ops = self.store.kind().version(self.info.version)?;
        ops.protobuf()
    }

    fn encode(&self, hub: &Value) -> ApiResult<Value> {
        self.store
            .kind()
            .encode(self.info.version, hub)
            .map_err(|e| Status::internal(e.to_string()).into())
    }

    fn include_object(&self) -> ApiResult<IncludeObject> {
        IncludeObject::parse(self.query.get("includeObject"))
            .map_err(|m| Status::bad_request(m).into())
    }

    /// The `dryRun` query parameter; a bad value is a 422 on
    /// `<options_kind>.meta.k8s.io` (`CreateOptions`, `DeleteOptions`, ...).
    fn dry_run(&self, options_kind: &str) -> ApiResult<bool> {
        match self.query.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(options_invalid(
                options_kind,
                "dryRun",
                format!("Unsupported value: [{other:?}]: supported values: \"All\""),
            )),
        }
    }

    /// Renders one object in the negotiated form.
    fn object_response(&self, code: StatusCode, hub: &Value) -> ApiResult<Response> {
        let (format, target) = self.negotiate(false)?;
        let obj = self.encode(hub)?;
        self.render_object(code, format, target, obj)
    }

    /// [`Ctx::object_response`] for a typed hub object (encoded without
    /// decoding JSON).
    fn typed_response(&self, code: StatusCode, hub: &Object) -> ApiResult<Response> {
        let (format, target) = self.negotiate(false)?;
        let obj = self
            .store
            .kind()
            .encode_object(self.info.version, hub)
            .map_err(|e| ApiError::from(Status::internal(e.to_string())))?;
        self.render_object(code, format, target, obj)
    }

    /// Writes an object already encoded in the request's version as the
    /// negotiated `format` and `target` (the object, a Table or its
    /// metadata).
    fn render_object(
        &self,
        code: StatusCode,
        format: Format,
        target: Target,
        obj: Value,
    ) -> ApiResult<Response> {
        let body = match target {
            Target::Table(v) => table::table(
                self.info,
                self.store.kind().table_printer(),
                &[obj],
                &v,
                self.include_object()?,
                None,
                true,
            ),
            Target::PartialObjectMetadata(v) => table::partial_metadata(&obj, &v),
            _ => obj,
        };
        Ok(protobuf::respond_object(
            code,
            format,
            self.protobuf(),
            &body,
            false,
        ))
    }
}

fn options_invalid(options_kind: &str, field: &str, message: String) -> ApiError {
    let cause = apiforge_core::meta::StatusCause {
        reason: "FieldValueNotSupported".into(),
        message: message.clone(),
        field: field.into(),
    };
    let mut s = Status::failure(
        422,
        "Invalid",
        format!("{options_kind}.meta.k8s.io \"\" is invalid: {field}: {message}"),
    );
    s.details = Some(StatusDetails {
        group: "meta.k8s.io".into(),
        kind: options_kind.into(),
        causes: vec![cause],
        ..Default::default()
    });
    s.into()
}

/// A boolean query parameter: everything but `0` and `false` (any case)
/// is true, as kube-apiserver's parameter conversion reads it.
fn query_bool(v: &str) -> bool {
    v != "0" && !v.eq_ignore_ascii_case("false")
}

/// `timeoutSeconds` (list and watch): an integer, else 400 with Go's
/// strconv text.
fn timeout_seconds_param(q: &Query) -> ApiResult<Option<i64>> {
    q.get("timeoutSeconds")
        .map(crate::go_errors::parse_int64)
        .transpose()
        .map_err(|e| Status::bad_request(e).into())
}

/// `resourceVersion` (get, list, watch): absent or `""` is `None`; a
/// non-integer is kube-apiserver's storage answer, 400
/// `invalid resource version: resourceVersion: Invalid value: ...`.
fn resource_version_param(q: &Query) -> ApiResult<Option<i64>> {
    match q.get("resourceVersion") {
        None | Some("") => Ok(None),
        Some(v) => crate::go_errors::parse_resource_version(v)
            .map(|n| Some(i64::try_from(n).unwrap_or(i64::MAX)))
            .map_err(|e| Status::bad_request(format!("invalid resource version: {e}")).into()),
    }
}

fn parse_list_params(ctx: &Ctx<'_>) -> ApiResult<ListParams> {
    let q = ctx.query;
    let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or_default())
        .map_err(|e| Status::bad_request(e.to_string()))?;
    // The kind's selectable fields (`.spec.color`) join metadata's.
    let allowed: Vec<&str> = META_FIELDS
        .into_iter()
        .chain(
            ctx.info
                .selectable_fields
                .iter()
                .map(|f| f.trim_start_matches('.')),
        )
        .collect();
    let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or_default(), &allowed)
        .map_err(|e| Status::bad_request(e.to_string()))?;
    // As kube-apiserver's query-parameter decoding: a non-integer is a
    // 400 with Go's strconv text; a negative limit means no limit.
    let limit = match q.get("limit") {
        None => 0,
        Some(v) => usize::try_from(crate::go_errors::parse_int64(v).map_err(Status::bad_request)?)
            .unwrap_or(0),
    };
    timeout_seconds_param(q)?;
    let resource_version = resource_version_param(q)?;
    let continue_token = q
        .get("continue")
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    if continue_token.is_some() && resource_version.is_some_and(|rv| rv != 0) {
        return Err(Status::bad_request(
            "specifying resource version is not allowed when using continue",
        )
        .into());
    }
    let watch = ctx.ri.verb == "watch";
    let rv_match = q.get("resourceVersionMatch").filter(|m| !m.is_empty());
    // Booleans as kube-apiserver's query decoding reads them: only `0` and
    // `false` are false.
    let send_initial_events = match q.get("sendInitialEvents") {
        None | Some("") => None,
        Some(v) => Some(query_bool(v)),
    };
    let mut errs = ErrorList::default();
    if watch {
        // upstream validateWatchOptions
        if send_initial_events.is_some() && rv_match != Some("NotOlderThan") {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if let Some(m) = rv_match {
            if send_initial_events.is_none() {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if m != "NotOlderThan" {
                errs.push(FieldError::not_supported(
                    "resourceVersionMatch",
                    m,
                    &["NotOlderThan"],
                ));
            }
            if continue_token.is_some() {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
    } else {
        // upstream ValidateListOptions
        if let Some(m) = rv_match {
            if resource_version.is_none() {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if continue_token.is_some() {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if m != "Exact" && m != "NotOlderThan" {
                errs.push(FieldError::not_supported(
                    "resourceVersionMatch",
                    m,
                    &["Exact", "NotOlderThan", ""],
                ));
            }
            if m == "Exact" && resource_version == Some(0) {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if send_initial_events.is_some() {
            errs.push(FieldError::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
    }
    if !errs.is_empty() {
        return Err(Status::invalid("meta.k8s.io", "ListOptions", "", errs.to_causes()).into());
    }
    Ok(ListParams {
        labels,
        fields,
        limit,
        continue_token,
        resource_version,
        exact: !watch && rv_match == Some("Exact"),
        send_initial_events,
    })
}

/// A JSON (or YAML) response with a status code.
pub fn respond(code: StatusCode, format: Format, value: &Value) -> Response {
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
                .map(|s| Bytes::from(apiforge_core::protobuf::status_body(&s)))
                .map_err(|e| e.to_string()),
            _ => Err("no protobuf serializer for this object".into()),
        },
    };
    match body {
        Ok(body) => bytes_response(code, format.content_type(), body),
        Err(e) => error_response(&Status::internal(e).into()),
    }
}
