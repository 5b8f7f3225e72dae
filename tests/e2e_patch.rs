//! PATCH (JSON, merge, strategic), deletecollection and fieldValidation
//! against the real binary over HTTPS, through kube-rs and raw requests.

mod common;

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

const FLUNDERS: &str = "/apis/wardle.example.com/v1beta1/namespaces/default/flunders";

fn flunders(client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("wardle.example.com", "v1beta1", "Flunder");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "flunders");
    Api::namespaced_with(client, "default", &ar)
}

fn flunder(name: &str, labels: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "wardle.example.com/v1beta1",
        "kind": "Flunder",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
    }))
    .expect("flunder")
}

fn api_code(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A raw request: status, `Warning` headers, JSON body.
async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Vec<String>, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body.to_vec()))
        .expect("request");
    let resp = client.send(req).await.expect("send");
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .collect();
    let bytes = resp.into_body().collect_bytes().await.expect("body");
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (code, warnings, value)
}

#[tokio::test]
async fn patch_types_through_kube_rs() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let api = flunders(client.clone());
    api.create(&PostParams::default(), &flunder("f1", json!({"a": "1"})))
        .await
        .expect("create");

    // Merge patch.
    let pp = PatchParams::default();
    let out = api
        .patch(
            "f1",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"b": "2", "a": null}}, "spec": {"referenceType": "Flunder", "flunderReference": "x"}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(out.metadata.labels.as_ref().map(|l| l.len()), Some(1));
    assert_eq!(out.data["spec"]["flunderReference"], "x");

    // JSON patch.
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/annotations", "value": {"note": "hi"}},
        {"op": "replace", "path": "/spec/flunderReference", "value": "y"},
    ]))
    .expect("ops");
    let out = api
        .patch("f1", &pp, &Patch::Json::<()>(ops))
        .await
        .expect("json patch");
    assert_eq!(out.data["spec"]["flunderReference"], "y");
    assert_eq!(
        out.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("note"))
            .map(String::as_str),
        Some("hi")
    );

    // Strategic merge patch: maps merge, null deletes.
    let out = api
        .patch(
            "f1",
            &pp,
            &Patch::Strategic(
                json!({"metadata": {"labels": {"c": "3"}, "annotations": {"note": null}}}),
            ),
        )
        .await
        .expect("strategic patch");
    let labels = out.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("b").map(String::as_str), Some("2"));
    assert_eq!(labels.get("c").map(String::as_str), Some("3"));
    assert!(out.metadata.annotations.unwrap_or_default().is_empty());

    // A stale resourceVersion in the patch is a precondition: 409.
    let stale = json!({"metadata": {"resourceVersion": "1"}, "spec": {"flunderReference": "z"}});
    let (code, reason, _) = api_code(
        api.patch("f1", &pp, &Patch::Merge(stale))
            .await
            .expect_err("stale rv"),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    // The current resourceVersion passes.
    let rv = out.metadata.resource_version.clone().unwrap_or_default();
    api.patch(
        "f1",
        &pp,
        &Patch::Merge(
            json!({"metadata": {"resourceVersion": rv}, "spec": {"flunderReference": "z"}}),
        ),
    )
    .await
    .expect("current rv");

    // Missing object: 404.
    let (code, _, msg) = api_code(
        api.patch("nope", &pp, &Patch::Merge(json!({})))
            .await
            .expect_err("missing"),
    );
    assert_eq!(code, 404);
    assert_eq!(msg, "flunders.wardle.example.com \"nope\" not found");

    // A patched object that does not decode: 422 on the patch.
    let (code, reason, msg) = api_code(
        api.patch(
            "f1",
            &pp,
            &Patch::Merge(json!({"spec": {"referenceType": 5}})),
        )
        .await
        .expect_err("invalid"),
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(
        msg.starts_with(" \"\" is invalid: patch: Invalid value: "),
        "{msg}"
    );

    // Dry run answers the patched object without storing it.
    let before = api.get("f1").await.expect("get");
    let dry = api
        .patch(
            "f1",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"metadata": {"labels": {"dry": "run"}}})),
        )
        .await
        .expect("dry run");
    assert!(dry.metadata.labels.unwrap_or_default().contains_key("dry"));
    let after = api.get("f1").await.expect("get");
    assert_eq!(
        before.metadata.resource_version,
        after.metadata.resource_version
    );
    assert!(
        !after
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("dry")
    );
}

#[tokio::test]
async fn patch_errors_on_the_wire() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let api = flunders(client.clone());
    api.create(&PostParams::default(), &flunder("f2", json!({})))
        .await
        .expect("create");
    let item = format!("{FLUNDERS}/f2");

    // Unsupported patch types: 415.
    // (Server-side apply is served since issue #17; the list names it as
    // kube-apiserver's installer does, after the strategic merge patch.)
    for ct in ["application/json", "text/plain"] {
        let (code, _, body) = raw(&client, "PATCH", &item, ct, b"{}").await;
        assert_eq!(code, 415, "{ct}");
        assert_eq!(body["reason"], "UnsupportedMediaType");
        assert_eq!(
            body["message"],
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
        );
    }
    // A charset parameter is ignored.
    let (code, _, _) = raw(
        &client,
        "PATCH",
        &item,
        "application/merge-patch+json; charset=utf-8",
        b"{}",
    )
    .await;
    assert_eq!(code, 200);

    // force on a non-apply patch: 422 on PatchOptions.
    let (code, _, body) = raw(
        &client,
        "PATCH",
        &format!("{item}?force=true"),
        "application/merge-patch+json",
        b"{}",
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );

    // Undecodable patch bodies: 400.
    let (code, _, body) = raw(
        &client,
        "PATCH",
        &item,
        "application/merge-patch+json",
        b"{",
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (400, Some("BadRequest")));
    let (code, _, _) = raw(
        &client,
        "PATCH",
        &item,
        "application/json-patch+json",
        b"{}",
    )
    .await;
    assert_eq!(code, 400);
    let (code, _, _) = raw(
        &client,
        "PATCH",
        &item,
        "application/strategic-merge-patch+json",
        b"[1]",
    )
    .await;
    assert_eq!(code, 400);

    // A JSON patch that does not apply: 422.
    let (code, _, body) = raw(
        &client,
        "PATCH",
        &item,
        "application/json-patch+json",
        br#"[{"op": "remove", "path": "/spec/nothing"}]"#,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "the server rejected our request due to an error in our request"
    );

    // Too many operations: 413.
    let ops: Vec<Value> = (0..10_001)
        .map(|_| json!({"op": "test", "path": "/kind", "value": "Flunder"}))
        .collect();
    let (code, _, body) = raw(
        &client,
        "PATCH",
        &item,
        "application/json-patch+json",
        &serde_json::to_vec(&ops).expect("json"),
    )
    .await;
    assert_eq!(code, 413);
    assert_eq!(
        body["message"],
        "The allowed maximum operations in a JSON patch is 10000, got 10001"
    );

    // Unknown fields in a patch: a warning by default, 422 with Strict.
    let (code, warnings, _) = raw(
        &client,
        "PATCH",
        &item,
        "application/merge-patch+json",
        br#"{"spec": {"foo": 1}}"#,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(warnings, vec![r#"299 - "unknown field \"spec.foo\"""#]);
    let (code, _, body) = raw(
        &client,
        "PATCH",
        &format!("{item}?fieldValidation=Strict"),
        "application/strategic-merge-patch+json",
        br#"{"spec": {"foo": 1}}"#,
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .ends_with("strict decoding error: unknown field \"spec.foo\""),
        "{body}"
    );
}

#[tokio::test]
async fn field_validation_on_create_and_update() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let body = br#"{"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": {"name": "fv", "name": "fv", "bogus": 1}, "spec": {"foo": 1, "bar": 2}}"#;

    // Strict: 400 with every problem.
    let (code, _, status) = raw(
        &client,
        "POST",
        &format!("{FLUNDERS}?fieldValidation=Strict"),
        "application/json",
        body,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        "Flunder in version \"v1beta1\" cannot be handled as a Flunder: strict decoding error: duplicate field \"metadata.name\", unknown field \"metadata.bogus\", unknown field \"spec.foo\", unknown field \"spec.bar\""
    );

    // Invalid directive: 422 on CreateOptions.
    let (code, _, status) = raw(
        &client,
        "POST",
        &format!("{FLUNDERS}?fieldValidation=Loud"),
        "application/json",
        body,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loud\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );

    // Warn (default): created, one Warning header per problem.
    let (code, warnings, _) = raw(&client, "POST", FLUNDERS, "application/json", body).await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        vec![
            r#"299 - "duplicate field \"metadata.name\"""#,
            r#"299 - "unknown field \"metadata.bogus\"""#,
            r#"299 - "unknown field \"spec.foo\"""#,
            r#"299 - "unknown field \"spec.bar\"""#,
        ]
    );

    // Ignore on update: no warnings, unknown fields dropped.
    let rv = flunders(client.clone())
        .get("fv")
        .await
        .expect("get")
        .metadata
        .resource_version
        .unwrap_or_default();
    let put = serde_json::to_vec(
        &json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": {"name": "fv", "resourceVersion": rv}, "spec": {"foo": 1}}),
    )
    .expect("json");
    let put = put.as_slice();
    let (code, warnings, obj) = raw(
        &client,
        "PUT",
        &format!("{FLUNDERS}/fv?fieldValidation=Ignore"),
        "application/json",
        put,
    )
    .await;
    assert_eq!((code, warnings.len()), (200, 0), "{obj}");
    assert!(obj["spec"].get("foo").is_none());
    let (code, _, _) = raw(
        &client,
        "PUT",
        &format!("{FLUNDERS}/fv?fieldValidation=Strict"),
        "application/json",
        put,
    )
    .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn delete_collection_with_selector() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let api = flunders(client.clone());
    for (name, team) in [("a", "red"), ("b", "red"), ("c", "blue")] {
        api.create(
            &PostParams::default(),
            &flunder(name, json!({"team": team})),
        )
        .await
        .expect("create");
    }
    // Dry run deletes nothing.
    let lp = ListParams::default().labels("team=red");
    api.delete_collection(&DeleteParams::default().dry_run(), &lp)
        .await
        .expect("dry run");
    assert_eq!(
        api.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        3
    );

    let deleted = api
        .delete_collection(&DeleteParams::default(), &lp)
        .await
        .expect("deletecollection");
    let list = deleted.left().expect("a list of the deleted objects");
    let mut names: Vec<String> = list
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, vec!["a", "b"]);
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert_eq!(left, vec!["c"]);

    // The raw body is the FlunderList in the request version.
    let (code, _, body) = raw(
        &client,
        "DELETE",
        &format!("{FLUNDERS}?fieldSelector=metadata.name%3Dc"),
        "application/json",
        b"",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(body["kind"], "FlunderList");
    assert_eq!(body["apiVersion"], "wardle.example.com/v1beta1");
    assert_eq!(body["items"][0]["metadata"]["name"], "c");
    assert!(
        api.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
}
