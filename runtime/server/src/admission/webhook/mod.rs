//! The `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook`
//! plugins: requests matching a `mutatingwebhookconfigurations` /
//! `validatingwebhookconfigurations` webhook are sent to it as an
//! `AdmissionReview`, as the generic apiserver's
//! `admission/plugin/webhook/{mutating,validating}` dispatchers do.
//!
//! - **Configurations** are read from the watch cache through the
//!   plugin [`Context`]'s lookup, like an informer: a snapshot is kept and
//!   listed again when it is older than [`REFRESH`], so a change takes
//!   effect well within a second. Configurations apply in name order, and
//!   webhooks in their order within a configuration.
//! - **Matching** ([`super::matching`]): `rules` (with `matchPolicy:
//!   Equivalent` trying the kind's other served versions), then the
//!   namespace and object selectors, then `matchConditions`.
//! - **Calls** go to the `clientConfig`'s `url`, or to a `service`
//!   (`https://<name>.<namespace>.svc:<port><path>`, dialled at the address
//!   the service resolves to), with `?timeout=<n>s` as client-go adds it,
//!   verified against `caBundle`, over pooled connections (one client per
//!   distinct client configuration and timeout).
//! - **Mutating** webhooks run one after another; a JSON patch is applied to
//!   the object in the version the webhook was called with, which is then
//!   decoded (and defaulted) again. With `reinvocationPolicy: IfNeeded` a
//!   webhook is called a second time, in the chain's reinvocation pass, if
//!   a later webhook changed the object, or a plugin reinvoked in that pass
//!   (a mutating policy) changed it.
//! - **Validating** webhooks run in parallel; the first error wins.
//! - Errors, audit annotations, warnings and metrics are upstream's.

pub mod review;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::config::WebhookCredentials;
use super::matching::{self, Conditions, Target};
use super::{Attributes, Context, Error, Operation, Plugin, async_trait};
use crate::webhook::Client;
use apiforge_core::builtin::admissionregistration_v1::{
    LabelSelector, MutatingWebhookConfiguration, RuleWithOperations,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use apiforge_core::meta::Status;
use review::{CallError, CallingError, Verdict};

/// How old a snapshot of the configurations may get before it is listed
/// again.
pub const REFRESH: Duration = Duration::from_millis(200);

/// The name of the mutating plugin.
pub const MUTATING_PLUGIN: &str = "MutatingAdmissionWebhook";
/// The name of the validating plugin.
pub const VALIDATING_PLUGIN: &str = "ValidatingAdmissionWebhook";

/// Resolves a webhook's `service` reference to the address to dial.
pub trait ServiceResolver: Send + Sync {
    /// The `(host, port)` serving `port` of service `namespace/name`.
    fn resolve<'a>(
        &'a self,
        ctx: &'a Context,
        namespace: &'a str,
        name: &'a str,
        port: u16,
    ) -> super::BoxFuture<'a, Result<(String, u16), String>>;
}

/// The service resolver the runtime uses unless told otherwise: the
/// Service, Endpoints and EndpointSlices this server stores
/// ([`super::service_resolver`]).
pub fn default_resolver() -> Option<Arc<dyn ServiceResolver>> {
    Some(Arc::new(StoredServices))
}

/// Resolves `service` references through the stored Services.
struct StoredServices;

impl ServiceResolver for StoredServices {
    fn resolve<'a>(
        &'a self,
        ctx: &'a Context,
        namespace: &'a str,
        name: &'a str,
        port: u16,
    ) -> super::BoxFuture<'a, Result<(String, u16), String>> {
        Box::pin(async move {
            let resolved = super::service_resolver::resolve_service(
                ctx.lookup(),
                namespace,
                name,
                i32::from(port),
            )
            .await
            .map_err(|e| e.to_string())?;
            split_host_port(&resolved.host_port)
        })
    }
}

/// `host:port` (IPv6 hosts in brackets) as a host and a port.
fn split_host_port(host_port: &str) -> Result<(String, u16), String> {
    let (host, port) = host_port
        .rsplit_once(':')
        .ok_or_else(|| format!("address {host_port}: missing port"))?;
    let port = port
        .parse()
        .map_err(|e| format!("address {host_port}: {e}"))?;
    Ok((host.trim_matches(['[', ']']).to_string(), port))
}

/// One webhook of a configuration, ready to match and call.
struct Hook {
    configuration: String,
    name: String,
    rules: Vec<RuleWithOperations>,
    ignore_failures: bool,
    equivalent: bool,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
    side_effects: String,
    timeout: Duration,
    review_versions: Vec<String>,
    reinvoke: bool,
    conditions: Conditions,
    client_config: WebhookClientConfig,
    /// Names the client of this webhook among the shared ones (its client
    /// configuration and timeout).
    client_key: String,
}

impl Hook {
    fn handles_group(&self, group: &str) -> bool {
        self.rules
            .iter()
            .any(|r| r.api_groups.iter().any(|g| g == "*" || g == group))
    }
}

struct Snapshot {
    taken: Option<Instant>,
    hooks: Vec<Arc<Hook>>,
}

impl Snapshot {
    fn fresh(&self) -> bool {
        self.taken.is_some_and(|t| t.elapsed() < REFRESH)
    }
}

/// The configurations of one plugin, as last listed, and the clients of
/// their webhooks.
struct Source {
    resource: &'static str,
    snapshot: RwLock<Arc<Snapshot>>,
    refreshing: tokio::sync::Mutex<()>,
    clients: Mutex<HashMap<String, Arc<Client>>>,
    resolver: Option<Arc<dyn ServiceResolver>>,
    credentials: Option<Arc<WebhookCredentials>>,
}

/// Fields both webhook kinds have, to build a [`Hook`] from either.
trait WebhookFields {
    fn into_hook(self, configuration: &str) -> Hook;
}

macro_rules! common_hook {
    ($w:expr, $configuration:expr, $reinvoke:expr) => {{
        let w = $w;
        let timeout = u64::try_from(w.timeout_seconds.unwrap_or(10)).unwrap_or(10);
        Hook {
            client_key: format!(
                "{}|{timeout}",
                serde_json::to_string(&w.client_config).unwrap_or_default()
            ),
            configuration: $configuration.to_string(),
            conditions: Conditions::compile(&w.match_conditions),
            name: w.name,
            rules: w.rules,
            ignore_failures: w.failure_policy.as_deref() == Some("Ignore"),
            equivalent: w.match_policy.as_deref() != Some("Exact"),
            namespace_selector: w.namespace_selector,
            object_selector: w.object_selector,
            side_effects: w.side_effects.unwrap_or_default(),
            timeout: Duration::from_secs(timeout),
            review_versions: w.admission_review_versions,
            reinvoke: $reinvoke,
            client_config: w.client_config,
        }
    }};
}

impl WebhookFields for apiforge_core::builtin::admissionregistration_v1::MutatingWebhook {
    fn into_hook(self, configuration: &str) -> Hook {
        let reinvoke = self.reinvocation_policy.as_deref() == Some("IfNeeded");
        common_hook!(self, configuration, reinvoke)
    }
}

impl WebhookFields for apiforge_core::builtin::admissionregistration_v1::ValidatingWebhook {
    fn into_hook(self, configuration: &str) -> Hook {
        common_hook!(self, configuration, false)
    }
}

/// A configuration kind: its name and webhooks.
trait Configuration: DeserializeOwned {
    type Webhook: WebhookFields;
    fn parts(self) -> (String, Vec<Self::Webhook>);
}

impl Configuration for MutatingWebhookConfiguration {
    type Webhook = apiforge_core::builtin::admissionregistration_v1::MutatingWebhook;
    fn parts(self) -> (String, Vec<Self::Webhook>) {
        (self.metadata.name, self.webhooks)
    }
}

impl Configuration for ValidatingWebhookConfiguration {
    type Webhook = apiforge_core::builtin::admissionregistration_v1::ValidatingWebhook;
    fn parts(self) -> (String, Vec<Self::Webhook>) {
        (self.metadata.name, self.webhooks)
    }
}

impl Source {
    fn new(resource: &'static str, resolver: Option<Arc<dyn ServiceResolver>>) -> Self {
        Source {
            resource,
            snapshot: RwLock::new(Arc::new(Snapshot {
                taken: None,
                hooks: Vec::new(),
            })),
            refreshing: tokio::sync::Mutex::new(()),
            clients: Mutex::default(),
            resolver,
            credentials: None,
        }
    }

    fn current(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether a request of `group` may reach a webhook (a stale snapshot
    /// may: it is refreshed when the plugin runs).
    fn may_handle(&self, group: &str) -> bool {
        let snapshot = self.current();
        !snapshot.fresh() || snapshot.hooks.iter().any(|h| h.handles_group(group))
    }

    async fn hooks<C: Configuration>(&self, ctx: &Context) -> Result<Arc<Snapshot>, Error> {
        let snapshot = self.current();
        if snapshot.fresh() {
            return Ok(snapshot);
        }
        let _guard = self.refreshing.lock().await;
        let snapshot = self.current();
        if snapshot.fresh() {
            return Ok(snapshot);
        }
        let listed = ctx
            .lookup()
            .list(matching::ADMISSION_GROUP, "v1", self.resource, None)
            .await?
            .unwrap_or_default();
        let mut configurations: Vec<(String, Vec<C::Webhook>)> = listed
            .into_iter()
            .filter_map(|v| match serde_json::from_value::<C>(v) {
                Ok(c) => Some(c.parts()),
                Err(e) => {
                    tracing::warn!(resource = self.resource, error = %e, "skipping an undecodable webhook configuration");
                    None
                }
            })
            .collect();
        configurations.sort_by(|a, b| a.0.cmp(&b.0));
        let hooks = configurations
            .into_iter()
            .flat_map(|(name, webhooks)| {
                webhooks
                    .into_iter()
                    .map(move |w| Arc::new(w.into_hook(&name)))
                    .collect::<Vec<_>>()
            })
            .collect();
        let fresh = Arc::new(Snapshot {
            taken: Some(Instant::now()),
            hooks,
        });
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
        Ok(fresh)
    }

    fn user_for(&self, target: &str) -> Option<&super::config::UserCredentials> {
        self.credentials.as_ref()?.for_target(target)
    }

    /// The client of `hook` (shared by every webhook with the same client
    /// configuration and timeout, so connections are pooled).
    fn client(&self, hook: &Hook, ctx: &Context) -> Result<Arc<Client>, String> {
        let key = &hook.client_key;
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(key) {
            return Ok(c.clone());
        }
        let cc = &hook.client_config;
        let ca = Some(cc.ca_bundle.0.as_slice()).filter(|ca| !ca.is_empty());
        // The call itself is bounded by the webhook's timeout; the client's
        // own is a backstop.
        let backstop = hook.timeout + Duration::from_secs(1);
        let timeout_param = format!("timeout={}s", hook.timeout.as_secs());
        let client = match (&cc.url, &cc.service) {
            (Some(url), _) => {
                let sep = if url.contains('?') { '&' } else { '?' };
                let target = url
                    .parse::<http::Uri>()
                    .ok()
                    .and_then(|u| u.authority().map(|a| a.to_string()))
                    .unwrap_or_default();
                Client::for_url_as(
                    &format!("{url}{sep}{timeout_param}"),
                    ca,
                    backstop,
                    self.user_for(&target),
                )?
            }
            (None, Some(svc)) => {
                let port = u16::try_from(svc.port.unwrap_or(443)).map_err(|e| e.to_string())?;
                let path = svc.path.as_deref().unwrap_or("/");
                let path = if path.starts_with('/') {
                    path.to_string()
                } else {
                    format!("/{path}")
                };
                let url = format!(
                    "https://{}.{}.svc:{port}{path}?{timeout_param}",
                    svc.name, svc.namespace
                );
                let resolver = self
                    .resolver
                    .clone()
                    .ok_or("no service resolver is configured")?;
                let target = format!("{}.{}.svc:{port}", svc.name, svc.namespace);
                Client::for_url_as(&url, ca, backstop, self.user_for(&target))?.with_dial(Arc::new(
                    ServiceDial {
                        resolver,
                        ctx: ctx.clone(),
                        namespace: svc.namespace.clone(),
                        name: svc.name.clone(),
                        port,
                    },
                ))
            }
            (None, None) => return Err("neither url nor service is set".into()),
        };
        let client = Arc::new(client);
        if clients.len() > 256 {
            clients.clear();
        }
        clients.insert(key.clone(), client.clone());
        Ok(client)
    }
}

/// Dials a service reference's current address.
struct ServiceDial {
    resolver: Arc<dyn ServiceResolver>,
    ctx: Context,
    namespace: String,
    name: String,
    port: u16,
}

impl crate::webhook::Dial for ServiceDial {
    fn dial(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::webhook::DialResult> + Send + '_>>
    {
        self.resolver
            .resolve(&self.ctx, &self.namespace, &self.name, self.port)
    }
}

/// Whom to call, with which version of the object.
struct Invocation {
    hook: Arc<Hook>,
    version: String,
    resource: String,
    kind: String,
}

/// The first rule match of `hook` (`Webhook.ShouldCallHook`), trying the
/// kind's other served versions for `matchPolicy: Equivalent`; `None` when
/// the webhook does not apply.
async fn should_call(
    hook: &Arc<Hook>,
    attrs: &Attributes,
    ctx: &Context,
) -> Result<Option<Invocation>, Error> {
    let ns_match =
        matching::namespace_selector_matches(hook.namespace_selector.as_ref(), attrs, ctx).await;
    if matches!(ns_match, Ok(false)) {
        return Ok(None);
    }
    if !matching::object_selector_matches(hook.object_selector.as_ref(), attrs) {
        return Ok(None);
    }
    let own = Target {
        group: &attrs.group,
        version: &attrs.version,
        resource: &attrs.resource,
    };
    let mut invocation = hook
        .rules
        .iter()
        .any(|r| matching::rule_matches(r, attrs, own))
        .then(|| Invocation {
            hook: hook.clone(),
            version: attrs.version.clone(),
            resource: attrs.resource.clone(),
            kind: attrs.kind.clone(),
        });
    if invocation.is_none()
        && hook.equivalent
        && let Some(codec) = &attrs.codec
    {
        'rules: for rule in &hook.rules {
            for v in codec.0.versions() {
                let info = v.info;
                if info.version == attrs.version {
                    continue;
                }
                let target = Target {
                    group: info.group,
                    version: info.version,
                    resource: info.plural,
                };
                if matching::rule_matches(rule, attrs, target) {
                    invocation = Some(Invocation {
                        hook: hook.clone(),
                        version: info.version.to_string(),
                        resource: info.plural.to_string(),
                        kind: info.kind.to_string(),
                    });
                    break 'rules;
                }
            }
        }
    }
    let Some(invocation) = invocation else {
        return Ok(None);
    };
    ns_match?;
    if !hook.conditions.is_empty() {
        let (object, old) = versioned(attrs, &invocation.version)?;
        let request = request_for(&invocation, attrs, "", object.as_ref(), old.as_ref());
        match hook
            .conditions
            .evaluate(object.as_ref(), old.as_ref(), &request, ctx, attrs)
        {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(_) if hook.ignore_failures => return Ok(None),
            Err(e) => {
                return Err(Error::forbidden_named(
                    &attrs.group,
                    &attrs.resource,
                    &attrs.name,
                    e,
                ));
            }
        }
    }
    Ok(Some(invocation))
}

/// [`matching::versioned`], failing as an internal error.
fn versioned(attrs: &Attributes, version: &str) -> Result<(Option<Value>, Option<Value>), Error> {
    matching::versioned(attrs, version).map_err(|e| Error::status(Status::internal(e)))
}

fn request_for(
    inv: &Invocation,
    attrs: &Attributes,
    uid: &str,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let target = Target {
        group: &attrs.group,
        version: &inv.version,
        resource: &inv.resource,
    };
    matching::admission_request(uid, attrs, target, &inv.kind, object, old)
}

/// `validating` or `admit`, as the metrics label the plugin type.
fn metric_type(mutating: bool) -> &'static str {
    if mutating { "admit" } else { "validating" }
}

/// Calls one webhook with the objects in the invocation's version.
async fn call(
    source: &Source,
    inv: &Invocation,
    attrs: &Attributes,
    ctx: &Context,
    object: Option<&Value>,
    old: Option<&Value>,
    mutating: bool,
) -> Result<Verdict, CallError> {
    let hook = &inv.hook;
    let calling = |reason: String| {
        CallError::Calling(CallingError {
            webhook: hook.name.clone(),
            reason,
        })
    };
    if attrs.dry_run {
        if hook.side_effects.is_empty() {
            return Err(calling("Webhook SideEffects is nil".into()));
        }
        if !matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun") {
            return Err(CallError::Internal(review::dry_run_unsupported(&hook.name)));
        }
    }
    let version = review::review_version(&hook.review_versions)
        .map_err(|e| calling(format!("could not create admission objects: {e}")))?;
    let uid = uuid::Uuid::new_v4().to_string();
    let target = Target {
        group: &attrs.group,
        version: &inv.version,
        resource: &inv.resource,
    };
    let request = matching::AdmissionRequest::new(&uid, attrs, target, &inv.kind, object, old);
    let body = serde_json::to_vec(&review::review(version, request))
        .map_err(|e| calling(format!("could not create admission objects: {e}")))?;
    let client = source
        .client(hook, ctx)
        .map_err(|e| calling(format!("could not get REST client: {e}")))?;
    let url = client.url();
    let answer = match tokio::time::timeout(hook.timeout, client.post(Bytes::from(body))).await {
        Err(_) => {
            return Err(calling(format!(
                "failed to call webhook: Post {url:?}: context deadline exceeded"
            )));
        }
        Ok(Err(e)) => return Err(calling(format!("failed to call webhook: {e}"))),
        Ok(Ok((code, body))) if !code.is_success() => {
            let status: Option<Value> = serde_json::from_slice(&body).ok();
            let message = status
                .as_ref()
                .and_then(|s| s.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| {
                    format!(
                        "the server responded with the status code {} but did not return more information",
                        code.as_u16()
                    )
                });
            return Err(calling(format!("failed to call webhook: {message}")));
        }
        Ok(Ok((_, body))) => serde_json::from_slice::<Value>(&body).map_err(|e| {
            calling(format!(
                "failed to call webhook: couldn't decode the webhook response: {e}"
            ))
        })?,
    };
    let verdict = review::verify(version, &uid, mutating, &answer)
        .map_err(|e| calling(format!("received invalid webhook response: {e}")))?;
    for (k, v) in &verdict.audit_annotations {
        crate::audit::annotate_current(format!("{}/{k}", hook.name), v.clone());
    }
    for w in &verdict.warnings {
        crate::request::warning::add(w.clone());
    }
    if !verdict.allowed {
        return Err(CallError::Rejected(review::denial(
            &hook.name,
            verdict.result.as_ref(),
        )));
    }
    Ok(verdict)
}

/// Records the call's metrics (`admissionmetrics.ObserveWebhook` and
/// `ObserveWebhookRejection`).
fn observe(
    hook: &Hook,
    mutating: bool,
    op: Operation,
    started: Instant,
    result: &Result<Verdict, CallError>,
) {
    let m = crate::metrics::global();
    let ty = metric_type(mutating);
    let rejection = match result {
        Ok(_) => None,
        Err(CallError::Calling(_)) if hook.ignore_failures => None,
        Err(CallError::Calling(_)) => Some(("calling_webhook_error", 0)),
        Err(CallError::Rejected(s)) => Some(("no_error", s.code.min(600))),
        Err(CallError::Internal(_)) => Some(("apiserver_internal_error", 0)),
    };
    if let Some((error_type, code)) = rejection {
        m.webhook_rejections
            .with_label_values(&[
                hook.name.as_str(),
                ty,
                op.as_str(),
                error_type,
                code.to_string().as_str(),
            ])
            .inc();
    }
    let rejected = if rejection.is_some() { "true" } else { "false" };
    m.webhook_duration
        .with_label_values(&[hook.name.as_str(), ty, op.as_str(), rejected])
        .observe(started.elapsed().as_secs_f64());
}

/// The stored object a request is about, in the hub form (`None` when it
/// does not exist).
async fn current_object(attrs: &Attributes, ctx: &Context) -> Result<Option<Value>, Error> {
    let Some(codec) = &attrs.codec else {
        return Ok(None);
    };
    let found = ctx
        .lookup()
        .get(
            &attrs.group,
            &attrs.version,
            &attrs.resource,
            &attrs.namespace,
            &attrs.name,
            true,
        )
        .await?;
    found
        .map(|obj| {
            codec
                .0
                .decode(&attrs.version, obj)
                .map_err(|e| Error::status(Status::internal(e.to_string())))
        })
        .transpose()
}

/// The mutating plugin.
pub struct MutatingWebhooks {
    source: Source,
}

/// The validating plugin.
pub struct ValidatingWebhooks {
    source: Source,
}

impl MutatingWebhooks {
    /// The plugin, resolving `service` references with `resolver`.
    pub fn new(resolver: Option<Arc<dyn ServiceResolver>>) -> Self {
        MutatingWebhooks {
            source: Source::new("mutatingwebhookconfigurations", resolver),
        }
    }

    /// The plugin presenting `credentials` to webhooks (by host, from the
    /// admission configuration's kubeconfig).
    pub fn with_credentials(mut self, credentials: Option<WebhookCredentials>) -> Self {
        self.source.credentials = credentials.map(Arc::new);
        self
    }
}

impl ValidatingWebhooks {
    /// The plugin, resolving `service` references with `resolver`.
    pub fn new(resolver: Option<Arc<dyn ServiceResolver>>) -> Self {
        ValidatingWebhooks {
            source: Source::new("validatingwebhookconfigurations", resolver),
        }
    }

    /// The plugin presenting `credentials` to webhooks (by host, from the
    /// admission configuration's kubeconfig).
    pub fn with_credentials(mut self, credentials: Option<WebhookCredentials>) -> Self {
        self.source.credentials = credentials.map(Arc::new);
        self
    }
}

fn audit_json(value: Value) -> String {
    serde_json::to_string(&value).unwrap_or_default()
}

impl MutatingWebhooks {
    /// One round over the webhooks (`mutatingDispatcher.Dispatch`):
    /// `only` limits a reinvocation round to the webhooks to call again.
    /// The `IfNeeded` webhooks called are recorded in the request's
    /// [`Reinvocation`](super::Reinvocation), and a change of the object
    /// asks for those called before it to run again.
    async fn round(
        &self,
        hooks: &[Arc<Hook>],
        attrs: &mut Attributes,
        ctx: &Context,
        round: usize,
        only: Option<&BTreeSet<String>>,
    ) -> Result<(), Error> {
        for (i, hook) in hooks.iter().enumerate() {
            let key = reinvocation_key(hook);
            if only.is_some_and(|only| !only.contains(&key)) {
                continue;
            }
            let Some(inv) = should_call(hook, attrs, ctx).await? else {
                continue;
            };
            let (object, old) = versioned(attrs, &inv.version)?;
            let started = Instant::now();
            let result = call(
                &self.source,
                &inv,
                attrs,
                ctx,
                object.as_ref(),
                old.as_ref(),
                true,
            )
            .await;
            observe(hook, true, attrs.operation(), started, &result);
            let annotation = |prefix: &str| format!("{prefix}round_{round}_index_{i}");
            let mut changed = false;
            let outcome = match result {
                Ok(verdict) => match verdict.patch {
                    Some(patch) => {
                        let applied = apply_patch(&inv, attrs, object, &patch);
                        if let Ok((hub, patch)) = applied {
                            changed = attrs.object.as_ref() != Some(&hub);
                            crate::audit::annotate_current_with(
                                annotation("patch.webhook.admission.k8s.io/"),
                                || {
                                    audit_json(json!({
                                        "configuration": hook.configuration,
                                        "webhook": hook.name,
                                        "patch": patch,
                                        "patchType": "JSONPatch",
                                    }))
                                },
                            );
                            attrs.object = Some(hub);
                            Ok(())
                        } else {
                            applied.map(|_| ())
                        }
                    }
                    None => Ok(()),
                },
                Err(CallError::Calling(e)) if hook.ignore_failures => {
                    tracing::warn!(webhook = %hook.name, error = %e, "failed calling webhook, failing open");
                    crate::metrics::global()
                        .webhook_fail_open
                        .with_label_values(&[&hook.name, "admit"])
                        .inc();
                    crate::audit::annotate_current(
                        annotation("failed-open.mutation.webhook.admission.k8s.io/"),
                        hook.name.clone(),
                    );
                    Ok(())
                }
                Err(CallError::Calling(e)) => Err(Error::status(e.to_status())),
                Err(CallError::Rejected(s) | CallError::Internal(s)) => Err(Error::status(s)),
            };
            crate::audit::annotate_current_with(
                annotation("mutation.webhook.admission.k8s.io/"),
                || {
                    audit_json(json!({
                        "configuration": hook.configuration,
                        "webhook": hook.name,
                        "mutated": changed,
                    }))
                },
            );
            if changed {
                attrs
                    .reinvocation
                    .request_previously_invoked(MUTATING_PLUGIN);
            }
            if hook.reinvoke {
                attrs.reinvocation.invoked(MUTATING_PLUGIN, key);
            }
            outcome?;
        }
        Ok(())
    }
}

/// Identifies a webhook across the chain's passes (upstream uses the
/// configuration's name and the webhook's index; names are unique within
/// a configuration).
fn reinvocation_key(hook: &Hook) -> String {
    format!("{}\u{0}{}", hook.configuration, hook.name)
}

/// Applies a webhook's JSON patch to the object in the invocation's
/// version and decodes (and defaults) the result into the hub form;
/// returns it with the patch as JSON for the audit annotation.
fn apply_patch(
    inv: &Invocation,
    attrs: &Attributes,
    object: Option<Value>,
    patch: &[u8],
) -> Result<(Value, Value), Error> {
    let hook = &inv.hook;
    let parsed: Value = serde_json::from_slice(patch).map_err(|e| {
        Error::status(
            CallingError {
                webhook: hook.name.clone(),
                reason: format!("received undecodable patch in webhook response: {e}"),
            }
            .to_status(),
        )
    })?;
    let ops: json_patch::Patch = serde_json::from_value(parsed.clone()).map_err(|e| {
        Error::status(
            CallingError {
                webhook: hook.name.clone(),
                reason: format!("received undecodable patch in webhook response: {e}"),
            }
            .to_status(),
        )
    })?;
    let Some(mut doc) = object else {
        return Err(Error::status(Status::internal(format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook.name
        ))));
    };
    if ops.0.is_empty() {
        return Ok((attrs.object.clone().unwrap_or_default(), parsed));
    }
    crate::patch::operations::apply(&mut doc, &ops, crate::patch::JSON_PATCH_MAX_COPY_BYTES)
        .map_err(|e| Error::status(Status::internal(e.message)))?;
    let hub = match &attrs.codec {
        Some(codec) => codec
            .0
            .decode(&inv.version, doc)
            .map_err(|e| Error::status(Status::internal(e.to_string())))?,
        None => doc,
    };
    Ok((hub, parsed))
}

#[async_trait]
impl Plugin for MutatingWebhooks {
    fn name(&self) -> &str {
        MUTATING_PLUGIN
    }

    fn handles(&self, operation: Operation) -> bool {
        operation != Operation::Connect
    }

    fn handles_group(&self, group: &str) -> bool {
        self.source.may_handle(group)
    }

    async fn admit(&self, attrs: &mut Attributes, ctx: &Context) -> Result<(), Error> {
        if matching::is_exempt(attrs) {
            return Ok(());
        }
        let snapshot = self
            .source
            .hooks::<MutatingWebhookConfiguration>(ctx)
            .await?;
        if snapshot.hooks.is_empty() {
            return Ok(());
        }
        let may_see_delete = || {
            snapshot.hooks.iter().any(|h| {
                h.handles_group(&attrs.group)
                    && h.rules
                        .iter()
                        .any(|r| r.operations.iter().any(|o| o == "*" || o == "DELETE"))
            })
        };
        if attrs.operation() == Operation::Delete && attrs.old_object.is_none() && may_see_delete()
        {
            // The delete handler admits before reading the object; upstream's
            // mutating webhooks see it as `oldObject`, so read it here.
            attrs.old_object = current_object(attrs, ctx).await?;
        }
        self.round(&snapshot.hooks, attrs, ctx, 0, None).await
    }

    /// The reinvocation pass: the `IfNeeded` webhooks called before a
    /// later change of the object (by a later webhook, or by a plugin
    /// reinvoked after them, such as a mutating policy) are called once
    /// more; a webhook not called in the first round is not called now.
    async fn reinvoke(&self, attrs: &mut Attributes, ctx: &Context) -> Result<(), Error> {
        let keys = attrs.reinvocation.take_requested(MUTATING_PLUGIN);
        if keys.is_empty() || matching::is_exempt(attrs) {
            return Ok(());
        }
        let snapshot = self
            .source
            .hooks::<MutatingWebhookConfiguration>(ctx)
            .await?;
        self.round(&snapshot.hooks, attrs, ctx, 1, Some(&keys))
            .await
    }
}

#[async_trait]
impl Plugin for ValidatingWebhooks {
    fn name(&self) -> &str {
        VALIDATING_PLUGIN
    }

    fn handles(&self, operation: Operation) -> bool {
        operation != Operation::Connect
    }

    fn handles_group(&self, group: &str) -> bool {
        self.source.may_handle(group)
    }

    async fn validate(&self, attrs: &Attributes, ctx: &Context) -> Result<(), Error> {
        if matching::is_exempt(attrs) {
            return Ok(());
        }
        let snapshot = self
            .source
            .hooks::<ValidatingWebhookConfiguration>(ctx)
            .await?;
        let mut relevant = Vec::new();
        for hook in &snapshot.hooks {
            if let Some(inv) = should_call(hook, attrs, ctx).await? {
                relevant.push(inv);
            }
        }
        if relevant.is_empty() {
            return Ok(());
        }
        let mut objects: HashMap<String, (Option<Value>, Option<Value>)> = HashMap::new();
        for inv in &relevant {
            if !objects.contains_key(&inv.version) {
                objects.insert(inv.version.clone(), versioned(attrs, &inv.version)?);
            }
        }
        let calls = relevant.iter().map(|inv| {
            let (object, old) = &objects[&inv.version];
            async move {
                let started = Instant::now();
                let result = call(
                    &self.source,
                    inv,
                    attrs,
                    ctx,
                    object.as_ref(),
                    old.as_ref(),
                    false,
                )
                .await;
                observe(&inv.hook, false, attrs.operation(), started, &result);
                match result {
                    Ok(_) => None,
                    Err(CallError::Calling(e)) if inv.hook.ignore_failures => {
                        tracing::warn!(webhook = %inv.hook.name, error = %e, "failed calling webhook, failing open");
                        crate::metrics::global()
                            .webhook_fail_open
                            .with_label_values(&[&inv.hook.name, "validating"])
                            .inc();
                        None
                    }
                    Err(CallError::Calling(e)) => Some(e.to_status()),
                    Err(CallError::Rejected(s) | CallError::Internal(s)) => Some(s),
                }
            }
        });
        let results = futures::future::join_all(calls).await;
        match results.into_iter().flatten().next() {
            Some(status) => Err(Error::status(status)),
            None => Ok(()),
        }
    }
}
