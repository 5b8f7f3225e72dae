//! Serving custom resources from a CRD version's `openAPIV3Schema`: the
//! pure, schema-driven half of apiextensions-apiserver.
//!
//! [`CustomSchema::from_json`](crate::apiextensions::CustomSchema::from_json) parses the schema once (compiling its
//! `pattern`s and CEL rules); the object passes then follow upstream's
//! order on a write: [`CustomSchema::prune`](crate::apiextensions::CustomSchema::prune) (unknown fields), then
//! [`CustomSchema::coerce`](crate::apiextensions::CustomSchema::coerce) (embedded resources' `apiVersion`, `kind` and
//! `metadata`), then
//! [`CustomSchema::apply_defaults`](crate::apiextensions::CustomSchema::apply_defaults), then [`CustomSchema::validate`](crate::apiextensions::CustomSchema::validate) or
//! [`CustomSchema::validate_update`](crate::apiextensions::CustomSchema::validate_update).
//!
//! Validation reports what upstream reports, with its field paths and
//! messages:
//!
//! 1. OpenAPI value validation, as kube-openapi words it and as
//!    `apiextensions-apiserver/pkg/apiserver/validation` turns it into field
//!    errors (`spec.replicas: Invalid value: "string": spec.replicas in body
//!    must be of type integer: "string"`, `Unsupported value`, `Required
//!    value`, `Too many`, `Too long`, ...).
//! 2. The embedded resources (`x-kubernetes-embedded-resource: true`, at
//!    any depth below the root, in lists and maps too), as upstream's
//!    `schema/objectmeta` `Validate`: `apiVersion` and `kind` are required
//!    (`spec.template.kind: Required value: must not be empty`), strings,
//!    non-empty, a parseable group-version and a DNS-1035 label but for
//!    case; `metadata` is validated as ObjectMeta on creation
//!    ([`crate::validation::validate_object_meta`]: `generateName`, `name`
//!    as a path segment — a missing name is not an error —, `namespace`
//!    when set, labels, annotations, owner references, finalizers, managed
//!    fields) at the embedded path (`spec.template.metadata.labels`). These
//!    errors are not ratcheted on update, as upstream.
//! 3. The `x-kubernetes-list-type` `set` / `map` invariants
//!    (`Duplicate value`).
//! 4. The CEL rules of `x-kubernetes-validations`, unless an earlier error
//!    is of a blocking type (type, `Required`, `Unsupported`, `Too long`,
//!    `Too many`): then, as upstream, one
//!    `<nil>: Invalid value: null: some validation rules were not checked
//!    because the object was invalid; correct the existing errors to
//!    complete validation` stands for them (only in a schema that has
//!    rules: upstream has no CEL validator otherwise).
//!
//! On update, errors on values equal to the old value at the same place
//! (objects by key, `map` lists by their keys, `set` lists by value) are
//! dropped (ratcheting), and transition rules (those reading `oldSelf`) run
//! where an old value exists. A transition rule with `optionalOldSelf:
//! true` runs also where there is none (a create, a new field, a new item
//! of a `map` list): its `oldSelf` is an optional, `optional.none()`
//! without an old value and `optional.of(old)` with one (read with
//! `hasValue()`, `value()`, `orValue(...)`); its `messageExpression` sees
//! the plain `oldSelf`, as upstream evaluates it.
//!
//! # CEL
//!
//! A failed rule is reported as Kubernetes 1.33 (the version the server
//! reports) does, and as [`crate::cel`] does for compiled-in kinds: the bad
//! value is the schema's type (`spec.listeners: Invalid value: "array":
//! <message>`). (1.35 shows a scalar's value and omits structured ones.)
//!
//! Rules are compiled by [`CustomSchema::from_json`](crate::apiextensions::CustomSchema::from_json); a rule that does not
//! compile does not fail the parse: it is reported where it applies as
//! `Invalid value: "<type>": rule compile error: ...`, as upstream reports
//! rules that failed to compile. The environment is the `cel` crate's
//! standard library (with `matches`, `duration`, `timestamp`), its strings
//! extension (`split`, `substring`, `lowerAscii`, `indexOf`, `join`, ...)
//! and these Kubernetes library functions: `isIP`, `isCIDR`, `isURL`,
//! `find`, `findAll`.
//!
//! Runtime cost: upstream's cel-go counts the actual cost of each
//! evaluation, stops a rule past `PerCallLimit` (1,000,000: `'operation
//! cancelled: actual cost limit exceeded': no further validation rules
//! will be run due to call cost exceeds limit for rule: <rule>`) and all
//! rules of the request once `RuntimeCELCostBudget` (10,000,000) is spent
//! (`validation failed due to running out of cost budget, no further
//! validation rules will be run`). The `cel` crate counts no cost, so each
//! rule is charged before it runs with the static estimate of `cost.rs`,
//! computed with the sizes of the actual `self` and `oldSelf` (every
//! string, list and map at a path sized as the largest one there). That is
//! an upper bound of what cel-go would count: both branches of `?:`, `&&`
//! and `||` are charged, and every item of a comprehension as if it did
//! not stop early, so a rule whose worst case over the actual data passes
//! the limit is stopped even where its evaluation would short-circuit
//! under it; and costs are charged before the evaluation, so the rule that
//! would overdraw the budget is the one reported, not run. A failed rule's
//! `messageExpression` is charged the same way (`messageExpression
//! evaluation failed due to running out of cost budget, ...`, `no further
//! validation rules will be run due to call cost exceeds limit for
//! messageExpression: "<expression>"`). An expression whose estimate
//! depends on a size the estimator cannot know (the result of a function
//! it does not model, compared or iterated: cel-go's checker would know
//! more) is not charged.
//!
//! `self` and `oldSelf` are typed from the schema as Kubernetes does:
//! `number` values are doubles, strings of `format: date-time` / `date` are
//! timestamps, `duration` durations and `byte` bytes. Declared properties
//! are seen under their CEL names, as Kubernetes escapes them
//! (`namespace` as `__namespace__`, `a-b` as `a__dash__b`); keys of maps
//! are not escaped. (Properties whose names CEL cannot spell keep their
//! names, where upstream hides them.)
//!
//! Not provided, compared with upstream:
//! - at the root, upstream shows rules only `metadata.name` and
//!   `metadata.generateName`; here `self.metadata` is the whole metadata;
//! - static type checking of rules against the schema (an unknown field is
//!   an evaluation error here, a compile error upstream);
//! - the Kubernetes libraries beyond those listed above (`ip()`, `cidr()`,
//!   `url()` objects, `quantity`, `semver`, `lists` extras, `format`
//!   checkers, authorizer);
//! - in the messages of embedded resources' metadata, an owner reference
//!   (or their list) shown as the bad value is its JSON, not Go's `%#v` of
//!   the struct (which has pointer addresses); a metadata that does not decode names the first
//!   field of the wrong JSON type in Go's words, other decoding failures
//!   (a timestamp that does not parse) in serde's.
//!
//! Formats checked: `ipv4`, `ipv6`, `cidr`, `mac`, `uuid` (3/4/5), `hostname`,
//! `uri`, `email`, `byte`, `date`, `date-time`, `duration`, `bsonobjectid`,
//! `hexcolor`, `rgbcolor`, `k8s-short-name`, `k8s-long-name`; any other
//! format (`int32`, `int64`, `password`, `isbn`, ...) is accepted, as
//! upstream ignores formats it does not know.
//!
//! Nesting: the passes follow the schema, whose depth is bounded when it is
//! parsed; values below `x-kubernetes-preserve-unknown-fields` are not
//! walked except by CEL conversion, which relies on serde_json's parse
//! depth limit (128).

pub(crate) mod cost;
mod defaults;
mod embedded;
mod formats;
mod prune;
pub(crate) mod rules;

/// The CEL environment Kubernetes expressions compile in: the standard
/// library, the strings extension and the Kubernetes functions (`isIP`,
/// `quantity`, ...) that CRD rules use; admission match conditions and
/// policies compile in it too.
pub fn cel_env() -> std::sync::Arc<cel::Env> {
    rules::env()
}
mod schema;
#[cfg(test)]
mod tests;
mod validate;

use serde_json::Value;

use crate::validation::{ErrorList, ErrorType, FieldError, FieldPath};

/// A parsed structural schema of one CRD version, ready to prune, default
/// and validate objects. Cheap to share behind an `Arc`.
#[derive(Clone, Debug)]
pub struct CustomSchema {
    root: schema::Node,
    /// Whether any node below the root is an embedded resource (the
    /// embedded passes are skipped otherwise).
    embedded: bool,
    /// Whether any node has `x-kubernetes-validations` (upstream has no CEL
    /// validator otherwise, and reports no unchecked rules).
    rules: bool,
}

impl CustomSchema {
    /// Parses an `openAPIV3Schema` (the JSON of a CRD version's schema).
    ///
    /// Fails, with a message naming the offending place, on a schema it
    /// cannot use: a node that is not an object, an unknown `type`, a
    /// `$ref`, an `items` list, a `pattern` that is not a valid regular
    /// expression, a rule without `rule` or with an unknown `reason`.
    /// CEL rules that do not compile are accepted and reported when they
    /// apply (see the module docs).
    pub fn from_json(schema: &Value) -> Result<CustomSchema, String> {
        let root = schema::parse(schema, "openAPIV3Schema", 0)?;
        let embedded = embedded::any_below(&root);
        let rules = rules::any(&root);
        Ok(CustomSchema {
            root,
            embedded,
            rules,
        })
    }

    /// Removes the fields the schema does not know, as upstream's
    /// `pruning.PruneWithOptions` on a resource root: `apiVersion`, `kind`
    /// and `metadata` are kept at the root and in embedded resources
    /// (`x-kubernetes-embedded-resource`), the content of `metadata` being
    /// the caller's (ObjectMeta); `x-kubernetes-preserve-unknown-fields`
    /// keeps unknown fields (known ones are still pruned by their schema).
    ///
    /// Returns the removed paths sorted, in upstream's form (`ReturnPruned`):
    /// `foo` at the root, `spec.foo`, `spec.items[0].bar` — with no leading
    /// dot; upstream words them `unknown field "spec.foo"`.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut out = Vec::new();
        prune::prune(Some(&self.root), obj, true, "", &mut out);
        out.sort();
        out
    }

    /// Coerces the embedded resources of an object as upstream's
    /// `objectmeta.Coerce` below the root (after pruning, before
    /// defaulting): a non-string `apiVersion` or `kind` is refused, or
    /// dropped with `drop_invalid`; a `metadata` is rewritten as the
    /// ObjectMeta it decodes to (unknown fields dropped), refused when it
    /// does not decode, or with `drop_invalid` stripped of the fields that
    /// do not. Writes refuse (`drop_invalid` false); reads of stored objects
    /// drop. The error is the first refusal, e.g. `spec.template.kind:
    /// Invalid value: 1: must be a string`.
    pub fn coerce(&self, obj: &mut Value, drop_invalid: bool) -> Result<(), Box<FieldError>> {
        if !self.embedded {
            return Ok(());
        }
        embedded::coerce(&self.root, obj, &FieldPath::root(), drop_invalid)
    }

    /// Applies the schema's `default`s as upstream's structural defaulting:
    /// nulls in non-nullable fields without a default are removed first;
    /// then absent fields of present objects, and nulls in non-nullable
    /// fields, items and map values, get their default (defaults are then
    /// defaulted in turn).
    pub fn apply_defaults(&self, obj: &mut Value) {
        defaults::drop_nulls(&self.root, obj);
        defaults::apply(&self.root, obj);
    }

    /// Validates a whole object (create): OpenAPI, embedded resources, list
    /// types, then CEL rules (see the module docs for the order and
    /// messages). The root's ObjectMeta rules (name, generateName, labels)
    /// are the caller's; those of embedded resources are checked here.
    pub fn validate(&self, obj: &Value) -> ErrorList {
        self.run(obj, None)
    }

    /// Validates an update of `old` to `obj`: as [`CustomSchema::validate`],
    /// plus transition rules where an old value exists, and without the
    /// errors of values unchanged from `old` (ratcheting; transition rules
    /// are not ratcheted).
    pub fn validate_update(&self, obj: &Value, old: &Value) -> ErrorList {
        self.run(obj, Some(old))
    }

    fn run(&self, obj: &Value, old: Option<&Value>) -> ErrorList {
        let mut errs = ErrorList::default();
        validate::openapi(&self.root, obj, old, "", &mut errs);
        // upstream `objectmeta.Validate`: not ratcheted, the same on update.
        if self.embedded {
            embedded::validate(&self.root, obj, &FieldPath::root(), &mut errs);
        }
        validate::list_types(&self.root, obj, old, &FieldPath::root(), &mut errs);
        // upstream `hasBlockingErr`: errors that leave the object without
        // the shape (and size bounds) the rules were written for.
        let blocking = errs.iter().any(|e| {
            matches!(
                e.type_,
                ErrorType::NotSupported
                    | ErrorType::Required
                    | ErrorType::TooLong
                    | ErrorType::TooMany
                    | ErrorType::TypeInvalid
            )
        });
        if !self.rules {
            // No rules: nothing left unchecked.
        } else if blocking {
            errs.push(FieldError::invalid(
                "<nil>",
                Value::Null,
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ));
        } else {
            rules::validate(&self.root, obj, old, &FieldPath::root(), &mut errs);
        }
        errs
    }

    /// The `type` of the schema at a JSON path such as `.spec.replicas`
    /// (for `/scale`, printer columns and selectable fields): `"integer"`,
    /// `"string"`, ... Map values are reached by their key (`.spec.map.k`),
    /// list items with `[*]` or an index. `None` when the path leaves the
    /// schema or the node has no `type`; an `x-kubernetes-int-or-string`
    /// node answers `"int-or-string"`.
    pub fn type_at(&self, path: &str) -> Option<&str> {
        let mut node = &self.root;
        let mut rest = path;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('[') {
                let end = r.find(']')?;
                node = node.items.as_deref()?;
                rest = &r[end + 1..];
            } else {
                let r = rest.strip_prefix('.').unwrap_or(rest);
                let end = r.find(['.', '[']).unwrap_or(r.len());
                let name = &r[..end];
                if name.is_empty() {
                    return None;
                }
                node = match node.properties.get(name) {
                    Some(n) => n,
                    None => node.additional.schema()?,
                };
                rest = &r[end..];
            }
        }
        if node.int_or_string {
            Some("int-or-string")
        } else if node.type_.is_empty() {
            None
        } else {
            Some(&node.type_)
        }
    }
}
