//! Typed in-process admission: Rust hooks on one kind's Rust type, run at
//! the admission plugins' positions in the chain, without an HTTP hop (what
//! an admission webhook does, checked by the compiler).
//!
//! A [`TypedAdmission<T>`] is a [`Plugin`] for the kind whose hub type is
//! `T` (the type the kind's strategy runs on: the `KindBuilder::<T>` of its
//! group). It decodes the request's object (and, on updates, the old object)
//! into `T`, calls the hooks, and writes a mutated `T` back into the
//! attributes. Mutating hooks run where mutating plugins run (before the
//! strategy prepares and validates the object), validating hooks where
//! validating plugins run (on the final object, just before the write), in
//! the order of registration of the plugin among the others.
//!
//! ```text
//! use apiforge_runtime::admission::{Denial, Operation, TypedAdmission};
//!
//! let plugin = TypedAdmission::<Flunder>::new("FlunderDefaults")
//!     .operations([Operation::Create, Operation::Update])
//!     .mutate(|flunder, _attrs| {
//!         flunder.metadata.labels.entry("team".into()).or_insert_with(|| "none".into());
//!         Ok(())
//!     })
//!     .validate(|flunder, _old, _attrs| {
//!         if flunder.metadata.name.starts_with("tmp-") {
//!             return Err(Denial::forbidden("temporary names are not allowed"));
//!         }
//!         Ok(())
//!     });
//! registry.register(plugin, true);
//! ```

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use super::{Attributes, Context, Error, Operation, Plugin, async_trait};
use crate::error::ApiError;
use apiforge_core::meta::Status;
use apiforge_core::resource::Resource;
use apiforge_core::validation::ErrorList;

/// A boxed, sendable future: what the `*_async` hooks of
/// [`TypedAdmission`] return (write `Box::pin(async move { ... })`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a typed hook rejects a request. It becomes the request's Status,
/// with the shapes kube-apiserver's admission gives: 403 Forbidden by
/// default, or 422 Invalid with field causes.
#[derive(Clone, Debug, PartialEq)]
pub struct Denial(DenialKind);

#[derive(Clone, Debug, PartialEq)]
enum DenialKind {
    Forbidden(String),
    Invalid(ErrorList),
    Status(Box<Status>),
}

impl Denial {
    /// 403 Forbidden (kube's `admission.NewForbidden`): the message is
    /// `<resource>.<group> "<name>" is forbidden: <reason>`, the details
    /// `{name, group, kind: <resource>}`.
    pub fn forbidden(reason: impl Into<String>) -> Self {
        Denial(DenialKind::Forbidden(reason.into()))
    }

    /// 422 Invalid with one cause per field error: the message is
    /// `<Kind>.<group> "<name>" is invalid: <errors>`, as the strategy's own
    /// validation reports.
    pub fn invalid(errors: ErrorList) -> Self {
        Denial(DenialKind::Invalid(errors))
    }

    /// Any Status, sent as is (for example an error a lookup returned).
    pub fn status(status: Status) -> Self {
        Denial(DenialKind::Status(Box::new(status)))
    }

    /// The error this denial answers a request with.
    pub fn into_error(self, attrs: &Attributes) -> Error {
        match self.0 {
            DenialKind::Forbidden(reason) => Error::forbidden(attrs, reason),
            DenialKind::Invalid(errors) => Error::status(Status::invalid(
                &attrs.group,
                &attrs.kind,
                &attrs.error_name(),
                errors.to_causes(),
            )),
            DenialKind::Status(status) => Error::status(*status),
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            DenialKind::Forbidden(reason) => f.write_str(reason),
            DenialKind::Invalid(errors) => {
                let all: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
                f.write_str(&all.join(", "))
            }
            DenialKind::Status(status) => f.write_str(&status.message),
        }
    }
}

impl std::error::Error for Denial {}

/// Lets `?` pass on the errors of [`Lookup`](super::Lookup) calls.
impl From<ApiError> for Denial {
    fn from(e: ApiError) -> Self {
        Denial(DenialKind::Status(e.0))
    }
}

type MutateHook<T> = Arc<
    dyn for<'a> Fn(&'a mut T, &'a Attributes, &'a Context) -> BoxFuture<'a, Result<(), Denial>>
        + Send
        + Sync,
>;

type ValidateHook<T> = Arc<
    dyn for<'a> Fn(
            &'a T,
            Option<&'a T>,
            &'a Attributes,
            &'a Context,
        ) -> BoxFuture<'a, Result<(), Denial>>
        + Send
        + Sync,
>;

fn mutate_hook<T, F>(f: F) -> MutateHook<T>
where
    F: for<'a> Fn(&'a mut T, &'a Attributes, &'a Context) -> BoxFuture<'a, Result<(), Denial>>
        + Send
        + Sync
        + 'static,
{
    Arc::new(f)
}

fn validate_hook<T, F>(f: F) -> ValidateHook<T>
where
    F: for<'a> Fn(
            &'a T,
            Option<&'a T>,
            &'a Attributes,
            &'a Context,
        ) -> BoxFuture<'a, Result<(), Denial>>
        + Send
        + Sync
        + 'static,
{
    Arc::new(f)
}

/// An admission plugin made of typed hooks on the kind whose hub type is
/// `T`. Register it like any plugin, under its name:
/// `registry.register(TypedAdmission::<T>::new("Name")..., true)`.
///
/// - It looks only at objects of `T`'s group and kind (any served version:
///   the chain sees objects in hub form), of the main resource unless
///   [`subresources`](Self::subresources) adds some.
/// - It runs on CREATE and UPDATE (change with
///   [`operations`](Self::operations)); DELETE and CONNECT carry no new
///   object, so typed hooks never see them.
/// - Mutating hooks run in order on the same `T`; the attributes' JSON
///   object is replaced only when they changed it. Validating hooks get the
///   final object and, on UPDATE, the old one.
/// - An object that does not decode into `T` fails the request with 500
///   InternalError (the object came from the server: `T` is not the kind's
///   hub type).
pub struct TypedAdmission<T> {
    name: String,
    operations: Vec<Operation>,
    subresources: Vec<String>,
    mutate: Vec<MutateHook<T>>,
    validate: Vec<ValidateHook<T>>,
    _kind: PhantomData<fn() -> T>,
}

impl<T: Resource> TypedAdmission<T> {
    /// A plugin named `name` (as `--enable-admission-plugins` spells it)
    /// with no hooks yet, for CREATE and UPDATE.
    pub fn new(name: impl Into<String>) -> Self {
        TypedAdmission {
            name: name.into(),
            operations: vec![Operation::Create, Operation::Update],
            subresources: Vec::new(),
            mutate: Vec::new(),
            validate: Vec::new(),
            _kind: PhantomData,
        }
    }

    /// The operations the hooks run on (only CREATE and UPDATE have an
    /// object; others are ignored).
    pub fn operations(mut self, operations: impl IntoIterator<Item = Operation>) -> Self {
        self.operations = operations.into_iter().collect();
        self
    }

    /// Subresources (e.g. `"status"`) whose writes the hooks also see,
    /// besides the main resource's.
    pub fn subresources<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.subresources = names.into_iter().map(Into::into).collect();
        self
    }

    /// Adds a mutating hook: it may change the object, or reject.
    pub fn mutate<F>(mut self, hook: F) -> Self
    where
        F: Fn(&mut T, &Attributes) -> Result<(), Denial> + Send + Sync + 'static,
    {
        self.mutate.push(mutate_hook(move |obj, attrs, _ctx| {
            Box::pin(std::future::ready(hook(obj, attrs)))
        }));
        self
    }

    /// Adds an asynchronous mutating hook, which may read other objects
    /// through the [`Context`]'s lookup. Write it as
    /// `|obj, attrs, ctx| Box::pin(async move { ... })`.
    pub fn mutate_async<F>(mut self, hook: F) -> Self
    where
        F: for<'a> Fn(&'a mut T, &'a Attributes, &'a Context) -> BoxFuture<'a, Result<(), Denial>>
            + Send
            + Sync
            + 'static,
    {
        self.mutate.push(mutate_hook(hook));
        self
    }

    /// Adds a validating hook: it sees the final object and, on UPDATE,
    /// the old one; it may only reject.
    pub fn validate<F>(mut self, hook: F) -> Self
    where
        F: Fn(&T, Option<&T>, &Attributes) -> Result<(), Denial> + Send + Sync + 'static,
    {
        self.validate
            .push(validate_hook(move |obj, old, attrs, _ctx| {
                Box::pin(std::future::ready(hook(obj, old, attrs)))
            }));
        self
    }

    /// Adds an asynchronous validating hook, which may read other objects
    /// through the [`Context`]'s lookup.
    pub fn validate_async<F>(mut self, hook: F) -> Self
    where
        F: for<'a> Fn(
                &'a T,
                Option<&'a T>,
                &'a Attributes,
                &'a Context,
            ) -> BoxFuture<'a, Result<(), Denial>>
            + Send
            + Sync
            + 'static,
    {
        self.validate.push(validate_hook(hook));
        self
    }

    /// Whether the request is about `T`'s kind and a subresource we see.
    fn applies(&self, attrs: &Attributes) -> bool {
        attrs.is_kind(T::INFO.group, T::INFO.kind)
            && (attrs.subresource.is_empty() || self.subresources.contains(&attrs.subresource))
    }

    fn decode(&self, value: &Value, which: &str) -> Result<T, Error> {
        T::deserialize(value).map_err(|e| {
            Error::status(Status::internal(format!(
                "admission plugin {}: the {which} is not a {}: {e}",
                self.name,
                T::INFO.kind
            )))
        })
    }

    fn encode(&self, obj: &T) -> Result<Value, Error> {
        serde_json::to_value(obj).map_err(|e| self.encoding_error(&e))
    }

    /// `obj` as JSON text (to tell whether the hooks changed it).
    fn serialize(&self, obj: &T) -> Result<Vec<u8>, Error> {
        serde_json::to_vec(obj).map_err(|e| self.encoding_error(&e))
    }

    fn encoding_error(&self, e: &serde_json::Error) -> Error {
        Error::status(Status::internal(format!(
            "admission plugin {}: encoding the {}: {e}",
            self.name,
            T::INFO.kind
        )))
    }
}

impl<T> fmt::Debug for TypedAdmission<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedAdmission")
            .field("name", &self.name)
            .field("kind", &std::any::type_name::<T>())
            .field("operations", &self.operations)
            .field("mutate", &self.mutate.len())
            .field("validate", &self.validate.len())
            .finish()
    }
}

#[async_trait]
impl<T: Resource> Plugin for TypedAdmission<T> {
    fn name(&self) -> &str {
        &self.name
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
            && self.operations.contains(&operation)
    }

    fn handles_group(&self, group: &str) -> bool {
        group == T::INFO.group
    }

    async fn admit(&self, attrs: &mut Attributes, ctx: &Context) -> Result<(), Error> {
        if self.mutate.is_empty() || !self.applies(attrs) {
            return Ok(());
        }
        let Some(value) = attrs.object.as_ref() else {
            return Ok(());
        };
        let mut obj = self.decode(value, "object")?;
        // Compared as JSON text: the same type serializes the same object
        // to the same bytes, without building two trees.
        let before = self.serialize(&obj)?;
        for hook in &self.mutate {
            hook(&mut obj, attrs, ctx)
                .await
                .map_err(|d| d.into_error(attrs))?;
        }
        if self.serialize(&obj)? != before {
            attrs.object = Some(self.encode(&obj)?);
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes, ctx: &Context) -> Result<(), Error> {
        if self.validate.is_empty() || !self.applies(attrs) {
            return Ok(());
        }
        let Some(value) = attrs.object.as_ref() else {
            return Ok(());
        };
        let obj = self.decode(value, "object")?;
        let old = attrs
            .old_object
            .as_ref()
            .map(|v| self.decode(v, "old object"))
            .transpose()?;
        for hook in &self.validate {
            hook(&obj, old.as_ref(), attrs, ctx)
                .await
                .map_err(|d| d.into_error(attrs))?;
        }
        Ok(())
    }
}
