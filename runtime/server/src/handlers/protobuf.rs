//! The protobuf side of the resource handlers: rendering objects, lists and
//! error Statuses as `application/vnd.kubernetes.protobuf`, decoding
//! protobuf request bodies, and the 415 for kinds without a codec.

use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use serde_json::Value;

use super::negotiation::{self, Allowed, Format, Target};
use super::respond;
use crate::error::ApiError;
use crate::request::response::{bytes_response, error_response};
use apiforge_core::meta::Status;
use apiforge_core::protobuf::{self as pb, MEDIA_TYPE};
use apiforge_core::scheme::ProtobufOps;

/// Renders a versioned object (or, with `list`, a versioned list) in the
/// negotiated format. Protobuf needs the kind's codec; the negotiation only
/// picks protobuf when there is one.
pub(super) fn respond_object(
    code: StatusCode,
    format: Format,
    ops: Option<&ProtobufOps>,
    body: &Value,
    list: bool,
) -> Response {
    if format != Format::Protobuf {
        return respond(code, format, body);
    }
    let encoded = match ops {
        Some(ops) if list => pb::encode_list_body(ops, body),
        Some(ops) => pb::encode_body(ops, body),
        None => {
            return error_response(
                &Status::internal("no protobuf serializer for this kind").into(),
            );
        }
    };
    match encoded {
        Ok(bytes) => bytes_response(code, MEDIA_TYPE, Bytes::from(bytes)),
        Err(e) => error_response(&Status::internal(e.to_string()).into()),
    }
}

/// Renders an error of a resource request. Like kube-apiserver's
/// `ErrorNegotiated`, the Status is written in the serializer the client's
/// Accept header picks for this endpoint (without `as=` conversions):
/// protobuf when it prefers protobuf and the kind has a codec, JSON
/// otherwise (also when negotiation fails).
pub(super) fn error_negotiated(err: &ApiError, accept: Option<&str>, protobuf: bool) -> Response {
    let allowed = Allowed {
        protobuf,
        ..Default::default()
    };
    match negotiation::negotiate(accept, allowed) {
        Some((Format::Protobuf, Target::Object)) => {
            let mut resp = error_response(err);
            *resp.body_mut() = axum::body::Body::from(pb::status_body(&err.0));
            if let Ok(ct) = http::HeaderValue::from_str(MEDIA_TYPE) {
                resp.headers_mut().insert(http::header::CONTENT_TYPE, ct);
            }
            resp
        }
        _ => error_response(err),
    }
}

/// Decodes a protobuf request body into the versioned JSON object; the
/// message of an error is the decoder's.
pub(super) fn decode_body(ops: Option<&ProtobufOps>, body: &[u8]) -> Result<Value, String> {
    let ops = ops.ok_or_else(|| "no protobuf serializer for this kind".to_string())?;
    pb::decode_body(ops, body).map_err(|e| e.to_string())
}

/// 415 UnsupportedMediaType with kube-apiserver's message, listing the
/// media types the endpoint decodes.
pub(super) fn unsupported_media_type(protobuf: bool) -> ApiError {
    let accepted = if protobuf {
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    } else {
        "application/json, application/yaml"
    };
    Status::failure(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {accepted}"
        ),
    )
    .into()
}
