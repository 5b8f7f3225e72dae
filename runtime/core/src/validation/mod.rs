//! Kubernetes field errors (`field.Error` / `field.ErrorList`), field paths,
//! the [`Validate`] trait that `#[derive(Validate)]` and `#[derive(Resource)]`
//! implement, and the validators shared by every kind (names, labels).
//!
//! The declarative rules (`#[validate(minimum = 1, ...)]`) are evaluated by
//! the helpers of [`rules`]; their messages follow upstream
//! `k8s.io/apimachinery` (`pkg/util/validation/field`, `pkg/api/validate`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

mod meta;
pub mod rules;

pub use meta::{TOTAL_ANNOTATION_SIZE_LIMIT, validate_labels, validate_object_meta};

use crate::meta::StatusCause;

/// The type of a field error, rendered as the cause's `reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    /// `FieldValueNotFound`.
    NotFound,
    /// `FieldValueRequired`.
    Required,
    /// `FieldValueDuplicate`.
    Duplicate,
    /// `FieldValueInvalid`.
    Invalid,
    /// `FieldValueNotSupported`.
    NotSupported,
    /// `FieldValueForbidden`.
    Forbidden,
    /// `FieldValueTooLong`.
    TooLong,
    /// `FieldValueTooMany`.
    TooMany,
    /// `InternalError`.
    Internal,
    /// `FieldValueTypeInvalid`.
    TypeInvalid,
}

impl ErrorType {
    /// The cause reason string.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }
}

/// One validation failure on one field.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// What kind of failure.
    pub type_: ErrorType,
    /// The field path, e.g. `spec.replicas` or `metadata.labels[app]`.
    pub field: String,
    /// The offending value, if it is shown (`Invalid value: "x"`).
    pub bad_value: Option<serde_json::Value>,
    /// Extra detail.
    pub detail: String,
}

impl FieldError {
    /// `FieldValueInvalid` with the bad value.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<serde_json::Value>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            type_: ErrorType::Invalid,
            field: field.into(),
            bad_value: Some(value.into()),
            detail: detail.into(),
        }
    }

    /// `FieldValueRequired`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            type_: ErrorType::Required,
            field: field.into(),
            bad_value: None,
            detail: detail.into(),
        }
    }

    /// `FieldValueForbidden`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            type_: ErrorType::Forbidden,
            field: field.into(),
            bad_value: None,
            detail: detail.into(),
        }
    }

    /// `FieldValueNotSupported` with the supported values.
    pub fn not_supported(
        field: impl Into<String>,
        value: impl Into<serde_json::Value>,
        supported: &[&str],
    ) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldError {
            type_: ErrorType::NotSupported,
            field: field.into(),
            bad_value: Some(value.into()),
            detail: format!("supported values: {}", quoted.join(", ")),
        }
    }

    /// `FieldValueDuplicate`: a value that must be unique is repeated.
    pub fn duplicate(field: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        FieldError {
            type_: ErrorType::Duplicate,
            field: field.into(),
            bad_value: Some(value.into()),
            detail: String::new(),
        }
    }

    /// `FieldValueTooLong`: `may not be more than <max> bytes` (the value is
    /// never shown).
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        FieldError {
            type_: ErrorType::TooLong,
            field: field.into(),
            bad_value: None,
            detail: format!("may not be more than {max} {unit}"),
        }
    }

    /// `FieldValueTooMany`: `<actual>: must have at most <max> items`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        let unit = if max == 1 { "item" } else { "items" };
        FieldError {
            type_: ErrorType::TooMany,
            field: field.into(),
            bad_value: Some(actual.into()),
            detail: format!("must have at most {max} {unit}"),
        }
    }

    /// The message as Kubernetes renders it: `Invalid value: "x": detail`.
    pub fn message(&self) -> String {
        let head = match self.type_ {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
            ErrorType::TypeInvalid => "Invalid value",
        };
        let mut out = head.to_string();
        if let Some(v) = &self.bad_value
            && matches!(
                self.type_,
                ErrorType::Invalid
                    | ErrorType::NotSupported
                    | ErrorType::Duplicate
                    | ErrorType::NotFound
                    | ErrorType::TypeInvalid
                    | ErrorType::TooMany
            )
        {
            out.push_str(": ");
            out.push_str(&render_value(v));
        }
        if !self.detail.is_empty() {
            out.push_str(": ");
            out.push_str(&self.detail);
        }
        out
    }

    /// The `StatusCause` of this error.
    pub fn to_cause(&self) -> StatusCause {
        StatusCause {
            reason: self.type_.reason().into(),
            message: self.message(),
            field: self.field.clone(),
        }
    }
}

fn render_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => format!("{s:?}"),
        serde_json::Value::Null => "null".into(),
        other => other.to_string(),
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// A list of field errors; empty means valid.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorList(pub Vec<FieldError>);

impl ErrorList {
    /// True when there is no error.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds one error.
    pub fn push(&mut self, e: FieldError) {
        self.0.push(e);
    }

    /// The number of errors.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Iterates over the errors.
    pub fn iter(&self) -> std::slice::Iter<'_, FieldError> {
        self.0.iter()
    }

    /// Adds all errors of another list.
    pub fn extend(&mut self, other: ErrorList) {
        self.0.extend(other.0);
    }

    /// The status causes.
    pub fn to_causes(&self) -> Vec<StatusCause> {
        self.0.iter().map(FieldError::to_cause).collect()
    }
}

/// A Kubernetes field path (`field.Path`): `spec.replicas`,
/// `spec.items[0].name`, `metadata.labels[app]`. The root is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldPath(String);

impl FieldPath {
    /// The empty root path (an object's top level).
    pub fn root() -> Self {
        FieldPath(String::new())
    }

    /// A path of one field, e.g. `FieldPath::new("spec")`.
    pub fn new(name: &str) -> Self {
        FieldPath(name.to_string())
    }

    /// The path of a child field: `spec` → `spec.replicas`.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            FieldPath(name.to_string())
        } else {
            FieldPath(format!("{}.{name}", self.0))
        }
    }

    /// The path of a list item: `spec.items` → `spec.items[0]`.
    pub fn index(&self, index: usize) -> Self {
        FieldPath(format!("{}[{index}]", self.0))
    }

    /// The path of a map entry: `metadata.labels` → `metadata.labels[app]`.
    pub fn key(&self, key: &str) -> Self {
        FieldPath(format!("{}[{key}]", self.0))
    }

    /// The path as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for the root path.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&FieldPath> for String {
    fn from(path: &FieldPath) -> String {
        path.0.clone()
    }
}

impl From<FieldPath> for String {
    fn from(path: FieldPath) -> String {
        path.0
    }
}

/// Declarative validation, defaulting and schema rules of a type,
/// implemented by `#[derive(Validate)]` (nested structs) and
/// `#[derive(Resource)]` (the kind itself) from `#[validate(...)]`
/// attributes. Every method has a no-op default, so a hand-written impl
/// overrides only what it needs.
///
/// Implementations for `Option<T>`, `Box<T>`, `Vec<T>` and string-keyed maps
/// forward to the items, with `[i]` / `[key]` path segments.
pub trait Validate {
    /// Validates a new value at `path` (create).
    fn validate(&self, path: &FieldPath) -> ErrorList {
        let _ = path;
        ErrorList::default()
    }

    /// Validates an update of `old` to `self` at `path`: immutable fields
    /// and CEL transition rules (`oldSelf`), recursively.
    fn validate_update(&self, old: &Self, path: &FieldPath) -> ErrorList {
        let _ = (old, path);
        ErrorList::default()
    }

    /// Applies the declared defaults (`default = ...`), recursively.
    fn default_fields(&mut self) {}

    /// Publishes the declared rules into this type's schema (and its nested
    /// types'), in the definitions of `generator`. The type's schema must
    /// already have been generated with `generator.subschema_for`.
    fn publish_schema(generator: &mut schemars::SchemaGenerator) {
        let _ = generator;
    }
}

impl<T: Validate> Validate for Option<T> {
    fn validate(&self, path: &FieldPath) -> ErrorList {
        self.as_ref().map(|v| v.validate(path)).unwrap_or_default()
    }
    fn validate_update(&self, old: &Self, path: &FieldPath) -> ErrorList {
        match (self, old) {
            (Some(new), Some(old)) => new.validate_update(old, path),
            _ => ErrorList::default(),
        }
    }
    fn default_fields(&mut self) {
        if let Some(v) = self {
            v.default_fields();
        }
    }
    fn publish_schema(generator: &mut schemars::SchemaGenerator) {
        T::publish_schema(generator);
    }
}

impl<T: Validate> Validate for Box<T> {
    fn validate(&self, path: &FieldPath) -> ErrorList {
        (**self).validate(path)
    }
    fn validate_update(&self, old: &Self, path: &FieldPath) -> ErrorList {
        (**self).validate_update(old, path)
    }
    fn default_fields(&mut self) {
        (**self).default_fields();
    }
    fn publish_schema(generator: &mut schemars::SchemaGenerator) {
        T::publish_schema(generator);
    }
}

impl<T: Validate> Validate for Vec<T> {
    fn validate(&self, path: &FieldPath) -> ErrorList {
        let mut errs = ErrorList::default();
        for (i, item) in self.iter().enumerate() {
            errs.extend(item.validate(&path.index(i)));
        }
        errs
    }
    fn default_fields(&mut self) {
        self.iter_mut().for_each(Validate::default_fields);
    }
    fn publish_schema(generator: &mut schemars::SchemaGenerator) {
        T::publish_schema(generator);
    }
}

impl<T: Validate> Validate for BTreeMap<String, T> {
    fn validate(&self, path: &FieldPath) -> ErrorList {
        let mut errs = ErrorList::default();
        for (k, item) in self {
            errs.extend(item.validate(&path.key(k)));
        }
        errs
    }
    fn validate_update(&self, old: &Self, path: &FieldPath) -> ErrorList {
        let mut errs = ErrorList::default();
        for (k, item) in self {
            if let Some(o) = old.get(k) {
                errs.extend(item.validate_update(o, &path.key(k)));
            }
        }
        errs
    }
    fn default_fields(&mut self) {
        self.values_mut().for_each(Validate::default_fields);
    }
    fn publish_schema(generator: &mut schemars::SchemaGenerator) {
        T::publish_schema(generator);
    }
}

impl<T: Validate, S: std::hash::BuildHasher> Validate for HashMap<String, T, S> {
    fn validate(&self, path: &FieldPath) -> ErrorList {
        let mut keys: Vec<&String> = self.keys().collect();
        keys.sort();
        let mut errs = ErrorList::default();
        for k in keys {
            if let Some(item) = self.get(k) {
                errs.extend(item.validate(&path.key(k)));
            }
        }
        errs
    }
    fn default_fields(&mut self) {
        self.values_mut().for_each(Validate::default_fields);
    }
    fn publish_schema(generator: &mut schemars::SchemaGenerator) {
        T::publish_schema(generator);
    }
}

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// Errors of a DNS-1123 label (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, ≤ 63).
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errs.push(format!(
            "must be no more than {DNS1123_LABEL_MAX} characters"
        ));
    }
    if !label_ok(value) {
        // Upstream `IsDNS1123Label`: a valid subdomain that is not a label
        // (the length being checked) has dots.
        if value.len() <= DNS1123_SUBDOMAIN_MAX && subdomain_ok(value) {
            errs.push("must not contain dots".into());
            return errs;
        }
        errs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into());
    }
    errs
}

fn label_ok(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn subdomain_ok(v: &str) -> bool {
    !v.is_empty() && v.split('.').all(label_ok)
}

/// Errors of a DNS-1123 subdomain (dot-separated labels, ≤ 253).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
        ));
    }
    if !subdomain_ok(value) {
        errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into());
    }
    errs
}

/// Errors of a DNS-1035 label (`[a-z]([-a-z0-9]*[a-z0-9])?`, ≤ 63): a
/// DNS-1123 label that starts with a letter.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errs.push(format!(
            "must be no more than {DNS1123_LABEL_MAX} characters"
        ));
    }
    if !label_ok(value) || !value.as_bytes().first().is_some_and(u8::is_ascii_lowercase) {
        errs.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".into());
    }
    errs
}

const QUALIFIED_NAME_MAX: usize = 63;
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, the name part of a
/// qualified name and a non-empty label value.
fn qualified_part_ok(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Upstream `RegexError`: the message, its examples and the expression.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let quoted: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        quoted.join(" or ")
    )
}

/// Errors of a qualified name (upstream `IsQualifiedName`): an optional
/// DNS-1123 subdomain prefix and `/`, then a name of at most 63
/// alphanumeric characters, `-`, `_` or `.` that starts and ends
/// alphanumeric. Label keys, annotation keys (lowercased) and finalizers.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for msg in is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {msg}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    if !qualified_part_ok(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Errors of a label value (upstream `IsValidLabelValue`): empty, or at
/// most 63 characters of a qualified name's name part.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > QUALIFIED_NAME_MAX {
        errs.push(format!(
            "must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    if !value.is_empty() && !qualified_part_ok(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Errors of a name prefix that must be usable in a path segment once a
/// suffix is appended (upstream `IsValidPathSegmentPrefix`: `.` and `..`
/// are allowed, as a suffix follows).
pub fn is_valid_path_segment_prefix(name: &str) -> Vec<String> {
    ["/", "%"]
        .iter()
        .filter(|bad| name.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// Errors of a name that must be usable as a path segment.
pub fn is_valid_path_segment_name(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    let mut errs = Vec::new();
    for bad in ["/", "%"] {
        if name.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_label() {
        assert!(is_dns1123_label("my-name").is_empty());
        assert!(!is_dns1123_label("My-name").is_empty());
        assert!(!is_dns1123_label("-a").is_empty());
        assert!(!is_dns1123_label(&"a".repeat(64)).is_empty());
    }

    #[test]
    fn dns1035_label() {
        assert!(is_dns1035_label("v1beta1").is_empty());
        assert!(!is_dns1035_label("1v").is_empty());
        assert!(!is_dns1035_label("").is_empty());
        assert!(!is_dns1035_label("V1").is_empty());
    }

    // apimachinery util/validation IsDNS1123Label: a valid subdomain that
    // is not a label "must not contain dots".
    #[test]
    fn dns_label_with_dots() {
        assert_eq!(is_dns1123_label("a.b"), ["must not contain dots"]);
        assert_eq!(is_dns1123_label("a..b").len(), 1);
        assert_ne!(is_dns1123_label("a..b"), ["must not contain dots"]);
    }

    // IsQualifiedName / IsValidLabelValue.
    #[test]
    fn qualified_names_and_label_values() {
        assert!(is_qualified_name("example.com/My_name.1").is_empty());
        assert!(is_qualified_name("a").is_empty());
        assert_eq!(is_qualified_name("/a"), ["prefix part must be non-empty"]);
        let e = is_qualified_name("Bad_Prefix/a");
        assert_eq!(e.len(), 1);
        assert!(
            e[0].starts_with("prefix part a lowercase RFC 1123 subdomain"),
            "{e:?}"
        );
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            ["name part must be no more than 63 characters"]
        );
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("a-b_c.d").is_empty());
        assert_eq!(is_valid_label_value("-a").len(), 1);
        assert!(is_valid_path_segment_prefix("..").is_empty());
        assert_eq!(
            is_valid_path_segment_prefix("a/%"),
            ["may not contain '/'", "may not contain '%'"]
        );
    }

    #[test]
    fn dns_subdomain() {
        assert!(is_dns1123_subdomain("a.b-c.d").is_empty());
        assert!(!is_dns1123_subdomain("a..b").is_empty());
        assert!(!is_dns1123_subdomain("").is_empty());
    }

    #[test]
    fn messages() {
        let e = FieldError::invalid("spec.x", "v", "bad");
        assert_eq!(e.message(), "Invalid value: \"v\": bad");
        let e = FieldError::required("metadata.name", "name or generateName is required");
        assert_eq!(
            e.message(),
            "Required value: name or generateName is required"
        );
    }
}
