//! The cost of CEL rules: a static estimate over the parsed expression,
//! following cel-go's cost model (`checker/cost.go`) and the Kubernetes
//! library estimates (`k8s.io/apiserver/pkg/cel/library/cost.go`), with
//! the sizes of `self` taken either from the schema, as Kubernetes derives
//! them (`k8s.io/apiserver/pkg/cel/common/schemas.go`), or from an actual
//! value.
//!
//! The model: reading a variable or selecting a field of a map or object
//! costs 1, a constant 0, creating a list 10, a map 30, a message 40; most
//! calls cost 1 plus their arguments; a comprehension costs its range, its
//! initial accumulator and its result, plus the range's size times the
//! cost of one loop condition and step. Calls over strings and lists cost
//! by their sizes: string traversal at 0.1 per character (`startsWith`,
//! `contains`, comparisons and equality of strings, `+` of strings,
//! `lowerAscii`, `split`, `join`, ...), regular expressions at the
//! string's traversal times 0.25 per character of the pattern (`matches`,
//! `find`, `findAll`), `in` of a list at its size.
//!
//! Sizes: a string is bounded by `maxLength` (times 4, as Kubernetes counts
//! bytes of UTF-8), else the longest `enum` value, else the 3 MiB request
//! limit (`duration`, `date`, `date-time` strings are bounded by their
//! formats); a list by `maxItems`, else by how many of its items of the
//! smallest serialized size fit in a request; a map likewise with
//! `maxProperties`.
//!
//! At CRD write time the sizes are the schema's ([`SchemaSizes`]); when a
//! rule runs they are those of the actual values ([`ValueSizes`]), which
//! gives an upper bound of the rule's actual cost to charge against
//! `PerCallLimit` and `RuntimeCELCostBudget`.
//!
//! This is an estimator written for this server, not cel-go's node for
//! node: types are inferred from the schema and from the functions called
//! instead of CEL's type checker (an expression whose type is not known is
//! given an unknown size, as cel-go gives values it cannot size), and
//! overloads are told apart by the inferred kinds of their arguments.

use std::collections::BTreeMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;

/// Upstream's `StaticEstimatedCostLimit`: the most a rule's estimate (times
/// the number of times it may run) may be.
pub(crate) const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// Upstream's `StaticEstimatedCRDCostLimit`: the most the estimates of all
/// rules of a schema may add up to.
pub(crate) const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;
/// Upstream's `PerCallLimit` (`k8s.io/apiserver/pkg/apis/cel/config.go`).
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;
/// Upstream's `RuntimeCELCostBudget`: the cost all rules of one request
/// may spend.
pub(crate) const RUNTIME_CEL_COST_BUDGET: i64 = 10_000_000;
/// Upstream's `MaxRequestSizeBytes`.
const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

const STRING_TRAVERSAL_COST_FACTOR: f64 = 0.1;
const REGEX_STRING_LENGTH_COST_FACTOR: f64 = 0.25;
const LIST_CREATE_BASE_COST: u64 = 10;
const MAP_CREATE_BASE_COST: u64 = 30;
const STRUCT_CREATE_BASE_COST: u64 = 40;

/// A range of costs or sizes; arithmetic saturates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) min: u64,
    pub(crate) max: u64,
}

impl Range {
    pub(crate) const fn fixed(n: u64) -> Range {
        Range { min: n, max: n }
    }

    const fn unknown() -> Range {
        Range {
            min: 0,
            max: u64::MAX,
        }
    }

    fn add(self, o: Range) -> Range {
        Range {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }

    fn mul(self, o: Range) -> Range {
        Range {
            min: self.min.saturating_mul(o.min),
            max: self.max.saturating_mul(o.max),
        }
    }

    fn factor(self, f: f64) -> Range {
        Range {
            min: mul_factor(self.min, f),
            max: mul_factor(self.max, f),
        }
    }

    fn union(self, o: Range) -> Range {
        Range {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

/// `x * f` rounded up, saturating (cel-go's `multiplyByCostFactor`).
fn mul_factor(x: u64, f: f64) -> u64 {
    let xf = x as f64;
    if xf > 0.0 && f > 0.0 && xf > u64::MAX as f64 / f {
        return u64::MAX;
    }
    let c = (xf * f).ceil();
    if c >= 18_446_744_073_709_551_616.0 {
        u64::MAX
    } else {
        c as u64
    }
}

/// `a * b`, saturating, 0 when `a` is 0 (upstream's
/// `multiplyWithOverflowGuard`).
pub(crate) fn mul_guard(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// The CEL kind of a value, as far as the estimator knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Bool,
    Int,
    Uint,
    Double,
    Null,
    String,
    Bytes,
    Duration,
    Timestamp,
    List,
    Map,
    Object,
    Dyn,
}

impl Kind {
    /// cel-go's `isScalar`: kinds of a fixed size of 1.
    fn scalar(self) -> bool {
        matches!(
            self,
            Kind::Bool | Kind::Int | Kind::Uint | Kind::Double | Kind::Duration | Kind::Timestamp
        )
    }

    fn stringish(self) -> bool {
        matches!(self, Kind::String | Kind::Bytes)
    }
}

/// Where sizes come from: the nodes reachable from `self` (and `oldSelf`,
/// which has the same type) by field names, list items, map values and
/// map keys.
pub(crate) trait Sizes {
    type At: Clone;
    fn root(&self) -> Option<Self::At>;
    fn field(&self, at: &Self::At, name: &str) -> Option<Self::At>;
    /// List items, or map values.
    fn items(&self, at: &Self::At) -> Option<Self::At>;
    fn keys(&self, at: &Self::At) -> Option<Self::At>;
    fn kind(&self, at: &Self::At) -> Kind;
    /// The largest `size()` of the values at `at` (0 for scalars and
    /// objects, as Kubernetes' declarations give them no size).
    fn max_size(&self, at: &Self::At) -> u64;
}

// ---------------------------------------------------------------------------
// Sizes from a schema.
// ---------------------------------------------------------------------------

/// What the estimator needs of a schema node (implemented by the runtime
/// schema tree and by the CRD validation's decoded schema).
pub(crate) trait SchemaView {
    fn type_name(&self) -> &str;
    fn format_name(&self) -> Option<&str>;
    fn is_int_or_string(&self) -> bool;
    fn is_embedded(&self) -> bool;
    fn max_length(&self) -> Option<i64>;
    fn max_items(&self) -> Option<i64>;
    fn max_properties(&self) -> Option<i64>;
    /// The length of the longest string of the `enum`, if there is one.
    fn enum_max_len(&self) -> Option<u64>;
    fn is_required(&self, name: &str) -> bool;
    fn has_default(&self) -> bool;
    fn property_list(&self) -> Vec<(&str, &Self)>;
    fn additional_schema(&self) -> Option<&Self>;
    /// Whether `additionalProperties` is set at all (a bool or a schema).
    fn has_additional(&self) -> bool;
    fn item_schema(&self) -> Option<&Self>;
}

/// A schema node as Kubernetes declares it to CEL (`DeclType`): its kind,
/// its most elements (`MaxElements`) and its smallest JSON serialization
/// (`MinSerializedSize`).
#[derive(Clone, Debug)]
pub(crate) struct Decl {
    pub(crate) kind: Kind,
    pub(crate) max_elements: u64,
    pub(crate) min_size: u64,
    pub(crate) fields: BTreeMap<String, Decl>,
    pub(crate) elem: Option<Box<Decl>>,
}

fn nonneg(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Decl {
    fn simple(kind: Kind, max_elements: u64, min_size: u64) -> Decl {
        Decl {
            kind,
            max_elements,
            min_size,
            fields: BTreeMap::new(),
            elem: None,
        }
    }

    fn unbounded_string() -> Decl {
        Decl::simple(Kind::String, MAX_REQUEST_SIZE_BYTES - 2, 2)
    }

    /// Upstream's `SchemaDeclType`: `None` for schemas rules cannot see
    /// (no type, arrays without items, ...).
    pub(crate) fn from_schema<S: SchemaView>(s: &S, is_resource_root: bool) -> Option<Decl> {
        if s.is_int_or_string() {
            let max = match s.max_length() {
                Some(l) => nonneg(l).saturating_mul(4),
                None => MAX_REQUEST_SIZE_BYTES - 2,
            };
            return Some(Decl::simple(Kind::Dyn, max, 1));
        }
        let mut decl = match s.type_name() {
            "array" => {
                let item = s.item_schema()?;
                let item_decl = Decl::from_schema(item, item.is_embedded())?;
                let max = match s.max_items() {
                    Some(m) => nonneg(m),
                    None => (MAX_REQUEST_SIZE_BYTES - 2) / (item_decl.min_size + 1),
                };
                Decl {
                    kind: Kind::List,
                    max_elements: max,
                    min_size: 2,
                    fields: BTreeMap::new(),
                    elem: Some(Box::new(item_decl)),
                }
            }
            "object" => {
                if let Some(additional) = s.additional_schema() {
                    let value = Decl::from_schema(additional, additional.is_embedded())?;
                    let max = match s.max_properties() {
                        Some(m) => nonneg(m),
                        None => (MAX_REQUEST_SIZE_BYTES - 2) / (value.min_size + 6),
                    };
                    return Some(Decl {
                        kind: Kind::Map,
                        max_elements: max,
                        min_size: 2,
                        fields: BTreeMap::new(),
                        elem: Some(Box::new(value)),
                    });
                }
                let mut fields = BTreeMap::new();
                let mut min_size = 2u64;
                for (name, prop) in s.property_list() {
                    if let Some(d) = Decl::from_schema(prop, prop.is_embedded()) {
                        if s.is_required(name) && !prop.has_default() {
                            min_size = min_size
                                .saturating_add(name.len() as u64)
                                .saturating_add(d.min_size)
                                .saturating_add(4);
                        }
                        fields.insert(name.to_string(), d);
                    }
                }
                Decl {
                    kind: Kind::Object,
                    max_elements: 0,
                    min_size,
                    fields,
                    elem: None,
                }
            }
            "string" => match s.format_name() {
                Some("byte") => Decl::simple(
                    Kind::Bytes,
                    s.max_length().map_or(MAX_REQUEST_SIZE_BYTES - 2, nonneg),
                    2,
                ),
                Some("duration") => Decl::simple(Kind::Duration, 32, 3),
                Some("date") => Decl::simple(Kind::Timestamp, 12, 12),
                Some("date-time") => Decl::simple(Kind::Timestamp, 32, 21),
                _ => {
                    let max = match (s.max_length(), s.enum_max_len()) {
                        (Some(l), _) => nonneg(l).saturating_mul(4),
                        (None, Some(e)) => e,
                        (None, None) => MAX_REQUEST_SIZE_BYTES - 2,
                    };
                    Decl::simple(Kind::String, max, 2)
                }
            },
            "boolean" => Decl::simple(Kind::Bool, 0, 4),
            "number" => Decl::simple(Kind::Double, 0, 1),
            "integer" => Decl::simple(Kind::Int, 0, 1),
            _ => return None,
        };
        if is_resource_root && decl.kind == Kind::Object {
            // `apiVersion`, `kind`, `metadata.name` and
            // `metadata.generateName` are always visible at a resource's
            // root: unless the schema declares them all as strings, they
            // are declared so, `metadata` with only those two (upstream's
            // `WithTypeAndObjectMeta`).
            let is_string = |d: Option<&Decl>| d.is_some_and(|d| d.kind == Kind::String);
            let declared = is_string(decl.fields.get("kind"))
                && is_string(decl.fields.get("apiVersion"))
                && decl.fields.get("metadata").is_some_and(|m| {
                    is_string(m.fields.get("name")) && is_string(m.fields.get("generateName"))
                });
            if !declared {
                decl.fields
                    .insert("apiVersion".into(), Decl::unbounded_string());
                decl.fields.insert("kind".into(), Decl::unbounded_string());
                let mut meta = Decl::simple(Kind::Object, 0, 2);
                meta.fields.insert("name".into(), Decl::unbounded_string());
                meta.fields
                    .insert("generateName".into(), Decl::unbounded_string());
                decl.fields.insert("metadata".into(), meta);
            }
        }
        Some(decl)
    }

    /// How many times a rule on this node may run when a parent list or
    /// map is unbounded (upstream's `maxCardinality`).
    pub(crate) fn max_cardinality(&self) -> u64 {
        MAX_REQUEST_SIZE_BYTES / (self.min_size.saturating_add(1))
    }
}

/// The factor by which a schema multiplies how many times its children may
/// exist: `maxItems` / `maxProperties` of lists and maps (`None` when
/// unbounded), 1 otherwise (upstream's `extractMaxElements`).
pub(crate) fn max_elements_factor<S: SchemaView>(s: &S) -> Option<u64> {
    match s.type_name() {
        "object" if s.has_additional() => s.max_properties().map(nonneg),
        "array" => s.max_items().map(nonneg),
        _ => Some(1),
    }
}

/// CEL keywords that Kubernetes escapes as `__<word>__`.
pub(crate) const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL field name of a property (upstream's `cel.Escape`): keywords
/// become `__<word>__`, and `__`, `.`, `-`, `/` in a name
/// `__underscores__`, `__dot__`, `__dash__`, `__slash__`; `None` for names
/// CEL cannot spell (empty, a leading digit, other characters).
pub(crate) fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            out.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

/// The property name a CEL field name stands for: Kubernetes escapes
/// property names that are CEL keywords (`__namespace__`) and `__`, `.`,
/// `-`, `/` in names (`__underscores__`, `__dot__`, `__dash__`,
/// `__slash__`) (upstream's `cel.Escape`).
pub(crate) fn unescape(name: &str) -> Option<String> {
    if let Some(inner) = name.strip_prefix("__").and_then(|n| n.strip_suffix("__"))
        && RESERVED.contains(&inner)
    {
        return Some(inner.to_string());
    }
    if !name.contains("__") {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find("__") {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let (text, len) = [
            ("__underscores__", "__"),
            ("__dot__", "."),
            ("__dash__", "-"),
            ("__slash__", "/"),
        ]
        .iter()
        .find(|(esc, _)| tail.starts_with(esc))
        .map_or(("__", 2), |(esc, plain)| (*plain, esc.len()));
        out.push_str(text);
        rest = &tail[len..];
    }
    out.push_str(rest);
    Some(out)
}

/// Sizes from a schema declaration.
pub(crate) struct SchemaSizes<'a>(pub(crate) &'a Decl);

/// A schema node, or the string keys of a map.
#[derive(Clone)]
pub(crate) enum DeclAt<'a> {
    Node(&'a Decl),
    Keys,
}

impl<'a> Sizes for SchemaSizes<'a> {
    type At = DeclAt<'a>;

    fn root(&self) -> Option<DeclAt<'a>> {
        Some(DeclAt::Node(self.0))
    }

    fn field(&self, at: &DeclAt<'a>, name: &str) -> Option<DeclAt<'a>> {
        match at {
            DeclAt::Node(d) if d.kind == Kind::Object => d
                .fields
                .get(name)
                .or_else(|| unescape(name).and_then(|n| d.fields.get(&n)))
                .map(DeclAt::Node),
            DeclAt::Node(d) if d.kind == Kind::Map => d.elem.as_deref().map(DeclAt::Node),
            _ => None,
        }
    }

    fn items(&self, at: &DeclAt<'a>) -> Option<DeclAt<'a>> {
        match at {
            DeclAt::Node(d) => d.elem.as_deref().map(DeclAt::Node),
            DeclAt::Keys => None,
        }
    }

    fn keys(&self, at: &DeclAt<'a>) -> Option<DeclAt<'a>> {
        match at {
            DeclAt::Node(d) if d.kind == Kind::Map => Some(DeclAt::Keys),
            _ => None,
        }
    }

    fn kind(&self, at: &DeclAt<'a>) -> Kind {
        match at {
            DeclAt::Node(d) => d.kind,
            DeclAt::Keys => Kind::String,
        }
    }

    fn max_size(&self, at: &DeclAt<'a>) -> u64 {
        match at {
            DeclAt::Node(d) => d.max_elements,
            // Kubernetes' map key declaration (`StringType`) has no size.
            DeclAt::Keys => 0,
        }
    }
}

// ---------------------------------------------------------------------------
// Sizes from actual values.
// ---------------------------------------------------------------------------

/// Sizes from the actual values of `self` and `oldSelf`: a path names every
/// value it reaches (`self.items.@items.name` all the items' names), and
/// the size there is the largest of them. The estimate is then the worst
/// case over the actual data.
pub(crate) struct ValueSizes<'a> {
    pub(crate) roots: Vec<&'a Value>,
}

/// The values a path reaches, or the largest key length of the maps it
/// reached.
#[derive(Clone)]
pub(crate) enum ValuesAt<'a> {
    Values(Vec<&'a Value>),
    Keys(u64),
}

impl<'a> Sizes for ValueSizes<'a> {
    type At = ValuesAt<'a>;

    fn root(&self) -> Option<ValuesAt<'a>> {
        Some(ValuesAt::Values(self.roots.clone()))
    }

    fn field(&self, at: &ValuesAt<'a>, name: &str) -> Option<ValuesAt<'a>> {
        let ValuesAt::Values(vs) = at else {
            return None;
        };
        let plain = unescape(name);
        Some(ValuesAt::Values(
            vs.iter()
                .filter_map(|v| {
                    v.get(name)
                        .or_else(|| plain.as_deref().and_then(|n| v.get(n)))
                })
                .collect(),
        ))
    }

    fn items(&self, at: &ValuesAt<'a>) -> Option<ValuesAt<'a>> {
        let ValuesAt::Values(vs) = at else {
            return None;
        };
        let mut out = Vec::new();
        for v in vs {
            match v {
                Value::Array(items) => out.extend(items.iter()),
                Value::Object(map) => out.extend(map.values()),
                _ => {}
            }
        }
        Some(ValuesAt::Values(out))
    }

    fn keys(&self, at: &ValuesAt<'a>) -> Option<ValuesAt<'a>> {
        let ValuesAt::Values(vs) = at else {
            return None;
        };
        let longest = vs
            .iter()
            .filter_map(|v| v.as_object())
            .flat_map(|m| m.keys())
            .map(|k| k.chars().count() as u64)
            .max()
            .unwrap_or(0);
        Some(ValuesAt::Keys(longest))
    }

    fn kind(&self, at: &ValuesAt<'a>) -> Kind {
        match at {
            ValuesAt::Keys(_) => Kind::String,
            ValuesAt::Values(vs) => match vs.iter().find(|v| !v.is_null()) {
                Some(Value::Bool(_)) => Kind::Bool,
                Some(Value::Number(n)) if n.is_f64() => Kind::Double,
                Some(Value::Number(_)) => Kind::Int,
                Some(Value::String(_)) => Kind::String,
                Some(Value::Array(_)) => Kind::List,
                Some(Value::Object(_)) => Kind::Map,
                Some(Value::Null) => Kind::Null,
                None => Kind::Dyn,
            },
        }
    }

    fn max_size(&self, at: &ValuesAt<'a>) -> u64 {
        match at {
            ValuesAt::Keys(n) => *n,
            ValuesAt::Values(vs) => vs
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.chars().count() as u64,
                    Value::Array(a) => a.len() as u64,
                    Value::Object(m) => m.len() as u64,
                    _ => 0,
                })
                .max()
                .unwrap_or(0),
        }
    }
}

// ---------------------------------------------------------------------------
// The estimator.
// ---------------------------------------------------------------------------

/// What is known of an expression's value: where it is in the schema (or
/// data), its kind, a size computed from the expression, and the same for
/// its entries (list and map literals, `map`/`filter` results).
#[derive(Clone)]
struct Info<A> {
    at: Option<A>,
    kind: Kind,
    size: Option<Range>,
    elem: Option<Box<Info<A>>>,
}

impl<A> Info<A> {
    fn of(kind: Kind) -> Info<A> {
        Info {
            at: None,
            kind,
            size: None,
            elem: None,
        }
    }

    fn sized(kind: Kind, size: Range) -> Info<A> {
        Info {
            at: None,
            kind,
            size: Some(size),
            elem: None,
        }
    }
}

struct Coster<'s, S: Sizes> {
    sizes: &'s S,
    scopes: Vec<(String, Info<S::At>)>,
}

/// The estimated cost range of `expr` with sizes from `sizes`.
pub(crate) fn estimate<S: Sizes>(expr: &IdedExpr, sizes: &S) -> Range {
    let mut c = Coster {
        sizes,
        scopes: Vec::new(),
    };
    c.cost(expr).0
}

impl<S: Sizes> Coster<'_, S> {
    fn at_info(&self, at: Option<S::At>) -> Info<S::At> {
        match at {
            Some(at) => Info {
                kind: self.sizes.kind(&at),
                at: Some(at),
                size: None,
                elem: None,
            },
            None => Info::of(Kind::Dyn),
        }
    }

    /// cel-go's `sizeOrUnknown`: a computed size, else the schema's, else 1
    /// for scalars, else unknown.
    fn size(&self, i: &Info<S::At>) -> Range {
        if let Some(s) = i.size {
            return s;
        }
        if let Some(at) = &i.at {
            return Range {
                min: 0,
                max: self.sizes.max_size(at),
            };
        }
        if i.kind.scalar() {
            return Range::fixed(1);
        }
        Range::unknown()
    }

    /// The info of an item (list) or value (map) of `i`.
    fn value_info(&self, i: &Info<S::At>) -> Info<S::At> {
        if let Some(e) = &i.elem {
            return (**e).clone();
        }
        let at = i.at.as_ref().and_then(|a| self.sizes.items(a));
        self.at_info(at)
    }

    /// The info of the single iteration variable over `i`: items of a
    /// list, keys of a map.
    fn iter_info(&self, i: &Info<S::At>) -> Info<S::At> {
        if let Some(e) = &i.elem {
            return (**e).clone();
        }
        match &i.at {
            Some(a) if self.sizes.kind(a) == Kind::Map => {
                let keys = self.sizes.keys(a);
                self.at_info(keys)
            }
            Some(a) => {
                let items = self.sizes.items(a);
                self.at_info(items)
            }
            None => Info::of(Kind::Dyn),
        }
    }

    fn lookup(&self, name: &str) -> Option<Info<S::At>> {
        self.scopes
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, i)| i.clone())
    }

    fn cost(&mut self, e: &IdedExpr) -> (Range, Info<S::At>) {
        match &e.expr {
            Expr::Unspecified => (Range::default(), Info::of(Kind::Dyn)),
            Expr::Literal(l) => (Range::default(), literal_info(l)),
            Expr::Ident(name) => {
                let info = match self.lookup(name) {
                    Some(i) => i,
                    None if name == "self" || name == "oldSelf" => {
                        let root = self.sizes.root();
                        self.at_info(root)
                    }
                    // Kubernetes' size estimator reads a path of one
                    // element as the root: any other identifier (`double`,
                    // `int`, ...) is sized as `self`.
                    None => Info {
                        at: self.sizes.root(),
                        kind: Kind::Dyn,
                        size: None,
                        elem: None,
                    },
                };
                (Range::fixed(1), info)
            }
            Expr::Select(sel) => {
                let (c, operand) = self.cost(&sel.operand);
                if sel.test {
                    return (c.add(Range::fixed(1)), Info::of(Kind::Bool));
                }
                let extra = match operand.kind {
                    Kind::Map | Kind::Object | Kind::Dyn => 1,
                    _ => 0,
                };
                (
                    c.add(Range::fixed(extra)),
                    self.field_info(&operand, &sel.field),
                )
            }
            Expr::Call(call) => self.call(call),
            Expr::List(list) => {
                let mut sum = Range::fixed(LIST_CREATE_BASE_COST);
                let mut elem: Option<Info<S::At>> = None;
                for item in &list.elements {
                    let (c, i) = self.cost(item);
                    sum = sum.add(c);
                    elem = Some(match elem {
                        None => i,
                        Some(prev) => self.union(prev, i),
                    });
                }
                let elem = elem.unwrap_or_else(|| Info::sized(Kind::Dyn, Range::fixed(0)));
                let mut info = Info::sized(Kind::List, Range::fixed(list.elements.len() as u64));
                info.elem = Some(Box::new(elem));
                (sum, info)
            }
            Expr::Map(map) => {
                let mut sum = Range::fixed(MAP_CREATE_BASE_COST);
                let mut elem: Option<Info<S::At>> = None;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        let (kc, _) = self.cost(&me.key);
                        let (vc, vi) = self.cost(&me.value);
                        sum = sum.add(kc).add(vc);
                        elem = Some(match elem {
                            None => vi,
                            Some(prev) => self.union(prev, vi),
                        });
                    }
                }
                let mut info = Info::sized(Kind::Map, Range::fixed(map.entries.len() as u64));
                info.elem = elem.map(Box::new);
                (sum, info)
            }
            Expr::Struct(s) => {
                let mut sum = Range::fixed(STRUCT_CREATE_BASE_COST);
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        sum = sum.add(self.cost(&f.value).0);
                    }
                }
                (sum, Info::of(Kind::Object))
            }
            Expr::Comprehension(comp) => {
                let (rc, range) = self.cost(&comp.iter_range);
                let (ac, accu) = self.cost(&comp.accu_init);
                self.scopes.push((comp.accu_var.clone(), accu));
                let pushed = if let Some(v2) = &comp.iter_var2 {
                    let first = if range.kind == Kind::List || range.elem.is_some() {
                        Info::of(Kind::Int)
                    } else {
                        self.iter_info(&range)
                    };
                    let second = self.value_info(&range);
                    self.scopes.push((comp.iter_var.clone(), first));
                    self.scopes.push((v2.clone(), second));
                    2
                } else {
                    let single = self.iter_info(&range);
                    self.scopes.push((comp.iter_var.clone(), single));
                    1
                };
                let (lc, _) = self.cost(&comp.loop_cond);
                let (sc, step) = self.cost(&comp.loop_step);
                for _ in 0..pushed {
                    self.scopes.pop();
                }
                let (resc, _) = self.cost(&comp.result);
                self.scopes.pop();
                let count = self.size(&range);
                let sum = rc.add(ac).add(resc).add(count.mul(sc.add(lc)));
                let info = match &comp.accu_init.expr {
                    Expr::Literal(l) => literal_info(l),
                    Expr::List(_) | Expr::Map(_) => {
                        let kind = if matches!(comp.accu_init.expr, Expr::List(_)) {
                            Kind::List
                        } else {
                            Kind::Map
                        };
                        let mut i = Info::sized(kind, count);
                        i.elem = step.elem;
                        i
                    }
                    _ => Info::of(Kind::Dyn),
                };
                (sum, info)
            }
        }
    }

    fn field_info(&self, operand: &Info<S::At>, field: &str) -> Info<S::At> {
        if let Some(at) = &operand.at {
            let f = self.sizes.field(at, field);
            return self.at_info(f);
        }
        if operand.kind == Kind::Map {
            return self.value_info(operand);
        }
        Info::of(Kind::Dyn)
    }

    fn union(&self, a: Info<S::At>, b: Info<S::At>) -> Info<S::At> {
        let size = self.size(&a).union(self.size(&b));
        let kind = if a.kind == b.kind { a.kind } else { Kind::Dyn };
        Info {
            at: a.at.or(b.at),
            kind,
            size: Some(size),
            elem: a.elem.or(b.elem),
        }
    }

    fn call(&mut self, call: &cel::common::ast::CallExpr) -> (Range, Info<S::At>) {
        let name = call.func_name.as_str();
        if name == "dyn" && call.args.len() == 1 && call.target.is_none() {
            let (c, i) = self.cost(&call.args[0]);
            return (Range::fixed(1).add(c), i);
        }
        let mut arg_costs = Vec::with_capacity(call.args.len());
        let mut args = Vec::with_capacity(call.args.len());
        for a in &call.args {
            let (c, i) = self.cost(a);
            arg_costs.push(c);
            args.push(i);
        }
        let argsum = arg_costs
            .iter()
            .fold(Range::default(), |acc, c| acc.add(*c));
        let (target_cost, target) = match &call.target {
            Some(t) => {
                let (c, i) = self.cost(t);
                (c, Some(i))
            }
            None => (Range::default(), None),
        };
        let (fc, info) =
            self.function(name, target.as_ref(), &call.args, &args, &arg_costs, argsum);
        (target_cost.add(fc), info)
    }

    #[allow(clippy::too_many_lines)]
    fn function(
        &self,
        name: &str,
        target: Option<&Info<S::At>>,
        arg_exprs: &[IdedExpr],
        args: &[Info<S::At>],
        arg_costs: &[Range],
        argsum: Range,
    ) -> (Range, Info<S::At>) {
        let one = Range::fixed(1).add(argsum);
        let bool_ = || Info::of(Kind::Bool);
        match (name, target, args) {
            ("_&&_" | "_||_", None, [_, _]) => (
                Range {
                    min: arg_costs[0].min,
                    max: arg_costs[0].max.saturating_add(arg_costs[1].max),
                },
                bool_(),
            ),
            ("_?_:_", None, [_, t, f]) => {
                let cost = arg_costs[0].add(arg_costs[1].union(arg_costs[2]));
                (cost, self.union(t.clone(), f.clone()))
            }
            ("startsWith" | "endsWith", Some(_), [a]) => (
                self.size(a)
                    .factor(STRING_TRAVERSAL_COST_FACTOR)
                    .add(argsum),
                bool_(),
            ),
            ("@in", None, [_, list]) => {
                if list.kind == Kind::Map {
                    (one, bool_())
                } else {
                    (self.size(list).add(argsum), bool_())
                }
            }
            ("matches", Some(t), [re]) => {
                let s = self
                    .size(t)
                    .add(Range::fixed(1))
                    .factor(STRING_TRAVERSAL_COST_FACTOR);
                let r = self.size(re).factor(REGEX_STRING_LENGTH_COST_FACTOR);
                (s.mul(r).add(argsum), bool_())
            }
            ("contains", Some(t), [sub]) if t.kind != Kind::List => {
                let s = self.size(t).factor(STRING_TRAVERSAL_COST_FACTOR);
                let u = self.size(sub).factor(STRING_TRAVERSAL_COST_FACTOR);
                (s.mul(u).add(argsum), bool_())
            }
            ("_+_", None, [l, r]) => {
                let size = self.size(l).add(self.size(r));
                if l.kind.stringish() || r.kind.stringish() {
                    let kind = if l.kind == Kind::Bytes || r.kind == Kind::Bytes {
                        Kind::Bytes
                    } else {
                        Kind::String
                    };
                    (
                        size.factor(STRING_TRAVERSAL_COST_FACTOR).add(argsum),
                        Info::sized(kind, size),
                    )
                } else if l.kind == Kind::List || r.kind == Kind::List {
                    let mut info = Info::sized(Kind::List, size);
                    info.elem = match (&l.elem, &r.elem) {
                        (Some(a), Some(b)) => {
                            Some(Box::new(self.union((**a).clone(), (**b).clone())))
                        }
                        _ => None,
                    };
                    (one, info)
                } else {
                    let kind = if l.kind.scalar() { l.kind } else { Kind::Dyn };
                    (one, Info::of(kind))
                }
            }
            ("_==_" | "_!=_", None, [l, r]) => (self.compare(l, r).add(argsum), bool_()),
            ("_<_" | "_<=_" | "_>_" | "_>=_", None, [l, r]) => {
                if l.kind.stringish() || r.kind.stringish() {
                    (self.compare(l, r).add(argsum), bool_())
                } else {
                    (one, bool_())
                }
            }
            // The Kubernetes library (library/cost.go).
            ("isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf", Some(t), _) => {
                let cost = if t.kind == Kind::List {
                    let el = self.value_info(t);
                    let mut el_cost = Range::fixed(1);
                    if el.kind.stringish() {
                        el_cost = el_cost.add(self.size(&el).factor(STRING_TRAVERSAL_COST_FACTOR));
                    }
                    self.size(t).mul(el_cost)
                } else {
                    self.size(t).factor(STRING_TRAVERSAL_COST_FACTOR)
                };
                let info = match name {
                    "isSorted" => bool_(),
                    "indexOf" | "lastIndexOf" => Info::of(Kind::Int),
                    _ => self.value_info(t),
                };
                (cost.add(argsum), info)
            }
            ("url", None, [a]) => (
                self.size(a)
                    .factor(STRING_TRAVERSAL_COST_FACTOR)
                    .add(argsum),
                Info::of(Kind::Object),
            ),
            ("lowerAscii" | "upperAscii" | "substring" | "trim", Some(t), _) => {
                let sz = self.size(t);
                (
                    sz.factor(STRING_TRAVERSAL_COST_FACTOR).add(argsum),
                    Info::sized(Kind::String, sz),
                )
            }
            ("replace", Some(t), [from, to, ..]) => {
                let sz = self.size(t);
                let size = replace_size(sz, self.size(from), self.size(to));
                (
                    sz.factor(2.0 * STRING_TRAVERSAL_COST_FACTOR).add(argsum),
                    Info::sized(Kind::String, size),
                )
            }
            ("split", Some(t), _) => {
                let sz = self.size(t);
                let mut info = Info::sized(
                    Kind::List,
                    Range {
                        min: 0,
                        max: sz.max,
                    },
                );
                info.elem = Some(Box::new(Info::of(Kind::String)));
                (
                    sz.factor(2.0 * STRING_TRAVERSAL_COST_FACTOR).add(argsum),
                    info,
                )
            }
            ("join", Some(t), _) => {
                let list = self.size(t);
                let el = self.value_info(t);
                let mut sz = list.mul(self.size(&el));
                if let Some(sep) = args.first() {
                    let seps = Range {
                        min: list.min.saturating_sub(1),
                        max: list.max.saturating_sub(1),
                    };
                    sz = sz.add(self.size(sep).mul(seps));
                }
                (
                    sz.factor(STRING_TRAVERSAL_COST_FACTOR).add(argsum),
                    Info::sized(Kind::String, sz),
                )
            }
            ("find" | "findAll", Some(t), [re, ..]) => {
                let sz = self.size(t);
                let s = sz.add(Range::fixed(1)).factor(STRING_TRAVERSAL_COST_FACTOR);
                let r = self.size(re).factor(REGEX_STRING_LENGTH_COST_FACTOR);
                let kind = if name == "find" {
                    Kind::String
                } else {
                    Kind::List
                };
                let mut info = Info::sized(
                    kind,
                    Range {
                        min: 0,
                        max: sz.max,
                    },
                );
                if kind == Kind::List {
                    info.elem = Some(Box::new(Info::of(Kind::String)));
                }
                (s.mul(r).add(argsum), info)
            }
            ("bytes", None, [a]) if a.kind == Kind::String => {
                let sz = self.size(a);
                (
                    sz.factor(STRING_TRAVERSAL_COST_FACTOR).add(argsum),
                    Info::sized(
                        Kind::Bytes,
                        Range {
                            min: sz.min,
                            max: sz.max.saturating_mul(4),
                        },
                    ),
                )
            }
            ("string", None, [a]) if a.kind == Kind::Bytes => {
                let sz = self.size(a);
                (
                    sz.factor(STRING_TRAVERSAL_COST_FACTOR).add(argsum),
                    Info::sized(
                        Kind::String,
                        Range {
                            min: sz.min / 4,
                            max: sz.max,
                        },
                    ),
                )
            }
            ("string", None, [a]) if a.kind == Kind::String => (one, a.clone()),
            ("_[_]" | "_[?_]", None, [container, key]) => {
                let info = match (&container.at, &arg_exprs[1].expr) {
                    (Some(_), Expr::Literal(LiteralValue::String(k)))
                        if container.kind == Kind::Object =>
                    {
                        self.field_info(container, k.inner())
                    }
                    _ => {
                        let _ = key;
                        self.value_info(container)
                    }
                };
                (one, info)
            }
            ("_?._", None, [operand, _]) => {
                let info = match &arg_exprs[1].expr {
                    Expr::Literal(LiteralValue::String(f)) => self.field_info(operand, f.inner()),
                    _ => Info::of(Kind::Dyn),
                };
                (one, info)
            }
            ("value" | "orValue" | "or", Some(t), _) => (one, t.clone()),
            ("of" | "optional.of", _, [a]) => (one, a.clone()),
            ("size", _, _) | ("int", None, _) => (one, Info::of(Kind::Int)),
            ("uint", None, _) => (one, Info::of(Kind::Uint)),
            ("double", None, _) => (one, Info::of(Kind::Double)),
            ("duration", None, _) => (one, Info::of(Kind::Duration)),
            ("timestamp", None, _) => (one, Info::of(Kind::Timestamp)),
            ("string", None, _) => (one, Info::of(Kind::String)),
            (
                "!_"
                | "@not_strictly_false"
                | "hasValue"
                | "isIP"
                | "isCIDR"
                | "isURL"
                | "exists"
                | "all"
                | "exists_one",
                _,
                _,
            ) => (one, bool_()),
            ("-_" | "_-_" | "_*_" | "_/_" | "_%_", None, [a, ..]) => {
                let kind = if a.kind.scalar() { a.kind } else { Kind::Dyn };
                (one, Info::of(kind))
            }
            _ => (one, Info::of(Kind::Dyn)),
        }
    }

    /// cel-go's cost of equality and of string comparisons: the smaller of
    /// the largest sizes, traversed.
    fn compare(&self, l: &Info<S::At>, r: &Info<S::At>) -> Range {
        let smallest = self.size(l).max.min(self.size(r).max);
        Range {
            min: u64::from(smallest > 0),
            max: smallest,
        }
        .factor(STRING_TRAVERSAL_COST_FACTOR)
    }
}

/// The size of `s.replace(from, to)` (library/cost.go).
fn replace_size(sz: Range, from: Range, to: Range) -> Range {
    let mut count = Range::default();
    let mut retained = Range::default();
    if from.min == 0 {
        count.max = sz.max.saturating_add(1);
        retained.max = sz.max;
    } else if to.max <= from.min {
        retained.max = sz.max;
    } else {
        count.max = (sz.max as f64 / from.min as f64).ceil() as u64;
    }
    if from.max == 0 {
        count.min = sz.min.saturating_add(1);
        retained.min = sz.min;
    } else if from.max <= to.min {
        retained.min = sz.min;
    } else {
        count.min = (sz.min as f64 / from.max as f64).ceil() as u64;
    }
    count.mul(to).add(retained)
}

fn literal_info<A>(l: &LiteralValue) -> Info<A> {
    match l {
        LiteralValue::String(s) => {
            Info::sized(Kind::String, Range::fixed(s.inner().chars().count() as u64))
        }
        LiteralValue::Bytes(b) => Info::sized(Kind::Bytes, Range::fixed(b.inner().len() as u64)),
        LiteralValue::Boolean(_) => Info::sized(Kind::Bool, Range::fixed(1)),
        LiteralValue::Int(_) => Info::sized(Kind::Int, Range::fixed(1)),
        LiteralValue::UInt(_) => Info::sized(Kind::Uint, Range::fixed(1)),
        LiteralValue::Double(_) => Info::sized(Kind::Double, Range::fixed(1)),
        LiteralValue::Null => Info::sized(Kind::Null, Range::fixed(1)),
    }
}

/// Upstream's `getCostErrorMessage`: `<what> exceeds budget by factor of
/// <factor> (...)`, the factor `more than 100x`, or `%fx` under 1.5, or
/// `%.1fx`.
pub(crate) fn cost_error_message(what: &str, cost: u64, limit: u64) -> String {
    let f = cost as f64 / limit as f64;
    let factor = if f > 100.0 {
        "more than 100x".to_string()
    } else if f < 1.5 {
        format!("{f:.6}x")
    } else {
        format!("{f:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

impl SchemaView for super::schema::Node {
    fn type_name(&self) -> &str {
        &self.type_
    }

    fn format_name(&self) -> Option<&str> {
        self.format.as_deref()
    }

    fn is_int_or_string(&self) -> bool {
        self.int_or_string
    }

    fn is_embedded(&self) -> bool {
        self.embedded
    }

    fn max_length(&self) -> Option<i64> {
        self.checks.max_length
    }

    fn max_items(&self) -> Option<i64> {
        self.checks.max_items
    }

    fn max_properties(&self) -> Option<i64> {
        self.checks.max_properties
    }

    fn enum_max_len(&self) -> Option<u64> {
        enum_max_len(self.checks.enum_.as_deref())
    }

    fn is_required(&self, name: &str) -> bool {
        self.checks.required.iter().any(|r| r == name)
    }

    fn has_default(&self) -> bool {
        self.default.is_some()
    }

    fn property_list(&self) -> Vec<(&str, &Self)> {
        self.properties
            .iter()
            .map(|(k, v)| (k.as_str(), v))
            .collect()
    }

    fn additional_schema(&self) -> Option<&Self> {
        self.additional.schema()
    }

    fn has_additional(&self) -> bool {
        !matches!(self.additional, super::schema::Additional::None)
    }

    fn item_schema(&self) -> Option<&Self> {
        self.items.as_deref()
    }
}

/// The length of the longest string of an `enum` (upstream's
/// `estimateMaxStringEnumLength`), `None` without one.
pub(crate) fn enum_max_len(values: Option<&[Value]>) -> Option<u64> {
    let values = values.filter(|v| !v.is_empty())?;
    Some(
        values
            .iter()
            .filter_map(Value::as_str)
            .map(|s| s.len() as u64)
            .max()
            .unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    //! Expected costs are those of upstream's `TestCostEstimation`
    //! (apiextensions-apiserver `pkg/apiserver/schema/cel/compilation_test.go`),
    //! computed there by cel-go's estimator with Kubernetes' size estimator.

    use serde_json::{Value, json};

    use super::{Decl, SchemaSizes, estimate};

    fn cost(schema: Value, rule: &str) -> u64 {
        let node = super::super::schema::parse(&schema, "", 0).expect("schema");
        let decl = Decl::from_schema(&node, false).expect("decl");
        let program = super::super::rules::env().compile(rule).expect("rule");
        estimate(program.expression(), &SchemaSizes(&decl)).max
    }

    fn array(item: Value, max: Option<i64>) -> Value {
        let mut s = json!({"type": "array", "items": item});
        if let Some(m) = max {
            s["maxItems"] = m.into();
        }
        s
    }

    fn map(value: Value, max: Option<i64>) -> Value {
        let mut s = json!({"type": "object", "additionalProperties": value});
        if let Some(m) = max {
            s["maxProperties"] = m.into();
        }
        s
    }

    fn string(max: Option<i64>) -> Value {
        let mut s = json!({"type": "string"});
        if let Some(m) = max {
            s["maxLength"] = m.into();
        }
        s
    }

    // apiserver/pkg/cel/escaping.go (`Escape`), and its inverse.
    #[test]
    fn property_names_escape_as_upstream() {
        use super::{escape, unescape};
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(
            escape("a-b.c/d__e").as_deref(),
            Some("a__dash__b__dot__c__slash__d__underscores__e")
        );
        assert_eq!(escape("plain_name").as_deref(), Some("plain_name"));
        assert_eq!(escape("1st"), None);
        assert_eq!(escape("a b"), None);
        assert_eq!(escape(""), None);
        assert_eq!(unescape("__namespace__").as_deref(), Some("namespace"));
        assert_eq!(
            unescape("a__dash__b__dot__c__slash__d__underscores__e").as_deref(),
            Some("a-b.c/d__e")
        );
        assert_eq!(unescape("plain"), None);
    }

    #[test]
    fn upstream_cost_estimation_cases() {
        let num = || json!({"type": "number"});
        let cases: Vec<(Value, &str, u64)> = vec![
            (array(num(), None), "self.all(x, true)", 4_718_591),
            (array(num(), Some(10)), "self.all(x, true)", 32),
            (array(string(None), None), "self.all(x, true)", 3_145_727),
            (array(string(None), Some(20)), "self.all(x, true)", 62),
            (
                array(json!({"type": "boolean"}), None),
                "self.all(x, true)",
                1_887_437,
            ),
            (map(num(), None), "self.all(x, true)", 1_348_169),
            (map(num(), Some(10)), "self.all(x, true)", 32),
            (map(string(None), None), "self.all(x, true)", 1_179_647),
            (string(None), "self.contains('test')", 314_574),
            (string(Some(10)), "self.contains('test')", 5),
            (string(None), "self.startsWith('test')", 2),
            (
                string(None),
                r#"size(self + "hello") > size("hello")"#,
                314_578,
            ),
            (
                string(Some(4)),
                r#"size(self + "hello") > size("hello")"#,
                7,
            ),
            (array(num(), None), "self[1] == 0.0", 2),
            (array(string(None), Some(8)), "self[1] == self[1]", 314_577),
            (
                array(num(), Some(10)),
                "self.all(x, self.all(y, true))",
                352,
            ),
            (
                array(num(), Some(10)),
                "self.all(x, self.all(y, self.all(z, true)))",
                3552,
            ),
            (string(None), r#"self.matches("x")"#, 314_574),
            (string(Some(50)), r#"self.matches("x")"#, 22),
            (
                string(None),
                r#""".matches("(((((((((())))))))))[0-9]")"#,
                7,
            ),
            (string(None), r#"self.matches("")"#, 1),
            (
                map(string(None), None),
                "self.all(x, x.contains(self[x]))",
                2_752_507,
            ),
            (
                map(string(Some(10)), Some(10)),
                "self.all(x, x.contains(self[x]))",
                72,
            ),
            (string(Some(0)), r#"self == "x""#, 1),
            (string(None), r#"self == "x""#, 2),
            (array(num(), None), "self.all(x, x == 0.0)", 6_291_454),
            (
                array(num(), Some(3 * 1024 * 2048)),
                "self.all(x, x == 0.0)",
                25_165_826,
            ),
            (string(None), "self.find('[0-9]+') == ''", 629_147),
            (string(Some(10)), "self.find('[0-9]+') == ''", 11),
            (
                array(string(None), None),
                "self.join(' ') == 'aa bb'",
                329_853_068_905,
            ),
            (
                array(string(Some(10)), Some(10)),
                "self.join(' ') == 'aa bb'",
                43,
            ),
            (
                array(string(None), None),
                "self.isSorted() == true",
                329_854_432_052,
            ),
            (
                array(string(Some(10)), Some(10)),
                "self.isSorted() == true",
                52,
            ),
            (string(None), "self.lowerAscii() == 'lower!'", 314_575),
            (string(Some(10)), "self.lowerAscii() == 'lower!'", 6),
            (
                json!({"type": "object", "properties": {"str": string(None), "separator": string(None)}}),
                "self.str.split(self.separator) == []",
                629_160,
            ),
            (
                json!({"type": "object", "properties": {
                    "str": string(None), "before": string(Some(2)), "after": string(Some(4))}}),
                "self.str.replace(self.before, self.after) == 'does not matter'",
                629_154,
            ),
            (
                map(json!({"type": "integer"}), None),
                "oldSelf.size() == self.size()",
                5,
            ),
            (
                map(json!({"type": "string", "format": "duration"}), None),
                r#"self["c"] == self["d"]"#,
                8,
            ),
            (
                json!({"type": "string", "enum": ["A", "B", "C", "LongValue"]}),
                "self.contains('A')",
                2,
            ),
            (
                json!({"type": "string", "enum": ["A", "B", "C", "LongValue"], "maxLength": 1000}),
                "self.contains('A')",
                401,
            ),
            (
                array(
                    map(
                        json!({"type": "object", "required": ["required"],
                               "properties": {"required": string(None), "optional": string(None)}}),
                        None,
                    ),
                    None,
                ),
                r#"self.all(x, x["y"].required == "z")"#,
                7_340_027,
            ),
        ];
        let mut wrong = Vec::new();
        for (schema, rule, expected) in cases {
            let got = cost(schema.clone(), rule);
            if got != expected {
                wrong.push(format!("{rule} on {schema}: {got}, upstream {expected}"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }
}
