//! Delegated authorization, as k8s.io/apiserver's
//! `DelegatingAuthorizationOptions` (an aggregated API server's): with
//! `--authorization-kubeconfig`, the server's authorizer is the union of
//!
//! 1. the always-allowed groups (`system:masters`, upstream's
//!    `AlwaysAllowGroups`, which has no flag);
//! 2. the always-allowed paths, `--authorization-always-allow-paths`
//!    (`/healthz,/readyz,/livez`): non-resource requests to those paths
//!    (a trailing `*` matches a prefix), allowed without asking anyone;
//! 3. SubjectAccessReviews posted to the main server of that kubeconfig,
//!    cached for `--authorization-webhook-cache-authorized-ttl` and
//!    `--authorization-webhook-cache-unauthorized-ttl` (10s each).
//!
//! `--authorization-mode` is then not used.

use std::path::PathBuf;
use std::time::Duration;

use super::{Attributes, Authorize, Decision, EvaluationError};

/// The SubjectAccessReview path on the main server.
pub const SUBJECT_ACCESS_REVIEWS_PATH: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// The delegated authorization flags.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--authorization-kubeconfig` (else `--kubeconfig`): the main server
    /// and a user allowed to create SubjectAccessReviews.
    pub kubeconfig: PathBuf,
    /// `--authorization-webhook-cache-authorized-ttl` (10s when delegating).
    pub authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl` (10s when delegating).
    pub unauthorized_ttl: Duration,
    /// `--authorization-always-allow-paths`.
    pub always_allow_paths: Vec<String>,
    /// Upstream's `AlwaysAllowGroups` (`system:masters`).
    pub always_allow_groups: Vec<String>,
}

/// Upstream's path authorizer: non-resource requests to the listed paths
/// (exact, or by prefix for a trailing `*`; a leading `/` is optional) are
/// allowed; everything else is no opinion.
#[derive(Debug)]
pub struct AlwaysAllowPaths {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl AlwaysAllowPaths {
    /// The authorizer of `paths`.
    pub fn new(paths: &[String]) -> Self {
        let mut exact = Vec::new();
        let mut prefixes = Vec::new();
        for p in paths.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            let p = format!("/{}", p.trim_start_matches('/'));
            match p.strip_suffix('*') {
                Some(prefix) => prefixes.push(prefix.to_string()),
                None => exact.push(p),
            }
        }
        AlwaysAllowPaths { exact, prefixes }
    }
}

#[async_trait::async_trait]
impl Authorize for AlwaysAllowPaths {
    async fn authorize(&self, attrs: &Attributes) -> Result<(Decision, String), EvaluationError> {
        if attrs.resource_request {
            return Ok((Decision::NoOpinion, String::new()));
        }
        let path = &attrs.path;
        if self.exact.iter().any(|p| p == path)
            || self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
        {
            return Ok((Decision::Allow, String::new()));
        }
        Ok((Decision::NoOpinion, String::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn paths_allow_exact_and_prefix_non_resource_requests() {
        let a = AlwaysAllowPaths::new(&["/healthz".into(), "readyz".into(), "/debug/*".into()]);
        let at = |path: &str, resource: bool| Attributes {
            path: path.into(),
            resource_request: resource,
            verb: "get".into(),
            ..Default::default()
        };
        let decide = |attrs: Attributes| {
            let a = &a;
            async move { a.authorize(&attrs).await.map(|(d, _)| d) }
        };
        assert_eq!(decide(at("/healthz", false)).await, Ok(Decision::Allow));
        assert_eq!(decide(at("/readyz", false)).await, Ok(Decision::Allow));
        assert_eq!(decide(at("/debug/pprof", false)).await, Ok(Decision::Allow));
        assert_eq!(
            decide(at("/healthz/etcd", false)).await,
            Ok(Decision::NoOpinion)
        );
        assert_eq!(decide(at("/healthz", true)).await, Ok(Decision::NoOpinion));
    }
}
