//! Request bodies: reading them within the size limit, decoding JSON, YAML
//! or protobuf into the kind's hub, and checking their apiVersion and
//! kind, with the field validation of `fieldValidation`.

use axum::extract::Request;
use bytes::Bytes;
use http::header;
use serde_json::Value;

use super::negotiation::{self, Format};
use super::{Ctx, protobuf};
use crate::error::{ApiError, ApiResult};
use crate::request::MAX_REQUEST_BODY_BYTES;
use apiforge_core::meta::Status;
use apiforge_core::scheme::{DecodeError, Kind, Object};

/// The whole request body, or 413 when it is over
/// [`MAX_REQUEST_BODY_BYTES`] (kube-apiserver's 3 MiB default).
pub(super) async fn read_body_limited(req: Request) -> ApiResult<Bytes> {
    axum::body::to_bytes(req.into_body(), MAX_REQUEST_BODY_BYTES)
        .await
        .map_err(|_| {
            Status::too_large(format!(
                "Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}"
            ))
            .into()
        })
}

/// The request body decoded into the kind's hub, as JSON (for the writes
/// that merge it with a stored object).
pub(super) async fn read_body(
    ctx: &Ctx<'_>,
    req: Request,
    validation: crate::patch::FieldValidation,
) -> ApiResult<Value> {
    read_decoded(ctx, req, validation, Kind::decode).await
}

/// The request body decoded once into the kind's hub, typed.
pub(super) async fn read_object(
    ctx: &Ctx<'_>,
    req: Request,
    validation: crate::patch::FieldValidation,
) -> ApiResult<Object> {
    read_decoded(ctx, req, validation, Kind::decode_object).await
}

/// Reads, parses and checks the body, then `decode`s it from the
/// request's version into the hub: the same path for JSON, YAML and
/// protobuf bodies.
async fn read_decoded<T>(
    ctx: &Ctx<'_>,
    req: Request,
    validation: crate::patch::FieldValidation,
    decode: fn(&Kind, &str, Value) -> Result<T, DecodeError>,
) -> ApiResult<T> {
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
    let issues = super::patch::field_issues(ctx, validation, format, &bytes, &value);
    check_body_kind(ctx, &value, &bytes)?;
    let hub =
        decode(ctx.store.kind(), info.version, value).map_err(|e| cannot_handle(e.to_string()))?;
    super::patch::report_field_issues(validation, issues, cannot_handle)?;
    Ok(hub)
}

/// The stack of a YAML decoding thread: the YAML deserializer takes far
/// more stack per nesting level than a runtime worker thread has (an
/// unoptimized build overflows 2 MiB below 100 levels).
pub const YAML_DECODE_STACK_BYTES: usize = 16 << 20;

/// Decodes a YAML body on a thread with a large stack (see
/// [`yaml_to_json`]), so no body can exhaust a runtime worker's stack.
pub(super) async fn decode_yaml(text: String) -> Result<Value, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("yaml-decode".into())
        .stack_size(YAML_DECODE_STACK_BYTES)
        .spawn(move || {
            let _ = tx.send(yaml_to_json(&text));
        })
        .map_err(|e| e.to_string())?;
    rx.await.map_err(|e| e.to_string())?
}

/// Decodes a YAML document into JSON, nesting at most as deep as the JSON
/// decoder allows (serde_json's 128 levels) and expanding aliases only
/// within a budget, so no "billion laughs" body can exhaust memory. Needs a
/// thread with a stack of [`YAML_DECODE_STACK_BYTES`].
pub fn yaml_to_json(text: &str) -> Result<Value, String> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = 128;
    // Alias expansion (replays count as nodes and scalar bytes) is
    // bounded before it allocates: at most as much scalar text as a body
    // may hold, and the parser's 250,000 nodes.
    budget.max_total_scalar_bytes = MAX_REQUEST_BODY_BYTES;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    serde_saphyr::from_str_with_options::<Value>(text, options).map_err(|e| e.to_string())
}

/// Checks the body's `apiVersion` and `kind` (each defaulted from the
/// endpoint when absent) as kube-apiserver's decoder does: another version
/// of the same kind is "the API version in the data ... does not match";
/// a kind the server does not serve in that version, or another kind, is
/// "cannot be handled".
pub(super) fn check_body_kind(ctx: &Ctx<'_>, value: &Value, body: &[u8]) -> ApiResult<()> {
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
        .served
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

#[cfg(test)]
mod tests {
    use super::decode_yaml;

    /// `a0: &a0 [x, x, ...]`, then each level `aN: &aN [*aN-1, ...]`:
    /// `width`^`levels` leaves from a few hundred bytes.
    fn laughs(levels: usize, width: usize) -> String {
        let mut out = format!("a0: &a0 [{}]\n", vec!["lol"; width].join(", "));
        for i in 1..=levels {
            let prev = format!("*a{}", i - 1);
            out.push_str(&format!(
                "a{i}: &a{i} [{}]\n",
                vec![prev.as_str(); width].join(", ")
            ));
        }
        out
    }

    fn wide(anchors: usize, aliases_per_anchor: usize, scalar: usize) -> String {
        let mut out = String::from("defs:\n");
        for i in 0..anchors {
            out.push_str(&format!("  - &d{i} \"{}\"\n", "x".repeat(scalar)));
        }
        out.push_str("uses:\n");
        for i in 0..anchors {
            for _ in 0..aliases_per_anchor {
                out.push_str(&format!("  - *d{i}\n"));
            }
        }
        out
    }

    #[tokio::test]
    async fn alias_expansion_is_bounded() {
        for (what, text) in [
            ("billion laughs", laughs(9, 10)),
            ("deep laughs", laughs(30, 2)),
            ("wide aliases", wide(300, 10, 9_000)),
        ] {
            let err = decode_yaml(text).await.expect_err(what);
            assert!(err.contains("budget breached"), "{what}: {err}");
        }
        // A body without aliases as large as a body may be still decodes.
        let text = wide(300, 0, 10_000);
        assert!(text.len() > 3_000_000);
        assert!(decode_yaml(text).await.is_ok());
    }
}
