//! REST semantics of issue #5 not covered elsewhere, against the real
//! binary over HTTPS: aggregated discovery asked for alone, ETag/304 on
//! discovery and OpenAPI, `?hash=` immutable caching, delete options and
//! preconditions, finalizers, dry-run deletes, generateName, update of a
//! missing object, and invalid continue tokens.

mod common;

use serde_json::{Value, json};

const FLUNDERS: &str = "/apis/wardle.example.com/v1beta1/namespaces/default/flunders";

/// A response: status, headers, body bytes.
struct Reply {
    code: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    }
}

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Reply {
    let mut req = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = match body {
        Some(b) => {
            req = req.header("Content-Type", "application/json");
            serde_json::to_vec(&b).expect("body")
        }
        None => Vec::new(),
    };
    let resp = client
        .send(req.body(kube::client::Body::from(body)).expect("request"))
        .await
        .expect("send");
    let code = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect_bytes()
        .await
        .expect("body")
        .to_vec();
    Reply {
        code,
        headers,
        body,
    }
}

fn flunder(name: &str, finalizers: &[&str]) -> Value {
    json!({
        "apiVersion": "wardle.example.com/v1beta1",
        "kind": "Flunder",
        "metadata": {"name": name, "finalizers": finalizers},
        "spec": {},
    })
}

#[tokio::test]
async fn aggregated_discovery_alone_and_document_caching() {
    let server = common::Server::start().await;
    let client = server.client().await;
    for version in ["v2", "v2beta1"] {
        let accept =
            format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
        for root in ["/api", "/apis"] {
            let r = send(&client, "GET", root, &[("Accept", &accept)], None).await;
            assert_eq!(
                r.code,
                200,
                "{root} {version}: {}",
                String::from_utf8_lossy(&r.body)
            );
            assert_eq!(r.header("content-type"), accept);
            let doc = r.json();
            assert_eq!(doc["kind"], "APIGroupDiscoveryList");
            assert_eq!(doc["apiVersion"], format!("apidiscovery.k8s.io/{version}"));
            let etag = r.header("etag");
            assert!(!etag.is_empty(), "{root}: no ETag");
            let again = send(
                &client,
                "GET",
                root,
                &[("Accept", &accept), ("If-None-Match", &etag)],
                None,
            )
            .await;
            assert_eq!(again.code, 304, "{root} {version}");
        }
    }
    // Legacy discovery documents: ETag and 304.
    for path in [
        "/api/v1",
        "/apis/wardle.example.com",
        "/apis/wardle.example.com/v1beta1",
    ] {
        let r = send(&client, "GET", path, &[], None).await;
        assert_eq!(r.code, 200, "{path}");
        let etag = r.header("etag");
        let again = send(&client, "GET", path, &[("If-None-Match", &etag)], None).await;
        assert_eq!(again.code, 304, "{path}");
    }
    // OpenAPI v3: the index links each group-version with ?hash=; that
    // URL is immutable, the plain one must be revalidated.
    let index = send(&client, "GET", "/openapi/v3", &[], None).await;
    assert_eq!(index.code, 200);
    let url = index.json()["paths"]["apis/wardle.example.com/v1beta1"]["serverRelativeURL"]
        .as_str()
        .expect("serverRelativeURL")
        .to_string();
    assert!(url.contains("?hash="), "{url}");
    let hashed = send(&client, "GET", &url, &[], None).await;
    assert_eq!(hashed.code, 200);
    assert_eq!(hashed.header("cache-control"), "public, immutable");
    let plain = send(
        &client,
        "GET",
        "/openapi/v3/apis/wardle.example.com/v1beta1",
        &[],
        None,
    )
    .await;
    assert_eq!(plain.header("cache-control"), "no-cache, private");
    let etag = plain.header("etag");
    let again = send(
        &client,
        "GET",
        "/openapi/v3/apis/wardle.example.com/v1beta1",
        &[("If-None-Match", &etag)],
        None,
    )
    .await;
    assert_eq!(again.code, 304);
}

#[tokio::test]
async fn delete_options_preconditions_and_finalizers() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let created = send(
        &client,
        "POST",
        FLUNDERS,
        &[],
        Some(flunder("held", &["example.com/hold"])),
    )
    .await;
    assert_eq!(created.code, 201);
    let obj = created.json();
    let uid = obj["metadata"]["uid"].as_str().expect("uid").to_string();
    let rv = obj["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let path = format!("{FLUNDERS}/held");

    // Preconditions (in the DeleteOptions body): 409 with upstream's message.
    let r = send(
        &client,
        "DELETE",
        &path,
        &[],
        Some(json!({"preconditions": {"uid": "wrong"}})),
    )
    .await;
    assert_eq!(r.code, 409);
    assert_eq!(r.json()["reason"], "Conflict");
    assert_eq!(
        r.json()["message"],
        format!(
            "Operation cannot be fulfilled on flunders.wardle.example.com \"held\": Precondition failed: UID in precondition: wrong, UID in object meta: {uid}"
        )
    );
    let r = send(
        &client,
        "DELETE",
        &path,
        &[],
        Some(json!({"preconditions": {"resourceVersion": "1"}})),
    )
    .await;
    assert_eq!(r.code, 409);
    assert_eq!(
        r.json()["message"],
        format!(
            "Operation cannot be fulfilled on flunders.wardle.example.com \"held\": Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: {rv}"
        )
    );

    // dryRun=All in the query: nothing happens.
    let r = send(&client, "DELETE", &format!("{path}?dryRun=All"), &[], None).await;
    assert_eq!(r.code, 200);
    let got = send(&client, "GET", &path, &[], None).await;
    assert_eq!(got.code, 200);
    assert!(got.json()["metadata"]["deletionTimestamp"].is_null());

    // Finalizers hold the object: it is marked, 200 with the object...
    let r = send(
        &client,
        "DELETE",
        &path,
        &[],
        Some(json!({"preconditions": {"uid": uid}, "propagationPolicy": "Foreground"})),
    )
    .await;
    assert_eq!(r.code, 200, "{}", String::from_utf8_lossy(&r.body));
    let held = r.json();
    assert_eq!(held["kind"], "Flunder");
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    assert_eq!(held["metadata"]["deletionGracePeriodSeconds"], 0);
    // ...and 202 when the client asked for a cascade with orphanDependents=false.
    let r = send(
        &client,
        "DELETE",
        &path,
        &[],
        Some(json!({"orphanDependents": false})),
    )
    .await;
    assert_eq!(r.code, 202, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["metadata"]["name"], "held");

    // Removing the last finalizer deletes it.
    let req = http::Request::patch(path.as_str())
        .header("Content-Type", "application/merge-patch+json")
        .body(kube::client::Body::from(
            br#"{"metadata":{"finalizers":null}}"#.to_vec(),
        ))
        .expect("request");
    let resp = client.send(req).await.expect("patch");
    assert_eq!(resp.status(), 200);
    let gone = send(&client, "GET", &path, &[], None).await;
    assert_eq!(gone.code, 404);
    assert_eq!(
        gone.json()["message"],
        "flunders.wardle.example.com \"held\" not found"
    );

    // Without finalizers: removed at once, 200 with a Success Status.
    send(&client, "POST", FLUNDERS, &[], Some(flunder("plain", &[]))).await;
    let r = send(
        &client,
        "DELETE",
        &format!("{FLUNDERS}/plain?propagationPolicy=Background"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.json()["kind"], "Status");
    assert_eq!(r.json()["status"], "Success");
    assert_eq!(r.json()["details"]["name"], "plain");
}

#[tokio::test]
async fn generate_name_update_of_missing_and_bad_continue() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let mut names = std::collections::BTreeSet::new();
    for _ in 0..5 {
        let r = send(
            &client,
            "POST",
            FLUNDERS,
            &[],
            Some(json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder", "metadata": {"generateName": "gen-"}, "spec": {}})),
        )
        .await;
        assert_eq!(r.code, 201);
        let name = r.json()["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_string();
        assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
        names.insert(name);
    }
    assert_eq!(names.len(), 5);

    // Flunders do not allow create-on-update: PUT of a missing one is 404.
    let r = send(
        &client,
        "PUT",
        &format!("{FLUNDERS}/missing"),
        &[],
        Some(flunder("missing", &[])),
    )
    .await;
    assert_eq!(r.code, 404);
    assert_eq!(r.json()["reason"], "NotFound");
    assert_eq!(
        r.json()["message"],
        "flunders.wardle.example.com \"missing\" not found"
    );

    // limit/continue: two pages, then an invalid token is a 400.
    let first = send(&client, "GET", &format!("{FLUNDERS}?limit=3"), &[], None)
        .await
        .json();
    assert_eq!(first["items"].as_array().map(Vec::len), Some(3));
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_string();
    let second = send(
        &client,
        "GET",
        &format!("{FLUNDERS}?limit=3&continue={token}"),
        &[],
        None,
    )
    .await
    .json();
    assert_eq!(second["items"].as_array().map(Vec::len), Some(2));
    assert!(second["metadata"]["continue"].is_null());
    // remainingItemCount along a walk in pages of 2: 3, 1, then absent.
    let mut counts = Vec::new();
    let mut path = format!("{FLUNDERS}?limit=2");
    loop {
        let page = send(&client, "GET", &path, &[], None).await.json();
        counts.push(page["metadata"]["remainingItemCount"].as_i64());
        match page["metadata"]["continue"].as_str() {
            Some(t) => path = format!("{FLUNDERS}?limit=2&continue={t}"),
            None => break,
        }
    }
    assert_eq!(counts, [Some(3), Some(1), None]);
    let bad = send(
        &client,
        "GET",
        &format!("{FLUNDERS}?limit=3&continue=garbage"),
        &[],
        None,
    )
    .await;
    assert_eq!(bad.code, 400);
    assert_eq!(bad.json()["reason"], "BadRequest");
}

#[tokio::test]
async fn tables_partial_metadata_and_yaml() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let r = send(&client, "POST", FLUNDERS, &[], Some(flunder("t1", &[]))).await;
    assert_eq!(r.code, 201);
    for version in ["v1", "v1beta1"] {
        let accept = format!("application/json;as=Table;v={version};g=meta.k8s.io");
        for (include, check) in [("None", "none"), ("Metadata", "meta"), ("Object", "object")] {
            let r = send(
                &client,
                "GET",
                &format!("{FLUNDERS}?includeObject={include}"),
                &[("Accept", &accept)],
                None,
            )
            .await;
            assert_eq!(r.code, 200, "{version} {include}");
            let table = r.json();
            assert_eq!(table["kind"], "Table");
            assert_eq!(table["apiVersion"], format!("meta.k8s.io/{version}"));
            assert!(
                table["columnDefinitions"]
                    .as_array()
                    .is_some_and(|c| !c.is_empty())
            );
            let row = &table["rows"][0];
            assert_eq!(row["cells"][0], "t1");
            match check {
                "none" => assert!(row["object"].is_null(), "{row}"),
                "meta" => {
                    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
                    assert_eq!(row["object"]["metadata"]["name"], "t1");
                }
                _ => assert_eq!(row["object"]["kind"], "Flunder"),
            }
        }
        let pom = send(
            &client,
            "GET",
            &format!("{FLUNDERS}/t1"),
            &[(
                "Accept",
                &format!("application/json;as=PartialObjectMetadata;v={version};g=meta.k8s.io"),
            )],
            None,
        )
        .await
        .json();
        assert_eq!(pom["kind"], "PartialObjectMetadata");
        assert_eq!(pom["metadata"]["name"], "t1");
        assert!(pom.get("spec").is_none());
        let list = send(
            &client,
            "GET",
            FLUNDERS,
            &[(
                "Accept",
                &format!("application/json;as=PartialObjectMetadataList;v={version};g=meta.k8s.io"),
            )],
            None,
        )
        .await
        .json();
        assert_eq!(list["kind"], "PartialObjectMetadataList");
        assert_eq!(list["items"][0]["metadata"]["name"], "t1");
    }
    let bad = send(
        &client,
        "GET",
        &format!("{FLUNDERS}?includeObject=All"),
        &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        None,
    )
    .await;
    assert_eq!(bad.code, 400, "{}", String::from_utf8_lossy(&bad.body));

    // YAML in and out.
    let req = http::Request::post(FLUNDERS)
        .header("Content-Type", "application/yaml")
        .header("Accept", "application/yaml")
        .body(kube::client::Body::from(
            b"apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: y1\nspec: {}\n".to_vec(),
        ))
        .expect("request");
    let resp = client.send(req).await.expect("yaml create");
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["content-type"], "application/yaml");
    let text = String::from_utf8(
        resp.into_body()
            .collect_bytes()
            .await
            .expect("body")
            .to_vec(),
    )
    .expect("utf8");
    assert!(text.contains("name: y1"), "{text}");
}

/// What no server of the delegation chain serves (a group nobody serves, a
/// version of a served group that does not exist, an unknown top-level path)
/// reaches the NotFound handler: kube-apiserver's 404 Status. An unknown
/// resource of a served group-version is the core server's own 404.
#[tokio::test]
async fn unserved_paths_end_at_the_not_found_handler() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let not_found = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": "the server could not find the requested resource",
        "reason": "NotFound", "details": {}, "code": 404});
    for path in [
        "/apis/nobody.example.com/v1/things",
        "/apis/nobody.example.com/v1",
        "/apis/nobody.example.com",
        "/apis/wardle.example.com/v9/namespaces/default/flunders",
        "/apis/wardle.example.com/v1beta1/namespaces/default/nothings",
        "/nowhere",
    ] {
        let reply = send(&client, "GET", path, &[], None).await;
        assert_eq!(reply.code, 404, "{path}");
        assert_eq!(reply.json(), not_found, "{path}");
    }
}
