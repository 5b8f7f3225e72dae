//! Webhook token authentication (`--authentication-token-webhook-*`): a
//! bearer token no other authenticator knows is sent to the webhook as an
//! `authentication.k8s.io` TokenReview (`spec.token`, and `spec.audiences`
//! with `--api-audiences`). `status.authenticated: true` authenticates as
//! `status.user`; `false` with `status.error`, or a failed call, is an
//! error; `false` alone leaves the token unrecognised.
//!
//! Answers are cached for `--authentication-token-webhook-cache-ttl`
//! (2m), both successes and refusals, as kube-apiserver's token cache does;
//! errors are not cached. Keys are SHA-256 digests of the token and the
//! audiences, never the token itself.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::UserInfo;
use crate::webhook::{Client, TtlCache};

/// Webhook token authentication settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--authentication-token-webhook-config-file`: the kubeconfig naming
    /// the webhook.
    pub config_file: PathBuf,
    /// `--authentication-token-webhook-cache-ttl`.
    pub cache_ttl: Duration,
    /// `--authentication-token-webhook-version`: `v1` or `v1beta1`.
    pub version: String,
}

impl Options {
    /// The settings for a config file with kube-apiserver's defaults.
    pub fn new(config_file: PathBuf) -> Self {
        Options {
            config_file,
            cache_ttl: Duration::from_secs(120),
            version: "v1".into(),
        }
    }
}

/// The outcome of a token review: the user and the audiences the token is
/// good for, or not recognised.
pub type Answer = Option<(UserInfo, Vec<String>)>;

/// The webhook token authenticator.
#[derive(Debug)]
pub struct TokenWebhook {
    client: Client,
    api_version: String,
    ttl: Duration,
    cache: TtlCache<Answer>,
    implicit_audiences: Vec<String>,
}

impl TokenWebhook {
    /// Reads the kubeconfig; `version` must be `v1` or `v1beta1`; answers
    /// without audiences are good for `api_audiences`.
    pub fn new(options: &Options, api_audiences: &[String]) -> Result<Self, super::Error> {
        if !matches!(options.version.as_str(), "v1" | "v1beta1") {
            return Err(super::Error::Webhook(format!(
                "unsupported authentication webhook version {:?}, supported versions are \"v1\", \"v1beta1\"",
                options.version
            )));
        }
        let client = Client::from_kubeconfig(&options.config_file)
            .map_err(|e| super::Error::Webhook(format!("invalid authentication token {e}")))?;
        Ok(TokenWebhook {
            client,
            api_version: format!("authentication.k8s.io/{}", options.version),
            ttl: options.cache_ttl,
            cache: TtlCache::default(),
            implicit_audiences: api_audiences.to_vec(),
        })
    }

    /// The TokenReview authenticator of a delegating server
    /// (`authentication.k8s.io/v1` TokenReviews posted to the main server
    /// of `--authentication-kubeconfig`).
    pub fn delegated(
        options: &super::delegated::Options,
        api_audiences: &[String],
    ) -> Result<Self, super::Error> {
        let client = Client::from_kubeconfig(&options.kubeconfig)
            .map_err(|e| e.to_string())
            .and_then(|c| c.at_path(super::delegated::TOKEN_REVIEWS_PATH))
            .map_err(|e| super::Error::Webhook(format!("authentication-kubeconfig: {e}")))?;
        Ok(TokenWebhook {
            client,
            api_version: "authentication.k8s.io/v1".into(),
            ttl: options.cache_ttl,
            cache: TtlCache::default(),
            implicit_audiences: api_audiences.to_vec(),
        })
    }

    /// Reviews `token` for `audiences` (empty: no audience check): the
    /// user and the audiences (of those asked for) the token is good for,
    /// `None` when the webhook does not authenticate it, or the error.
    pub async fn authenticate(&self, token: &str, audiences: &[String]) -> Result<Answer, String> {
        let mut digest = Sha256::new();
        digest.update(token.as_bytes());
        for a in audiences {
            digest.update([0]);
            digest.update(a.as_bytes());
        }
        let key: String = digest
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let answer = match self.cache.get(&key) {
            Some(answer) => answer,
            None => {
                let answer = self.review(token, audiences).await?;
                self.cache.set(key, answer.clone(), self.ttl);
                answer
            }
        };
        // Without audiences in the answer, the token is good for the
        // server's own (`--api-audiences`).
        Ok(answer.and_then(|(user, token_audiences)| {
            if audiences.is_empty() {
                return Some((user, Vec::new()));
            }
            let token_audiences = if token_audiences.is_empty() {
                &self.implicit_audiences
            } else {
                &token_audiences
            };
            let good: Vec<String> = audiences
                .iter()
                .filter(|a| token_audiences.contains(a))
                .cloned()
                .collect();
            (!good.is_empty()).then_some((user, good))
        }))
    }

    async fn review(&self, token: &str, audiences: &[String]) -> Result<Answer, String> {
        let mut spec = json!({"token": token});
        if !audiences.is_empty() {
            spec["audiences"] = json!(audiences);
        }
        let review = json!({
            "apiVersion": self.api_version,
            "kind": "TokenReview",
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": {"user": {}},
        });
        let answer = self
            .client
            .post_json("tokenreviews.authentication.k8s.io", &review)
            .await
            .map_err(|e| e.to_string())?;
        let status = answer.get("status").cloned().unwrap_or_default();
        if status.get("authenticated").and_then(Value::as_bool) != Some(true) {
            return match status.get("error").and_then(Value::as_str) {
                Some(e) if !e.is_empty() => Err(e.to_string()),
                _ => Ok(None),
            };
        }
        let user = status.get("user").cloned().unwrap_or_default();
        let text = |key: &str| {
            user.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let info = UserInfo {
            name: text("username"),
            uid: text("uid"),
            groups: serde_json::from_value(user.get("groups").cloned().unwrap_or_default())
                .unwrap_or_default(),
            extra: serde_json::from_value::<BTreeMap<String, Vec<String>>>(
                user.get("extra").cloned().unwrap_or_default(),
            )
            .unwrap_or_default(),
        };
        let token_audiences: Vec<String> =
            serde_json::from_value(status.get("audiences").cloned().unwrap_or_default())
                .unwrap_or_default();
        Ok(Some((info, token_audiences)))
    }
}
