//! Authorization: may this user do this to that.
//!
//! [`Attributes`] describe a request (from its
//! [`RequestInfo`](crate::request::RequestInfo) and the
//! authenticated [`UserInfo`]). The configured authorizers
//! (`--authorization-mode`, a comma list evaluated in order: `AlwaysAllow`,
//! `AlwaysDeny`, `ABAC`, `Webhook`, `RBAC`) form a union behind the privileged group
//! `system:masters`, which is always allowed: the first authorizer with an
//! opinion decides, and a request nobody allows is refused with
//! Kubernetes' 403 Forbidden Status. A delegating server
//! (`--authorization-kubeconfig`) asks the main server instead
//! ([`delegated`]).

pub mod abac;
pub mod cel;
pub mod delegated;
pub mod escalation;
pub mod rbac;
pub mod reviews;
pub mod webhook;

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::ApiError;
use crate::request::RequestInfo;
use crate::request::user::{MASTERS_GROUP, UserInfo};
use apiforge_core::meta::{Status, StatusDetails};

/// What a request asks to do, as authorizers see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// The Kubernetes verb (`get`, `list`, `create`, ...; the lower-case
    /// HTTP method for non-resource requests).
    pub verb: String,
    /// Whether the request addresses a resource (else a plain path).
    pub resource_request: bool,
    /// The request path (non-resource requests).
    pub path: String,
    /// The namespace (`""` for cluster scope).
    pub namespace: String,
    /// The API group (`""` for core).
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The plural resource.
    pub resource: String,
    /// The subresource, if any.
    pub subresource: String,
    /// The object name, if any.
    pub name: String,
}

impl Attributes {
    /// The attributes of a parsed request made by `user`.
    pub fn from_request_info(user: &UserInfo, info: &RequestInfo) -> Self {
        Attributes {
            user: user.clone(),
            verb: info.verb.clone(),
            resource_request: info.is_resource_request,
            path: info.path.clone(),
            namespace: info.namespace.clone(),
            api_group: info.group.clone(),
            api_version: info.version.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            name: info.name.clone(),
        }
    }

    /// Whether the verb only reads (`get`, `list`, `watch`).
    pub fn is_read_only(&self) -> bool {
        matches!(self.verb.as_str(), "get" | "list" | "watch")
    }
}

/// An authorizer's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed: later authorizers are not asked.
    Allow,
    /// Denied: later authorizers are not asked.
    Deny,
    /// No opinion: the next authorizer decides.
    NoOpinion,
}

/// An authorizer that could not evaluate a request (a webhook that could
/// not be called); the union goes on to the next authorizer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EvaluationError(pub String);

/// One authorization mode.
#[async_trait::async_trait]
pub trait Authorize: Send + Sync {
    /// Decides on `attrs`, with a human-readable reason; an error counts as
    /// no opinion.
    async fn authorize(&self, attrs: &Attributes) -> Result<(Decision, String), EvaluationError>;

    /// The authorizer's type in `apiserver_authorization_decisions_total`
    /// (the `--authorization-mode` it comes from; its lower case is the
    /// `name`, as upstream names authorizers configured by flags).
    fn metric_type(&self) -> &'static str {
        "Custom"
    }
}

/// The union's verdict on a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The decision.
    pub decision: Decision,
    /// The reasons of the authorizers, newline-joined.
    pub reason: String,
    /// The errors of authorizers that could not decide (`None` when all
    /// could), as Go's aggregate error prints them.
    pub error: Option<String>,
}

/// The names of `--authorization-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Allows everything.
    AlwaysAllow,
    /// Allows nothing.
    AlwaysDeny,
    /// Attribute-based policy file (`--authorization-policy-file`).
    Abac,
    /// Role-based access control (rbac.authorization.k8s.io objects).
    Rbac,
    /// A SubjectAccessReview webhook (`--authorization-webhook-*`).
    Webhook,
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "AlwaysAllow" => Ok(Mode::AlwaysAllow),
            "AlwaysDeny" => Ok(Mode::AlwaysDeny),
            "ABAC" => Ok(Mode::Abac),
            "RBAC" => Ok(Mode::Rbac),
            "Webhook" => Ok(Mode::Webhook),
            other => Err(format!(
                "authorization-mode {other:?} is not a valid mode (AlwaysAllow, AlwaysDeny, ABAC, Webhook, RBAC)"
            )),
        }
    }
}

/// Authorization settings (kube-apiserver flags).
#[derive(Clone, Debug)]
pub struct Options {
    /// `--authorization-mode`, in evaluation order.
    pub modes: Vec<Mode>,
    /// `--authorization-policy-file` (ABAC).
    pub policy_file: Option<PathBuf>,
    /// `--authorization-webhook-*` (mode `Webhook`).
    pub webhook: webhook::Options,
    /// `--authorization-kubeconfig` and the other delegating flags: when
    /// set, the [`delegated`] authorizer replaces the modes.
    pub delegated: Option<delegated::Options>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            modes: vec![Mode::Rbac],
            policy_file: None,
            webhook: webhook::Options::default(),
            delegated: None,
        }
    }
}

/// Errors of loading authorization configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    /// The ABAC policy file is malformed.
    #[error("{path}: line {line}: {message}")]
    Policy {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The options do not fit together.
    #[error("{0}")]
    Invalid(String),
}

struct AlwaysAllow;

#[async_trait::async_trait]
impl Authorize for AlwaysAllow {
    fn metric_type(&self) -> &'static str {
        "AlwaysAllow"
    }

    async fn authorize(&self, _: &Attributes) -> Result<(Decision, String), EvaluationError> {
        Ok((Decision::Allow, String::new()))
    }
}

struct AlwaysDeny;

#[async_trait::async_trait]
impl Authorize for AlwaysDeny {
    fn metric_type(&self) -> &'static str {
        "AlwaysDeny"
    }

    async fn authorize(&self, _: &Attributes) -> Result<(Decision, String), EvaluationError> {
        Ok((Decision::NoOpinion, "Everything is forbidden.".into()))
    }
}

/// The union of the configured modes, behind the privileged group.
#[derive(Clone)]
pub struct Authorizer {
    chain: Vec<Arc<dyn Authorize>>,
    rbac: Option<Arc<rbac::Rbac>>,
    /// Groups allowed everything (`system:masters`).
    privileged: Vec<String>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("authorizers", &self.chain.len())
            .finish()
    }
}

impl Authorizer {
    /// Builds the union from the options (reads the ABAC policy file).
    pub fn new(options: &Options) -> Result<Self, Error> {
        if let Some(delegated) = &options.delegated {
            let sar = webhook::SubjectAccessWebhook::delegated(delegated)?;
            return Ok(Authorizer {
                chain: vec![
                    Arc::new(delegated::AlwaysAllowPaths::new(
                        &delegated.always_allow_paths,
                    )),
                    Arc::new(sar),
                ],
                rbac: None,
                privileged: delegated.always_allow_groups.clone(),
            });
        }
        let mut chain: Vec<Arc<dyn Authorize>> = Vec::new();
        let mut rbac = None;
        for mode in &options.modes {
            match mode {
                Mode::AlwaysAllow => chain.push(Arc::new(AlwaysAllow)),
                Mode::AlwaysDeny => chain.push(Arc::new(AlwaysDeny)),
                Mode::Abac => {
                    let path = options.policy_file.as_ref().ok_or_else(|| {
                        Error::Invalid(
                            "authorization-mode ABAC's authorization policy file not passed".into(),
                        )
                    })?;
                    chain.push(Arc::new(abac::PolicyList::load(path)?));
                }
                Mode::Webhook => {
                    chain.push(Arc::new(webhook::SubjectAccessWebhook::new(
                        &options.webhook,
                    )?));
                }
                Mode::Rbac => {
                    let r = Arc::new(rbac::Rbac::default());
                    chain.push(r.clone());
                    rbac = Some(r);
                }
            }
        }
        Ok(Authorizer {
            chain,
            rbac,
            privileged: vec![MASTERS_GROUP.to_string()],
        })
    }

    /// An authorizer from explicit parts (tests, embedding).
    pub fn from_parts(chain: Vec<Arc<dyn Authorize>>) -> Self {
        Authorizer {
            chain,
            rbac: None,
            privileged: vec![MASTERS_GROUP.to_string()],
        }
    }

    /// The RBAC authorizer, when `RBAC` is a mode (its rules are fed by the
    /// server from the stored objects).
    pub fn rbac(&self) -> Option<&Arc<rbac::Rbac>> {
        self.rbac.as_ref()
    }

    /// The union's decision: `system:masters` is allowed; otherwise the
    /// first authorizer with an opinion decides; reasons of the others are
    /// joined with newlines.
    pub async fn authorize(&self, attrs: &Attributes) -> (Decision, String) {
        let v = self.evaluate(attrs).await;
        (v.decision, v.reason)
    }

    /// The union's [`Verdict`], with the errors of authorizers that could
    /// not decide (they count as no opinion, as upstream's union).
    pub async fn evaluate(&self, attrs: &Attributes) -> Verdict {
        if self.privileged.iter().any(|g| attrs.user.in_group(g)) {
            return Verdict {
                decision: Decision::Allow,
                reason: String::new(),
                error: None,
            };
        }
        let mut reasons = Vec::new();
        let mut errors = Vec::new();
        for a in &self.chain {
            match a.authorize(attrs).await {
                Ok((decision @ (Decision::Allow | Decision::Deny), reason)) => {
                    record_decision(&**a, decision);
                    return Verdict {
                        decision,
                        reason,
                        error: None,
                    };
                }
                Ok((Decision::NoOpinion, reason)) if !reason.is_empty() => reasons.push(reason),
                Ok((Decision::NoOpinion, _)) => {}
                Err(e) => errors.push(e.0),
            }
        }
        let error = match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(format!("[{}]", errors.join(", "))),
        };
        Verdict {
            decision: Decision::NoOpinion,
            reason: reasons.join("\n"),
            error,
        }
    }

    /// `Ok` when allowed, else the 403 Forbidden Status.
    pub async fn check(&self, attrs: &Attributes) -> Result<(), ApiError> {
        match self.authorize(attrs).await {
            (Decision::Allow, _) => Ok(()),
            (_, reason) => Err(forbidden(attrs, &reason).into()),
        }
    }
}

/// `apiserver_authorization_decisions_total` of a terminal decision.
fn record_decision(authorizer: &dyn Authorize, decision: Decision) {
    let ty = authorizer.metric_type();
    let decision = if decision == Decision::Allow {
        "allowed"
    } else {
        "denied"
    };
    crate::metrics::global()
        .authorization_decisions
        .with_label_values(&[ty, &ty.to_ascii_lowercase(), decision])
        .inc();
}

/// Kubernetes' description of what was refused: `User "bob" cannot list
/// resource "flunders" in API group "wardle.example.com" in the namespace
/// "default"` (or `at the cluster scope`, or `cannot get path "/logs"`).
pub fn forbidden_message(attrs: &Attributes) -> String {
    let user = &attrs.user.name;
    if !attrs.resource_request {
        return format!("User {user:?} cannot {} path {:?}", attrs.verb, attrs.path);
    }
    let mut resource = attrs.resource.clone();
    if !attrs.subresource.is_empty() {
        resource = format!("{resource}/{}", attrs.subresource);
    }
    if attrs.namespace.is_empty() {
        format!(
            "User {user:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
            attrs.verb, attrs.api_group
        )
    } else {
        format!(
            "User {user:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
            attrs.verb, attrs.api_group, attrs.namespace
        )
    }
}

/// The 403 Forbidden Status for refused `attrs` (with the authorizers'
/// `reason`, if any), shaped like the generic apiserver's.
pub fn forbidden(attrs: &Attributes, reason: &str) -> Status {
    let msg = forbidden_message(attrs)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let err = if reason.is_empty() {
        msg
    } else {
        format!("{msg}: {reason}")
    };
    let qualified = if attrs.api_group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.api_group)
    };
    let message = if qualified.is_empty() {
        format!("forbidden: {err}")
    } else if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} {:?} is forbidden: {err}", attrs.name)
    };
    Status::failure(403, "Forbidden", message).with_details(StatusDetails {
        name: attrs.name.clone(),
        group: attrs.api_group.clone(),
        kind: attrs.resource.clone(),
        ..Default::default()
    })
}
