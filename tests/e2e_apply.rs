//! Server-side apply and `metadata.managedFields` against the real binary:
//! kube-rs `Patch::Apply` with typed and dynamic objects, raw apply
//! requests for status codes and Status bodies, shared ownership,
//! conflicts and `force`, subresources, resets, and the write
//! preconditions a PUT body carries.
//!
//! Expected values follow kube-apiserver's field manager and
//! structured-merge-diff: `FieldsV1` members (`f:`, `k:{...}`, `v:...`,
//! `.`), the conflict Status of `NewApplyConflict`, the PatchOptions
//! validation of `ValidatePatchOptions`, the apply errors of the
//! version-check and structured-merge managers.

mod common;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

const FLUNDERS: &str = "/apis/wardle.example.com/v1beta1/namespaces/default/flunders";
const DATABASES: &str = "/apis/showcase.apiforge.dev/v1/namespaces/default/databases";
const APPLY: &str = "application/apply-patch+yaml";
const MERGE: &str = "application/merge-patch+json";

/// A raw request: status and JSON body.
async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    raw_as(client, method, path, content_type, body, None).await
}

async fn raw_as(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
    user_agent: Option<&str>,
) -> (u16, Value) {
    let bytes = match body {
        Value::String(s) => s.clone().into_bytes(),
        Value::Null => Vec::new(),
        other => serde_json::to_vec(other).expect("json"),
    };
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type);
    if let Some(agent) = user_agent {
        req = req.header(http::header::USER_AGENT, agent);
    }
    let req = req.body(kube::client::Body::from(bytes)).expect("request");
    let resp = client.send(req).await.expect("send");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await.expect("body");
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn get(client: &kube::Client, path: &str) -> Value {
    let (code, body) = raw(client, "GET", path, "application/json", &Value::Null).await;
    assert_eq!(code, 200, "GET {path}: {body}");
    body
}

fn flunder(name: &str, spec: Value, labels: Value) -> Value {
    json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": {"name": name, "labels": labels}, "spec": spec})
}

/// The managedFields entry of `manager` (panics when there is none).
fn entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["manager"] == manager))
        .unwrap_or_else(|| panic!("no managedFields entry of {manager}: {obj}"))
}

fn managers(obj: &Value) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|e| e["manager"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn kube_rs_applies_typed_and_dynamic_objects() {
    let server = common::Server::start().await;
    let client = server.client().await;

    // Typed: a ConfigMap through k8s-openapi's type.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm1", "labels": {"team": "a"}},
        "data": {"a": "1", "b": "2"},
    }))
    .expect("configmap");
    let applied = cms
        .patch("cm1", &PatchParams::apply("kube-test"), &Patch::Apply(&cm))
        .await
        .expect("apply creates");
    let mf = applied.metadata.managed_fields.expect("managedFields");
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("kube-test"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    assert_eq!(mf[0].api_version.as_deref(), Some("v1"));
    assert_eq!(mf[0].fields_type.as_deref(), Some("FieldsV1"));
    assert!(mf[0].time.is_some());
    // Map entries are members; maps and the metadata struct are not.
    assert_eq!(
        serde_json::to_value(&mf[0].fields_v1).expect("fieldsV1"),
        json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:team": {}}}})
    );
    // Dropping a key the manager alone owned removes it.
    let cm2: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": {"a": "1"},
    }))
    .expect("configmap");
    let applied = cms
        .patch("cm1", &PatchParams::apply("kube-test"), &Patch::Apply(&cm2))
        .await
        .expect("apply updates");
    let data = applied.data.expect("data");
    assert_eq!(data.len(), 1, "{data:?}");
    assert!(applied.metadata.labels.unwrap_or_default().is_empty());

    // Dynamic: a Flunder through DynamicObject.
    let gvk = GroupVersionKind::gvk("wardle.example.com", "v1beta1", "Flunder");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "flunders");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let f = flunder(
        "dyn",
        json!({"referenceType": "Flunder", "flunderReference": "x"}),
        json!({"app": "web"}),
    );
    let applied = api
        .patch("dyn", &PatchParams::apply("kube-dyn"), &Patch::Apply(&f))
        .await
        .expect("apply dynamic");
    let value = serde_json::to_value(&applied).expect("json");
    assert_eq!(
        entry(&value, "kube-dyn")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:app": {}}},
               "f:spec": {"f:flunderReference": {}, "f:referenceType": {}}})
    );
    // A conflicting apply from another manager: kube-rs sees the 409.
    let other = flunder("dyn", json!({"flunderReference": "y"}), json!({}));
    let err = api
        .patch(
            "dyn",
            &PatchParams::apply("kube-other"),
            &Patch::Apply(&other),
        )
        .await
        .expect_err("conflict");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
            assert_eq!(
                s.message,
                r#"Apply failed with 1 conflict: conflict with "kube-dyn": .spec.flunderReference"#
            );
        }
        other => panic!("expected a Status, got {other:?}"),
    }
    let forced = api
        .patch(
            "dyn",
            &PatchParams::apply("kube-other").force(),
            &Patch::Apply(&other),
        )
        .await
        .expect("force");
    let value = serde_json::to_value(&forced).expect("json");
    assert_eq!(value["spec"]["flunderReference"], "y");
    assert_eq!(
        entry(&value, "kube-dyn")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:referenceType": {}}})
    );
    // The configuration's empty labels map is a field of its own (an empty
    // map is a leaf).
    assert_eq!(
        entry(&value, "kube-other")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {}}, "f:spec": {"f:flunderReference": {}}})
    );
}

#[tokio::test]
async fn conflicts_updates_and_shared_ownership() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let f1 = format!("{FLUNDERS}/f1");
    let spec = json!({"referenceType": "Flunder", "flunderReference": "x"});
    let (code, created) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=a"),
        APPLY,
        &flunder("f1", spec.clone(), json!({"l": "1"})),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(managers(&created), ["a"]);

    // A merge patch by another manager is an Update operation, in the
    // request's version, and takes the field from the applier.
    let (code, patched) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=updater"),
        MERGE,
        &json!({"spec": {"flunderReference": "y"}}),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    let updater = entry(&patched, "updater");
    assert_eq!(updater["operation"], "Update");
    assert_eq!(updater["apiVersion"], "wardle.example.com/v1beta1");
    assert_eq!(
        updater["fieldsV1"],
        json!({"f:spec": {"f:flunderReference": {}}})
    );
    assert_eq!(
        entry(&patched, "a")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:l": {}}}, "f:spec": {"f:referenceType": {}}})
    );
    // Apply entries sort before Update entries.
    assert_eq!(managers(&patched), ["a", "updater"]);

    // Changing the updater's field conflicts: 409, one cause per field,
    // nothing written.
    let before = get(&client, &f1).await;
    let (code, status) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=a"),
        APPLY,
        &flunder(
            "f1",
            json!({"referenceType": "Flunder", "flunderReference": "z"}),
            json!({"l": "1"}),
        ),
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        r#"Apply failed with 1 conflict: conflict with "updater" using wardle.example.com/v1beta1: .spec.flunderReference"#
    );
    assert_eq!(
        status["details"],
        json!({"causes": [{"reason": "FieldManagerConflict",
            "message": r#"conflict with "updater" using wardle.example.com/v1beta1"#,
            "field": ".spec.flunderReference"}]})
    );
    let after = get(&client, &f1).await;
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );

    // force=true transfers ownership; the updater, left with nothing, goes.
    let (code, forced) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=a&force=true"),
        APPLY,
        &flunder(
            "f1",
            json!({"referenceType": "Flunder", "flunderReference": "z"}),
            json!({"l": "1"}),
        ),
    )
    .await;
    assert_eq!(code, 200, "{forced}");
    assert_eq!(forced["spec"]["flunderReference"], "z");
    assert_eq!(managers(&forced), ["a"]);

    // Shared ownership: b applies the same label value (no conflict); a
    // stops applying it and it stays; b stops too and it goes.
    let (code, shared) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=b"),
        APPLY,
        &json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
            "metadata": {"name": "f1", "labels": {"l": "1"}}}),
    )
    .await;
    assert_eq!(code, 200, "{shared}");
    let (_, kept) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=a"),
        APPLY,
        &flunder(
            "f1",
            json!({"referenceType": "Flunder", "flunderReference": "z"}),
            json!({}),
        ),
    )
    .await;
    assert_eq!(kept["metadata"]["labels"], json!({"l": "1"}), "{kept}");
    let (_, gone) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=b"),
        APPLY,
        &json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
            "metadata": {"name": "f1"}}),
    )
    .await;
    assert!(gone["metadata"].get("labels").is_none(), "{gone}");

    // Applying the same configuration again writes nothing: same
    // resourceVersion, same time — also in a later second, when the
    // applier's managedFields time alone would differ (`labels: {}` is
    // not stored, so the apply sees a change that the stored form drops).
    let config = flunder(
        "f1",
        json!({"referenceType": "Flunder", "flunderReference": "z"}),
        json!({}),
    );
    let (_, first) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=a"),
        APPLY,
        &config,
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (code, again) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=a"),
        APPLY,
        &config,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        again["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    assert_eq!(entry(&again, "a")["time"], entry(&first, "a")["time"]);

    // A resourceVersion in the configuration is a precondition.
    let mut stale = config.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let (code, status) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=a"),
        APPLY,
        &stale,
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        r#"Operation cannot be fulfilled on flunders.wardle.example.com "f1": the object has been modified; please apply your changes to the latest version and try again"#
    );

    // YAML bodies are apply bodies too.
    let yaml = "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: f1\nspec:\n  referenceType: Flunder\n  flunderReference: z\n";
    let (code, body) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=a"),
        APPLY,
        &Value::String(yaml.into()),
    )
    .await;
    assert_eq!(code, 200, "{body}");
}

#[tokio::test]
async fn bad_apply_requests_change_nothing() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let f1 = format!("{FLUNDERS}/f1");
    let good = flunder(
        "f1",
        json!({"referenceType": "Flunder", "flunderReference": "x"}),
        json!({}),
    );
    let (code, _) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=a"),
        APPLY,
        &good,
    )
    .await;
    assert_eq!(code, 201);
    let before = get(&client, &f1).await;

    // PatchOptions: an apply needs a field manager (422 on PatchOptions).
    let (code, status) = raw(&client, "PATCH", &f1, APPLY, &good).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}])
    );

    let cases: Vec<(Value, u16, String)> = vec![
        // Not of the kind: the version-check manager's 400.
        (
            json!({"kind": "Flunder", "metadata": {"name": "f1"}}),
            400,
            "invalid object type: /, Kind=Flunder".into(),
        ),
        (
            json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder", "metadata": {"name": "f1"}}),
            400,
            "invalid object type: wardle.example.com/v1alpha1, Kind=Flunder".into(),
        ),
        // Another object than the URL's.
        (
            flunder("other", json!({}), json!({})),
            400,
            "the name of the object (other) does not match the name on the URL (f1)".into(),
        ),
        (
            json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
                "metadata": {"name": "f1", "namespace": "kube-system"}}),
            400,
            "the namespace of the provided object does not match the namespace sent on the request".into(),
        ),
        // Ownership is not the applier's to set.
        (
            json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
                "metadata": {"name": "f1", "managedFields": [{"manager": "x"}]}}),
            400,
            "metadata.managedFields must be nil".into(),
        ),
        // Not a well-formed object of the schema: upstream's typed
        // conversion error (a non-Status error, 500).
        (
            flunder("f1", json!({"nope": 1}), json!({})),
            500,
            "failed to create typed patch object (default/f1; wardle.example.com/v1beta1, Kind=Flunder): .spec.nope: field not declared in schema".into(),
        ),
        (
            flunder("f1", json!(["a"]), json!({})),
            500,
            "failed to create typed patch object (default/f1; wardle.example.com/v1beta1, Kind=Flunder): .spec: expected map, got list".into(),
        ),
    ];
    for (body, want_code, want_message) in cases {
        let (code, status) = raw(
            &client,
            "PATCH",
            &format!("{f1}?fieldManager=a"),
            APPLY,
            &body,
        )
        .await;
        assert_eq!(code, want_code, "{body}: {status}");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["message"], want_message.as_str(), "{body}");
    }
    // A body that is not a map.
    let (code, status) = raw(
        &client,
        "PATCH",
        &format!("{f1}?fieldManager=a"),
        APPLY,
        &Value::String("- a\n- b\n".into()),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("error decoding YAML: "),
        "{status}"
    );
    let after = get(&client, &f1).await;
    assert_eq!(after, before);

    // dryRun=All on a missing object: 201 with the object, nothing stored.
    let (code, body) = raw(
        &client,
        "PATCH",
        &format!("{FLUNDERS}/dry?fieldManager=a&dryRun=All"),
        APPLY,
        &flunder("dry", json!({}), json!({})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["metadata"]["name"], "dry");
    let (code, _) = raw(
        &client,
        "GET",
        &format!("{FLUNDERS}/dry"),
        "application/json",
        &Value::Null,
    )
    .await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn status_subresource_resets_and_user_agent_managers() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let db = format!("{DATABASES}/db1");
    let spec = json!({"engine": "postgres", "version": "16",
        "users": [{"name": "alice", "privileges": ["read"]}]});
    let config = json!({"apiVersion": "showcase.apiforge.dev/v1", "kind": "Database",
        "metadata": {"name": "db1"}, "spec": spec,
        // Status through the main resource is reset, and not owned.
        "status": {"phase": "Running"}});
    let (code, created) = raw(
        &client,
        "PATCH",
        &format!("{db}?fieldManager=owner"),
        APPLY,
        &config,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert!(created["status"].get("phase").is_none(), "{created}");
    assert_eq!(
        entry(&created, "owner")["fieldsV1"],
        json!({"f:spec": {"f:engine": {}, "f:users": {"k:{\"name\":\"alice\"}": {
            ".": {}, "f:name": {}, "f:privileges": {"v:\"read\"": {}}}}, "f:version": {}}})
    );

    // A second applier adds its own item of the associative list.
    let (code, merged) = raw(
        &client,
        "PATCH",
        &format!("{db}?fieldManager=team-b"),
        APPLY,
        &json!({"apiVersion": "showcase.apiforge.dev/v1", "kind": "Database",
            "metadata": {"name": "db1"}, "spec": {"users": [{"name": "bob", "privileges": ["write"]}]}}),
    )
    .await;
    assert_eq!(code, 200, "{merged}");
    let users: Vec<&str> = merged["spec"]["users"]
        .as_array()
        .expect("users")
        .iter()
        .map(|u| u["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(users, ["alice", "bob"]);

    // Apply to /status: an entry with subresource "status", spec untouched.
    let (code, status) = raw(
        &client,
        "PATCH",
        &format!("{db}/status?fieldManager=controller"),
        APPLY,
        &json!({"apiVersion": "showcase.apiforge.dev/v1", "kind": "Database",
            "metadata": {"name": "db1"}, "status": {"phase": "Running", "replicas": 1}}),
    )
    .await;
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["status"]["phase"], "Running");
    let ctl = entry(&status, "controller");
    assert_eq!(ctl["operation"], "Apply");
    assert_eq!(ctl["subresource"], "status");
    assert_eq!(
        ctl["fieldsV1"],
        json!({"f:status": {"f:phase": {}, "f:replicas": {}}})
    );

    // A write without fieldManager is recorded under the user agent's
    // product name.
    let (code, labelled) = raw_as(
        &client,
        "PATCH",
        &db,
        MERGE,
        &json!({"metadata": {"labels": {"x": "1"}}}),
        Some("my-tool/1.2.3 (linux/amd64) build/abc"),
    )
    .await;
    assert_eq!(code, 200, "{labelled}");
    let tool = entry(&labelled, "my-tool");
    assert_eq!(tool["operation"], "Update");
    assert_eq!(
        tool["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:x": {}}}})
    );

    // managedFields: [{}] resets them.
    let (code, reset) = raw(
        &client,
        "PATCH",
        &format!("{db}?fieldManager=resetter"),
        MERGE,
        &json!({"metadata": {"managedFields": [{}]}}),
    )
    .await;
    assert_eq!(code, 200, "{reset}");
    assert!(reset["metadata"].get("managedFields").is_none(), "{reset}");
}

#[tokio::test]
async fn create_and_update_record_update_operations() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let (code, created) = raw(
        &client,
        "POST",
        &format!("{FLUNDERS}?fieldManager=creator"),
        "application/json",
        &flunder(
            "c1",
            json!({"referenceType": "Flunder", "flunderReference": "x"}),
            json!({"a": "1"}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let e = entry(&created, "creator");
    assert_eq!(e["operation"], "Update");
    assert_eq!(e["apiVersion"], "wardle.example.com/v1beta1");
    // Against the kind's empty object: the new labels map is a member
    // ("."), the spec struct that exists empty is not.
    assert_eq!(
        e["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
               "f:spec": {"f:flunderReference": {}, "f:referenceType": {}}})
    );
    // A PUT of the same object changes nothing, not even the time.
    let (code, same) = raw(
        &client,
        "PUT",
        &format!("{FLUNDERS}/c1?fieldManager=creator"),
        "application/json",
        &created,
    )
    .await;
    assert_eq!(code, 200, "{same}");
    assert_eq!(entry(&same, "creator")["time"], e["time"]);
    assert_eq!(
        same["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    // A PUT by someone else records them for what they changed.
    let mut changed = created.clone();
    changed["spec"]["flunderReference"] = json!("y");
    let (code, updated) = raw(
        &client,
        "PUT",
        &format!("{FLUNDERS}/c1?fieldManager=editor"),
        "application/json",
        &changed,
    )
    .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(
        entry(&updated, "editor")["fieldsV1"],
        json!({"f:spec": {"f:flunderReference": {}}})
    );
    assert_eq!(
        entry(&updated, "creator")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:spec": {"f:referenceType": {}}})
    );
}

#[tokio::test]
async fn put_preconditions_from_the_body() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let (code, created) = raw(
        &client,
        "POST",
        FLUNDERS,
        "application/json",
        &flunder("p1", json!({}), json!({})),
    )
    .await;
    assert_eq!(code, 201, "{created}");

    // Without resourceVersion, on a kind that requires one: 422 naming the
    // group-resource, as the generic store builds it.
    let mut body = created.clone();
    body["metadata"]
        .as_object_mut()
        .expect("meta")
        .remove("resourceVersion");
    let (code, status) = raw(
        &client,
        "PUT",
        &format!("{FLUNDERS}/p1"),
        "application/json",
        &body,
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        r#"flunders.wardle.example.com "p1" is invalid: metadata.resourceVersion: Invalid value: "0x0": must be specified for an update"#
    );
    assert_eq!(status["details"]["kind"], "flunders");
    assert_eq!(status["details"]["group"], "wardle.example.com");
    assert_eq!(status["details"]["name"], "p1");

    // A uid other than the stored one fails the UID precondition.
    let mut body = created.clone();
    body["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    body["spec"] = json!({"referenceType": "Flunder", "flunderReference": "x"});
    let (code, status) = raw(
        &client,
        "PUT",
        &format!("{FLUNDERS}/p1"),
        "application/json",
        &body,
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        format!(
            r#"Operation cannot be fulfilled on flunders.wardle.example.com "p1": Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: {}"#,
            created["metadata"]["uid"].as_str().unwrap_or_default()
        )
    );
    let after = get(&client, &format!("{FLUNDERS}/p1")).await;
    assert_eq!(after, created);
}

#[tokio::test]
async fn scale_apply_owns_the_replicas_of_the_object() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let db = format!("{DATABASES}/db2");
    let config = json!({"apiVersion": "showcase.apiforge.dev/v1", "kind": "Database",
        "metadata": {"name": "db2"}, "spec": {"engine": "postgres", "version": "16", "replicas": 2}});
    let (code, created) = raw(
        &client,
        "PATCH",
        &format!("{db}?fieldManager=owner"),
        APPLY,
        &config,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let scale = |replicas: i64| {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "db2", "namespace": "default"}, "spec": {"replicas": replicas}})
    };
    // The applier of the object owns the replicas: an autoscaler's apply
    // of another count conflicts with it.
    let (code, status) = raw(
        &client,
        "PATCH",
        &format!("{db}/scale?fieldManager=autoscaler"),
        APPLY,
        &scale(5),
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        r#"Apply failed with 1 conflict: conflict with "owner": .spec.replicas"#
    );
    // Forced, the autoscaler owns them (an Apply entry with subresource
    // scale) and the object's applier no longer does.
    let (code, scaled) = raw(
        &client,
        "PATCH",
        &format!("{db}/scale?fieldManager=autoscaler&force=true"),
        APPLY,
        &scale(5),
    )
    .await;
    assert_eq!(code, 200, "{scaled}");
    assert_eq!(scaled["kind"], "Scale");
    assert_eq!(scaled["spec"]["replicas"], 5);
    let obj = get(&client, &db).await;
    assert_eq!(obj["spec"]["replicas"], 5);
    let autoscaler = entry(&obj, "autoscaler");
    assert_eq!(autoscaler["operation"], "Apply");
    assert_eq!(autoscaler["subresource"], "scale");
    assert_eq!(
        autoscaler["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(
        entry(&obj, "owner")["fieldsV1"],
        json!({"f:spec": {"f:engine": {}, "f:version": {}}})
    );
    // A later apply of the object without replicas leaves them alone.
    let mut without = config.clone();
    without["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("replicas");
    let (code, kept) = raw(
        &client,
        "PATCH",
        &format!("{db}?fieldManager=owner"),
        APPLY,
        &without,
    )
    .await;
    assert_eq!(code, 200, "{kept}");
    assert_eq!(kept["spec"]["replicas"], 5);
}
