//! The API error: a boxed `metav1.Status`, rendered as the response body at
//! the HTTP edge.

use apiforge_core::meta::Status;
use apiforge_storage as storage;

/// An error a request can end with; always carries the Status to return.
#[derive(Debug, Clone)]
pub struct ApiError(pub Box<Status>);

impl ApiError {
    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        self.0.code
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.0.code, self.0.reason, self.0.message)
    }
}

impl std::error::Error for ApiError {}

impl From<Status> for ApiError {
    fn from(s: Status) -> Self {
        ApiError(Box::new(s))
    }
}

/// Result alias of request handling.
pub type ApiResult<T> = Result<T, ApiError>;

impl From<storage::Error> for ApiError {
    fn from(e: storage::Error) -> Self {
        use storage::Error as E;
        let status = match &e {
            E::NotFound(key) => Status::failure(404, "NotFound", format!("{key} not found")),
            E::AlreadyExists(key) => {
                Status::failure(409, "AlreadyExists", format!("{key} already exists"))
            }
            E::Conflict { message, .. } => Status::failure(409, "Conflict", message.clone()),
            E::Compacted {
                requested,
                compacted,
            } => Status::expired(format!(
                "too old resource version: {requested} ({compacted})"
            )),
            E::FutureRevision { requested, current } => {
                let mut s = Status::timeout(format!(
                    "Timeout: Too large resource version: {requested}, current: {current}"
                ));
                s.details = Some(apiforge_core::meta::StatusDetails {
                    causes: vec![apiforge_core::meta::StatusCause {
                        reason: "ResourceVersionTooLarge".into(),
                        message: "Too large resource version".into(),
                        field: String::new(),
                    }],
                    retry_after_seconds: Some(1),
                    ..Default::default()
                });
                s
            }
            E::Unavailable(m) => Status::unavailable(m.clone()),
            // apimachinery's NewTooManyRequests(message, 1).
            E::TooManyRequests(m) => {
                let mut s = Status::failure(429, "TooManyRequests", m.clone());
                s.details = Some(apiforge_core::meta::StatusDetails {
                    retry_after_seconds: Some(1),
                    ..Default::default()
                });
                s
            }
            E::Timeout(m) => Status::timeout(m.clone()),
            E::WatcherTooSlow => Status::failure(500, "InternalError", e.to_string()),
            E::Internal(m) => Status::internal(m.clone()),
        };
        ApiError(Box::new(status))
    }
}
