//! The review "resources": create-only, nothing stored, answered from the
//! authenticator's and authorizer's view of the request.
//!
//! - `authorization.k8s.io/v1` SelfSubjectAccessReview (may I?),
//!   SubjectAccessReview and LocalSubjectAccessReview (may they?), and
//!   SelfSubjectRulesReview (what may I do in a namespace — from RBAC);
//! - `authentication.k8s.io/v1` (and `v1beta1`) SelfSubjectReview (who am
//!   I), and `v1` TokenReview (who is this bearer token: the server's token
//!   authenticators, as kube-apiserver's `tokenreviews` storage runs them).
//!
//! Bodies are JSON or Kubernetes protobuf (kubectl 1.32+ sends these kinds
//! as protobuf); the answer is the request object with its `status` filled,
//! code 201, in protobuf when the client's first `Accept` type is protobuf.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{StatusCode, header};
use k8s_pb::api::authentication::v1 as authn_pb;
use k8s_pb::api::authorization::v1 as authz_pb;
use prost::Message;
use serde_json::{Value, json};

use super::{Attributes, Authorizer, Decision};
use crate::authn::{Authenticator, UserInfo};
use crate::error::ApiError;
use crate::request::MAX_REQUEST_BODY_BYTES;
use crate::request::RequestInfo;
use crate::request::response::error_response;
use apiforge_core::meta::{Status, StatusCause};

const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTHENTICATION: &str = "authentication.k8s.io";

/// The review resources: group, version, plural and kind.
#[rustfmt::skip]
pub const RESOURCES: [(&str, &str, &str, &str); 7] = [
    (AUTHORIZATION, "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
    (AUTHORIZATION, "v1", "subjectaccessreviews", "SubjectAccessReview"),
    (AUTHORIZATION, "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview"),
    (AUTHORIZATION, "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview"),
    (AUTHENTICATION, "v1", "selfsubjectreviews", "SelfSubjectReview"),
    (AUTHENTICATION, "v1beta1", "selfsubjectreviews", "SelfSubjectReview"),
    (AUTHENTICATION, "v1", "tokenreviews", "TokenReview"),
];

/// The review kind a request addresses, by group, version and plural.
fn kind_of(info: &RequestInfo) -> Option<&'static str> {
    RESOURCES
        .iter()
        .find(|(group, version, plural, _)| {
            (
                info.group.as_str(),
                info.version.as_str(),
                info.resource.as_str(),
            ) == (*group, *version, *plural)
        })
        .map(|(_, _, _, kind)| *kind)
}

/// Whether the request addresses a review resource.
pub fn is_review(info: &RequestInfo) -> bool {
    info.is_resource_request && info.name.is_empty() && kind_of(info).is_some()
}

fn is_protobuf(value: Option<&http::HeaderValue>) -> bool {
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|v| v.trim().starts_with(apiforge_core::protobuf::MEDIA_TYPE))
}

/// Answers a review request made by `user` (already authorized to create
/// it).
pub async fn handle(
    authenticator: &Authenticator,
    authorizer: &Authorizer,
    user: &UserInfo,
    info: &RequestInfo,
    req: http::Request<Body>,
) -> Response {
    match answer(authenticator, authorizer, user, info, req).await {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

async fn answer(
    authenticator: &Authenticator,
    authorizer: &Authorizer,
    user: &UserInfo,
    info: &RequestInfo,
    req: http::Request<Body>,
) -> Result<Response, ApiError> {
    let Some(kind) = kind_of(info) else {
        return Err(Status::path_not_found().into());
    };
    if info.verb != "create" {
        return Err(Status::method_not_allowed(&info.verb, &info.group, &info.resource).into());
    }
    let namespaced = kind == "LocalSubjectAccessReview";
    if namespaced == info.namespace.is_empty() {
        return Err(Status::path_not_found().into());
    }
    let proto_in = is_protobuf(req.headers().get(header::CONTENT_TYPE));
    let proto_out = is_protobuf(req.headers().get(header::ACCEPT));
    let body = axum::body::to_bytes(req.into_body(), MAX_REQUEST_BODY_BYTES)
        .await
        .map_err(|e| ApiError::from(Status::bad_request(e.to_string())))?;
    let api_version = format!("{}/{}", info.group, info.version);
    let mut object = if proto_in {
        let env = apiforge_core::protobuf::unwrap(&body)
            .map_err(|e| ApiError::from(Status::bad_request(e.to_string())))?;
        pb_to_json(kind, &env.raw)?
    } else {
        serde_json::from_slice::<Value>(&body)
            .map_err(|e| ApiError::from(Status::bad_request(format!("error decoding body: {e}"))))?
    };
    if !object.is_object() {
        return Err(Status::bad_request("the body must be a JSON object").into());
    }
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    if object.get("metadata").is_none_or(|m| !m.is_object()) {
        object["metadata"] = json!({});
    }
    if object["metadata"].get("creationTimestamp").is_none() {
        object["metadata"]["creationTimestamp"] = Value::Null;
    }
    object["status"] = match kind {
        "SelfSubjectReview" => json!({"userInfo": user}),
        "SelfSubjectRulesReview" => rules_status(authorizer, user, &object),
        "TokenReview" => token_status(authenticator, &object).await?,
        _ => access_status(authorizer, user, kind, info, &object).await?,
    };
    let resp = if proto_out {
        let raw = json_to_pb(kind, &object)?;
        let body = apiforge_core::protobuf::wrap(&api_version, kind, raw);
        bytes(
            StatusCode::CREATED,
            apiforge_core::protobuf::MEDIA_TYPE,
            body.into(),
        )
    } else {
        let body = serde_json::to_vec(&object)
            .map_err(|e| ApiError::from(Status::internal(e.to_string())))?;
        bytes(StatusCode::CREATED, "application/json", body.into())
    };
    Ok(resp)
}

fn bytes(code: StatusCode, content_type: &'static str, body: Bytes) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    resp
}

fn s(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or_default().to_string()
}

fn invalid(kind: &str, field: &str, message: &str) -> ApiError {
    Status::invalid(
        AUTHORIZATION,
        kind,
        "",
        vec![StatusCause {
            reason: "FieldValueInvalid".into(),
            message: message.into(),
            field: field.into(),
        }],
    )
    .into()
}

/// The status of a TokenReview (kube-apiserver's `tokenreviews` storage):
/// the token authenticated for `spec.audiences` (default: the server's
/// `--api-audiences`); refusals report `authenticated` omitted, an empty
/// `user` and the authenticators' `error`.
async fn token_status(authenticator: &Authenticator, object: &Value) -> Result<Value, ApiError> {
    let namespace = s(object.pointer("/metadata/namespace"));
    if !namespace.is_empty() {
        return Err(Status::bad_request(format!(
            "namespace is not allowed on this type: {namespace}"
        ))
        .into());
    }
    let token = s(object.pointer("/spec/token"));
    if token.is_empty() {
        return Err(
            Status::bad_request("token is required for TokenReview in authentication").into(),
        );
    }
    let mut audiences = strs(object.pointer("/spec/audiences"));
    if audiences.is_empty() {
        audiences = authenticator.api_audiences().to_vec();
    }
    Ok(match authenticator.review_token(&token, &audiences).await {
        Ok((user, audiences)) => {
            let mut status = json!({"authenticated": true, "user": user});
            if !audiences.is_empty() {
                status["audiences"] = json!(audiences);
            }
            status
        }
        Err(error) => json!({"user": {}, "error": error}),
    })
}

async fn access_status(
    authorizer: &Authorizer,
    requester: &UserInfo,
    kind: &str,
    info: &RequestInfo,
    object: &Value,
) -> Result<Value, ApiError> {
    let spec = object.get("spec").cloned().unwrap_or_default();
    let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let user = if kind == "SelfSubjectAccessReview" {
        requester.clone()
    } else {
        let user = UserInfo {
            name: s(spec.get("user")),
            uid: s(spec.get("uid")),
            groups: serde_json::from_value(spec.get("groups").cloned().unwrap_or_default())
                .unwrap_or_default(),
            extra: serde_json::from_value(spec.get("extra").cloned().unwrap_or_default())
                .unwrap_or_default(),
        };
        if user.name.is_empty() && user.groups.is_empty() {
            return Err(invalid(
                kind,
                "spec.user",
                "at least one of user or group must be specified",
            ));
        }
        user
    };
    let attrs = match (resource, non_resource) {
        (Some(r), None) => {
            let namespace = s(r.get("namespace"));
            if kind == "LocalSubjectAccessReview" && namespace != info.namespace {
                return Err(invalid(
                    kind,
                    "spec.resourceAttributes.namespace",
                    "must match metadata.namespace",
                ));
            }
            Attributes {
                user,
                verb: s(r.get("verb")),
                resource_request: true,
                namespace,
                api_group: s(r.get("group")),
                api_version: s(r.get("version")),
                resource: s(r.get("resource")),
                subresource: s(r.get("subresource")),
                name: s(r.get("name")),
                path: String::new(),
            }
        }
        (None, Some(n)) if kind != "LocalSubjectAccessReview" => Attributes {
            user,
            verb: s(n.get("verb")),
            path: s(n.get("path")),
            ..Default::default()
        },
        _ => {
            return Err(invalid(
                kind,
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    let verdict = authorizer.evaluate(&attrs).await;
    let mut status = json!({"allowed": verdict.decision == Decision::Allow});
    if verdict.decision == Decision::Deny {
        status["denied"] = json!(true);
    }
    if !verdict.reason.is_empty() {
        status["reason"] = json!(verdict.reason);
    }
    if let Some(error) = verdict.error {
        status["evaluationError"] = json!(error);
    }
    Ok(status)
}

fn rules_status(authorizer: &Authorizer, user: &UserInfo, object: &Value) -> Value {
    let namespace = s(object.pointer("/spec/namespace"));
    let Some(rbac) = authorizer.rbac() else {
        return json!({"resourceRules": [], "nonResourceRules": [], "incomplete": true,
            "evaluationError": "rules are only known with the RBAC authorizer"});
    };
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for r in rbac.snapshot().rules_for(user, &namespace) {
        if r.non_resource_urls.is_empty() {
            let mut rule =
                json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
            if !r.resource_names.is_empty() {
                rule["resourceNames"] = json!(r.resource_names);
            }
            resource_rules.push(rule);
        } else {
            non_resource_rules
                .push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
        }
    }
    json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false})
}

fn opt(v: Option<String>) -> Value {
    v.map(Value::from).unwrap_or(Value::Null)
}

fn resource_attributes_json(r: authz_pb::ResourceAttributes) -> Value {
    json!({
        "namespace": opt(r.namespace), "verb": opt(r.verb), "group": opt(r.group),
        "version": opt(r.version), "resource": opt(r.resource),
        "subresource": opt(r.subresource), "name": opt(r.name),
    })
}

fn non_resource_attributes_json(n: authz_pb::NonResourceAttributes) -> Value {
    json!({"path": opt(n.path), "verb": opt(n.verb)})
}

fn meta_json(m: Option<k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut out = json!({});
    if let Some(name) = m.name.filter(|n| !n.is_empty()) {
        out["name"] = json!(name);
    }
    if let Some(ns) = m.namespace.filter(|n| !n.is_empty()) {
        out["namespace"] = json!(ns);
    }
    out
}

fn decode_err(e: prost::DecodeError) -> ApiError {
    Status::bad_request(format!("error decoding protobuf body: {e}")).into()
}

/// The JSON form of a protobuf review (only the fields the answer needs).
fn pb_to_json(kind: &str, raw: &[u8]) -> Result<Value, ApiError> {
    let spec_of = |resource: Option<authz_pb::ResourceAttributes>,
                   non_resource: Option<authz_pb::NonResourceAttributes>| {
        let mut spec = json!({});
        if let Some(r) = resource {
            spec["resourceAttributes"] = resource_attributes_json(r);
        }
        if let Some(n) = non_resource {
            spec["nonResourceAttributes"] = non_resource_attributes_json(n);
        }
        spec
    };
    Ok(match kind {
        "SelfSubjectAccessReview" => {
            let m = authz_pb::SelfSubjectAccessReview::decode(raw).map_err(decode_err)?;
            let spec = m.spec.unwrap_or_default();
            json!({"metadata": meta_json(m.metadata),
                "spec": spec_of(spec.resource_attributes, spec.non_resource_attributes)})
        }
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let (metadata, spec) = if kind == "SubjectAccessReview" {
                let m = authz_pb::SubjectAccessReview::decode(raw).map_err(decode_err)?;
                (m.metadata, m.spec.unwrap_or_default())
            } else {
                let m = authz_pb::LocalSubjectAccessReview::decode(raw).map_err(decode_err)?;
                (m.metadata, m.spec.unwrap_or_default())
            };
            let mut out = spec_of(spec.resource_attributes, spec.non_resource_attributes);
            out["user"] = opt(spec.user);
            out["uid"] = opt(spec.uid);
            out["groups"] = json!(spec.groups);
            let extra: serde_json::Map<String, Value> = spec
                .extra
                .into_iter()
                .map(|(k, v)| (k, json!(v.items)))
                .collect();
            out["extra"] = Value::Object(extra);
            json!({"metadata": meta_json(metadata), "spec": out})
        }
        "SelfSubjectRulesReview" => {
            let m = authz_pb::SelfSubjectRulesReview::decode(raw).map_err(decode_err)?;
            json!({"metadata": meta_json(m.metadata),
                "spec": {"namespace": opt(m.spec.unwrap_or_default().namespace)}})
        }
        "TokenReview" => {
            let m = authn_pb::TokenReview::decode(raw).map_err(decode_err)?;
            let spec = m.spec.unwrap_or_default();
            json!({"metadata": meta_json(m.metadata),
                "spec": {"token": opt(spec.token), "audiences": spec.audiences}})
        }
        _ => {
            let m = authn_pb::SelfSubjectReview::decode(raw).map_err(decode_err)?;
            json!({"metadata": meta_json(m.metadata)})
        }
    })
}

fn strs(v: Option<&Value>) -> Vec<String> {
    serde_json::from_value(v.cloned().unwrap_or_default()).unwrap_or_default()
}

fn some(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_string)
}

fn meta_pb(v: &Value) -> Option<k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta> {
    Some(k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: some(v.pointer("/metadata/name")),
        namespace: some(v.pointer("/metadata/namespace")),
        ..Default::default()
    })
}

fn resource_attributes_pb(v: Option<&Value>) -> Option<authz_pb::ResourceAttributes> {
    let v = v.filter(|v| v.is_object())?;
    Some(authz_pb::ResourceAttributes {
        namespace: some(v.get("namespace")),
        verb: some(v.get("verb")),
        group: some(v.get("group")),
        version: some(v.get("version")),
        resource: some(v.get("resource")),
        subresource: some(v.get("subresource")),
        name: some(v.get("name")),
        ..Default::default()
    })
}

fn non_resource_attributes_pb(v: Option<&Value>) -> Option<authz_pb::NonResourceAttributes> {
    let v = v.filter(|v| v.is_object())?;
    Some(authz_pb::NonResourceAttributes {
        path: some(v.get("path")),
        verb: some(v.get("verb")),
    })
}

fn access_status_pb(v: &Value) -> Option<authz_pb::SubjectAccessReviewStatus> {
    let st = v.get("status")?;
    Some(authz_pb::SubjectAccessReviewStatus {
        allowed: st.get("allowed").and_then(Value::as_bool),
        denied: st.get("denied").and_then(Value::as_bool),
        reason: some(st.get("reason")),
        evaluation_error: some(st.get("evaluationError")),
    })
}

/// The protobuf message of an answered review.
fn json_to_pb(kind: &str, v: &Value) -> Result<Vec<u8>, ApiError> {
    let spec = v.get("spec");
    let resource = || resource_attributes_pb(spec.and_then(|s| s.get("resourceAttributes")));
    let non_resource =
        || non_resource_attributes_pb(spec.and_then(|s| s.get("nonResourceAttributes")));
    let subject_spec = || authz_pb::SubjectAccessReviewSpec {
        resource_attributes: resource(),
        non_resource_attributes: non_resource(),
        user: some(spec.and_then(|s| s.get("user"))),
        groups: strs(spec.and_then(|s| s.get("groups"))),
        uid: some(spec.and_then(|s| s.get("uid"))),
        ..Default::default()
    };
    Ok(match kind {
        "SelfSubjectAccessReview" => authz_pb::SelfSubjectAccessReview {
            metadata: meta_pb(v),
            spec: Some(authz_pb::SelfSubjectAccessReviewSpec {
                resource_attributes: resource(),
                non_resource_attributes: non_resource(),
            }),
            status: access_status_pb(v),
        }
        .encode_to_vec(),
        "SubjectAccessReview" => authz_pb::SubjectAccessReview {
            metadata: meta_pb(v),
            spec: Some(subject_spec()),
            status: access_status_pb(v),
        }
        .encode_to_vec(),
        "LocalSubjectAccessReview" => authz_pb::LocalSubjectAccessReview {
            metadata: meta_pb(v),
            spec: Some(subject_spec()),
            status: access_status_pb(v),
        }
        .encode_to_vec(),
        "SelfSubjectRulesReview" => {
            let st = v.get("status");
            let rules = |key: &str| -> Vec<Value> {
                st.and_then(|s| s.get(key))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            };
            authz_pb::SelfSubjectRulesReview {
                metadata: meta_pb(v),
                spec: Some(authz_pb::SelfSubjectRulesReviewSpec {
                    namespace: some(spec.and_then(|s| s.get("namespace"))),
                }),
                status: Some(authz_pb::SubjectRulesReviewStatus {
                    resource_rules: rules("resourceRules")
                        .iter()
                        .map(|r| authz_pb::ResourceRule {
                            verbs: strs(r.get("verbs")),
                            api_groups: strs(r.get("apiGroups")),
                            resources: strs(r.get("resources")),
                            resource_names: strs(r.get("resourceNames")),
                        })
                        .collect(),
                    non_resource_rules: rules("nonResourceRules")
                        .iter()
                        .map(|r| authz_pb::NonResourceRule {
                            verbs: strs(r.get("verbs")),
                            non_resource_ur_ls: strs(r.get("nonResourceURLs")),
                        })
                        .collect(),
                    incomplete: st
                        .and_then(|s| s.get("incomplete"))
                        .and_then(Value::as_bool),
                    evaluation_error: some(st.and_then(|s| s.get("evaluationError"))),
                }),
            }
            .encode_to_vec()
        }
        "TokenReview" => {
            let st = v.get("status");
            authn_pb::TokenReview {
                metadata: meta_pb(v),
                spec: Some(authn_pb::TokenReviewSpec {
                    token: some(spec.and_then(|s| s.get("token"))),
                    audiences: strs(spec.and_then(|s| s.get("audiences"))),
                }),
                status: Some(authn_pb::TokenReviewStatus {
                    authenticated: Some(
                        st.and_then(|s| s.get("authenticated"))
                            .and_then(Value::as_bool)
                            .unwrap_or_default(),
                    ),
                    user: Some(user_info_pb(st.and_then(|s| s.get("user")))),
                    audiences: strs(st.and_then(|s| s.get("audiences"))),
                    error: some(st.and_then(|s| s.get("error"))),
                }),
            }
            .encode_to_vec()
        }
        _ => {
            let u = v.pointer("/status/userInfo");
            authn_pb::SelfSubjectReview {
                metadata: meta_pb(v),
                status: Some(authn_pb::SelfSubjectReviewStatus {
                    user_info: Some(user_info_pb(u)),
                }),
            }
            .encode_to_vec()
        }
    })
}

/// The protobuf `UserInfo` of a JSON one.
fn user_info_pb(u: Option<&Value>) -> authn_pb::UserInfo {
    let extra = u
        .and_then(|u| u.get("extra"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, vs)| {
                    (
                        k.clone(),
                        authn_pb::ExtraValue {
                            items: strs(Some(vs)),
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    authn_pb::UserInfo {
        username: some(u.and_then(|u| u.get("username"))),
        uid: some(u.and_then(|u| u.get("uid"))),
        groups: strs(u.and_then(|u| u.get("groups"))),
        extra,
    }
}
