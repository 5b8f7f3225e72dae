//! The declarative rules behind `#[validate(...)]`, as functions that
//! generated code calls (and hand-written validation may call too).
//!
//! Each check pushes Kubernetes-shaped [`FieldError`]s into an
//! [`ErrorList`]:
//!
//! | rule | error | message |
//! |---|---|---|
//! | `required` | `FieldValueRequired` | `Required value` |
//! | `minimum` / `maximum` | `FieldValueInvalid` | `Invalid value: 0: must be greater than or equal to 1` |
//! | `exclusive_minimum` / `exclusive_maximum` | `FieldValueInvalid` | `...: must be greater than 0` / `must be less than 10` |
//! | `min_length` | `FieldValueInvalid` | `Invalid value: "ab": must be at least 3 bytes long` |
//! | `max_length` | `FieldValueTooLong` | `Too long: may not be more than 10 bytes` |
//! | `pattern` | `FieldValueInvalid` | `Invalid value: "X": must match the regular expression '^[a-z]+$'` |
//! | `format` | `FieldValueInvalid` | the upstream format message (e.g. RFC 1123 label) |
//! | `enum_values` | `FieldValueNotSupported` | `Unsupported value: "x": supported values: "a", "b"` |
//! | `min_items` | `FieldValueInvalid` | `Invalid value: 0: must have at least 1 item` |
//! | `max_items` | `FieldValueTooMany` | `Too many: 4: must have at most 3 items` |
//! | `list_type = "set"` / `"map"` | `FieldValueDuplicate` | `Duplicate value: ...` at `path[i]` |
//! | `immutable` | `FieldValueInvalid` | `Invalid value: ...: field is immutable` |
//! | `one_of` / `at_most_one_of` | `FieldValueInvalid` | `must specify exactly one of: `a`, `b`` |
//! | `cel` | `FieldValueInvalid` | `Invalid value: "object": <message>` |
//!
//! Unions are also published as `x-kubernetes-validations` rules with the
//! same messages ([`union_rules`], [`IsSet::cel_is_set`]).

use std::sync::OnceLock;

use serde::Serialize;
use serde_json::Value;

use super::{ErrorList, FieldError, FieldPath};

/// A number a numeric bound can be checked against.
pub trait Number {
    /// The value as `f64`, for comparisons.
    fn as_f64(&self) -> f64;
    /// The value as JSON, for the error's bad value.
    fn to_json(&self) -> Value;
}

macro_rules! number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            #[allow(clippy::cast_lossless, clippy::cast_precision_loss)]
            fn as_f64(&self) -> f64 {
                *self as f64
            }
            fn to_json(&self) -> Value {
                Value::from(*self)
            }
        }
    )*};
}
number!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);

/// Whether a field counts as set, for `required` and unions: `Some`,
/// non-empty strings and collections, `true`, non-zero numbers.
pub trait IsSet {
    /// True when the field holds a value.
    fn is_set(&self) -> bool;

    /// The CEL condition, on the JSON object holding it as `self`, under
    /// which field `field` of this type is set in the sense of
    /// [`IsSet::is_set`] (present, and for strings, lists, maps, booleans
    /// and numbers not empty, false or zero): what a CRD exported from the
    /// kind checks for `one_of` / `at_most_one_of`.
    fn cel_is_set(field: &str) -> String
    where
        Self: Sized,
    {
        format!("has(self.{field})")
    }
}

impl<T> IsSet for Option<T> {
    fn is_set(&self) -> bool {
        self.is_some()
    }
}
impl IsSet for String {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
    fn cel_is_set(field: &str) -> String {
        format!("(has(self.{field}) && self.{field} != '')")
    }
}
impl IsSet for &str {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
    fn cel_is_set(field: &str) -> String {
        format!("(has(self.{field}) && self.{field} != '')")
    }
}
impl<T> IsSet for Vec<T> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
    fn cel_is_set(field: &str) -> String {
        format!("(has(self.{field}) && size(self.{field}) != 0)")
    }
}
impl<K, V> IsSet for std::collections::BTreeMap<K, V> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
    fn cel_is_set(field: &str) -> String {
        format!("(has(self.{field}) && size(self.{field}) != 0)")
    }
}
impl<K, V, S> IsSet for std::collections::HashMap<K, V, S> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
    fn cel_is_set(field: &str) -> String {
        format!("(has(self.{field}) && size(self.{field}) != 0)")
    }
}
impl IsSet for bool {
    fn is_set(&self) -> bool {
        *self
    }
    fn cel_is_set(field: &str) -> String {
        format!("(has(self.{field}) && self.{field})")
    }
}
impl IsSet for Value {
    fn is_set(&self) -> bool {
        !self.is_null()
    }
}
macro_rules! is_set_number {
    ($zero:literal: $($t:ty),*) => {$(
        impl IsSet for $t {
            #[allow(clippy::float_cmp)]
            fn is_set(&self) -> bool {
                *self != (0 as $t)
            }
            fn cel_is_set(field: &str) -> String {
                format!(concat!("(has(self.{field}) && self.{field} != ", $zero, ")"), field = field)
            }
        }
    )*};
}
is_set_number!("0": i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);
is_set_number!("0.0": f32, f64);

fn trim_float(v: f64) -> String {
    let s = v.to_string();
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// `minimum` (inclusive) or `exclusive_minimum`.
pub fn minimum(
    errs: &mut ErrorList,
    path: &FieldPath,
    value: &dyn Number,
    min: f64,
    exclusive: bool,
) {
    let v = value.as_f64();
    if exclusive && v <= min {
        errs.push(FieldError::invalid(
            path,
            value.to_json(),
            format!("must be greater than {}", trim_float(min)),
        ));
    } else if !exclusive && v < min {
        errs.push(FieldError::invalid(
            path,
            value.to_json(),
            format!("must be greater than or equal to {}", trim_float(min)),
        ));
    }
}

/// `maximum` (inclusive) or `exclusive_maximum`.
pub fn maximum(
    errs: &mut ErrorList,
    path: &FieldPath,
    value: &dyn Number,
    max: f64,
    exclusive: bool,
) {
    let v = value.as_f64();
    if exclusive && v >= max {
        errs.push(FieldError::invalid(
            path,
            value.to_json(),
            format!("must be less than {}", trim_float(max)),
        ));
    } else if !exclusive && v > max {
        errs.push(FieldError::invalid(
            path,
            value.to_json(),
            format!("must be less than or equal to {}", trim_float(max)),
        ));
    }
}

/// `min_length`, in bytes.
pub fn min_length(errs: &mut ErrorList, path: &FieldPath, value: &str, min: usize) {
    if value.len() < min {
        let unit = if min == 1 { "byte" } else { "bytes" };
        errs.push(FieldError::invalid(
            path,
            value,
            format!("must be at least {min} {unit} long"),
        ));
    }
}

/// `max_length`, in bytes (`Too long: may not be more than N bytes`).
pub fn max_length(errs: &mut ErrorList, path: &FieldPath, value: &str, max: usize) {
    if value.len() > max {
        errs.push(FieldError::too_long(path, max));
    }
}

/// `min_items`.
pub fn min_items(errs: &mut ErrorList, path: &FieldPath, len: usize, min: usize) {
    if len < min {
        let unit = if min == 1 { "item" } else { "items" };
        errs.push(FieldError::invalid(
            path,
            len,
            format!("must have at least {min} {unit}"),
        ));
    }
}

/// `max_items` (`Too many: N: must have at most M items`).
pub fn max_items(errs: &mut ErrorList, path: &FieldPath, len: usize, max: usize) {
    if len > max {
        errs.push(FieldError::too_many(path, len, max));
    }
}

/// `enum_values`: the value must be one of `allowed`.
pub fn enum_values(errs: &mut ErrorList, path: &FieldPath, value: &str, allowed: &[&str]) {
    if !allowed.contains(&value) {
        errs.push(FieldError::not_supported(path, value, allowed));
    }
}

/// `required`: the field must be set.
pub fn required(errs: &mut ErrorList, path: &FieldPath, set: bool) {
    if !set {
        errs.push(FieldError::required(path, ""));
    }
}

/// `immutable`: `new` must equal `old`.
pub fn immutable<T: PartialEq + Serialize>(
    errs: &mut ErrorList,
    path: &FieldPath,
    new: &T,
    old: &T,
) {
    if new != old {
        let value = serde_json::to_value(new).unwrap_or(Value::Null);
        errs.push(FieldError::invalid(path, value, "field is immutable"));
    }
}

/// The members of a union as its messages list them: `` `a`, `b` ``.
fn union_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `one_of` (`exactly = true`) or `at_most_one_of` over sibling fields,
/// given as `(json name, is set)`; errors are reported at `path` (the
/// struct holding the members).
pub fn union(errs: &mut ErrorList, path: &FieldPath, members: &[(&str, bool)], exactly: bool) {
    let names = union_names(members.iter().map(|(n, _)| *n));
    let set: Vec<String> = members
        .iter()
        .filter(|(_, s)| *s)
        .map(|(n, _)| format!("`{n}`"))
        .collect();
    if exactly && set.is_empty() {
        errs.push(FieldError::invalid(
            path,
            "",
            format!("must specify one of: {names}"),
        ));
    } else if set.len() > 1 {
        let which = if exactly { "exactly" } else { "at most" };
        errs.push(FieldError::invalid(
            path,
            format!("{{{}}}", set.join(", ")),
            format!("must specify {which} one of: {names}"),
        ));
    }
}

/// The `x-kubernetes-validations` rules of a union for the struct's
/// published schema (and so for a CRD exported from the kind), given as
/// `(json name, CEL condition of being set)` ([`IsSet::cel_is_set`]):
/// they refuse what [`union`] refuses, with its messages (`one_of`: one
/// rule for none set, one for more than one). A failed rule reports the
/// struct's path as [`union`] does, with the CRD rules' bad value (the
/// type, `"object"`).
pub fn union_rules(members: &[(&str, String)], exactly: bool) -> Value {
    let names = union_names(members.iter().map(|(n, _)| *n));
    let count = members
        .iter()
        .map(|(_, set)| format!("({set} ? 1 : 0)"))
        .collect::<Vec<_>>()
        .join(" + ");
    if exactly {
        serde_json::json!([
            {"rule": format!("{count} != 0"), "message": format!("must specify one of: {names}")},
            {"rule": format!("{count} <= 1"), "message": format!("must specify exactly one of: {names}")},
        ])
    } else {
        serde_json::json!([
            {"rule": format!("{count} <= 1"), "message": format!("must specify at most one of: {names}")},
        ])
    }
}

/// `list_type = "set"`: items must be unique (`Duplicate value` at
/// `path[i]` for each repetition).
pub fn unique_items<T: Serialize>(errs: &mut ErrorList, path: &FieldPath, items: &[T]) {
    let mut seen: Vec<Value> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let v = serde_json::to_value(item).unwrap_or(Value::Null);
        if seen.contains(&v) {
            errs.push(FieldError::duplicate(path.index(i), v));
        } else {
            seen.push(v);
        }
    }
}

/// `list_type = "map"` with `list_map_keys`: the key tuple of every item
/// must be unique (`Duplicate value: {"name":"a"}` at `path[i]`).
pub fn unique_map_keys<T: Serialize>(
    errs: &mut ErrorList,
    path: &FieldPath,
    items: &[T],
    keys: &[&str],
) {
    let mut seen: Vec<Value> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let v = serde_json::to_value(item).unwrap_or(Value::Null);
        let mut key = serde_json::Map::new();
        for k in keys {
            key.insert((*k).to_string(), v.get(*k).cloned().unwrap_or(Value::Null));
        }
        let key = Value::Object(key);
        if seen.contains(&key) {
            errs.push(FieldError::duplicate(path.index(i), key));
        } else {
            seen.push(key);
        }
    }
}

/// A regular expression compiled once, on first use (`pattern = "..."`).
pub struct Pattern {
    source: &'static str,
    compiled: OnceLock<Option<regex::Regex>>,
}

impl Pattern {
    /// A pattern; the macro has already checked that it compiles.
    pub const fn new(source: &'static str) -> Self {
        Pattern {
            source,
            compiled: OnceLock::new(),
        }
    }

    /// The source of the pattern.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// Whether `value` matches (a pattern that does not compile matches
    /// nothing).
    pub fn is_match(&self, value: &str) -> bool {
        self.compiled
            .get_or_init(|| regex::Regex::new(self.source).ok())
            .as_ref()
            .is_some_and(|re| re.is_match(value))
    }

    /// `pattern`: `Invalid value: "X": must match the regular expression '<source>'`.
    pub fn check(&self, errs: &mut ErrorList, path: &FieldPath, value: &str) {
        if !self.is_match(value) {
            errs.push(FieldError::invalid(
                path,
                value,
                format!("must match the regular expression '{}'", self.source),
            ));
        }
    }
}

/// The string formats of `format = "..."`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// An RFC 1123 label (`dns1123_label`).
    Dns1123Label,
    /// An RFC 1123 subdomain (`dns1123_subdomain`).
    Dns1123Subdomain,
    /// A Kubernetes short name: an RFC 1123 label (`k8s_short_name`).
    K8sShortName,
    /// A lowercase UUID (`uuid`).
    Uuid,
    /// An RFC 3339 date-time (`date_time`).
    DateTime,
    /// An IPv4 or IPv6 address (`ip`).
    Ip,
    /// A CIDR (`cidr`).
    Cidr,
}

impl Format {
    /// The OpenAPI `format` published for this format.
    pub fn openapi_name(self) -> &'static str {
        match self {
            Format::Dns1123Label | Format::K8sShortName => "k8s-short-name",
            Format::Dns1123Subdomain => "k8s-long-name",
            Format::Uuid => "uuid",
            Format::DateTime => "date-time",
            Format::Ip => "k8s-ip",
            Format::Cidr => "cidr",
        }
    }

    /// The error details of `value` (empty when valid).
    pub fn errors(self, value: &str) -> Vec<String> {
        match self {
            Format::Dns1123Label | Format::K8sShortName => super::is_dns1123_label(value),
            Format::Dns1123Subdomain => super::is_dns1123_subdomain(value),
            Format::Uuid => {
                if is_lower_uuid(value) {
                    vec![]
                } else {
                    vec!["must be a lowercase UUID in 8-4-4-4-12 format".into()]
                }
            }
            Format::DateTime => {
                if value.parse::<jiff::Timestamp>().is_ok() {
                    vec![]
                } else {
                    vec!["must be a valid RFC 3339 date-time (e.g. 2006-01-02T15:04:05Z)".into()]
                }
            }
            Format::Ip => {
                if value.parse::<std::net::IpAddr>().is_ok() {
                    vec![]
                } else {
                    vec!["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".into()]
                }
            }
            Format::Cidr => {
                if is_cidr(value) {
                    vec![]
                } else {
                    vec!["must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)".into()]
                }
            }
        }
    }

    /// `format`: one `Invalid value` per failed check.
    pub fn check(self, errs: &mut ErrorList, path: &FieldPath, value: &str) {
        for msg in self.errors(value) {
            errs.push(FieldError::invalid(path, value, msg));
        }
    }
}

fn is_lower_uuid(v: &str) -> bool {
    let groups: Vec<&str> = v.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    groups.len() == 5
        && groups.iter().zip(lens).all(|(g, n)| {
            g.len() == n
                && g.bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        })
}

fn is_cidr(v: &str) -> bool {
    let Some((addr, bits)) = v.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

/// The JSON of a value for a CEL rule or a schema default (`null` if it
/// cannot be serialized).
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

// Autoref-specialization probes: generated code calls these on every field
// so that nested `Validate` types are recursed into and `Option`s unwrapped,
// without the macro having to know the field's type.

/// Probe over a field, for generated code.
#[doc(hidden)]
pub struct Probe<'a, T: ?Sized>(pub &'a T);

/// Probe over a mutable field, for generated code.
#[doc(hidden)]
pub struct ProbeMut<'a, T: ?Sized>(pub &'a mut T);

/// Probe over a new and an old field, for generated code.
#[doc(hidden)]
pub struct ProbePair<'a, T: ?Sized>(pub &'a T, pub &'a T);

/// Probe over a field type, for generated code.
#[doc(hidden)]
pub struct ProbeType<T: ?Sized>(pub std::marker::PhantomData<T>);

/// Chosen when the field's type implements `Validate`.
#[doc(hidden)]
pub trait ViaValidate {
    fn __apiforge_validate(&self, path: &FieldPath) -> ErrorList;
}
impl<T: super::Validate + ?Sized> ViaValidate for Probe<'_, T> {
    fn __apiforge_validate(&self, path: &FieldPath) -> ErrorList {
        self.0.validate(path)
    }
}
/// Fallback when it does not.
#[doc(hidden)]
pub trait ViaNothing {
    fn __apiforge_validate(&self, _path: &FieldPath) -> ErrorList {
        ErrorList::default()
    }
}
impl<T: ?Sized> ViaNothing for &Probe<'_, T> {}

#[doc(hidden)]
pub trait ViaValidateUpdate {
    fn __apiforge_validate_update(&self, path: &FieldPath) -> ErrorList;
}
impl<T: super::Validate> ViaValidateUpdate for ProbePair<'_, T> {
    fn __apiforge_validate_update(&self, path: &FieldPath) -> ErrorList {
        self.0.validate_update(self.1, path)
    }
}
#[doc(hidden)]
pub trait ViaNothingUpdate {
    fn __apiforge_validate_update(&self, _path: &FieldPath) -> ErrorList {
        ErrorList::default()
    }
}
impl<T: ?Sized> ViaNothingUpdate for &ProbePair<'_, T> {}

#[doc(hidden)]
pub trait ViaDefault {
    fn __apiforge_default(&mut self);
}
impl<T: super::Validate + ?Sized> ViaDefault for ProbeMut<'_, T> {
    fn __apiforge_default(&mut self) {
        self.0.default_fields();
    }
}
#[doc(hidden)]
pub trait ViaNothingDefault {
    fn __apiforge_default(&mut self) {}
}
impl<T: ?Sized> ViaNothingDefault for &mut ProbeMut<'_, T> {}

#[doc(hidden)]
pub trait ViaPublish {
    fn __apiforge_publish(&self, generator: &mut schemars::SchemaGenerator);
}
impl<T: super::Validate + ?Sized> ViaPublish for ProbeType<T> {
    fn __apiforge_publish(&self, generator: &mut schemars::SchemaGenerator) {
        T::publish_schema(generator);
    }
}
#[doc(hidden)]
pub trait ViaNothingPublish {
    fn __apiforge_publish(&self, _generator: &mut schemars::SchemaGenerator) {}
}
impl<T: ?Sized> ViaNothingPublish for &ProbeType<T> {}

/// Unwraps `Option<T>` fields to `Option<&T>`.
#[doc(hidden)]
pub trait ViaOption<'a> {
    type Inner: ?Sized;
    fn __apiforge_get(&self) -> Option<&'a Self::Inner>;
}
impl<'a, T> ViaOption<'a> for Probe<'a, Option<T>> {
    type Inner = T;
    fn __apiforge_get(&self) -> Option<&'a T> {
        self.0.as_ref()
    }
}
/// Wraps any other field in `Some`.
#[doc(hidden)]
pub trait ViaValue<'a> {
    type Inner: ?Sized;
    fn __apiforge_get(&self) -> Option<&'a Self::Inner>;
}
impl<'a, T: ?Sized> ViaValue<'a> for &Probe<'a, T> {
    type Inner = T;
    fn __apiforge_get(&self) -> Option<&'a T> {
        Some(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(f: impl FnOnce(&mut ErrorList)) -> String {
        let mut errs = ErrorList::default();
        f(&mut errs);
        assert_eq!(errs.len(), 1, "{errs:?}");
        errs.0[0].to_string()
    }

    #[test]
    fn bounds() {
        let p = FieldPath::new("spec").child("replicas");
        assert_eq!(
            one(|e| maximum(e, &p, &5i32, 3.0, false)),
            "spec.replicas: Invalid value: 5: must be less than or equal to 3"
        );
        assert_eq!(
            one(|e| maximum(e, &p, &3i32, 3.0, true)),
            "spec.replicas: Invalid value: 3: must be less than 3"
        );
        assert_eq!(
            one(|e| minimum(e, &p, &0u8, 1.0, false)),
            "spec.replicas: Invalid value: 0: must be greater than or equal to 1"
        );
        assert_eq!(
            one(|e| minimum(e, &p, &0.5f64, 0.5, true)),
            "spec.replicas: Invalid value: 0.5: must be greater than 0.5"
        );
        let mut errs = ErrorList::default();
        minimum(&mut errs, &p, &1i64, 1.0, false);
        maximum(&mut errs, &p, &3i64, 3.0, false);
        assert!(errs.is_empty());
    }

    #[test]
    fn lengths_and_items() {
        let p = FieldPath::new("spec").child("name");
        assert_eq!(
            one(|e| max_length(e, &p, "abcdefghijk", 10)),
            "spec.name: Too long: may not be more than 10 bytes"
        );
        assert_eq!(
            one(|e| max_length(e, &p, "ab", 1)),
            "spec.name: Too long: may not be more than 1 byte"
        );
        assert_eq!(
            one(|e| min_length(e, &p, "ab", 3)),
            "spec.name: Invalid value: \"ab\": must be at least 3 bytes long"
        );
        assert_eq!(
            one(|e| max_items(e, &p, 4, 3)),
            "spec.name: Too many: 4: must have at most 3 items"
        );
        assert_eq!(
            one(|e| min_items(e, &p, 0, 1)),
            "spec.name: Invalid value: 0: must have at least 1 item"
        );
    }

    #[test]
    fn enums_and_required() {
        let p = FieldPath::new("spec").child("engine");
        assert_eq!(
            one(|e| enum_values(e, &p, "oracle", &["postgres", "mysql"])),
            "spec.engine: Unsupported value: \"oracle\": supported values: \"postgres\", \"mysql\""
        );
        assert_eq!(
            one(|e| required(e, &p, false)),
            "spec.engine: Required value"
        );
        let mut errs = ErrorList::default();
        required(&mut errs, &p, true);
        assert!(errs.is_empty());
        assert_eq!(errs.to_causes().len(), 0);
    }

    #[test]
    fn unions() {
        let p = FieldPath::new("spec");
        assert_eq!(
            one(|e| union(e, &p, &[("a", false), ("b", false)], true)),
            "spec: Invalid value: \"\": must specify one of: `a`, `b`"
        );
        assert_eq!(
            one(|e| union(e, &p, &[("a", true), ("b", true)], false)),
            "spec: Invalid value: \"{`a`, `b`}\": must specify at most one of: `a`, `b`"
        );
        let mut errs = ErrorList::default();
        union(&mut errs, &p, &[("a", false), ("b", false)], false);
        union(&mut errs, &p, &[("a", true), ("b", false)], true);
        assert!(errs.is_empty());
    }

    #[test]
    fn sets_and_maps() {
        let p = FieldPath::new("spec").child("tags");
        let e = one(|e| unique_items(e, &p, &["a", "b", "a"]));
        assert_eq!(e, "spec.tags[2]: Duplicate value: \"a\"");
        #[derive(Serialize)]
        struct Port {
            name: &'static str,
            port: i32,
        }
        let items = [
            Port {
                name: "http",
                port: 80,
            },
            Port {
                name: "http",
                port: 81,
            },
        ];
        let e = one(|e| unique_map_keys(e, &p, &items, &["name"]));
        assert_eq!(e, "spec.tags[1]: Duplicate value: {\"name\":\"http\"}");
        let mut errs = ErrorList::default();
        unique_map_keys(&mut errs, &p, &items, &["name", "port"]);
        assert!(errs.is_empty());
    }

    #[test]
    fn patterns_and_formats() {
        static P: Pattern = Pattern::new("^[a-z]+$");
        let p = FieldPath::new("spec").child("name");
        assert_eq!(
            one(|e| P.check(e, &p, "ABC")),
            "spec.name: Invalid value: \"ABC\": must match the regular expression '^[a-z]+$'"
        );
        assert!(P.is_match("abc"));
        assert!(
            Format::Uuid
                .errors("123e4567-e89b-12d3-a456-426614174000")
                .is_empty()
        );
        assert!(
            !Format::Uuid
                .errors("123E4567-e89b-12d3-a456-426614174000")
                .is_empty()
        );
        assert!(Format::DateTime.errors("2025-01-01T10:00:00Z").is_empty());
        assert!(!Format::DateTime.errors("yesterday").is_empty());
        assert!(Format::Ip.errors("2001:db8::1").is_empty());
        assert_eq!(
            one(|e| Format::Ip.check(e, &p, "10.0.0.300")),
            "spec.name: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
        );
        assert!(Format::Cidr.errors("10.0.0.0/8").is_empty());
        assert!(!Format::Cidr.errors("10.0.0.0/33").is_empty());
        assert!(Format::Dns1123Subdomain.errors("a.b").is_empty());
        assert!(!Format::K8sShortName.errors("a.b").is_empty());
        assert!(Format::Dns1123Label.errors("my-db").is_empty());
    }

    #[test]
    fn immutability() {
        let p = FieldPath::new("spec").child("engine");
        assert_eq!(
            one(|e| immutable(e, &p, &"b".to_string(), &"a".to_string())),
            "spec.engine: Invalid value: \"b\": field is immutable"
        );
    }

    #[test]
    fn paths() {
        let p = FieldPath::root()
            .child("metadata")
            .child("labels")
            .key("app");
        assert_eq!(p.to_string(), "metadata.labels[app]");
        assert_eq!(
            FieldPath::new("spec")
                .child("items")
                .index(0)
                .child("name")
                .as_str(),
            "spec.items[0].name"
        );
        assert!(FieldPath::root().is_root());
    }
}
