//! One hub object, typed, behind the erased kind interface.
//!
//! A request body is decoded once, into its kind's hub type, and travels as
//! an [`Object`] through the strategy, admission, storage encoding and the
//! response: each step downcasts it to the hub type the kind was built
//! with instead of deserializing JSON again. [`typed_decodes`] counts the
//! deserializations into a kind's type, so tests can assert that a request
//! decodes its body once.

use std::any::Any;
use std::cell::Cell;
use std::fmt;

use serde_json::Value;

use super::DecodeError;
use crate::meta::ObjectMeta;
use crate::resource::Resource;

/// The operations an [`Object`] needs of its hub type.
trait Erased: Send + Sync {
    fn metadata(&self) -> &ObjectMeta;
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
    fn to_value(&self) -> Result<Value, DecodeError>;
    fn boxed_clone(&self) -> Box<dyn Erased>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn type_name(&self) -> &'static str;
}

impl<H: Resource> Erased for H {
    fn metadata(&self) -> &ObjectMeta {
        Resource::metadata(self)
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        Resource::metadata_mut(self)
    }
    fn to_value(&self) -> Result<Value, DecodeError> {
        serde_json::to_value(self).map_err(|e| DecodeError::Invalid(e.to_string()))
    }
    fn boxed_clone(&self) -> Box<dyn Erased> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn type_name(&self) -> &'static str {
        std::any::type_name::<H>()
    }
}

/// A hub object of some kind, typed (see the module documentation). Made
/// by [`Kind::decode_object`](super::Kind::decode_object) and
/// [`Kind::hub_object`](super::Kind::hub_object); the kind's other
/// `*_object` operations accept only objects of its own hub type.
pub struct Object {
    inner: Box<dyn Erased>,
}

impl Object {
    /// Wraps a hub value.
    pub fn new<H: Resource>(hub: H) -> Self {
        Object {
            inner: Box::new(hub),
        }
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        self.inner.metadata()
    }

    /// The object's metadata, mutably.
    pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self.inner.metadata_mut()
    }

    /// The object's JSON form (the hub's serialization, without
    /// `apiVersion` and `kind` unless the hub type writes them).
    pub fn to_value(&self) -> Result<Value, DecodeError> {
        self.inner.to_value()
    }

    /// The hub value, if the object is an `H`.
    pub fn downcast_ref<H: Resource>(&self) -> Option<&H> {
        self.inner.as_any().downcast_ref()
    }

    /// The hub value, mutably, if the object is an `H`.
    pub fn downcast_mut<H: Resource>(&mut self) -> Option<&mut H> {
        self.inner.as_any_mut().downcast_mut()
    }

    /// The hub value as `H`, or the error a kind gives for an object of
    /// another kind.
    pub(super) fn hub<H: Resource>(&self) -> Result<&H, DecodeError> {
        self.downcast_ref()
            .ok_or_else(|| wrong_type::<H>(self.inner.type_name()))
    }

    /// [`Object::hub`], mutably.
    pub(super) fn hub_mut<H: Resource>(&mut self) -> Result<&mut H, DecodeError> {
        let type_name = self.inner.type_name();
        self.downcast_mut()
            .ok_or_else(|| wrong_type::<H>(type_name))
    }
}

fn wrong_type<H: Resource>(found: &str) -> DecodeError {
    DecodeError::Invalid(format!(
        "an object of type {found} was given to the operations of {}",
        H::INFO.kind
    ))
}

impl Clone for Object {
    fn clone(&self) -> Self {
        Object {
            inner: self.inner.boxed_clone(),
        }
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object")
            .field("type", &self.inner.type_name())
            .field("name", &self.metadata().name)
            .finish()
    }
}

thread_local! {
    static TYPED_DECODES: Cell<u64> = const { Cell::new(0) };
}

/// Counts one deserialization into a kind's type on this thread.
pub(super) fn count_decode() {
    TYPED_DECODES.with(|n| n.set(n.get() + 1));
}

/// How many times this thread has deserialized JSON into a kind's Rust
/// type through the erased interface (decoding a body, reading a stored
/// object, running a strategy hook on a JSON value). A test aid: read it
/// before and after a request served on the current thread.
pub fn typed_decodes() -> u64 {
    TYPED_DECODES.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::core_v1::{ConfigMap, Namespace};

    #[test]
    fn downcasts_only_to_its_own_type() {
        let mut cm = ConfigMap::default();
        cm.metadata.name = "a".into();
        let mut obj = Object::new(cm);
        assert!(obj.downcast_ref::<Namespace>().is_none());
        obj.metadata_mut().namespace = "ns".into();
        let copy = obj.clone();
        let back = copy.downcast_ref::<ConfigMap>().expect("a ConfigMap");
        assert_eq!(
            (
                back.metadata.name.as_str(),
                back.metadata.namespace.as_str()
            ),
            ("a", "ns")
        );
        let err = obj.hub::<Namespace>().expect_err("not a Namespace");
        assert!(
            err.to_string()
                .contains("given to the operations of Namespace")
        );
    }
}
