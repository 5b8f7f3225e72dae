//! Admission: the plugins every create, update and delete passes through
//! (the generic apiserver's `k8s.io/apiserver/pkg/admission`).
//!
//! A [`Plugin`] may *mutate* the object ([`Plugin::admit`]) and/or
//! *validate* it ([`Plugin::validate`]). The [`Chain`] runs all mutating
//! hooks first, in plugin order, on the decoded object before the
//! strategy's preparation and validation; the validating hooks run, in the
//! same order, on the final object after the strategy's validation, just
//! before the write (see `registry::Store::{create, update, delete}`).
//!
//! Plugins are registered by name in an [`AdmissionRegistry`] (built-ins
//! plus whatever user groups add, e.g. wardle's `BanFlunder`), and the
//! server's `--enable-admission-plugins` / `--disable-admission-plugins`
//! select the enabled set with [`AdmissionRegistry::select`]. Plugins read
//! other objects through a [`Lookup`] (the registry's stores, served from the
//! watch cache), handed to them in the [`Context`].
//!
//! A group author who wants a webhook's power without its HTTP hop writes
//! typed hooks on a kind's Rust type and registers them as a
//! [`TypedAdmission`] plugin (see [`typed`]).

pub mod config;
pub mod matching;
pub mod namespace_lifecycle;
pub mod policy;
pub mod service_resolver;
#[cfg(test)]
mod tests;
pub mod typed;
pub mod webhook;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use apiforge_core::cel_authorizer::Checker;
use apiforge_core::meta::{Status, StatusCause, StatusDetails};

pub use async_trait::async_trait;
pub use namespace_lifecycle::NamespaceLifecycle;
pub use typed::{BoxFuture, Denial, TypedAdmission};

/// The operation being admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A create (POST, or PUT that creates).
    Create,
    /// An update (PUT).
    Update,
    /// A delete.
    Delete,
    /// A connect (exec, proxy, ...; not served yet).
    Connect,
}

impl Operation {
    /// The wire name: `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who makes the request (the effective user after impersonation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name.
    pub username: String,
    /// The user's uid.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// What else the authenticator said about the user.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl From<crate::request::user::UserInfo> for UserInfo {
    fn from(u: crate::request::user::UserInfo) -> Self {
        UserInfo {
            username: u.name,
            uid: u.uid,
            groups: u.groups,
            extra: u.extra,
        }
    }
}

/// The kind's codec, for plugins that need an object in a particular
/// version (webhooks are called with versioned objects, not the hub form).
#[derive(Clone)]
pub struct Codec(pub Arc<apiforge_core::scheme::Kind>);

impl fmt::Debug for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Codec")
    }
}

/// Everything a plugin learns about a request (`admission.Attributes`).
#[derive(Clone, Debug, Default)]
pub struct Attributes {
    /// The operation.
    pub operation: Option<Operation>,
    /// API group of the kind (`""` for core).
    pub group: String,
    /// Version of the kind.
    pub version: String,
    /// The kind, e.g. `Flunder`.
    pub kind: String,
    /// The plural resource, e.g. `flunders`.
    pub resource: String,
    /// The subresource (`""` for the main resource).
    pub subresource: String,
    /// The namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// The object's name; empty on a create that only has `generateName`.
    pub name: String,
    /// The new object (hub form): set on create and update. Mutating
    /// plugins may change it.
    pub object: Option<Value>,
    /// The existing object (hub form): set on update, and on delete for
    /// validating plugins.
    pub old_object: Option<Value>,
    /// Whether the request is a dry run (nothing is persisted; plugins with
    /// side effects must not perform them).
    pub dry_run: bool,
    /// The requesting user.
    pub user: UserInfo,
    /// The kind's codec (set by the registry; `None` in hand-built
    /// attributes).
    pub codec: Option<Codec>,
    /// What the reinvocable plugins invoked, and what they ask to run
    /// again (upstream's per-request reinvocation context).
    pub reinvocation: Reinvocation,
}

/// Upstream's `admission.ReinvocationContext` for the plugins that keep
/// per-hook state (the mutating webhooks and policies): per plugin name,
/// the keys of the `reinvocationPolicy: IfNeeded` hooks it invoked, and
/// the keys to invoke again in the chain's reinvocation pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reinvocation {
    invoked: BTreeMap<String, BTreeSet<String>>,
    requested: BTreeMap<String, BTreeSet<String>>,
}

impl Reinvocation {
    /// `plugin` invoked the reinvocable hook `key`.
    pub fn invoked(&mut self, plugin: &str, key: String) {
        self.invoked.entry(plugin.into()).or_default().insert(key);
    }

    /// Whether `plugin` invoked any reinvocable hook.
    pub fn invoked_any(&self, plugin: &str) -> bool {
        self.invoked.get(plugin).is_some_and(|k| !k.is_empty())
    }

    /// The object changed after `plugin`'s reinvocable hooks ran: every
    /// one it invoked so far runs again in the reinvocation pass
    /// (`RequireReinvokingPreviouslyInvokedPlugins`).
    pub fn request_previously_invoked(&mut self, plugin: &str) {
        if let Some(keys) = self.invoked.get(plugin) {
            let keys = keys.clone();
            self.requested
                .entry(plugin.into())
                .or_default()
                .extend(keys);
        }
    }

    /// Whether `plugin` has hooks to invoke again.
    pub fn has_requested(&self, plugin: &str) -> bool {
        self.requested.get(plugin).is_some_and(|k| !k.is_empty())
    }

    /// The keys of `plugin`'s hooks to invoke again, taken (each hook is
    /// reinvoked at most once).
    pub fn take_requested(&mut self, plugin: &str) -> BTreeSet<String> {
        self.requested.remove(plugin).unwrap_or_default()
    }
}

impl Attributes {
    /// The operation (`Create` when unset).
    pub fn operation(&self) -> Operation {
        self.operation.unwrap_or(Operation::Create)
    }

    /// Whether the request is about `group`/`kind` (any version).
    pub fn is_kind(&self, group: &str, kind: &str) -> bool {
        self.group == group && self.kind == kind
    }

    /// The name errors about this request use, as the generic apiserver's
    /// `admission.NewForbidden`: the object's name, else its
    /// `generateName`, else the request's name, else `Unknown`.
    pub fn error_name(&self) -> String {
        let meta = self.object.as_ref().and_then(|o| o.get("metadata"));
        let field = |key: &str| {
            meta.and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        field("name")
            .or_else(|| field("generateName"))
            .or_else(|| (!self.name.is_empty()).then(|| self.name.clone()))
            .unwrap_or_else(|| "Unknown".into())
    }
}

/// A rejection by a plugin; becomes the request's `Status`.
#[derive(Clone, Debug, PartialEq)]
pub struct Error(Box<Status>);

impl Error {
    /// 403 Forbidden about the request's object:
    /// `<resource>.<group> "<name>" is forbidden: <reason>` with details
    /// `{name, group, kind: <resource>}` (the name as
    /// [`Attributes::error_name`]).
    pub fn forbidden(attrs: &Attributes, reason: impl fmt::Display) -> Self {
        Self::forbidden_named(&attrs.group, &attrs.resource, &attrs.error_name(), reason)
    }

    /// 403 Forbidden about `<resource>.<group> "<name>"` (the generic
    /// apiserver's `errors.NewForbidden`); an empty name is left out of the
    /// message.
    pub fn forbidden_named(
        group: &str,
        resource: &str,
        name: &str,
        reason: impl fmt::Display,
    ) -> Self {
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let message = if name.is_empty() {
            format!("{qualified} is forbidden: {reason}")
        } else {
            format!("{qualified} \"{name}\" is forbidden: {reason}")
        };
        Error(Box::new(
            Status::failure(403, "Forbidden", message).with_details(StatusDetails {
                name: name.into(),
                group: group.into(),
                kind: resource.into(),
                ..Default::default()
            }),
        ))
    }

    /// A plugin's own Status (any code, reason, message and details).
    pub fn status(status: Status) -> Self {
        Error(Box::new(status))
    }

    /// Adds a cause to the Status details.
    pub fn with_cause(mut self, cause: StatusCause) -> Self {
        self.0
            .details
            .get_or_insert_with(Default::default)
            .causes
            .push(cause);
        self
    }

    /// The Status this error responds with.
    pub fn as_status(&self) -> &Status {
        &self.0
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for Error {}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e.0)
    }
}

impl From<ApiError> for Error {
    fn from(e: ApiError) -> Self {
        Error(e.0)
    }
}

/// Read access to the objects the server stores, for plugins. Objects come
/// back encoded in the requested version (with `apiVersion` and `kind`), so
/// plugins do not depend on a kind's hub type.
#[async_trait]
pub trait Lookup: Send + Sync {
    /// Whether `group`/`version`/`resource` is served.
    fn serves(&self, group: &str, version: &str, resource: &str) -> bool;

    /// Reads one object. `fresh: false` may answer from a slightly stale
    /// cache; `true` reads the most recent state from storage. `Ok(None)`
    /// when the object does not exist or the resource is not served.
    async fn get(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: &str,
        name: &str,
        fresh: bool,
    ) -> ApiResult<Option<Value>>;

    /// The plural resource serving `kind` in `group`/`version`, and whether
    /// it is namespaced (a REST mapping); `None` when no served resource
    /// has that kind. By default nothing is known.
    fn resource_for_kind(
        &self,
        _group: &str,
        _version: &str,
        _kind: &str,
    ) -> Option<(String, bool)> {
        None
    }

    /// A count that moves whenever the objects [`list`](Lookup::list)
    /// answers for `group`/`version`/`resource` may have changed, so that
    /// what was listed can be kept while it stays the same; `None` when
    /// unknown (the default: list again).
    fn revision(&self, _group: &str, _version: &str, _resource: &str) -> Option<u64> {
        None
    }

    /// Whether an object exists: [`get`](Lookup::get)'s answer without
    /// the object (a lookup may answer without decoding it).
    async fn exists(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: &str,
        name: &str,
        fresh: bool,
    ) -> ApiResult<bool> {
        Ok(self
            .get(group, version, resource, namespace, name, fresh)
            .await?
            .is_some())
    }

    /// Lists the objects of a resource (`namespace` `None` = all namespaces)
    /// as the server's cache has them, which may be slightly stale (like an
    /// informer's lister in kube-apiserver's plugins). `Ok(None)` when the
    /// resource is not served.
    async fn list(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> ApiResult<Option<Vec<Value>>>;
}

/// A [`Lookup`] that serves nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoLookup;

#[async_trait]
impl Lookup for NoLookup {
    fn serves(&self, _: &str, _: &str, _: &str) -> bool {
        false
    }

    async fn get(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: &str,
        _: &str,
        _: bool,
    ) -> ApiResult<Option<Value>> {
        Ok(None)
    }

    async fn list(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: Option<&str>,
    ) -> ApiResult<Option<Vec<Value>>> {
        Ok(None)
    }
}

/// What plugins get besides the attributes.
#[derive(Clone)]
pub struct Context {
    lookup: Arc<dyn Lookup>,
    authorizer: Option<Arc<dyn Checker>>,
}

impl Context {
    /// A context reading objects through `lookup`.
    pub fn new(lookup: Arc<dyn Lookup>) -> Self {
        Context {
            lookup,
            authorizer: None,
        }
    }

    /// Read access to stored objects.
    pub fn lookup(&self) -> &dyn Lookup {
        self.lookup.as_ref()
    }

    /// Binds CEL's `authorizer` and `authorizer.requestResource` for the
    /// request of `attrs` in `cel_ctx` (nothing without an authorizer).
    pub fn bind_authorizer(&self, cel_ctx: &mut cel::Context<'_, '_>, attrs: &Attributes) {
        let Some(checker) = &self.authorizer else {
            return;
        };
        let user = &attrs.user;
        apiforge_core::cel_authorizer::bind(
            cel_ctx,
            checker.clone(),
            apiforge_core::cel_authorizer::User {
                name: user.username.clone(),
                uid: user.uid.clone(),
                groups: user.groups.clone(),
                extra: user.extra.clone(),
            },
            apiforge_core::cel_authorizer::RequestResource {
                group: attrs.group.clone(),
                resource: attrs.resource.clone(),
                subresource: attrs.subresource.clone(),
                namespace: attrs.namespace.clone(),
                name: attrs.name.clone(),
            },
        );
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

/// An admission plugin. Implement [`admit`](Plugin::admit) to mutate (or
/// reject before the strategy runs), [`validate`](Plugin::validate) to
/// check the final object; both default to allowing everything. Use
/// `#[apiforge_runtime::admission::async_trait]` on the impl.
#[async_trait]
pub trait Plugin: Send + Sync + 'static {
    /// The plugin's name, as used by `--enable-admission-plugins`.
    fn name(&self) -> &str;

    /// Whether the plugin looks at this operation at all.
    fn handles(&self, _operation: Operation) -> bool {
        true
    }

    /// Whether the plugin looks at objects of this API group (`""` for
    /// core) at all; by default it looks at every group. A chain none of
    /// whose plugins look at a request skips building its attributes.
    fn handles_group(&self, _group: &str) -> bool {
        true
    }

    /// Mutating admission: may change `attrs.object` or reject.
    async fn admit(&self, _attrs: &mut Attributes, _ctx: &Context) -> Result<(), Error> {
        Ok(())
    }

    /// Validating admission: may only reject.
    async fn validate(&self, _attrs: &Attributes, _ctx: &Context) -> Result<(), Error> {
        Ok(())
    }

    /// Whether [`reinvoke`](Plugin::reinvoke) should run when a later
    /// mutating plugin changed the object this one admitted (asked after
    /// [`admit`](Plugin::admit)). Defaults to no; a plugin that records
    /// the hooks it invoked in [`Attributes::reinvocation`] is asked
    /// whenever it recorded any.
    fn reinvocable(&self) -> bool {
        false
    }

    /// Runs once more, after the chain's mutating hooks, when a later
    /// plugin changed the object or the plugin requested it in
    /// [`Attributes::reinvocation`] (only for a
    /// [`reinvocable`](Plugin::reinvocable) plugin or one that recorded
    /// invocations).
    async fn reinvoke(&self, _attrs: &mut Attributes, _ctx: &Context) -> Result<(), Error> {
        Ok(())
    }
}

/// The enabled plugins, in the order they run, and the authorizer CEL
/// expressions ask ([`Plugins::with_authorizer`]).
#[derive(Clone, Default)]
pub struct Plugins(Vec<Arc<dyn Plugin>>, Option<Arc<dyn Checker>>);

impl Plugins {
    /// The enabled plugins' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|p| p.name()).collect()
    }

    /// True when no plugin is enabled.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Appends a plugin (the server's own, such as RBAC's escalation
    /// check).
    pub fn with(mut self, plugin: Arc<dyn Plugin>) -> Self {
        self.0.push(plugin);
        self
    }

    /// The authorizer of the `authorizer` variable of the plugins' CEL
    /// expressions (match conditions, admission policies); without one,
    /// expressions that read it fail as reading an undeclared variable.
    pub fn with_authorizer(mut self, authorizer: Arc<dyn Checker>) -> Self {
        self.1 = Some(authorizer);
        self
    }
}

impl fmt::Debug for Plugins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl FromIterator<Arc<dyn Plugin>> for Plugins {
    fn from_iter<I: IntoIterator<Item = Arc<dyn Plugin>>>(iter: I) -> Self {
        Plugins(iter.into_iter().collect(), None)
    }
}

struct Registered {
    plugin: Arc<dyn Plugin>,
    default_on: bool,
    /// Kept after every plugin registered without it (the webhook plugins
    /// run after the built-in and user plugins, as upstream orders them).
    last: bool,
}

/// Every admission plugin the binary knows, in the order they run, each
/// on or off by default. User code registers its own plugins here before
/// the server starts.
#[derive(Default)]
pub struct AdmissionRegistry {
    plugins: Vec<Registered>,
}

/// A bad `--enable-admission-plugins` / `--disable-admission-plugins`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A name no plugin has.
    #[error("{flag} plugin \"{name}\" is unknown (known plugins: {known})")]
    Unknown {
        /// The flag that named it.
        flag: &'static str,
        /// The unknown name.
        name: String,
        /// The known names, comma separated.
        known: String,
    },
    /// A plugin both enabled and disabled.
    #[error("{0} in enable-admission-plugins and disable-admission-plugins overlapped")]
    Overlap(String),
}

impl AdmissionRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The runtime's built-in plugins, all on by default, in the generic
    /// apiserver's recommended order: `NamespaceLifecycle` first;
    /// `MutatingAdmissionPolicy`, `MutatingAdmissionWebhook`,
    /// `ValidatingAdmissionPolicy` and `ValidatingAdmissionWebhook` last,
    /// after any plugin registered later (user groups' plugins), so
    /// webhooks see the object the built-in plugins admitted. `service`
    /// references of webhooks resolve with `resolver`.
    pub fn with_builtins_resolving(resolver: Option<Arc<dyn webhook::ServiceResolver>>) -> Self {
        Self::with_builtins_configured(resolver, &config::AdmissionConfig::default())
            .unwrap_or_default()
    }

    /// The built-in plugins configured by an `--admission-control-config-file`
    /// (the webhook plugins' client credentials).
    pub fn with_builtins_configured(
        resolver: Option<Arc<dyn webhook::ServiceResolver>>,
        admission: &config::AdmissionConfig,
    ) -> Result<Self, config::ConfigError> {
        let mutating = admission.webhook_credentials(webhook::MUTATING_PLUGIN)?;
        let validating = admission.webhook_credentials(webhook::VALIDATING_PLUGIN)?;
        let mut r = Self::new();
        r.register(NamespaceLifecycle::new(), true);
        r.register_last(Arc::new(policy::MutatingAdmissionPolicies::new()), true);
        r.register_last(
            Arc::new(webhook::MutatingWebhooks::new(resolver.clone()).with_credentials(mutating)),
            true,
        );
        r.register_last(Arc::new(policy::ValidatingAdmissionPolicies::new()), true);
        r.register_last(
            Arc::new(webhook::ValidatingWebhooks::new(resolver).with_credentials(validating)),
            true,
        );
        Ok(r)
    }

    /// [`with_builtins_resolving`](Self::with_builtins_resolving) with the
    /// runtime's service resolver.
    pub fn with_builtins() -> Self {
        Self::with_builtins_resolving(webhook::default_resolver())
    }

    /// Adds a plugin that stays after every plugin registered with
    /// [`register`](Self::register), even later ones.
    pub fn register_last(&mut self, plugin: Arc<dyn Plugin>, default_on: bool) -> &mut Self {
        self.plugins.retain(|r| r.plugin.name() != plugin.name());
        self.plugins.push(Registered {
            plugin,
            default_on,
            last: true,
        });
        self
    }

    /// Adds a plugin after the ones registered so far; `default_on` says
    /// whether it runs without `--enable-admission-plugins` naming it. A
    /// plugin with the name of an earlier one replaces it in place.
    pub fn register(&mut self, plugin: impl Plugin, default_on: bool) -> &mut Self {
        self.register_arc(Arc::new(plugin), default_on)
    }

    /// [`register`](Self::register) for an already shared plugin.
    pub fn register_arc(&mut self, plugin: Arc<dyn Plugin>, default_on: bool) -> &mut Self {
        let entry = Registered {
            plugin,
            default_on,
            last: false,
        };
        match self
            .plugins
            .iter_mut()
            .find(|r| r.plugin.name() == entry.plugin.name())
        {
            Some(existing) => *existing = entry,
            None => {
                let at = self
                    .plugins
                    .iter()
                    .position(|r| r.last)
                    .unwrap_or(self.plugins.len());
                self.plugins.insert(at, entry);
            }
        }
        self
    }

    /// All registered names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.plugins.iter().map(|r| r.plugin.name()).collect()
    }

    /// The default-on plugins.
    pub fn defaults(&self) -> Plugins {
        self.plugins
            .iter()
            .filter(|r| r.default_on)
            .map(|r| r.plugin.clone())
            .collect()
    }

    /// The enabled set, as kube-apiserver computes it: the default-on
    /// plugins plus `enable`, minus `disable`, in registration order
    /// (the order of the flags does not matter). Unknown names and names in
    /// both lists are errors. Blank entries are ignored.
    pub fn select(&self, enable: &[String], disable: &[String]) -> Result<Plugins, ConfigError> {
        let clean = |list: &[String]| -> Vec<String> {
            list.iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let (enable, disable) = (clean(enable), clean(disable));
        let known = self.names();
        for (flag, list) in [
            ("enable-admission-plugins", &enable),
            ("disable-admission-plugins", &disable),
        ] {
            if let Some(name) = list.iter().find(|n| !known.contains(&n.as_str())) {
                return Err(ConfigError::Unknown {
                    flag,
                    name: name.clone(),
                    known: known.join(", "),
                });
            }
        }
        if let Some(both) = enable.iter().find(|n| disable.contains(n)) {
            return Err(ConfigError::Overlap(both.clone()));
        }
        Ok(self
            .plugins
            .iter()
            .filter(|r| {
                let name = r.plugin.name().to_string();
                (r.default_on || enable.contains(&name)) && !disable.contains(&name)
            })
            .map(|r| r.plugin.clone())
            .collect())
    }
}

impl fmt::Debug for AdmissionRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.plugins.iter().map(|r| (r.plugin.name(), r.default_on)))
            .finish()
    }
}

/// The running admission chain: the enabled plugins with their context.
#[derive(Clone, Debug)]
pub struct Chain {
    plugins: Plugins,
    ctx: Context,
}

impl Default for Chain {
    fn default() -> Self {
        Chain::empty()
    }
}

impl Chain {
    /// A chain of `plugins` reading objects through `lookup`.
    pub fn new(plugins: Plugins, lookup: Arc<dyn Lookup>) -> Self {
        let mut ctx = Context::new(lookup);
        ctx.authorizer = plugins.1.clone();
        Chain { plugins, ctx }
    }

    /// A chain that admits everything.
    pub fn empty() -> Self {
        Chain::new(Plugins::default(), Arc::new(NoLookup))
    }

    /// The enabled plugins.
    pub fn plugins(&self) -> &Plugins {
        &self.plugins
    }

    /// Whether any plugin looks at `operation` on objects of `group`.
    pub fn wants(&self, operation: Operation, group: &str) -> bool {
        self.plugins
            .0
            .iter()
            .any(|p| p.handles(operation) && p.handles_group(group))
    }

    /// Runs every mutating hook, in order; the first rejection wins. Then
    /// each reinvocable plugin whose output a later plugin changed runs
    /// once more ([`Plugin::reinvoke`]), as upstream's reinvoker does.
    pub async fn admit(&self, attrs: &mut Attributes) -> ApiResult<()> {
        let started = Instant::now();
        let result = self.admit_all(attrs).await;
        observe_step(ADMIT, attrs.operation(), started, result.is_err());
        result
    }

    async fn admit_all(&self, attrs: &mut Attributes) -> ApiResult<()> {
        let op = attrs.operation();
        let mut outputs: Vec<(&Arc<dyn Plugin>, Option<Value>)> = Vec::new();
        for p in &self.plugins.0 {
            if p.handles(op) && p.handles_group(&attrs.group) {
                let started = Instant::now();
                let result = p.admit(attrs, &self.ctx).await;
                observe_plugin(&**p, ADMIT, op, started, result.is_err());
                result?;
                if p.reinvocable() || attrs.reinvocation.invoked_any(p.name()) {
                    outputs.push((p, attrs.object.clone()));
                }
            }
        }
        // The reinvocation pass (upstream's reinvoker runs the chain once
        // more): a plugin whose output a later plugin changed reinvokes
        // what it had invoked; one whose own later hooks changed the
        // object reinvokes the hooks before them.
        for (p, output) in outputs {
            let changed = attrs.object != output;
            if changed {
                attrs.reinvocation.request_previously_invoked(p.name());
            }
            if changed || attrs.reinvocation.has_requested(p.name()) {
                let started = Instant::now();
                let result = p.reinvoke(attrs, &self.ctx).await;
                observe_plugin(&**p, ADMIT, op, started, result.is_err());
                result?;
            }
        }
        Ok(())
    }

    /// Runs every validating hook, in order; the first rejection wins.
    pub async fn validate(&self, attrs: &Attributes) -> ApiResult<()> {
        let op = attrs.operation();
        let started = Instant::now();
        let mut result = Ok(());
        for p in &self.plugins.0 {
            if p.handles(op) && p.handles_group(&attrs.group) {
                let started = Instant::now();
                result = p.validate(attrs, &self.ctx).await;
                observe_plugin(&**p, VALIDATE, op, started, result.is_err());
                if result.is_err() {
                    break;
                }
            }
        }
        observe_step(VALIDATE, op, started, result.is_err());
        Ok(result?)
    }
}

/// The `type` label of mutating admission (upstream's step names).
const ADMIT: &str = "admit";
/// The `type` label of validating admission.
const VALIDATE: &str = "validate";

/// The plugins whose time is the admission webhooks' (left out of the
/// request's SLI duration, as upstream's latency trackers do).
const WEBHOOK_PLUGINS: [&str; 2] = ["MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"];

/// `apiserver_admission_controller_admission_duration_seconds` of one
/// plugin run.
fn observe_plugin(
    plugin: &dyn Plugin,
    step: &str,
    op: Operation,
    started: Instant,
    rejected: bool,
) {
    let elapsed = started.elapsed();
    if WEBHOOK_PLUGINS.contains(&plugin.name()) {
        crate::metrics::LatencyTracker::exclude(elapsed);
    }
    crate::metrics::global()
        .admission_controller_duration
        .with_label_values(&[plugin.name(), step, op.as_str(), bool_label(rejected)])
        .observe(elapsed.as_secs_f64());
}

/// `apiserver_admission_step_admission_duration_seconds` of a whole step.
fn observe_step(step: &str, op: Operation, started: Instant, rejected: bool) {
    crate::metrics::global()
        .admission_step_duration
        .with_label_values(&[step, op.as_str(), bool_label(rejected)])
        .observe(started.elapsed().as_secs_f64());
}

fn bool_label(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}
