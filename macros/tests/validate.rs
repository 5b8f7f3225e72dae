//! Every `#[validate(...)]` rule through the derive: exact field paths,
//! reasons and messages, update rules and defaulting.

#![allow(missing_docs)]

use std::collections::BTreeMap;

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::resource::{Resource as _, Strategy};
use apiforge_runtime::validation::{ErrorList, FieldError, FieldPath};
use apiforge_runtime::{Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn odd(v: &i32, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    if v % 2 == 0 {
        errs.push(FieldError::invalid(path, *v, "must be odd"));
    }
    errs
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(
    group = "test.example.com",
    version = "v1",
    namespaced,
    default_strategy
)]
#[validate(cel(
    rule = "!has(self.spec.replicas) || self.spec.replicas != 4",
    message = "four is unlucky"
))]
pub struct Widget {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: WidgetSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(default, rename_all = "camelCase")]
#[validate(one_of(url, secret_name), at_most_one_of(color, colour))]
pub struct WidgetSpec {
    #[validate(minimum = 1, maximum = 5, default = 1)]
    pub replicas: Option<i32>,
    #[validate(minimum = 0, exclusive_minimum, maximum = 1, exclusive_maximum)]
    pub ratio: f64,
    #[validate(required, min_length = 3, max_length = 10, immutable)]
    pub display_name: String,
    #[validate(pattern = "^[a-z]+$")]
    pub code: String,
    #[validate(format = "dns1123_label")]
    pub host: Option<String>,
    #[validate(enum_values = ["small", "large"], default = "small")]
    pub size: String,
    #[validate(min_items = 1, max_items = 3, list_type = "set")]
    pub tags: Vec<String>,
    #[validate(list_type = "map", list_map_keys = ["name"], patch_strategy = "merge", patch_merge_key = "name")]
    pub ports: Vec<Port>,
    pub labels: BTreeMap<String, Port>,
    #[validate(custom = odd)]
    pub stripes: i32,
    pub url: Option<String>,
    pub secret_name: Option<String>,
    pub color: Option<String>,
    pub colour: Option<String>,
    #[validate(cel(rule = "self >= oldSelf", message = "may not shrink"))]
    pub capacity: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(default)]
pub struct Port {
    #[validate(required)]
    pub name: String,
    #[validate(maximum = 65535, default = 80)]
    pub port: i32,
    #[validate(cel(rule = "self.startsWith('TCP') || self.startsWith('UDP')"))]
    pub protocol: Option<String>,
}

fn valid() -> Widget {
    Widget {
        spec: WidgetSpec {
            replicas: Some(2),
            ratio: 0.5,
            display_name: "widget".into(),
            code: "abc".into(),
            size: "small".into(),
            tags: vec!["a".into()],
            stripes: 1,
            url: Some("https://x".into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn messages(errs: &ErrorList) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

fn errors_of(f: impl FnOnce(&mut WidgetSpec)) -> Vec<String> {
    let mut w = valid();
    f(&mut w.spec);
    messages(&w.validate_create())
}

#[test]
fn a_valid_object_has_no_errors() {
    assert_eq!(errors_of(|_| {}), Vec::<String>::new());
}

#[test]
fn numeric_bounds() {
    assert_eq!(
        errors_of(|s| s.replicas = Some(6)),
        ["spec.replicas: Invalid value: 6: must be less than or equal to 5"]
    );
    assert_eq!(
        errors_of(|s| s.replicas = Some(0)),
        ["spec.replicas: Invalid value: 0: must be greater than or equal to 1"]
    );
    assert_eq!(errors_of(|s| s.replicas = None), Vec::<String>::new());
    assert_eq!(
        errors_of(|s| s.ratio = 1.0),
        ["spec.ratio: Invalid value: 1.0: must be less than 1"]
    );
    assert_eq!(
        errors_of(|s| s.ratio = 0.0),
        ["spec.ratio: Invalid value: 0.0: must be greater than 0"]
    );
}

#[test]
fn strings() {
    assert_eq!(
        errors_of(|s| s.display_name = String::new()),
        [
            "spec.displayName: Required value",
            "spec.displayName: Invalid value: \"\": must be at least 3 bytes long"
        ]
    );
    assert_eq!(
        errors_of(|s| s.display_name = "abcdefghijk".into()),
        ["spec.displayName: Too long: may not be more than 10 bytes"]
    );
    assert_eq!(
        errors_of(|s| s.code = "ABC".into()),
        ["spec.code: Invalid value: \"ABC\": must match the regular expression '^[a-z]+$'"]
    );
    let e = errors_of(|s| s.host = Some("-bad".into()));
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with(
            "spec.host: Invalid value: \"-bad\": a lowercase RFC 1123 label must consist of"
        ),
        "{e:?}"
    );
    assert_eq!(
        errors_of(|s| s.size = "medium".into()),
        ["spec.size: Unsupported value: \"medium\": supported values: \"small\", \"large\""]
    );
}

#[test]
fn lists_and_maps() {
    assert_eq!(
        errors_of(|s| s.tags = vec![]),
        ["spec.tags: Invalid value: 0: must have at least 1 item"]
    );
    assert_eq!(
        errors_of(|s| s.tags = vec!["a".into(), "b".into(), "c".into(), "d".into()]),
        ["spec.tags: Too many: 4: must have at most 3 items"]
    );
    assert_eq!(
        errors_of(|s| s.tags = vec!["a".into(), "a".into()]),
        ["spec.tags[1]: Duplicate value: \"a\""]
    );
    let port = |name: &str, port| Port {
        name: name.into(),
        port,
        protocol: None,
    };
    assert_eq!(
        errors_of(|s| s.ports = vec![port("http", 80), port("http", 81)]),
        ["spec.ports[1]: Duplicate value: {\"name\":\"http\"}"]
    );
    assert_eq!(
        errors_of(|s| s.ports = vec![port("", 70000)]),
        [
            "spec.ports[0].name: Required value",
            "spec.ports[0].port: Invalid value: 70000: must be less than or equal to 65535"
        ]
    );
    assert_eq!(
        errors_of(|s| {
            s.labels.insert("app".into(), port("", 1));
        }),
        ["spec.labels[app].name: Required value"]
    );
}

#[test]
fn custom_unions_and_cel() {
    assert_eq!(
        errors_of(|s| s.stripes = 2),
        ["spec.stripes: Invalid value: 2: must be odd"]
    );
    assert_eq!(
        errors_of(|s| s.url = None),
        ["spec: Invalid value: \"\": must specify one of: `url`, `secretName`"]
    );
    assert_eq!(
        errors_of(|s| s.secret_name = Some("s".into())),
        [
            "spec: Invalid value: \"{`url`, `secretName`}\": must specify exactly one of: `url`, `secretName`"
        ]
    );
    assert_eq!(
        errors_of(|s| {
            s.color = Some("red".into());
            s.colour = Some("red".into());
        }),
        [
            "spec: Invalid value: \"{`color`, `colour`}\": must specify at most one of: `color`, `colour`"
        ]
    );
    assert_eq!(
        errors_of(|s| s.replicas = Some(4)),
        [": Invalid value: \"object\": four is unlucky"]
    );
    assert_eq!(
        errors_of(|s| s.ports = vec![Port {
            name: "a".into(),
            port: 1,
            protocol: Some("SCTP".into())
        }]),
        [
            "spec.ports[0].protocol: Invalid value: \"string\": failed rule: self.startsWith('TCP') || self.startsWith('UDP')"
        ]
    );
}

#[test]
fn reasons() {
    let mut w = valid();
    w.spec.display_name = "abcdefghijk".into();
    w.spec.tags = vec!["a".into(), "a".into()];
    w.spec.size = "x".into();
    let reasons: Vec<&str> = w
        .validate_create()
        .iter()
        .map(|e| e.type_.reason())
        .collect();
    assert_eq!(
        reasons,
        [
            "FieldValueTooLong",
            "FieldValueNotSupported",
            "FieldValueDuplicate"
        ]
    );
}

#[test]
fn updates() {
    let old = valid();
    let mut new = valid();
    new.spec.display_name = "renamed".into();
    assert_eq!(
        messages(&new.validate_update(&old)),
        ["spec.displayName: Invalid value: \"renamed\": field is immutable"]
    );
    let mut old = valid();
    old.spec.capacity = Some(10);
    let mut new = valid();
    new.spec.capacity = Some(5);
    assert_eq!(
        messages(&new.validate_update(&old)),
        ["spec.capacity: Invalid value: \"integer\": may not shrink"]
    );
    assert!(
        new.validate_create().is_empty(),
        "transition rules do not run on create"
    );
    new.spec.capacity = Some(11);
    assert!(new.validate_update(&old).is_empty());
}

#[test]
fn defaulting() {
    let mut w: Widget =
        serde_json::from_value(serde_json::json!({"spec": {"ports": [{"name": "http"}]}}))
            .unwrap_or_default();
    w.default_fields();
    assert_eq!(w.spec.replicas, Some(1));
    assert_eq!(w.spec.size, "small");
    assert_eq!(w.spec.ports[0].port, 80);
    let mut w = valid();
    w.spec.replicas = Some(3);
    w.spec.size = "large".into();
    w.default_fields();
    assert_eq!(w.spec.replicas, Some(3));
    assert_eq!(w.spec.size, "large");
}

#[test]
fn nested_paths_from_any_root() {
    let spec = WidgetSpec {
        replicas: Some(9),
        ..valid().spec
    };
    assert_eq!(
        messages(&apiforge_runtime::validation::Validate::validate(
            &spec,
            &FieldPath::new("template").child("spec")
        )),
        ["template.spec.replicas: Invalid value: 9: must be less than or equal to 5"]
    );
}

#[test]
fn hand_written_hooks_can_call_the_generated_part() {
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
    #[resource(group = "test.example.com", version = "v1", cluster)]
    struct Gadget {
        #[serde(default)]
        metadata: ObjectMeta,
        #[validate(maximum = 3)]
        count: i32,
    }
    impl Strategy for Gadget {
        fn validate_create(&self) -> ErrorList {
            let mut errs = self.generated_validate();
            if self.metadata.name == "forbidden" {
                errs.push(FieldError::forbidden("metadata.name", "reserved"));
            }
            errs
        }
    }
    let g = Gadget {
        metadata: ObjectMeta {
            name: "forbidden".into(),
            ..Default::default()
        },
        count: 4,
    };
    assert_eq!(
        messages(&g.validate_create()),
        [
            "count: Invalid value: 4: must be less than or equal to 3",
            "metadata.name: Forbidden: reserved"
        ]
    );
}
