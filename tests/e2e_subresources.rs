//! The `/status` and `/scale` subresources end to end (showcase Database):
//! what the main resource and `/status` may each change, generations,
//! optimistic concurrency, dry runs, the autoscaling/v1 Scale round trip,
//! the 404/405/409/422 Status bodies, discovery, and kubectl's
//! `scale`, `get --subresource` and `patch --subresource`.

mod common;

use k8s_openapi::api::autoscaling::v1::Scale;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use common::kubectl::Kubectl;

const DBS: &str = "/apis/showcase.apiforge.dev/v1/namespaces/default/databases";

fn databases(client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("showcase.apiforge.dev", "v1", "Database");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "databases");
    Api::namespaced_with(client, "default", &ar)
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("object")
}

fn database(name: &str, replicas: i64) -> DynamicObject {
    object(json!({
        "apiVersion": "showcase.apiforge.dev/v1", "kind": "Database",
        "metadata": {"name": name},
        "spec": {"engine": "postgres", "version": "16", "replicas": replicas},
        "status": {"phase": "Running", "replicas": 7},
    }))
}

fn json_of(obj: &DynamicObject) -> Value {
    serde_json::to_value(obj).expect("json")
}

/// The error's Status as JSON (what the server sent).
fn status(err: kube::Error) -> Value {
    match err {
        kube::Error::Api(s) => serde_json::to_value(&*s).expect("status json"),
        other => panic!("not an API error: {other:?}"),
    }
}

fn conflict(name: &str) -> Value {
    json!({"status": "Failure", "code": 409, "reason": "Conflict", "metadata": {},
        "message": format!("Operation cannot be fulfilled on databases.showcase.apiforge.dev \"{name}\": the object has been modified; please apply your changes to the latest version and try again"),
        "details": {"name": name, "group": "showcase.apiforge.dev", "kind": "databases"}})
}

fn merge(value: Value) -> Patch<Value> {
    Patch::Merge(value)
}

/// A raw request: status code and JSON body.
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Accept", "application/json");
    let bytes = match body {
        Some(b) => {
            req = req.header("Content-Type", "application/json");
            serde_json::to_vec(&b).expect("json")
        }
        None => Vec::new(),
    };
    let resp = client
        .send(req.body(bytes).expect("request").map(Into::into))
        .await
        .expect("send");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await.expect("body");
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn status_is_written_only_through_status() {
    let server = common::Server::start().await;
    let api = databases(server.client().await);

    // create drops status; generation starts at 1
    let created = json_of(
        &api.create(&PostParams::default(), &database("db", 1))
            .await
            .expect("create"),
    );
    assert!(created.get("status").is_none(), "{created}");
    assert_eq!(created["metadata"]["generation"], 1);

    // GET /status is the whole object
    let got = json_of(&api.get_status("db").await.expect("get_status"));
    assert_eq!(got, created);

    // PUT /status: only status changes (spec, labels and annotations of the
    // body are ignored, as the CRD status strategy); generation unchanged
    let mut body = created.clone();
    body["spec"]["version"] = json!("17");
    body["metadata"]["labels"] = json!({"team": "a"});
    body["metadata"]["annotations"] = json!({"note": "x"});
    body["status"] = json!({"phase": "Running", "replicas": 1, "selector": "app=db"});
    let replaced = json_of(
        &api.replace_status("db", &PostParams::default(), &object(body))
            .await
            .expect("replace_status"),
    );
    assert_eq!(
        replaced["status"],
        json!({"phase": "Running", "replicas": 1, "selector": "app=db"})
    );
    assert_eq!(replaced["spec"], created["spec"]);
    assert!(replaced["metadata"].get("labels").is_none(), "{replaced}");
    assert!(
        replaced["metadata"].get("annotations").is_none(),
        "{replaced}"
    );
    assert_eq!(replaced["metadata"]["generation"], 1);
    assert_ne!(
        replaced["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );

    // PATCH /status (merge): status merges, the rest is ignored
    let patched = json_of(
        &api.patch_status(
            "db",
            &PatchParams::default(),
            &merge(
                json!({"status": {"phase": "Failed"}, "spec": {"replicas": 2},
                "metadata": {"labels": {"team": "b"}}}),
            ),
        )
        .await
        .expect("patch_status"),
    );
    assert_eq!(
        patched["status"],
        json!({"phase": "Failed", "replicas": 1, "selector": "app=db"})
    );
    assert_eq!(patched["spec"]["replicas"], 1);
    assert!(patched["metadata"].get("labels").is_none(), "{patched}");
    assert_eq!(patched["metadata"]["generation"], 1);

    // strategic merge and JSON patches work on /status too
    let smp = json_of(
        &api.patch_status(
            "db",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            ),
        )
        .await
        .expect("strategic patch_status"),
    );
    assert_eq!(
        smp["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}])
    );
    let jp: json_patch::Patch = serde_json::from_value(
        json!([{"op": "replace", "path": "/status/phase", "value": "Pending"}]),
    )
    .expect("json patch");
    let jsonpatched = json_of(
        &api.patch_status("db", &PatchParams::default(), &Patch::<Value>::Json(jp))
            .await
            .expect("json patch_status"),
    );
    assert_eq!(jsonpatched["status"]["phase"], "Pending");

    // the main resource ignores status changes; a spec change bumps the
    // generation
    let mut body = jsonpatched.clone();
    body["status"] = json!({"phase": "Running"});
    body["spec"]["replicas"] = json!(2);
    let updated = json_of(
        &api.replace("db", &PostParams::default(), &object(body))
            .await
            .expect("replace"),
    );
    assert_eq!(updated["status"], jsonpatched["status"]);
    assert_eq!(updated["spec"]["replicas"], 2);
    assert_eq!(updated["metadata"]["generation"], 2);
    let main_patched = json_of(
        &api.patch(
            "db",
            &PatchParams::default(),
            &merge(json!({"status": {"phase": "Running"}, "metadata": {"labels": {"team": "c"}}})),
        )
        .await
        .expect("patch"),
    );
    assert_eq!(main_patched["status"], jsonpatched["status"]);
    assert_eq!(main_patched["metadata"]["labels"], json!({"team": "c"}));
    assert_eq!(main_patched["metadata"]["generation"], 2);

    // a stale resourceVersion on /status is a conflict
    let err = api
        .replace_status("db", &PostParams::default(), &object(replaced.clone()))
        .await
        .expect_err("stale resourceVersion");
    assert_eq!(status(err), conflict("db"));

    // a dry run answers the result and stores nothing
    let dry = json_of(
        &api.patch_status(
            "db",
            &PatchParams::default().dry_run(),
            &merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .expect("dry-run patch_status"),
    );
    assert_eq!(dry["status"]["phase"], "Failed");
    let now = json_of(&api.get("db").await.expect("get"));
    assert_eq!(now["status"]["phase"], "Pending");
    assert_eq!(
        now["metadata"]["resourceVersion"],
        main_patched["metadata"]["resourceVersion"]
    );

    // the status is validated (422 on the kind) and strictly decoded
    let err = api
        .patch_status(
            "db",
            &PatchParams::default(),
            &merge(json!({"status": {"phase": "Sleeping"}})),
        )
        .await
        .expect_err("invalid phase");
    let s = status(err);
    assert_eq!(s["code"], 422, "{s}");
    assert_eq!(s["details"]["causes"][0]["field"], "status.phase", "{s}");
    let mut body = now.clone();
    body["status"]["bogus"] = json!(1);
    let (code, body) = send(
        &server.client().await,
        "PUT",
        &format!("{DBS}/db/status?fieldValidation=Strict"),
        Some(body),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "Database in version \"v1\" cannot be handled as a Database: strict decoding error: unknown field \"status.bogus\""
    );
}

#[tokio::test]
async fn scale_round_trip() {
    let server = common::Server::start().await;
    let api = databases(server.client().await);
    api.create(&PostParams::default(), &database("db", 2))
        .await
        .expect("create");
    let with_status = json_of(
        &api.patch_status(
            "db",
            &PatchParams::default(),
            &merge(json!({"status": {"phase": "Running", "replicas": 1, "selector": "app=db"}})),
        )
        .await
        .expect("patch_status"),
    );
    let meta = &with_status["metadata"];

    let scale = api.get_scale("db").await.expect("get_scale");
    assert_eq!(
        serde_json::to_value(&scale).expect("json"),
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "db", "namespace": "default", "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"],
                "creationTimestamp": meta["creationTimestamp"]},
            "spec": {"replicas": 2},
            "status": {"replicas": 1, "selector": "app=db"}})
    );

    // PUT /scale writes spec.replicas (the Scale's resourceVersion is a
    // precondition); generation grows, status stays
    let mut want = scale.clone();
    want.spec.get_or_insert_default().replicas = Some(3);
    let scaled = api
        .replace_scale("db", &PostParams::default(), &want)
        .await
        .expect("replace_scale");
    assert_eq!(scaled.spec.as_ref().and_then(|s| s.replicas), Some(3));
    let parent = json_of(&api.get("db").await.expect("get"));
    assert_eq!(parent["spec"]["replicas"], 3);
    assert_eq!(parent["metadata"]["generation"], 2);
    assert_eq!(parent["status"], with_status["status"]);
    assert_eq!(
        scaled.metadata.resource_version.as_deref(),
        parent["metadata"]["resourceVersion"].as_str()
    );

    // a stale resourceVersion is a conflict
    let err = api
        .replace_scale("db", &PostParams::default(), &want)
        .await
        .expect_err("stale scale");
    assert_eq!(status(err), conflict("db"));

    // PATCH /scale
    let patched = api
        .patch_scale(
            "db",
            &PatchParams::default(),
            &merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("patch_scale");
    assert_eq!(patched.spec.as_ref().and_then(|s| s.replicas), Some(4));
    assert_eq!(
        patched.status.as_ref().map(|s| s.replicas),
        Some(1),
        "{patched:?}"
    );
    let dry = api
        .patch_scale(
            "db",
            &PatchParams::default().dry_run(),
            &merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("dry-run patch_scale");
    assert_eq!(dry.spec.as_ref().and_then(|s| s.replicas), Some(5));
    assert_eq!(
        json_of(&api.get("db").await.expect("get"))["spec"]["replicas"],
        4
    );

    // negative replicas: 422 on Scale.autoscaling
    let mut negative: Scale = serde_json::from_value(json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "db", "namespace": "default"}, "spec": {"replicas": -1}}))
    .expect("scale");
    let err = api
        .replace_scale("db", &PostParams::default(), &negative)
        .await
        .expect_err("negative replicas");
    assert_eq!(
        status(err),
        json!({"status": "Failure", "code": 422, "reason": "Invalid", "metadata": {},
            "message": "Scale.autoscaling \"db\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "details": {"name": "db", "group": "autoscaling", "kind": "Scale",
                "causes": [{"reason": "FieldValueInvalid", "field": "spec.replicas",
                    "message": "Invalid value: -1: must be greater than or equal to 0"}]}})
    );
    // the kind's own rules still apply (Database replicas are 1..=9)
    negative.spec.get_or_insert_default().replicas = Some(10);
    let err = api
        .replace_scale("db", &PostParams::default(), &negative)
        .await
        .expect_err("too many replicas");
    let s = status(err);
    assert_eq!(s["code"], 422, "{s}");
    assert_eq!(s["details"]["kind"], "Database", "{s}");
    assert_eq!(s["details"]["causes"][0]["field"], "spec.replicas", "{s}");

    // strict field validation of Scale bodies and patches
    let client = server.client().await;
    let (code, body) = send(
        &client,
        "PUT",
        &format!("{DBS}/db/scale?fieldValidation=Strict"),
        Some(json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "db", "namespace": "default"}, "spec": {"replicas": 2, "bogus": 1}})),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "Scale in version \"v1\" cannot be handled as a Scale: strict decoding error: unknown field \"spec.bogus\""
    );
    let err = api
        .patch_scale(
            "db",
            &PatchParams {
                field_validation: Some(kube::api::ValidationDirective::Strict),
                ..Default::default()
            },
            &merge(json!({"spec": {"replicas": 2, "bogus": 1}})),
        )
        .await
        .expect_err("strict patch");
    let s = status(err);
    assert_eq!(s["code"], 422, "{s}");
    assert_eq!(s["details"]["causes"][0]["field"], "patch", "{s}");
    // a Scale of another API version is refused
    let (code, body) = send(
        &client,
        "PUT",
        &format!("{DBS}/db/scale"),
        Some(json!({"apiVersion": "autoscaling/v2", "kind": "Scale", "spec": {"replicas": 2}})),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "the API version in the data (autoscaling/v2) does not match the expected API version (autoscaling/v1)"
    );

    // a missing object
    let err = api.get_scale("nope").await.expect_err("missing");
    assert_eq!(
        status(err),
        json!({"status": "Failure", "code": 404, "reason": "NotFound", "metadata": {},
            "message": "databases.showcase.apiforge.dev \"nope\" not found",
            "details": {"name": "nope", "group": "showcase.apiforge.dev", "kind": "databases"}})
    );
}

#[tokio::test]
async fn unserved_subresources_and_verbs() {
    let server = common::Server::start().await;
    let client = server.client().await;
    databases(client.clone())
        .create(&PostParams::default(), &database("db", 1))
        .await
        .expect("create");
    let not_found = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server could not find the requested resource", "reason": "NotFound",
        "details": {}, "code": 404});
    let not_allowed = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server does not allow this method on the requested resource",
        "reason": "MethodNotAllowed", "details": {}, "code": 405});
    for path in [
        // wardle Flunders have no subresources
        "/apis/wardle.example.com/v1beta1/namespaces/default/flunders/f/status".to_string(),
        "/apis/wardle.example.com/v1beta1/namespaces/default/flunders/f/scale".to_string(),
        // v1alpha1 Databases have status but no scale
        "/apis/showcase.apiforge.dev/v1alpha1/namespaces/default/databases/db/scale".to_string(),
        format!("{DBS}/db/bogus"),
        // no watch route on a subresource
        "/apis/showcase.apiforge.dev/v1/watch/namespaces/default/databases/db/status".to_string(),
    ] {
        assert_eq!(
            send(&client, "GET", &path, None).await,
            (404, not_found.clone()),
            "{path}"
        );
    }
    let (code, _) = send(
        &client,
        "GET",
        "/apis/showcase.apiforge.dev/v1alpha1/namespaces/default/databases/db/status",
        None,
    )
    .await;
    assert_eq!(code, 200);
    for (method, sub) in [
        ("DELETE", "status"),
        ("POST", "status"),
        ("DELETE", "scale"),
        ("POST", "scale"),
    ] {
        let body = (method == "POST").then(|| json!({}));
        assert_eq!(
            send(&client, method, &format!("{DBS}/db/{sub}"), body).await,
            (405, not_allowed.clone()),
            "{method} {sub}"
        );
    }
}

#[tokio::test]
async fn discovery_lists_the_subresources() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let (code, list) = send(&client, "GET", "/apis/showcase.apiforge.dev/v1", None).await;
    assert_eq!(code, 200);
    let names: Vec<&str> = list["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["databases", "databases/status", "databases/scale"]);
    assert_eq!(
        list["resources"][1],
        json!({"name": "databases/status", "singularName": "", "namespaced": true,
            "kind": "Database", "verbs": ["get", "patch", "update"]})
    );
    assert_eq!(
        list["resources"][2],
        json!({"name": "databases/scale", "singularName": "", "namespaced": true,
            "group": "autoscaling", "version": "v1", "kind": "Scale",
            "verbs": ["get", "patch", "update"]})
    );

    let doc = client
        .list_api_groups_aggregated()
        .await
        .expect("aggregated discovery");
    let doc = serde_json::to_value(&doc).expect("discovery json");
    let group = doc["items"]
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find(|g| g["metadata"]["name"] == "showcase.apiforge.dev")
        })
        .expect("showcase group");
    let v1 = group["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["version"] == "v1"))
        .expect("v1");
    // (kube-rs adds the empty `acceptedTypes` the server leaves out)
    assert_eq!(
        v1["resources"][0]["subresources"],
        json!([
            {"subresource": "status", "responseKind": {"group": "showcase.apiforge.dev", "version": "v1", "kind": "Database"}, "acceptedTypes": [], "verbs": ["get", "patch", "update"]},
            {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "acceptedTypes": [], "verbs": ["get", "patch", "update"]},
        ])
    );
}

#[tokio::test]
async fn kubectl_scale_and_subresource_flags() {
    let server = common::Server::start().await;
    let api = databases(server.client().await);
    api.create(&PostParams::default(), &database("db", 1))
        .await
        .expect("create");
    let k = Kubectl::with_binary(&server, common::kubectl::versioned_binary("1.33"));

    let out = k.ok(&["scale", "database", "db", "--replicas=3"]);
    assert_eq!(out.trim(), "database.showcase.apiforge.dev/db scaled");
    let parent = json_of(&api.get("db").await.expect("get"));
    assert_eq!(parent["spec"]["replicas"], 3);
    assert_eq!(parent["metadata"]["generation"], 2);

    // --current-replicas reads /scale first and updates it with its
    // resourceVersion as a precondition
    let out = k.ok(&[
        "scale",
        "database",
        "db",
        "--current-replicas=3",
        "--replicas=2",
    ]);
    assert_eq!(out.trim(), "database.showcase.apiforge.dev/db scaled");
    let wrong = k.run(&[
        "scale",
        "database",
        "db",
        "--current-replicas=5",
        "--replicas=4",
    ]);
    assert!(!wrong.status.success());
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        stderr.contains("Expected replicas to be 5, was 2"),
        "{stderr}"
    );
    let out = k.ok(&["scale", "database", "db", "--replicas=3"]);
    assert_eq!(out.trim(), "database.showcase.apiforge.dev/db scaled");
    assert_eq!(
        json_of(&api.get("db").await.expect("get"))["metadata"]["generation"],
        4
    );

    let out = k.ok(&[
        "patch",
        "database",
        "db",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running","replicas":3},"spec":{"replicas":5}}"#,
    ]);
    assert_eq!(out.trim(), "database.showcase.apiforge.dev/db patched");

    let got: Value = serde_json::from_str(&k.ok(&[
        "get",
        "database",
        "db",
        "--subresource=status",
        "-o",
        "json",
    ]))
    .expect("kubectl get -o json");
    assert_eq!(got["status"], json!({"phase": "Running", "replicas": 3}));
    assert_eq!(got["spec"]["replicas"], 3);
    assert_eq!(got["metadata"]["generation"], 4);

    let scale: Value = serde_json::from_str(&k.ok(&[
        "get",
        "database",
        "db",
        "--subresource=scale",
        "-o",
        "json",
    ]))
    .expect("kubectl get scale -o json");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"], json!({"replicas": 3}));
    assert_eq!(scale["status"], json!({"replicas": 3}));

    // the default table output of a subresource
    let table = k.ok(&["get", "database", "db", "--subresource=scale"]);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("\ndb "), "{table}");
}
