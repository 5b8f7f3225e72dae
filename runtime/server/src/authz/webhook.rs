//! Webhook authorization (`--authorization-mode=...,Webhook,...` with
//! `--authorization-webhook-*`): each request is sent to the webhook as an
//! `authorization.k8s.io` SubjectAccessReview (the user, and
//! `resourceAttributes` or `nonResourceAttributes` from the request).
//! `status.allowed` allows; `status.denied` denies (later authorizers are
//! not asked); neither is no opinion; a failed call is an
//! [`EvaluationError`] (no opinion, and a 500 when nobody allows).
//!
//! Answers are cached by review spec: allowed ones for
//! `--authorization-webhook-cache-authorized-ttl` (5m), the others for
//! `--authorization-webhook-cache-unauthorized-ttl` (30s); errors are not
//! cached.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Attributes, Authorize, Decision, Error, EvaluationError};
use crate::webhook::{Client, TtlCache};

/// Webhook authorization settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--authorization-webhook-config-file`: the kubeconfig naming the
    /// webhook.
    pub config_file: Option<PathBuf>,
    /// `--authorization-webhook-cache-authorized-ttl`.
    pub authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl`.
    pub unauthorized_ttl: Duration,
    /// `--authorization-webhook-version`: `v1` or `v1beta1`.
    pub version: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            config_file: None,
            authorized_ttl: Duration::from_secs(300),
            unauthorized_ttl: Duration::from_secs(30),
            version: "v1".into(),
        }
    }
}

/// The webhook authorizer.
#[derive(Debug)]
pub struct SubjectAccessWebhook {
    client: Client,
    api_version: String,
    options: Options,
    cache: TtlCache<(Decision, String)>,
}

impl SubjectAccessWebhook {
    /// Reads the kubeconfig.
    pub fn new(options: &Options) -> Result<Self, Error> {
        let path = options.config_file.as_ref().ok_or_else(|| {
            Error::Invalid(
                "authorization-mode Webhook's authorization config file not passed".into(),
            )
        })?;
        if !matches!(options.version.as_str(), "v1" | "v1beta1") {
            return Err(Error::Invalid(format!(
                "unsupported authorization webhook version {:?}, supported versions are \"v1\", \"v1beta1\"",
                options.version
            )));
        }
        let client = Client::from_kubeconfig(path)
            .map_err(|e| Error::Invalid(format!("invalid authorization {e}")))?;
        Ok(SubjectAccessWebhook {
            client,
            api_version: format!("authorization.k8s.io/{}", options.version),
            options: options.clone(),
            cache: TtlCache::default(),
        })
    }
}

impl SubjectAccessWebhook {
    /// The SubjectAccessReview authorizer of a delegating server
    /// (`authorization.k8s.io/v1` SubjectAccessReviews posted to the main
    /// server of `--authorization-kubeconfig`).
    pub fn delegated(options: &super::delegated::Options) -> Result<Self, Error> {
        let client = Client::from_kubeconfig(&options.kubeconfig)
            .map_err(|e| e.to_string())
            .and_then(|c| c.at_path(super::delegated::SUBJECT_ACCESS_REVIEWS_PATH))
            .map_err(|e| Error::Invalid(format!("authorization-kubeconfig: {e}")))?;
        Ok(SubjectAccessWebhook {
            client,
            api_version: "authorization.k8s.io/v1".into(),
            options: Options {
                config_file: Some(options.kubeconfig.clone()),
                authorized_ttl: options.authorized_ttl,
                unauthorized_ttl: options.unauthorized_ttl,
                version: "v1".into(),
            },
            cache: TtlCache::default(),
        })
    }
}

/// The SubjectAccessReview `spec` of `attrs`.
pub fn review_spec(attrs: &Attributes) -> Value {
    let mut spec = json!({});
    if attrs.resource_request {
        spec["resourceAttributes"] = json!({
            "namespace": attrs.namespace,
            "verb": attrs.verb,
            "group": attrs.api_group,
            "version": attrs.api_version,
            "resource": attrs.resource,
            "subresource": attrs.subresource,
            "name": attrs.name,
        });
        // Go's omitempty.
        if let Some(r) = spec["resourceAttributes"].as_object_mut() {
            r.retain(|_, v| v.as_str().is_some_and(|s| !s.is_empty()));
        }
    } else {
        spec["nonResourceAttributes"] = json!({"path": attrs.path, "verb": attrs.verb});
    }
    let user = &attrs.user;
    if !user.name.is_empty() {
        spec["user"] = json!(user.name);
    }
    if !user.groups.is_empty() {
        spec["groups"] = json!(user.groups);
    }
    if !user.extra.is_empty() {
        spec["extra"] = json!(user.extra);
    }
    if !user.uid.is_empty() {
        spec["uid"] = json!(user.uid);
    }
    spec
}

#[async_trait::async_trait]
impl Authorize for SubjectAccessWebhook {
    fn metric_type(&self) -> &'static str {
        "Webhook"
    }

    async fn authorize(&self, attrs: &Attributes) -> Result<(Decision, String), EvaluationError> {
        let spec = review_spec(attrs);
        let key = spec.to_string();
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let review = json!({
            "apiVersion": self.api_version,
            "kind": "SubjectAccessReview",
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": {"allowed": false},
        });
        let answer = self
            .client
            .post_json("subjectaccessreviews.authorization.k8s.io", &review)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "Failed to make webhook authorizer request");
                EvaluationError(e.to_string())
            })?;
        let status = answer.get("status").cloned().unwrap_or_default();
        let flag = |key: &str| status.get(key).and_then(Value::as_bool) == Some(true);
        let reason = status
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        // Both allowed and denied is a denial (upstream also reports it as
        // an error).
        let (decision, ttl) = if flag("denied") {
            (Decision::Deny, self.options.unauthorized_ttl)
        } else if flag("allowed") {
            (Decision::Allow, self.options.authorized_ttl)
        } else {
            (Decision::NoOpinion, self.options.unauthorized_ttl)
        };
        self.cache.set(key, (decision, reason.clone()), ttl);
        Ok((decision, reason))
    }
}
