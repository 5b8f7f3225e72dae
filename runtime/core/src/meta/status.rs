use serde::{Deserialize, Serialize};

/// `metav1.Status`: the body of every error response (and of some
/// successful deletes).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Always `Status`.
    pub kind: String,
    /// Always `v1`.
    pub api_version: String,
    /// Always an empty object for errors.
    pub metadata: super::ListMeta,
    /// `Success` or `Failure`.
    pub status: String,
    /// A human-readable description of the status.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// A machine-readable reason (`NotFound`, `Invalid`, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Extended data about the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: u16,
}

fn is_zero(v: &u16) -> bool {
    *v == 0
}

/// Extra information about a `Status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The name of the resource the status is about.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The group of the resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The kind (for most errors the resource's plural name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The uid of the resource (successful deletes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Individual causes, e.g. field errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds the client should wait before retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<i32>,
}

/// One cause of a failure, e.g. a field error.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusCause {
    /// A machine-readable reason (`FieldValueInvalid`, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field path, e.g. `spec.replicas`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl Status {
    /// A failure `Status` with the given code, reason and message.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata: Default::default(),
            status: "Failure".into(),
            message: message.into(),
            reason: reason.into(),
            details: None,
            code,
        }
    }

    /// A success `Status` (code 200) with the given details.
    pub fn success(details: Option<StatusDetails>) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata: Default::default(),
            status: "Success".into(),
            message: String::new(),
            reason: String::new(),
            details,
            code: 0,
        }
    }

    /// Adds details to the status.
    pub fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(details);
        self
    }

    /// 404 NotFound: `<resource>.<group> "<name>" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Status::failure(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: resource.into(),
            ..Default::default()
        })
    }

    /// 409 AlreadyExists: `<resource>.<group> "<name>" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Status::failure(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: resource.into(),
            ..Default::default()
        })
    }

    /// 409 Conflict with Kubernetes' standard optimistic-concurrency message.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Status::failure(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        )
        .with_details(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: resource.into(),
            ..Default::default()
        })
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Status::failure(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Status::failure(401, "Unauthorized", "Unauthorized")
    }

    /// 404 for paths the server does not serve.
    pub fn path_not_found() -> Self {
        Status::failure(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(StatusDetails::default())
    }

    /// 405 MethodNotAllowed for a verb a resource does not support.
    pub fn method_not_allowed(method: &str, group: &str, resource: &str) -> Self {
        Status::failure(
            405,
            "MethodNotAllowed",
            format!(
                "{method} is not supported on resources of kind \"{}\"",
                qualified(group, resource)
            ),
        )
        .with_details(StatusDetails::default())
    }

    /// 406 NotAcceptable for an Accept header the endpoint cannot satisfy.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Status::failure(406, "NotAcceptable", message)
    }

    /// 415 UnsupportedMediaType for a request body the server cannot decode.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Status::failure(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {content_type:?})"
            ),
        )
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(message: impl Into<String>) -> Self {
        Status::failure(413, "RequestEntityTooLarge", message)
    }

    /// 410 Expired (resource version too old).
    pub fn expired(message: impl Into<String>) -> Self {
        Status::failure(410, "Expired", message)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        Status::failure(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(StatusDetails {
            causes: vec![StatusCause {
                message,
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    /// 503 ServiceUnavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Status::failure(503, "ServiceUnavailable", message)
    }

    /// 504 Timeout.
    pub fn timeout(message: impl Into<String>) -> Self {
        Status::failure(504, "Timeout", message)
    }

    /// 422 Invalid with field causes, for `<Kind>.<group> "<name>"`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<StatusCause>) -> Self {
        let summary: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let summary = if summary.len() == 1 {
            summary[0].clone()
        } else {
            format!("[{}]", summary.join(", "))
        };
        Status::failure(
            422,
            "Invalid",
            format!(
                "{} \"{name}\" is invalid: {summary}",
                qualified(group, kind)
            ),
        )
        .with_details(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
            causes,
            ..Default::default()
        })
    }
}

/// `<resource>.<group>`, or just `<resource>` for the core group.
pub(crate) fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}
