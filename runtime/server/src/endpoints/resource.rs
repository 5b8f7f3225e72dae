//! Handlers of resource requests: get, list, watch, create, update, patch,
//! delete, deletecollection, and the `/status` and `/scale` subresources.

mod patching;
mod subresources;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use super::negotiation::{self, Allowed, Format, Target};
use super::protobuf;
use super::table::{self, IncludeObject};
use super::{ApiServer, respond};
use crate::error::{ApiError, ApiResult};
use crate::registry::{
    DeleteOutcome, FieldSelector, LabelSelector, ListParams, Preconditions, Store, WatchEvent,
};
use crate::request::RequestInfo;
use crate::request::response::error_response;
use crate::request::{MAX_REQUEST_BODY_BYTES, Query};
use apiforge_core::meta::{Status, StatusDetails};
use apiforge_core::resource::KindInfo;
use apiforge_core::validation::{ErrorList, FieldError};

/// Fields every kind can be selected by.
const META_FIELDS: [&str; 2] = ["metadata.name", "metadata.namespace"];

struct Ctx<'a> {
    server: &'a ApiServer,
    store: &'a Store,
    info: &'static KindInfo,
    ri: &'a RequestInfo,
    query: &'a Query,
    accept: Option<String>,
}

pub(super) async fn handle(
    server: &ApiServer,
    ri: Arc<RequestInfo>,
    query: Query,
    req: Request,
) -> Response {
    let Some((store, info)) = server.store(&ri.group, &ri.version, &ri.resource) else {
        return error_response(&Status::path_not_found().into());
    };
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
    let ctx = Ctx {
        server,
        store,
        info,
        ri: &ri,
        query: &query,
        accept,
    };
    let result = match ri.verb.as_str() {
        _ if !ri.subresource.is_empty() => subresources::handle(&ctx, req).await,
        "get" => get(&ctx).await,
        "list" => list(&ctx).await,
        "watch" => watch(&ctx).await,
        "create" => create(&ctx, req).await,
        "update" => update(&ctx, req).await,
        "patch" => patching::patch(&ctx, req).await,
        "delete" => delete(&ctx, req).await,
        "deletecollection" => patching::delete_collection(&ctx, req).await,
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

async fn get(ctx: &Ctx<'_>) -> ApiResult<Response> {
    let rv = resource_version_param(ctx.query)?;
    let (format, target) = ctx.negotiate(false)?;
    if format == Format::Json
        && matches!(target, Target::Object)
        && let Some(cached) = ctx
            .store
            .get_shared(&ctx.ri.namespace, &ctx.ri.name, rv)
            .await?
    {
        let body = shared_encoding(ctx, &cached)?;
        return Ok(crate::request::response::bytes_response(
            StatusCode::OK,
            "application/json",
            body,
        ));
    }
    let hub = ctx.store.get(&ctx.ri.namespace, &ctx.ri.name, rv).await?;
    ctx.object_response(StatusCode::OK, &hub)
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
        .map_err(Status::bad_request)?;
    let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or_default(), &META_FIELDS)
        .map_err(Status::bad_request)?;
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

fn namespace_scope<'a>(ctx: &'a Ctx<'_>) -> Option<&'a str> {
    if ctx.ri.namespace.is_empty() {
        None
    } else {
        Some(ctx.ri.namespace.as_str())
    }
}

async fn list(ctx: &Ctx<'_>) -> ApiResult<Response> {
    let params = parse_list_params(ctx)?;
    let (format, target) = ctx.negotiate(true)?;
    if format == Format::Json
        && matches!(target, Target::Object)
        && let Some(page) = ctx.store.list_shared(namespace_scope(ctx), &params).await?
    {
        return shared_list_response(ctx, &page);
    }
    let page = ctx.store.list(namespace_scope(ctx), &params).await?;
    let mut meta = serde_json::Map::new();
    meta.insert(
        "resourceVersion".into(),
        json!(page.resource_version.to_string()),
    );
    if let Some(c) = &page.continue_token {
        meta.insert("continue".into(), json!(c));
    }
    if let Some(r) = page.remaining {
        meta.insert("remainingItemCount".into(), json!(r));
    }
    let items: Vec<Value> = page
        .items
        .iter()
        .map(|o| ctx.encode(o))
        .collect::<ApiResult<_>>()?;
    let body = match target {
        Target::Table(v) => table::table(
            ctx.info,
            ctx.store.kind().table_printer(),
            &items,
            &v,
            ctx.include_object()?,
            Some(Value::Object(meta)),
            true,
        ),
        Target::PartialObjectMetadataList(v) => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": format!("meta.k8s.io/{v}"),
            "metadata": meta,
            "items": items.iter().map(|o| table::partial_metadata(o, &v)).collect::<Vec<_>>(),
        }),
        _ => json!({
            "apiVersion": ctx.info.api_version(),
            "kind": ctx.info.list_kind(),
            "metadata": meta,
            "items": items,
        }),
    };
    Ok(protobuf::respond_object(
        StatusCode::OK,
        format,
        ctx.protobuf(),
        &body,
        true,
    ))
}

/// The JSON encoding of one cached object in the request's version, made
/// once and shared by every list and watch that sends it.
fn shared_encoding(
    ctx: &Ctx<'_>,
    object: &crate::registry::cache::CachedObject,
) -> ApiResult<Bytes> {
    let (kind, version) = (ctx.store.kind(), ctx.info.version);
    object
        .encoded(version, |hub| encode_json(kind, version, hub))
        .map_err(|e| Status::internal(e).into())
}

/// A hub object's JSON encoding in `version`.
fn encode_json(
    kind: &apiforge_core::scheme::Kind,
    version: &str,
    hub: &Value,
) -> Result<Bytes, String> {
    kind.encode(version, hub)
        .map_err(|e| e.to_string())
        .and_then(|o| serde_json::to_vec(&o).map_err(|e| e.to_string()))
        .map(Bytes::from)
}

/// A JSON list assembled from the items' shared encodings (no per-request
/// conversion or serialization of the items).
fn shared_list_response(ctx: &Ctx<'_>, page: &crate::registry::SharedPage) -> ApiResult<Response> {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "resourceVersion".into(),
        json!(page.resource_version.to_string()),
    );
    if let Some(c) = &page.continue_token {
        meta.insert("continue".into(), json!(c));
    }
    if let Some(r) = page.remaining {
        meta.insert("remainingItemCount".into(), json!(r));
    }
    let head = serde_json::to_vec(&json!({
        "apiVersion": ctx.info.api_version(),
        "kind": ctx.info.list_kind(),
        "metadata": meta,
    }))
    .map_err(|e| ApiError::from(Status::internal(e.to_string())))?;
    let encoded: Vec<Bytes> = page
        .items
        .iter()
        .map(|o| shared_encoding(ctx, o))
        .collect::<ApiResult<_>>()?;
    let mut body =
        Vec::with_capacity(head.len() + 16 + encoded.iter().map(|b| b.len() + 1).sum::<usize>());
    // `{...head...}` → `{...head...,"items":[a,b,...]}`
    body.extend_from_slice(&head[..head.len() - 1]);
    body.extend_from_slice(b",\"items\":[");
    for (i, item) in encoded.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(b"]}");
    Ok(crate::request::response::bytes_response(
        StatusCode::OK,
        "application/json",
        Bytes::from(body),
    ))
}

async fn watch(ctx: &Ctx<'_>) -> ApiResult<Response> {
    let params = parse_list_params(ctx)?;
    // Watch streams are JSON only: a client preferring protobuf gets its
    // JSON clause (client-go decodes by the response Content-Type).
    let (format, target) = negotiation::negotiate(
        ctx.accept.as_deref(),
        Allowed {
            meta_targets: true,
            ..Default::default()
        },
    )
    .ok_or_else(not_acceptable)?;
    if format != Format::Json {
        return Err(not_acceptable());
    }
    let include = ctx.include_object()?;
    let bookmarks = ctx.query.get("allowWatchBookmarks").is_some_and(query_bool);
    let timeout = match timeout_seconds_param(ctx.query)? {
        // Zero or negative: the server's default, as kube-apiserver.
        Some(n) if n > 0 => Duration::from_secs(n.unsigned_abs()),
        _ => ctx.server.default_watch_timeout(),
    };
    let events = ctx
        .store
        .watch(namespace_scope(ctx), &params, bookmarks)
        .await?;
    let watcher = crate::metrics::GaugeGuard::new(
        crate::metrics::global()
            .registered_watchers
            .with_label_values(&[ctx.info.group, ctx.info.version, ctx.info.kind]),
    );
    let kind = ctx.store.kind().clone();
    let info = ctx.info;
    let mut first = true;
    let lines = events.map(move |ev| {
        let (ty, object) = match ev {
            // The plain object: encoded once per version and shared by every
            // watcher (and list) that sends this cached object.
            WatchEvent::Object(ty, cached) if matches!(target, Target::Object) => {
                let encoded = cached.encoded(info.version, |hub| encode_json(&kind, info.version, hub));
                return match encoded {
                    Ok(bytes) => event_line(ty, &bytes),
                    Err(e) => encode_line(
                        "ERROR",
                        &serde_json::to_value(Status::internal(e)).unwrap_or_default(),
                    ),
                };
            }
            WatchEvent::Object(ty, cached) => {
                let obj = match cached
                    .object()
                    .and_then(|hub| kind.encode(info.version, &hub).map_err(|e| e.to_string()))
                {
                    Ok(o) => o,
                    Err(e) => return encode_line("ERROR", &serde_json::to_value(Status::internal(e)).unwrap_or_default()),
                };
                let obj = match &target {
                    Target::Table(v) => {
                        let t = table::table(info, kind.table_printer(), &[obj], v, include, None, first);
                        first = false;
                        t
                    }
                    Target::PartialObjectMetadata(v) => table::partial_metadata(&obj, v),
                    _ => obj,
                };
                (ty, obj)
            }
            WatchEvent::Bookmark(rv) => (
                "BOOKMARK",
                json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": {"resourceVersion": rv.to_string()}}),
            ),
            WatchEvent::InitialEventsEnd(rv) => (
                "BOOKMARK",
                json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": {
                    "resourceVersion": rv.to_string(),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                }}),
            ),
            WatchEvent::Error(status) => ("ERROR", serde_json::to_value(&*status).unwrap_or_default()),
        };
        encode_line(ty, &object)
    });
    let mut shutdown = ctx.server.shutdown.clone();
    let stop = async move {
        let _watcher = watcher;
        tokio::select! {
            _ = tokio::time::sleep(timeout) => {}
            _ = shutdown.wait_for(|v| *v) => {}
        }
    };
    // Events already waiting for this watcher go out as one chunk: under
    // load a watcher that fell behind catches up with one TLS record and
    // one write per batch instead of per event (the bytes on the wire are
    // the same newline-separated events).
    let stream = lines
        .ready_chunks(WATCH_BATCH_EVENTS)
        .map(join_lines)
        .take_until(Box::pin(stop))
        .map(Ok::<Bytes, std::convert::Infallible>);
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// The whole request body, or 413 when it is over
/// [`MAX_REQUEST_BODY_BYTES`] (kube-apiserver's 3 MiB default).
async fn read_body_limited(req: Request) -> ApiResult<Bytes> {
    axum::body::to_bytes(req.into_body(), MAX_REQUEST_BODY_BYTES)
        .await
        .map_err(|_| {
            Status::too_large(format!(
                "Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}"
            ))
            .into()
        })
}

/// At most this many waiting watch events are joined into one chunk.
const WATCH_BATCH_EVENTS: usize = 64;

/// One chunk of watch events (each a line).
fn join_lines(mut lines: Vec<Bytes>) -> Bytes {
    if lines.len() == 1 {
        return lines.pop().unwrap_or_default();
    }
    let mut chunk = Vec::with_capacity(lines.iter().map(Bytes::len).sum());
    for line in &lines {
        chunk.extend_from_slice(line);
    }
    Bytes::from(chunk)
}

/// A watch event line around an already encoded object.
fn event_line(ty: &str, object: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + ty.len() + 24);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(ty.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

fn encode_line(ty: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": ty, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

async fn read_body(
    ctx: &Ctx<'_>,
    req: Request,
    validation: crate::patch::FieldValidation,
) -> ApiResult<Value> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let format = negotiation::body_format(content_type.as_deref())
        .filter(|f| *f != Format::Protobuf || ctx.protobuf().is_some())
        .ok_or_else(|| protobuf::unsupported_media_type(ctx.protobuf().is_some()))?;
    let bytes = read_body_limited(req).await?;
    let info = ctx.info;
    let cannot_handle = |e: String| -> ApiError {
        Status::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: {e}",
            info.kind, info.version, info.kind
        ))
        .into()
    };
    // Bodies whose apiVersion/kind cannot even be read (kube-apiserver's
    // `transformDecodeError` without a kind).
    let unrecognized = |e: String| -> ApiError {
        Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {e} ({})",
            info.kind,
            crate::go_errors::summarize_body(&bytes)
        ))
        .into()
    };
    let json_parse_error =
        |e: String| unrecognized(format!("couldn't get version/kind; json parse error: {e}"));
    let mut value: Value = match format {
        Format::Json => serde_json::from_slice(&bytes)
            .map_err(|e| json_parse_error(crate::go_errors::json_error(&e, &bytes)))?,
        Format::Yaml => {
            let yaml_error = |e: String| {
                let first = e.lines().next().unwrap_or_default().to_string();
                unrecognized(format!("error converting YAML to JSON: yaml: {first}"))
            };
            let text = String::from_utf8(bytes.to_vec()).map_err(|e| yaml_error(e.to_string()))?;
            decode_yaml(text).await.map_err(yaml_error)?
        }
        Format::Protobuf => protobuf::decode_body(ctx.protobuf(), &bytes).map_err(cannot_handle)?,
    };
    if let Some(e) = crate::go_errors::not_an_object(&value) {
        return Err(json_parse_error(e));
    }
    if value.is_null() {
        value = Value::Object(Default::default());
    }
    let issues = patching::field_issues(ctx, validation, format, &bytes, &value);
    check_body_kind(ctx, &value, &bytes)?;
    let hub = ctx
        .store
        .kind()
        .decode(info.version, value)
        .map_err(|e| cannot_handle(e.to_string()))?;
    patching::report_field_issues(validation, issues, cannot_handle)?;
    Ok(hub)
}

/// The stack of a YAML decoding thread: the YAML deserializer takes far
/// more stack per nesting level than a runtime worker thread has (an
/// unoptimized build overflows 2 MiB below 100 levels).
const YAML_DECODE_STACK_BYTES: usize = 16 << 20;

/// Decodes a YAML body on a thread with a large stack, nesting at most as
/// deep as the JSON decoder allows (serde_json's 128 levels), so no body
/// can exhaust the stack.
async fn decode_yaml(text: String) -> Result<Value, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("yaml-decode".into())
        .stack_size(YAML_DECODE_STACK_BYTES)
        .spawn(move || {
            let mut budget = serde_saphyr::Budget::default();
            budget.max_depth = 128;
            let mut options = serde_saphyr::Options::default();
            options.budget = Some(budget);
            let decoded = serde_saphyr::from_str_with_options::<Value>(&text, options)
                .map_err(|e| e.to_string());
            let _ = tx.send(decoded);
        })
        .map_err(|e| e.to_string())?;
    rx.await.map_err(|e| e.to_string())?
}

/// Checks the body's `apiVersion` and `kind` (each defaulted from the
/// endpoint when absent) as kube-apiserver's decoder does: another version
/// of the same kind is "the API version in the data ... does not match";
/// a kind the server does not serve in that version, or another kind, is
/// "cannot be handled".
fn check_body_kind(ctx: &Ctx<'_>, value: &Value, body: &[u8]) -> ApiResult<()> {
    let info = ctx.info;
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .unwrap_or(info.kind);
    let (group, version) = match api_version.split('/').collect::<Vec<_>>()[..] {
        [""] => (info.group, info.version),
        [v] => ("", v),
        [g, v] => (g, v),
        _ => {
            return Err(Status::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): unexpected GroupVersion string: {api_version} ({})",
                info.kind,
                crate::go_errors::summarize_body(body)
            ))
            .into());
        }
    };
    if (group, version, kind) == (info.group, info.version, info.kind) {
        return Ok(());
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let served = ctx
        .server
        .stores
        .iter()
        .any(|(_, i)| (i.group, i.version, i.kind) == (group, version, kind));
    let reason = if kind == info.kind && served {
        return Err(Status::bad_request(format!(
            "the API version in the data ({gv}) does not match the expected API version ({})",
            info.api_version()
        ))
        .into());
    } else if served {
        let internal = if info.group.is_empty() {
            "core"
        } else {
            info.group.split('.').next().unwrap_or_default()
        };
        format!(
            "converting ({version}.{kind}) to ({internal}.{}): unknown conversion",
            info.kind
        )
    } else {
        format!(
            "no kind {kind:?} is registered for version {gv:?} in scheme \"pkg/runtime/scheme.go:100\""
        )
    };
    Err(Status::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {}: {reason}",
        info.kind
    ))
    .into())
}

async fn create(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let dry_run = ctx.dry_run("CreateOptions")?;
    let validation = patching::field_validation(ctx, "CreateOptions")?;
    let hub = read_body(ctx, req, validation).await?;
    let created = ctx.store.create(&ctx.ri.namespace, hub, dry_run).await?;
    ctx.object_response(StatusCode::CREATED, &created)
}

async fn update(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let dry_run = ctx.dry_run("UpdateOptions")?;
    let validation = patching::field_validation(ctx, "UpdateOptions")?;
    let hub = read_body(ctx, req, validation).await?;
    let (obj, created) = ctx
        .writer()
        .update(&ctx.ri.namespace, &ctx.ri.name, hub, dry_run)
        .await?;
    ctx.object_response(
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        &obj,
    )
}

async fn delete(ctx: &Ctx<'_>, req: Request) -> ApiResult<Response> {
    let (pre, dry_run, cascade) = delete_options(ctx, req).await?;
    let deleted = match ctx
        .store
        .delete(&ctx.ri.namespace, &ctx.ri.name, &pre, dry_run)
        .await?
    {
        DeleteOutcome::Removed(obj) => obj,
        // As kube-apiserver: 202 Accepted when the object was not removed
        // at once and the client asked for cascading deletion with the
        // (deprecated) `orphanDependents: false`; 200 otherwise.
        DeleteOutcome::Terminating(obj) => {
            let code = if cascade {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            return ctx.object_response(code, &obj);
        }
    };
    let meta = apiforge_core::scheme::object_meta(&deleted);
    let status = Status::success(Some(StatusDetails {
        name: meta.name,
        group: ctx.info.group.into(),
        kind: ctx.info.plural.into(),
        uid: meta.uid,
        ..Default::default()
    }));
    Ok(respond(
        StatusCode::OK,
        Format::Json,
        &serde_json::to_value(status).unwrap_or_default(),
    ))
}

/// The preconditions, the dry-run flag and whether `orphanDependents` is
/// explicitly false, of a delete's `DeleteOptions` body (or, without a body,
/// its query parameters).
async fn delete_options(ctx: &Ctx<'_>, req: Request) -> ApiResult<(Preconditions, bool, bool)> {
    let bytes = read_body_limited(req).await?;
    let mut pre = Preconditions::default();
    // As kube-apiserver: a body carries the options; without one they come
    // from the query parameters.
    let (dry_run, policy, cascade): (Vec<String>, Option<String>, bool) =
        if !bytes.iter().all(u8::is_ascii_whitespace) {
            // kube-apiserver's decoder texts, without a summary of the body.
            let undecodable = |e: String| {
                Status::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
            };
            let opts: Value = serde_json::from_slice(&bytes)
                .map_err(|e| undecodable(crate::go_errors::json_error(&e, &bytes)))?;
            if let Some(e) = crate::go_errors::not_an_object(&opts) {
                return Err(undecodable(e).into());
            }
            if let Some(p) = opts.get("preconditions") {
                pre.uid = p.get("uid").and_then(Value::as_str).map(str::to_string);
                pre.resource_version = p
                    .get("resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            let dry_run = opts
                .get("dryRun")
                .and_then(Value::as_array)
                .map(|values| {
                    values
                        .iter()
                        .map(|v| v.as_str().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default();
            let policy = opts
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string);
            let cascade = opts.get("orphanDependents") == Some(&Value::Bool(false));
            (dry_run, policy, cascade)
        } else {
            if let Some(v) = ctx.query.get("gracePeriodSeconds") {
                crate::go_errors::parse_int64(v).map_err(Status::bad_request)?;
            }
            let dry_run = ctx
                .query
                .get("dryRun")
                .filter(|v| !v.is_empty())
                .map(|v| vec![v.to_string()])
                .unwrap_or_default();
            (
                dry_run,
                ctx.query.get("propagationPolicy").map(str::to_string),
                ctx.query.get("orphanDependents") == Some("false"),
            )
        };
    let mut errs = ErrorList::default();
    if let Some(policy) = &policy
        && !matches!(policy.as_str(), "Orphan" | "Background" | "Foreground")
    {
        errs.push(FieldError::not_supported(
            "propagationPolicy",
            policy.as_str(),
            &["Foreground", "Background", "Orphan", "nil"],
        ));
    }
    if dry_run.iter().any(|v| v != "All") {
        errs.push(FieldError::not_supported(
            "dryRun",
            json!(dry_run),
            &["All"],
        ));
    }
    if !errs.is_empty() {
        return Err(Status::invalid("meta.k8s.io", "DeleteOptions", "", errs.to_causes()).into());
    }
    Ok((pre, !dry_run.is_empty(), cascade))
}
