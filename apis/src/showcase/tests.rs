//! The showcase group end to end through the type-erased kind.

use apiforge_runtime::resource::{Resource, Strategy};
use apiforge_runtime::scheme::Convert;
use serde_json::{Value, json};

use super::*;

fn kind() -> apiforge_runtime::scheme::Kind {
    KindBuilder::<v1::Database>::new()
        .version::<v1::Database>()
        .version::<v1alpha1::Database>()
        .storage::<v1::Database>()
        .build()
}

fn db(spec: Value) -> v1::Database {
    let mut d: v1::Database =
        serde_json::from_value(json!({"metadata": {"name": "db"}, "spec": spec}))
            .unwrap_or_default();
    d.default_fields();
    d
}

fn errors(d: &v1::Database) -> Vec<String> {
    d.validate_create()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn kind_info() {
    let info = v1::Database::INFO;
    assert_eq!(info.short_names, ["db"]);
    assert_eq!(info.printer_columns.len(), 6);
    assert_eq!(info.printer_columns[4].priority, 1);
    assert_eq!(info.selectable_fields, [".spec.engine", ".status.phase"]);
    assert!(info.subresources.status);
    assert_eq!(
        info.subresources.scale.map(|s| s.label_selector_path),
        Some(".status.selector")
    );
    assert!(info.warning().is_none());
    assert_eq!(
        v1alpha1::Database::INFO.warning().as_deref(),
        Some(
            "showcase.apiforge.dev/v1alpha1 Database is deprecated; use showcase.apiforge.dev/v1 Database"
        )
    );
}

#[test]
fn defaults_apply() {
    let d = db(json!({"version": "16"}));
    assert_eq!(d.spec.replicas, Some(1));
    assert_eq!(d.spec.storage.size_gib, 10);
    assert!(errors(&d).is_empty(), "{:?}", errors(&d));
}

#[test]
fn validation_paths_and_messages() {
    let d = db(
        json!({"engine": "mysql", "version": "8.x", "replicas": 5, "storage": {"sizeGiB": 2048, "className": "Fast_SSD"},
        "users": [{"name": "app", "privileges": ["read", "read", "drop"]}, {"name": "app"}],
        "backup": {"schedule": "@daily", "continuous": true}}),
    );
    assert_eq!(
        errors(&d),
        [
            "spec.version: Invalid value: \"8.x\": must match the regular expression '^[0-9]+(\\.[0-9]+)*$'",
            "spec.storage.sizeGiB: Invalid value: 2048: must be less than or equal to 1024",
            "spec.storage.className: Invalid value: \"Fast_SSD\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "spec.users[1]: Duplicate value: {\"name\":\"app\"}",
            "spec.users[0].privileges[1]: Duplicate value: \"read\"",
            "spec.users[0].privileges: Invalid value: \"array\": privileges are read, write or admin",
            "spec.backup.schedule: Invalid value: \"@daily\": must be at least 9 bytes long",
            "spec.backup: Invalid value: \"{`schedule`, `continuous`}\": must specify at most one of: `schedule`, `continuous`",
            ": Invalid value: \"object\": mysql databases have at most 3 replicas",
        ]
    );
}

#[test]
fn update_rules() {
    let old = db(json!({"engine": "postgres", "version": "16", "storage": {"sizeGiB": 20}}));
    let new = db(json!({"engine": "mysql", "version": "16", "storage": {"sizeGiB": 10}}));
    let errs: Vec<String> = new
        .validate_update(&old)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errs,
        [
            "spec.engine: Invalid value: \"mysql\": field is immutable",
            "spec.storage: Invalid value: \"object\": storage may not shrink",
        ]
    );
}

#[test]
fn round_trips_through_the_hub() {
    let old = v1alpha1::Database {
        spec: v1alpha1::DatabaseSpec {
            engine: v1::Engine::Mysql,
            engine_version: "8.0".into(),
            replicas: Some(2),
            storage_gib: 50,
        },
        ..Default::default()
    };
    let hub: v1::Database = old.clone().into_hub();
    assert_eq!(hub.spec.version, "8.0");
    assert_eq!(hub.spec.storage.size_gib, 50);
    assert_eq!(v1alpha1::Database::from_hub(&hub), old);

    let k = kind();
    let stored = k
        .decode(
            "v1alpha1",
            json!({"spec": {"engine": "mysql", "engineVersion": "8.0", "storageGiB": 5}}),
        )
        .unwrap_or(Value::Null);
    assert_eq!(
        stored["spec"],
        json!({"engine": "mysql", "version": "8.0", "replicas": 1, "storage": {"sizeGiB": 5}})
    );
    let back = k.encode("v1alpha1", &stored).unwrap_or(Value::Null);
    assert_eq!(
        back["spec"],
        json!({"engine": "mysql", "engineVersion": "8.0", "replicas": 1, "storageGiB": 5})
    );
    assert_eq!(back["apiVersion"], "showcase.apiforge.dev/v1alpha1");
}

#[test]
fn schema_publishes_the_rules() {
    let doc = apiforge_runtime::openapi::group_version_document(&group(), "v1");
    let s = &doc["components"]["schemas"];
    let spec = &s["dev.apiforge.showcase.v1.DatabaseSpec"]["properties"];
    assert_eq!(spec["version"]["pattern"], "^[0-9]+(\\.[0-9]+)*$");
    assert_eq!(spec["version"]["maxLength"], 16);
    assert_eq!(spec["replicas"]["minimum"], 1);
    assert_eq!(spec["replicas"]["maximum"], 9);
    assert_eq!(spec["replicas"]["default"], 1);
    assert_eq!(spec["users"]["x-kubernetes-list-type"], "map");
    assert_eq!(spec["users"]["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(
        spec["engine"]["x-kubernetes-validations"],
        json!([{"rule": "self == oldSelf", "message": "field is immutable"}])
    );
    assert_eq!(
        s["dev.apiforge.showcase.v1.Database"]["x-kubernetes-validations"][0]["message"],
        "mysql databases have at most 3 replicas"
    );
    assert_eq!(
        s["dev.apiforge.showcase.v1.StorageSpec"]["properties"]["sizeGiB"]["default"],
        10
    );
    assert_eq!(
        s["dev.apiforge.showcase.v1.DatabaseStatus"]["properties"]["conditions"]["x-kubernetes-list-map-keys"],
        json!(["type"])
    );
    let required = &s["dev.apiforge.showcase.v1.Condition"]["required"];
    assert!(
        required
            .as_array()
            .is_some_and(|r| r.contains(&json!("type")) && r.contains(&json!("status")))
    );
    let defs = s.as_object().cloned().unwrap_or_default();
    let fields = apiforge_runtime::schema::patch_fields(
        &json!({"$ref": "#/components/schemas/dev.apiforge.showcase.v1.Database"}),
        &defs,
    );
    let paths: Vec<&str> = fields.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "metadata.ownerReferences",
            "metadata.finalizers",
            "spec.users",
            "status.conditions"
        ]
    );
}

#[test]
fn strategy_hooks() {
    let mysql5 = db(json!({"engine": "mysql", "version": "5.7", "replicas": 2}));
    assert_eq!(
        mysql5.warnings_on_create(),
        [
            "spec.version: MySQL 5.7 is end of life; use 8.0 or later",
            "spec.backup: a replicated database without backups"
        ]
    );
    let modern = db(json!({"engine": "postgres", "version": "16.2"}));
    assert!(modern.warnings_on_create().is_empty());
    assert!(modern.warnings_on_update(&mysql5).is_empty());
    // the status subresource makes generation track spec changes
    assert!(v1::Database::bump_generation_on_spec_change());
    assert!(kind().bump_generation_on_spec_change());

    let mut with_status = modern.clone();
    with_status.status = Some(v1::DatabaseStatus {
        phase: "Running".into(),
        ..Default::default()
    });
    let mut created = with_status.clone();
    created.reset_status_on_create();
    assert_eq!(created.status, None);
    assert_eq!(created.spec, with_status.spec);

    // a status write keeps spec and metadata from the stored object
    let mut status_write = mysql5.clone();
    status_write.metadata.name = "other".into();
    status_write.status = with_status.status.clone();
    status_write.prepare_status_update(&modern);
    assert_eq!(status_write.spec, modern.spec);
    assert_eq!(status_write.metadata, modern.metadata);
    assert_eq!(status_write.status, with_status.status);
}

#[test]
fn an_absent_status_phase_is_not_enum_checked() {
    use apiforge_runtime::validation::{FieldPath, Validate};
    let path = FieldPath::new("status");
    // `phase` is omitted on the wire when empty: an absent field, not "".
    let status: v1::DatabaseStatus =
        serde_json::from_value(json!({"replicas": 1})).unwrap_or_default();
    assert!(
        status.validate(&path).is_empty(),
        "{:?}",
        status.validate(&path)
    );
    let mut with_status = db(json!({"engine": "postgres", "version": "16.2"}));
    with_status.status = Some(status);
    assert!(
        errors(&with_status).is_empty(),
        "{:?}",
        errors(&with_status)
    );
    // a present value is still checked
    let bad = v1::DatabaseStatus {
        phase: "Sleeping".into(),
        ..Default::default()
    };
    let errs: Vec<String> = bad
        .validate(&path)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errs,
        [
            r#"status.phase: Unsupported value: "Sleeping": supported values: "Pending", "Running", "Failed""#
        ]
    );
}

// `at_most_one_of(schedule, continuous)` is exported with the CRD
// (`apiforge crd`) as an x-kubernetes-validations rule: the custom
// resource served from that definition refuses and accepts the same
// backups as the compiled kind, at the same path with the same message.
#[test]
fn the_exported_definition_refuses_the_same_backups() {
    use apiforge_runtime::scheme::{custom, definition};
    let crd = definition::definitions_of(&group(), None).remove(0);
    let crd = custom::kind_from_definition(&crd, None).expect("a valid definition");
    let union = |errs: &apiforge_runtime::validation::ErrorList| -> Vec<(String, String)> {
        errs.iter()
            .filter(|e| e.detail.contains("one of"))
            .map(|e| (e.field.clone(), e.detail.clone()))
            .collect()
    };
    for backup in [
        json!({}),
        json!({"schedule": "0 3 * * *"}),
        json!({"continuous": false}),
        json!({"schedule": "0 3 * * *", "continuous": true}),
        json!({"schedule": "0 3 * * *", "continuous": null}),
    ] {
        let spec = json!({"engine": "postgres", "version": "16", "backup": backup});
        let compiled = union(&db(spec.clone()).validate_create());
        let body = json!({"apiVersion": "showcase.apiforge.dev/v1", "kind": "Database",
            "metadata": {"name": "db", "namespace": "ns"}, "spec": spec});
        let hub = crd.decode_object("v1", body).expect("decoded");
        let exported = union(&crd.validate_create_object(&hub).expect("validated"));
        assert_eq!(exported, compiled, "{backup}");
        let both = backup.get("schedule").is_some()
            && backup.get("continuous").is_some_and(|c| !c.is_null());
        assert_eq!(compiled.len(), usize::from(both), "{backup}");
    }
}
