//! `AdmissionReview` (`admission.k8s.io/v1` and `v1beta1`) requests and
//! responses, and the errors a webhook call ends in, as the generic
//! apiserver's `webhook/request` and `webhook/errors` packages shape them.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use serde_json::{Value, json};

use apiforge_core::meta::{Status, StatusDetails};

use crate::admission::matching::AdmissionRequest;

/// Why a webhook call did not give a verdict
/// (`webhookutil.ErrCallingWebhook`): the failure policy decides whether
/// the request fails.
#[derive(Clone, Debug, PartialEq)]
pub struct CallingError {
    /// The webhook's name.
    pub webhook: String,
    /// What went wrong.
    pub reason: String,
}

impl fmt::Display for CallingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "failed calling webhook {:?}: {}",
            self.webhook, self.reason
        )
    }
}

impl CallingError {
    /// The 500 a failing-closed call answers
    /// (`apierrors.NewInternalError(err)`).
    pub fn to_status(&self) -> Status {
        Status::internal(self.to_string())
    }
}

/// What a webhook call ended in, besides success.
#[derive(Clone, Debug)]
pub enum CallError {
    /// The call failed (subject to the failure policy).
    Calling(CallingError),
    /// The webhook denied the request.
    Rejected(Status),
    /// The request cannot be sent to this webhook, or its answer cannot be
    /// applied (not subject to the failure policy).
    Internal(Status),
}

/// The verdict of a webhook that answered.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// The webhook's `status`, if any.
    pub result: Option<Value>,
    /// The decoded JSON patch (mutating webhooks only).
    pub patch: Option<Vec<u8>>,
    /// Audit annotations, to be prefixed with the webhook's name.
    pub audit_annotations: BTreeMap<String, String>,
    /// Warnings for the client.
    pub warnings: Vec<String>,
}

/// The `AdmissionReview` version to send: the first of the webhook's
/// `admissionReviewVersions` this server speaks
/// (`request.CreateAdmissionObjects`).
pub fn review_version(versions: &[String]) -> Result<&'static str, String> {
    versions
        .iter()
        .find_map(|v| match v.as_str() {
            "v1" => Some("v1"),
            "v1beta1" => Some("v1beta1"),
            _ => None,
        })
        .ok_or_else(|| {
            "webhook does not accept known AdmissionReview versions (v1, v1beta1)".to_string()
        })
}

/// An `AdmissionReview` to POST, serialized with its request's objects
/// borrowed (no JSON tree is built for the body).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Review<'a> {
    kind: &'static str,
    api_version: &'static str,
    request: AdmissionRequest<'a>,
}

/// The review to POST: `request` in `admission.k8s.io/<version>`.
pub fn review<'a>(version: &str, request: AdmissionRequest<'a>) -> Review<'a> {
    Review {
        kind: "AdmissionReview",
        api_version: if version == "v1beta1" {
            "admission.k8s.io/v1beta1"
        } else {
            "admission.k8s.io/v1"
        },
        request,
    }
}

/// Checks a webhook's answer (`request.VerifyAdmissionResponse`).
pub fn verify(version: &str, uid: &str, mutating: bool, answer: &Value) -> Result<Verdict, String> {
    let resp = answer
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let patch_type = resp.get("patchType").filter(|v| !v.is_null());
    let patch = match resp.get("patch").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => Some(
            base64::engine::general_purpose::STANDARD
                .decode(p)
                .map_err(|e| format!("illegal base64 data in response.patch: {e}"))?,
        ),
        _ => None,
    };
    if version == "v1" {
        let got_uid = resp.get("uid").and_then(Value::as_str).unwrap_or_default();
        if got_uid != uid {
            return Err(format!("expected response.uid={uid:?}, got {got_uid:?}"));
        }
        let api_version = answer
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = answer
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            let (group, ver) = api_version.split_once('/').unwrap_or(("", api_version));
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{ver}, Kind={kind}"
            ));
        }
        if mutating {
            if patch.is_some() && patch_type.is_none() {
                return Err("webhook returned response.patch but not response.patchType".into());
            }
            if patch.is_none() && patch_type.is_some() {
                return Err("webhook returned response.patchType but not response.patch".into());
            }
            if let Some(t) = patch_type {
                let t = t.as_str().unwrap_or_default();
                if t.is_empty() {
                    return Err(format!(
                        "webhook returned invalid response.patchType of {t:?}"
                    ));
                }
                if t != "JSONPatch" {
                    return Err(format!("unsupported patch type {t:?}"));
                }
            }
        } else {
            if patch.is_some() {
                return Err("validating webhook may not return response.patch".into());
            }
            if patch_type.is_some() {
                return Err("validating webhook may not return response.patchType".into());
            }
        }
    }
    let strings = |key: &str| -> Vec<String> {
        resp.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(Verdict {
        allowed: resp.get("allowed").and_then(Value::as_bool) == Some(true),
        result: resp.get("status").filter(|s| s.is_object()).cloned(),
        patch: if mutating { patch } else { None },
        audit_annotations: resp
            .get("auditAnnotations")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default(),
        warnings: strings("warnings"),
    })
}

/// The Status of a denial (`webhookerrors.ToStatusErr`): the webhook's
/// status with its message prefixed by `admission webhook "<name>" denied
/// the request`; a status without a code answers 500, as the API server
/// answers any failure Status without one.
pub fn denial(webhook: &str, result: Option<&Value>) -> Status {
    let empty = json!({});
    let result = result.unwrap_or(&empty);
    let text = |key: &str| {
        result
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (message, reason) = (text("message"), text("reason"));
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    let message = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    let code = result
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c != 0)
        .unwrap_or(500);
    let mut status = Status::failure(code, &reason, message);
    if let Some(details) = result.get("details").filter(|d| d.is_object()) {
        status.details = serde_json::from_value::<StatusDetails>(details.clone()).ok();
    }
    status
}

/// The 400 of a dry run a webhook with side effects cannot take
/// (`webhookerrors.NewDryRunUnsupportedErr`).
pub fn dry_run_unsupported(webhook: &str) -> Status {
    Status::bad_request(format!(
        "admission webhook {webhook:?} does not support dry run"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages of `webhookerrors.ToStatusErr` and `ErrCallingWebhook`.
    #[test]
    fn denial_and_calling_messages() {
        let s = denial(
            "deny.example.com",
            Some(&json!({"code": 403, "message": "no"})),
        );
        assert_eq!(s.code, 403);
        assert_eq!(
            s.message,
            "admission webhook \"deny.example.com\" denied the request: no"
        );
        let s = denial("d", Some(&json!({"reason": "Nope"})));
        assert_eq!(
            s.message,
            "admission webhook \"d\" denied the request: Nope"
        );
        assert_eq!(s.code, 500);
        let s = denial("d", None);
        assert_eq!(
            s.message,
            "admission webhook \"d\" denied the request without explanation"
        );
        let e = CallingError {
            webhook: "w".into(),
            reason: "failed to call webhook: Post \"https://x\": refused".into(),
        };
        assert_eq!(
            e.to_status().message,
            "Internal error occurred: failed calling webhook \"w\": failed to call webhook: Post \"https://x\": refused"
        );
        assert_eq!(
            dry_run_unsupported("w").message,
            "admission webhook \"w\" does not support dry run"
        );
    }

    #[test]
    fn verify_checks_uid_kind_and_patch_fields() {
        let ok = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u", "allowed": true}});
        assert!(verify("v1", "u", false, &ok).is_ok_and(|v| v.allowed));
        assert_eq!(
            verify("v1", "other", false, &ok).err(),
            Some("expected response.uid=\"other\", got \"u\"".into())
        );
        let patched = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u", "allowed": true, "patch": "W10="}});
        assert_eq!(
            verify("v1", "u", true, &patched).err(),
            Some("webhook returned response.patch but not response.patchType".into())
        );
        assert_eq!(
            verify("v1", "u", false, &patched).err(),
            Some("validating webhook may not return response.patch".into())
        );
        assert_eq!(
            verify("v1", "u", true, &json!({})).err(),
            Some("webhook response was absent".into())
        );
        // v1beta1 answers are not checked for uid or kind.
        let beta = json!({"response": {"allowed": true, "patch": "W10="}});
        let v = verify("v1beta1", "u", true, &beta).expect("v1beta1");
        assert_eq!(v.patch.as_deref(), Some(b"[]".as_slice()));
    }
}
