//! The conversion webhook of a CustomResourceDefinition
//! (`conversion.strategy: Webhook`): a `ConversionReview` POSTed to the
//! definition's `clientConfig` (`url`, or a `service` reference resolved as
//! `https://<name>.<namespace>.svc:<port><path>`, as the generic apiserver's
//! default service resolver does: the name cluster DNS gives the service),
//! trusting its `caBundle`,
//! in the first of `conversionReviewVersions` the server speaks (`v1`,
//! `v1beta1`), as upstream's webhook converter.
//!
//! The erased kind interface converts synchronously (a codec step of
//! decode, encode and storage); the call runs on the server's multi-threaded
//! runtime with `block_in_place`, so other requests go on meanwhile.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::webhook;
use apiforge_core::scheme::custom::Converter;

/// Upstream's timeout of conversion webhook calls.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The review versions the server speaks, preferred first.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// A definition's conversion webhook.
pub struct WebhookConverter {
    client: webhook::Client,
    review_version: &'static str,
}

impl WebhookConverter {
    /// The converter of a definition (its JSON), or why it has none.
    pub fn for_definition(crd: &Value) -> Result<Self, String> {
        let webhook = crd
            .pointer("/spec/conversion/webhook")
            .ok_or("conversion.webhook is required for the Webhook strategy")?;
        let config = webhook
            .get("clientConfig")
            .ok_or("conversion.webhook.clientConfig is required")?;
        let url = match (
            config.get("url").and_then(Value::as_str),
            config.get("service"),
        ) {
            (Some(url), _) => url.to_string(),
            (None, Some(service)) => {
                let text = |k: &str| service.get(k).and_then(Value::as_str).unwrap_or_default();
                let port = service.get("port").and_then(Value::as_i64).unwrap_or(443);
                format!(
                    "https://{}.{}.svc:{port}{}",
                    text("name"),
                    text("namespace"),
                    text("path")
                )
            }
            (None, None) => return Err("clientConfig names neither url nor service".into()),
        };
        let ca = match config.get("caBundle").and_then(Value::as_str) {
            Some(b64) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .map_err(|e| format!("caBundle: {e}"))?,
            ),
            None => None,
        };
        let offered: Vec<&str> = webhook
            .get("conversionReviewVersions")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let review_version = offered
            .iter()
            .find_map(|v| REVIEW_VERSIONS.iter().find(|ours| *ours == v))
            .copied()
            .ok_or_else(|| {
                format!(
                    "no supported conversionReviewVersions: the server speaks {REVIEW_VERSIONS:?}, the webhook {offered:?}"
                )
            })?;
        Ok(WebhookConverter {
            client: webhook::Client::for_url(&url, ca.as_deref(), TIMEOUT)?,
            review_version,
        })
    }

    async fn call(&self, objects: Vec<Value>, desired: &str) -> Result<Vec<Value>, String> {
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({
            "apiVersion": format!("apiextensions.k8s.io/{}", self.review_version),
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
        });
        let answer = self
            .client
            .post_json("ConversionReview", &review)
            .await
            .map_err(|e| e.to_string())?;
        let response = answer
            .get("response")
            .ok_or("the ConversionReview has no response")?;
        let got = response
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if got != uid {
            return Err(format!("expected response uid {uid:?}, got {got:?}"));
        }
        let result = response.get("result").cloned().unwrap_or(Value::Null);
        if result.get("status").and_then(Value::as_str) != Some("Success") {
            return Err(result
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the webhook did not report success")
                .to_string());
        }
        Ok(response
            .get("convertedObjects")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }
}

impl Converter for WebhookConverter {
    fn convert(&self, objects: Vec<Value>, desired: &str) -> Result<Vec<Value>, String> {
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| "conversion webhooks are called from the server's runtime".to_string())?;
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err("conversion webhooks need the multi-threaded runtime".into());
        }
        tokio::task::block_in_place(|| handle.block_on(self.call(objects, desired)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `service` reference is called at the service's cluster DNS name,
    /// as the generic apiserver's default service resolver builds it (port
    /// 443 unless given); its serving certificate is checked for that name.
    #[test]
    fn service_references_resolve_to_cluster_dns_names() {
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let ca = rcgen::CertificateParams::new(Vec::<String>::new())
            .and_then(|p| p.self_signed(&key))
            .unwrap_or_else(|e| panic!("{e}"));
        let ca = base64::engine::general_purpose::STANDARD.encode(ca.pem());
        let crd = |service: Value| {
            json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"service": service, "caBundle": ca},
                "conversionReviewVersions": ["v1"]}}}})
        };
        let c = WebhookConverter::for_definition(&crd(
            json!({"namespace": "webhooks", "name": "conv", "path": "/convert", "port": 8443}),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.client.url(), "https://conv.webhooks.svc:8443/convert");
        let c = WebhookConverter::for_definition(&crd(json!({"namespace": "ns", "name": "c"})))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.client.url(), "https://c.ns.svc:443/");
    }

    #[test]
    fn review_versions_are_negotiated() {
        let crd = |versions: Value| {
            json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": "http://127.0.0.1:1/convert"},
                "conversionReviewVersions": versions}}}})
        };
        let c = WebhookConverter::for_definition(&crd(json!(["v2", "v1beta1", "v1"])))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.review_version, "v1beta1", "the webhook's order decides");
        let err = WebhookConverter::for_definition(&crd(json!(["v2"])))
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("no supported conversionReviewVersions"),
            "{err}"
        );
    }
}
