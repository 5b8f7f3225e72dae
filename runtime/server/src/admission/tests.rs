//! Chain tests: ordering, selection, dry run, and the built-in plugins on a
//! real registry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::registry::{DeleteOutcome, Store, StoreLookup, StoreMap, attach_admission};
use apiforge_core::builtin::core_v1::Namespace;
use apiforge_core::resource::Resource;
use apiforge_core::scheme::KindBuilder;
use apiforge_storage::Storage;
use apiforge_storage::embedded::{EmbeddedOptions, EmbeddedStore};

/// Records every hook call as `<name>.<hook>` and optionally rejects or
/// labels the object.
struct Recorder {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    reject_validate: bool,
    ops: Option<Operation>,
    /// The only API group it looks at (`None`: every group).
    group: Option<&'static str>,
}

#[async_trait]
impl Plugin for Recorder {
    fn name(&self) -> &str {
        self.name
    }

    fn handles(&self, operation: Operation) -> bool {
        self.ops.is_none_or(|op| op == operation)
    }

    fn handles_group(&self, group: &str) -> bool {
        self.group.is_none_or(|g| g == group)
    }

    async fn admit(&self, attrs: &mut Attributes, _: &Context) -> Result<(), Error> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}.admit dry_run={}", self.name, attrs.dry_run));
        if let Some(obj) = attrs.object.as_mut() {
            obj["metadata"]["labels"][self.name] = json!("admitted");
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes, _: &Context) -> Result<(), Error> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}.validate", self.name));
        if self.reject_validate {
            return Err(Error::forbidden(attrs, "nope"));
        }
        Ok(())
    }
}

fn recorder(name: &'static str, log: &Arc<Mutex<Vec<String>>>) -> Recorder {
    Recorder {
        name,
        log: log.clone(),
        reject_validate: false,
        ops: None,
        group: None,
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn mutating_hooks_run_before_validating_ones_in_order() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut reg = AdmissionRegistry::new();
    reg.register(recorder("A", &log), true)
        .register(recorder("B", &log), true);
    let chain = Chain::new(reg.select(&[], &[]).unwrap(), Arc::new(NoLookup));
    let mut attrs = Attributes {
        operation: Some(Operation::Create),
        object: Some(json!({"metadata": {"name": "x"}})),
        dry_run: true,
        ..Default::default()
    };
    chain.admit(&mut attrs).await.unwrap();
    chain.validate(&attrs).await.unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        strings(&[
            "A.admit dry_run=true",
            "B.admit dry_run=true",
            "A.validate",
            "B.validate"
        ])
    );
    assert_eq!(
        attrs.object.unwrap()["metadata"]["labels"],
        json!({"A": "admitted", "B": "admitted"})
    );
}

/// A reinvocable plugin that records its reinvocations.
struct Reinvocable(Arc<Mutex<Vec<String>>>);

#[async_trait]
impl Plugin for Reinvocable {
    fn name(&self) -> &str {
        "R"
    }

    fn reinvocable(&self) -> bool {
        true
    }

    async fn reinvoke(&self, attrs: &mut Attributes, _: &Context) -> Result<(), Error> {
        self.0.lock().unwrap().push("R.reinvoke".into());
        if let Some(obj) = attrs.object.as_mut() {
            obj["metadata"]["labels"]["R"] = json!("reinvoked");
        }
        Ok(())
    }
}

/// A reinvocable plugin runs once more when a later plugin changed the
/// object it admitted, and not otherwise.
#[tokio::test]
async fn reinvocable_plugins_run_again_after_later_changes() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut reg = AdmissionRegistry::new();
    reg.register(Reinvocable(log.clone()), true)
        .register(recorder("B", &log), true);
    let chain = Chain::new(reg.select(&[], &[]).unwrap(), Arc::new(NoLookup));
    let mut attrs = Attributes {
        operation: Some(Operation::Create),
        object: Some(json!({"metadata": {"name": "x"}})),
        ..Default::default()
    };
    chain.admit(&mut attrs).await.unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        strings(&["B.admit dry_run=false", "R.reinvoke"])
    );
    assert_eq!(
        attrs.object.unwrap()["metadata"]["labels"],
        json!({"B": "admitted", "R": "reinvoked"})
    );

    let log = Arc::new(Mutex::new(Vec::new()));
    let mut reg = AdmissionRegistry::new();
    reg.register(recorder("B", &log), true)
        .register(Reinvocable(log.clone()), true);
    let chain = Chain::new(reg.select(&[], &[]).unwrap(), Arc::new(NoLookup));
    let mut attrs = Attributes {
        operation: Some(Operation::Create),
        object: Some(json!({"metadata": {"name": "x"}})),
        ..Default::default()
    };
    chain.admit(&mut attrs).await.unwrap();
    assert_eq!(*log.lock().unwrap(), strings(&["B.admit dry_run=false"]));
}

#[tokio::test]
async fn first_rejection_wins_and_unhandled_operations_are_skipped() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut reg = AdmissionRegistry::new();
    reg.register(
        Recorder {
            ops: Some(Operation::Delete),
            ..recorder("OnlyDelete", &log)
        },
        true,
    )
    .register(
        Recorder {
            reject_validate: true,
            ..recorder("Deny", &log)
        },
        true,
    )
    .register(recorder("After", &log), true);
    let chain = Chain::new(reg.select(&[], &[]).unwrap(), Arc::new(NoLookup));
    let attrs = Attributes {
        operation: Some(Operation::Create),
        group: "g.example.com".into(),
        resource: "things".into(),
        name: "t".into(),
        ..Default::default()
    };
    let err = chain.validate(&attrs).await.unwrap_err();
    assert_eq!(err.code(), 403);
    assert_eq!(
        err.0.message,
        "things.g.example.com \"t\" is forbidden: nope"
    );
    assert_eq!(*log.lock().unwrap(), strings(&["Deny.validate"]));
}

#[tokio::test]
async fn plugins_see_only_the_groups_they_handle() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut reg = AdmissionRegistry::new();
    reg.register(
        Recorder {
            group: Some("rbac.authorization.k8s.io"),
            ..recorder("Rbac", &log)
        },
        true,
    )
    .register(
        Recorder {
            ops: Some(Operation::Create),
            ..recorder("OnCreate", &log)
        },
        true,
    );
    let chain = Chain::new(reg.select(&[], &[]).unwrap(), Arc::new(NoLookup));
    assert!(chain.wants(Operation::Update, "rbac.authorization.k8s.io"));
    assert!(chain.wants(Operation::Create, "g.example.com"));
    // Nobody looks at updates outside RBAC: the registry skips admission.
    assert!(!chain.wants(Operation::Update, "g.example.com"));
    for (op, group) in [
        (Operation::Update, "g.example.com"),
        (Operation::Create, "g.example.com"),
        (Operation::Update, "rbac.authorization.k8s.io"),
    ] {
        let mut attrs = Attributes {
            operation: Some(op),
            group: group.into(),
            object: Some(json!({"metadata": {"name": "x"}})),
            ..Default::default()
        };
        chain.admit(&mut attrs).await.unwrap();
        chain.validate(&attrs).await.unwrap();
    }
    assert_eq!(
        *log.lock().unwrap(),
        strings(&[
            "OnCreate.admit dry_run=false",
            "OnCreate.validate",
            "Rbac.admit dry_run=false",
            "Rbac.validate"
        ])
    );
}

#[test]
fn selection_follows_kube_apiserver_flags() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut reg = AdmissionRegistry::with_builtins();
    reg.register(recorder("Off", &log), false)
        .register(recorder("On", &log), true);
    // The webhook plugins stay after plugins registered later.
    assert_eq!(
        reg.names(),
        [
            "NamespaceLifecycle",
            "Off",
            "On",
            "MutatingAdmissionPolicy",
            "MutatingAdmissionWebhook",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionWebhook"
        ]
    );
    assert_eq!(
        reg.defaults().names(),
        [
            "NamespaceLifecycle",
            "On",
            "MutatingAdmissionPolicy",
            "MutatingAdmissionWebhook",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionWebhook"
        ]
    );
    // Enabling keeps registration order, whatever the flag order.
    let p = reg.select(&strings(&["On", "Off"]), &[]).unwrap();
    assert_eq!(
        p.names(),
        [
            "NamespaceLifecycle",
            "Off",
            "On",
            "MutatingAdmissionPolicy",
            "MutatingAdmissionWebhook",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionWebhook"
        ]
    );
    let p = reg
        .select(
            &[],
            &strings(&[
                "NamespaceLifecycle",
                " ",
                "MutatingAdmissionPolicy",
                "MutatingAdmissionWebhook",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionWebhook",
            ]),
        )
        .unwrap();
    assert_eq!(p.names(), ["On"]);
    assert_eq!(
        reg.select(&strings(&["Nope"]), &[])
            .unwrap_err()
            .to_string(),
        "enable-admission-plugins plugin \"Nope\" is unknown (known plugins: NamespaceLifecycle, Off, On, MutatingAdmissionPolicy, MutatingAdmissionWebhook, ValidatingAdmissionPolicy, ValidatingAdmissionWebhook)"
    );
    assert!(matches!(
        reg.select(&[], &strings(&["Nope"])),
        Err(ConfigError::Unknown {
            flag: "disable-admission-plugins",
            ..
        })
    ));
    assert_eq!(
        reg.select(&strings(&["On"]), &strings(&["On"]))
            .unwrap_err()
            .to_string(),
        "On in enable-admission-plugins and disable-admission-plugins overlapped"
    );
}

// --- On a real registry ---

#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
    apiforge_core::Resource,
)]
#[resource(
    group = "test.example.com",
    version = "v1",
    namespaced,
    default_strategy
)]
struct Widget {
    #[serde(default)]
    metadata: apiforge_core::meta::ObjectMeta,
    #[serde(default)]
    spec: Value,
}

struct Fixture {
    _dir: tempfile::TempDir,
    namespaces: Store,
    widgets: Store,
}

fn fixture(plugins: impl FnOnce(&mut AdmissionRegistry)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
    let caches = crate::registry::Caches::default();
    let opts = crate::registry::CacheOptions::default();
    let mut stores: StoreMap = HashMap::new();
    for (kind, info) in [
        (
            KindBuilder::<Namespace>::new()
                .version::<Namespace>()
                .build(),
            &Namespace::INFO,
        ),
        (
            KindBuilder::<Widget>::new().version::<Widget>().build(),
            &Widget::INFO,
        ),
    ] {
        let store = Store::new(
            Arc::new(kind),
            storage.clone(),
            "/registry",
            Some((&caches, &opts)),
        );
        stores.insert(
            (info.group.into(), info.version.into(), info.plural.into()),
            (store, info),
        );
    }
    let mut reg = AdmissionRegistry::with_builtins();
    plugins(&mut reg);
    let stores = attach_admission(stores, reg.select(&[], &[]).unwrap());
    let get = |g: &str, p: &str, v: &str| {
        stores[&(g.to_string(), v.to_string(), p.to_string())]
            .0
            .clone()
    };
    Fixture {
        namespaces: get("", "namespaces", "v1"),
        widgets: get("test.example.com", "widgets", "v1"),
        _dir: dir,
    }
}

fn decode(store: &Store, body: Value) -> Value {
    store.kind().decode("v1", body).unwrap()
}

async fn create_ns(f: &Fixture, name: &str) {
    let ns = decode(&f.namespaces, json!({"metadata": {"name": name}}));
    f.namespaces.create("", ns, false).await.unwrap();
}

fn widget(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {}})
}

#[tokio::test]
async fn namespace_lifecycle_rejects_missing_and_terminating_namespaces() {
    let f = fixture(|_| {});
    let err = f
        .widgets
        .create("missing", decode(&f.widgets, widget("w")), false)
        .await
        .unwrap_err();
    assert_eq!(
        serde_json::to_value(&*err.0).unwrap(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"namespaces \"missing\" not found","reason":"NotFound",
               "details":{"name":"missing","kind":"namespaces"},"code":404})
    );

    create_ns(&f, "doomed").await;
    f.widgets
        .create("doomed", decode(&f.widgets, widget("w")), false)
        .await
        .unwrap();
    // The namespace keeps its `kubernetes` finalizer: DELETE only marks it.
    let out = f
        .namespaces
        .delete("", "doomed", &Default::default(), false)
        .await
        .unwrap();
    let DeleteOutcome::Terminating(ns) = out else {
        panic!("namespace removed at once: {out:?}")
    };
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert!(ns["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(ns["metadata"]["deletionGracePeriodSeconds"], 0);

    let err = f
        .widgets
        .create("doomed", decode(&f.widgets, widget("w2")), false)
        .await
        .unwrap_err();
    assert_eq!(
        serde_json::to_value(&*err.0).unwrap(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"widgets.test.example.com \"w2\" is forbidden: unable to create new content in namespace doomed because it is being terminated",
               "reason":"Forbidden",
               "details":{"name":"w2","group":"test.example.com","kind":"widgets",
                          "causes":[{"reason":"NamespaceTerminating","message":"namespace doomed is being terminated","field":"metadata.namespace"}]},
               "code":403})
    );

    // Updates in a terminating namespace are allowed.
    let mut w = f.widgets.get("doomed", "w", None).await.unwrap();
    w["spec"] = json!({"x": 1});
    f.widgets.update("doomed", "w", w, false).await.unwrap();

    // The namespace controller empties and finalizes it.
    let controller = crate::controllers::namespace::NamespaceController::new(
        f.namespaces.clone(),
        vec![f.widgets.clone()],
    );
    assert!(!controller.sync_all().await.unwrap());
    assert_eq!(
        f.namespaces
            .get("", "doomed", None)
            .await
            .unwrap_err()
            .code(),
        404
    );
    assert_eq!(
        f.widgets.get("doomed", "w", None).await.unwrap_err().code(),
        404
    );
}

/// A namespace controller acting late (a slow replica, one that lost its
/// lease) on a namespace that was finalized and re-created under the same
/// name leaves the new namespace, its finalizer and its objects alone:
/// every step is guarded by the namespace's uid.
#[tokio::test]
async fn late_namespace_controller_leaves_a_recreated_namespace_alone() {
    let f = fixture(|_| {});
    let controller = || {
        crate::controllers::namespace::NamespaceController::new(
            f.namespaces.clone(),
            vec![f.widgets.clone()],
        )
    };
    let uid = |ns: &Value| ns["metadata"]["uid"].as_str().unwrap().to_string();
    create_ns(&f, "race").await;
    f.widgets
        .create("race", decode(&f.widgets, widget("w")), false)
        .await
        .unwrap();
    let DeleteOutcome::Terminating(old) = f
        .namespaces
        .delete("", "race", &Default::default(), false)
        .await
        .unwrap()
    else {
        panic!("namespace removed at once")
    };
    let old_uid = uid(&old);
    // One controller empties and finalizes it.
    assert!(controller().finalize_uid("race", &old_uid).await.unwrap());
    assert_eq!(
        f.namespaces.get("", "race", None).await.unwrap_err().code(),
        404
    );
    // Re-created at once, with an object of the same name and another one.
    create_ns(&f, "race").await;
    for name in ["w", "other"] {
        f.widgets
            .create("race", decode(&f.widgets, widget(name)), false)
            .await
            .unwrap();
    }
    let new = f.namespaces.get("", "race", None).await.unwrap();
    assert_ne!(uid(&new), old_uid);
    let keeps_everything = || async {
        let ns = f.namespaces.get("", "race", None).await.unwrap();
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]), "{ns}");
        for name in ["w", "other"] {
            f.widgets.get("race", name, None).await.unwrap();
        }
        ns
    };
    // The late controller still works on the old uid: nothing to do.
    assert!(controller().finalize_uid("race", &old_uid).await.unwrap());
    keeps_everything().await;
    // Not even when the new namespace is terminating in turn.
    let DeleteOutcome::Terminating(_) = f
        .namespaces
        .delete("", "race", &Default::default(), false)
        .await
        .unwrap()
    else {
        panic!("namespace removed at once")
    };
    assert!(controller().finalize_uid("race", &old_uid).await.unwrap());
    let ns = keeps_everything().await;
    assert!(ns["metadata"]["deletionTimestamp"].is_string());
    // The namespace's own uid finalizes it.
    assert!(controller().finalize_uid("race", &uid(&new)).await.unwrap());
    assert_eq!(
        f.namespaces.get("", "race", None).await.unwrap_err().code(),
        404
    );
    assert_eq!(
        f.widgets.get("race", "w", None).await.unwrap_err().code(),
        404
    );
}

#[tokio::test]
async fn system_namespaces_cannot_be_deleted() {
    let f = fixture(|_| {});
    create_ns(&f, "default").await;
    let err = f
        .namespaces
        .delete("", "default", &Default::default(), false)
        .await
        .unwrap_err();
    assert_eq!(
        serde_json::to_value(&*err.0).unwrap(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"namespaces \"default\" is forbidden: this namespace may not be deleted",
               "reason":"Forbidden","details":{"name":"default","kind":"namespaces"},"code":403})
    );
}

#[tokio::test]
async fn dry_run_sees_admission_and_persists_nothing() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let plugin_log = log.clone();
    let f = fixture(move |r| {
        r.register(recorder("Label", &plugin_log), true);
    });
    create_ns(&f, "ns").await;
    log.lock().unwrap().clear();
    let created = f
        .widgets
        .create("ns", decode(&f.widgets, widget("dry")), true)
        .await
        .unwrap();
    assert_eq!(created["metadata"]["labels"], json!({"Label": "admitted"}));
    assert_eq!(
        *log.lock().unwrap(),
        strings(&["Label.admit dry_run=true", "Label.validate"])
    );
    assert_eq!(
        f.widgets.get("ns", "dry", None).await.unwrap_err().code(),
        404
    );
    // A dry run is still rejected by NamespaceLifecycle.
    let err = f
        .widgets
        .create("nowhere", decode(&f.widgets, widget("dry")), true)
        .await
        .unwrap_err();
    assert_eq!(err.code(), 404);
}

#[tokio::test]
async fn finalizers_hold_objects_until_the_last_one_is_removed() {
    let f = fixture(|_| {});
    create_ns(&f, "ns").await;
    let body = json!({"metadata": {"name": "held", "finalizers": ["example.com/a"]}, "spec": {}});
    f.widgets
        .create("ns", decode(&f.widgets, body), false)
        .await
        .unwrap();
    let DeleteOutcome::Terminating(obj) = f
        .widgets
        .delete("ns", "held", &Default::default(), false)
        .await
        .unwrap()
    else {
        panic!("removed despite a finalizer")
    };
    assert!(obj["metadata"]["deletionTimestamp"].is_string());
    // Deleting again answers with the terminating object.
    let again = f
        .widgets
        .delete("ns", "held", &Default::default(), false)
        .await
        .unwrap();
    assert!(matches!(again, DeleteOutcome::Terminating(_)));
    // An update keeps deletionTimestamp; removing the last finalizer
    // removes the object.
    let mut obj = f.widgets.get("ns", "held", None).await.unwrap();
    obj["metadata"]["finalizers"] = json!([]);
    obj["metadata"]["deletionTimestamp"] = Value::Null;
    let (last, _) = f.widgets.update("ns", "held", obj, false).await.unwrap();
    assert!(last["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        f.widgets.get("ns", "held", None).await.unwrap_err().code(),
        404
    );
}

#[tokio::test]
async fn store_lookup_encodes_in_the_requested_version() {
    let f = fixture(|_| {});
    create_ns(&f, "a").await;
    let mut stores: StoreMap = HashMap::new();
    stores.insert(
        (String::new(), "v1".into(), "namespaces".into()),
        (f.namespaces.clone(), &Namespace::INFO),
    );
    let lookup = StoreLookup::new(stores);
    assert!(lookup.serves("", "v1", "namespaces"));
    assert!(!lookup.serves("wardle.example.com", "v1alpha1", "fischers"));
    let got = lookup
        .get("", "v1", "namespaces", "", "a", true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got["kind"], "Namespace");
    assert_eq!(got["apiVersion"], "v1");
    assert!(
        lookup
            .get("", "v1", "namespaces", "", "b", true)
            .await
            .unwrap()
            .is_none()
    );
    // Lists come from the watch cache (like an informer's lister), which
    // may not have seen the create yet: wait for it, boundedly.
    let mut all = None;
    for _ in 0..500 {
        all = lookup.list("", "v1", "namespaces", None).await.unwrap();
        if all.as_ref().map(Vec::len) == Some(1) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(all.map(|v| v.len()), Some(1));
    assert!(
        lookup
            .list("wardle.example.com", "v1alpha1", "fischers", None)
            .await
            .unwrap()
            .is_none()
    );
}

// --- Typed admission ---

/// Widgets that record what the typed hooks saw, and reject names starting
/// with `bad` (403) or a `spec.size` over 5 (422).
fn typed_widgets(log: &Arc<Mutex<Vec<String>>>) -> TypedAdmission<Widget> {
    let seen = log.clone();
    TypedAdmission::<Widget>::new("TypedWidgets")
        .mutate(|w, attrs| {
            w.spec["stamped"] = json!(attrs.operation().as_str());
            Ok(())
        })
        .validate(move |w, old, attrs| {
            seen.lock().unwrap().push(format!(
                "{} {} old={}",
                attrs.operation(),
                w.spec,
                old.map_or("none".to_string(), |o| o.spec.to_string())
            ));
            if w.metadata.name.starts_with("bad") {
                return Err(Denial::forbidden("no bad widgets"));
            }
            if w.spec["size"].as_i64().is_some_and(|s| s > 5) {
                let mut errs = apiforge_core::validation::ErrorList::default();
                errs.push(apiforge_core::validation::FieldError::invalid(
                    "spec.size",
                    w.spec["size"].clone(),
                    "must be at most 5",
                ));
                return Err(Denial::invalid(errs));
            }
            Ok(())
        })
}

#[tokio::test]
async fn typed_mutation_is_stored_and_updates_get_the_old_object() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let plugin = typed_widgets(&log);
    let f = fixture(move |r| {
        r.register(plugin, true);
    });
    create_ns(&f, "ns").await;
    let created = f
        .widgets
        .create(
            "ns",
            decode(
                &f.widgets,
                json!({"metadata": {"name": "w"}, "spec": {"size": 1}}),
            ),
            false,
        )
        .await
        .unwrap();
    assert_eq!(created["spec"], json!({"size": 1, "stamped": "CREATE"}));
    let mut w = f.widgets.get("ns", "w", None).await.unwrap();
    assert_eq!(w["spec"], json!({"size": 1, "stamped": "CREATE"}));

    w["spec"] = json!({"size": 2});
    f.widgets.update("ns", "w", w, false).await.unwrap();
    let w = f.widgets.get("ns", "w", None).await.unwrap();
    assert_eq!(w["spec"], json!({"size": 2, "stamped": "UPDATE"}));
    assert_eq!(
        *log.lock().unwrap(),
        strings(&[
            r#"CREATE {"size":1,"stamped":"CREATE"} old=none"#,
            r#"UPDATE {"size":2,"stamped":"UPDATE"} old={"size":1,"stamped":"CREATE"}"#,
        ])
    );
}

#[tokio::test]
async fn typed_denials_become_forbidden_or_invalid_statuses() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let plugin = typed_widgets(&log);
    let f = fixture(move |r| {
        r.register(plugin, true);
    });
    create_ns(&f, "ns").await;
    let err = f
        .widgets
        .create("ns", decode(&f.widgets, widget("bad-one")), false)
        .await
        .unwrap_err();
    assert_eq!(
        serde_json::to_value(&*err.0).unwrap(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"widgets.test.example.com \"bad-one\" is forbidden: no bad widgets",
               "reason":"Forbidden",
               "details":{"name":"bad-one","group":"test.example.com","kind":"widgets"},
               "code":403})
    );
    let err = f
        .widgets
        .create(
            "ns",
            decode(
                &f.widgets,
                json!({"metadata": {"name": "big"}, "spec": {"size": 7}}),
            ),
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(
        serde_json::to_value(&*err.0).unwrap(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"Widget.test.example.com \"big\" is invalid: spec.size: Invalid value: 7: must be at most 5",
               "reason":"Invalid",
               "details":{"name":"big","group":"test.example.com","kind":"Widget",
                          "causes":[{"reason":"FieldValueInvalid","message":"Invalid value: 7: must be at most 5","field":"spec.size"}]},
               "code":422})
    );
    for name in ["bad-one", "big"] {
        assert_eq!(
            f.widgets.get("ns", name, None).await.unwrap_err().code(),
            404
        );
    }
}

#[tokio::test]
async fn typed_hooks_skip_other_kinds_operations_and_subresources() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let chain = Chain::new(
        [Arc::new(typed_widgets(&log).operations([Operation::Create])) as Arc<dyn Plugin>]
            .into_iter()
            .collect(),
        Arc::new(NoLookup),
    );
    assert!(chain.wants(Operation::Create, "test.example.com"));
    assert!(!chain.wants(Operation::Update, "test.example.com"));
    assert!(!chain.wants(Operation::Delete, "test.example.com"));
    assert!(!chain.wants(Operation::Create, ""));
    // Not a Widget (and not decodable as one): untouched, allowed.
    let body = json!({"metadata": "not an object", "spec": 1});
    for (group, kind, subresource) in [
        ("test.example.com", "Gadget", ""),
        ("other.example.com", "Widget", ""),
        ("test.example.com", "Widget", "status"),
    ] {
        let mut attrs = Attributes {
            operation: Some(Operation::Create),
            group: group.into(),
            kind: kind.into(),
            subresource: subresource.into(),
            name: "bad".into(),
            object: Some(body.clone()),
            ..Default::default()
        };
        chain.admit(&mut attrs).await.unwrap();
        chain.validate(&attrs).await.unwrap();
        assert_eq!(attrs.object, Some(body.clone()));
    }
    // A delete has no object for typed hooks.
    let mut attrs = Attributes {
        operation: Some(Operation::Delete),
        group: "test.example.com".into(),
        kind: "Widget".into(),
        name: "bad".into(),
        ..Default::default()
    };
    chain.admit(&mut attrs).await.unwrap();
    chain.validate(&attrs).await.unwrap();
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn typed_decode_failures_are_internal_errors() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let chain = Chain::new(
        [Arc::new(typed_widgets(&log)) as Arc<dyn Plugin>]
            .into_iter()
            .collect(),
        Arc::new(NoLookup),
    );
    let mut attrs = Attributes {
        operation: Some(Operation::Update),
        group: "test.example.com".into(),
        kind: "Widget".into(),
        resource: "widgets".into(),
        name: "w".into(),
        object: Some(json!({"metadata": "not an object"})),
        ..Default::default()
    };
    let err = chain.admit(&mut attrs).await.unwrap_err();
    assert_eq!(err.code(), 500);
    assert!(
        err.0.message.starts_with(
            "Internal error occurred: admission plugin TypedWidgets: the object is not a Widget: "
        ),
        "{}",
        err.0.message
    );
    // A good object with an undecodable old one.
    attrs.object = Some(widget("w"));
    attrs.old_object = Some(json!({"metadata": 1}));
    let err = chain.validate(&attrs).await.unwrap_err();
    assert_eq!(err.code(), 500);
    assert!(err.0.message.contains("the old object is not a Widget"));
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn typed_async_hooks_read_other_objects() {
    let f = fixture(|r| {
        r.register(
            TypedAdmission::<Widget>::new("NamespaceUid").mutate_async(|w, attrs, ctx| {
                Box::pin(async move {
                    let ns = ctx
                        .lookup()
                        .get("", "v1", "namespaces", "", &attrs.namespace, true)
                        .await?
                        .ok_or_else(|| Denial::forbidden("no namespace"))?;
                    w.spec["namespaceUid"] = ns["metadata"]["uid"].clone();
                    Ok(())
                })
            }),
            true,
        );
    });
    create_ns(&f, "ns").await;
    let ns = f.namespaces.get("", "ns", None).await.unwrap();
    let created = f
        .widgets
        .create("ns", decode(&f.widgets, widget("w")), false)
        .await
        .unwrap();
    assert_eq!(created["spec"]["namespaceUid"], ns["metadata"]["uid"]);
}
