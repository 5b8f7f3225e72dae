//! REST consistency semantics of issue #5 against the real binary over
//! HTTPS: dry-run updates, patches and deletes (validated, answered with
//! what would have been stored, never persisted), `resourceVersionMatch`,
//! expired continue tokens and watches after storage compaction
//! (`--etcd-compaction-interval`) or past the watch cache window, and the
//! Table columns kube-apiserver prints for ConfigMaps, Secrets and
//! Namespaces.

mod common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A response: status and body bytes.
struct Reply {
    code: u16,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<Value>,
) -> Reply {
    let mut req = http::Request::builder().method(method).uri(path);
    let body = match body {
        Some(b) => {
            req = req.header("Content-Type", content_type);
            serde_json::to_vec(&b).expect("body")
        }
        None => Vec::new(),
    };
    let resp = client
        .send(req.body(kube::client::Body::from(body)).expect("request"))
        .await
        .expect("send");
    let code = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect_bytes()
        .await
        .expect("body")
        .to_vec();
    Reply { code, body }
}

async fn get(client: &kube::Client, path: &str) -> Reply {
    send(client, "GET", path, "", None).await
}

async fn post(client: &kube::Client, path: &str, body: Value) -> Value {
    let r = send(client, "POST", path, "application/json", Some(body)).await;
    assert_eq!(r.code, 201, "POST {path}: {}", r.text());
    r.json()
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| {
                    i["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn rv(obj: &Value) -> i64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {obj}"))
}

fn invalid_options(kind: &str, field: &str, reason: &str, detail: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("{kind}.meta.k8s.io \"\" is invalid: {field}: {detail}"),
        "reason": "Invalid",
        "details": {
            "group": "meta.k8s.io",
            "kind": kind,
            "causes": [{"reason": reason, "message": detail, "field": field}],
        },
        "code": 422,
    })
}

const BAD_KEY: &str = "Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// An object without `metadata.managedFields`.
fn without_managed(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    out
}

#[tokio::test]
async fn dry_run_update_patch_and_delete_persist_nothing() {
    let server = common::Server::start().await;
    let client = server.client().await;
    post(
        &client,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dry"}}),
    )
    .await;
    let coll = "/api/v1/namespaces/dry/configmaps";
    let path = format!("{coll}/cfg");
    let orig = post(
        &client,
        coll,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}}),
    )
    .await;
    let start = rv(&orig);
    let with_data = |data: Value| {
        let mut o = orig.clone();
        o["data"] = data;
        o
    };

    // PUT: the answer is what would have been stored, at the same version.
    let dry = format!("{path}?dryRun=All");
    let update = with_data(json!({"a": "2", "b": "3"}));
    let r = send(
        &client,
        "PUT",
        &dry,
        "application/json",
        Some(update.clone()),
    )
    .await;
    // What would have been stored includes the writer's ownership of what
    // it changed (managedFields are compared on their own).
    let answer = r.json();
    assert_eq!(
        (r.code, without_managed(&answer)),
        (200, without_managed(&update))
    );
    assert_eq!(
        answer["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}})
    );

    // Patches of every type.
    for (ct, patch, data) in [
        (
            "application/merge-patch+json",
            json!({"data": {"m": "x"}}),
            json!({"a": "1", "m": "x"}),
        ),
        (
            "application/json-patch+json",
            json!([{"op": "add", "path": "/data/j", "value": "y"}]),
            json!({"a": "1", "j": "y"}),
        ),
        (
            "application/strategic-merge-patch+json",
            json!({"data": {"s": "z"}}),
            json!({"a": "1", "s": "z"}),
        ),
    ] {
        let r = send(&client, "PATCH", &dry, ct, Some(patch)).await;
        assert_eq!(
            (r.code, without_managed(&r.json())),
            (200, without_managed(&with_data(data))),
            "{ct}"
        );
    }

    // Validation still runs: an invalid object is a 422.
    let invalid = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("ConfigMap \"cfg\" is invalid: data[bad key]: {BAD_KEY}"),
        "reason": "Invalid",
        "details": {
            "name": "cfg",
            "kind": "ConfigMap",
            "causes": [{"reason": "FieldValueInvalid", "message": BAD_KEY, "field": "data[bad key]"}],
        },
        "code": 422,
    });
    let bad = with_data(json!({"bad key": "x"}));
    let r = send(&client, "PUT", &dry, "application/json", Some(bad)).await;
    assert_eq!((r.code, r.json()), (422, invalid.clone()));
    let r = send(
        &client,
        "PATCH",
        &dry,
        "application/merge-patch+json",
        Some(json!({"data": {"bad key": "x"}})),
    )
    .await;
    assert_eq!((r.code, r.json()), (422, invalid));

    // Deletes: the Status (or the list) of what would have been deleted.
    let r = send(&client, "DELETE", &dry, "", None).await;
    assert_eq!(
        (r.code, r.json()),
        (
            200,
            json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {"name": "cfg", "kind": "configmaps", "uid": orig["metadata"]["uid"]},
            })
        )
    );
    let r = send(&client, "DELETE", &format!("{coll}?dryRun=All"), "", None).await;
    assert_eq!(r.code, 200, "{}", r.text());
    let list = r.json();
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["items"], json!([orig]));

    // An unknown dry-run value is refused for each verb.
    for (method, url, kind) in [
        ("PUT", path.clone(), "UpdateOptions"),
        ("PATCH", path.clone(), "PatchOptions"),
        ("DELETE", path.clone(), "DeleteOptions"),
        ("DELETE", coll.to_string(), "DeleteOptions"),
    ] {
        let (ct, body) = match method {
            "PUT" => ("application/json", Some(orig.clone())),
            "PATCH" => ("application/merge-patch+json", Some(json!({}))),
            _ => ("", None),
        };
        let r = send(&client, method, &format!("{url}?dryRun=Foo"), ct, body).await;
        assert_eq!(
            (r.code, r.json()),
            (
                422,
                invalid_options(
                    kind,
                    "dryRun",
                    "FieldValueNotSupported",
                    "Unsupported value: [\"Foo\"]: supported values: \"All\""
                )
            ),
            "{method} {url}"
        );
    }

    // Nothing was persisted: the object is unchanged and no event was sent.
    let r = get(&client, &path).await;
    assert_eq!((r.code, r.json()), (200, orig));
    let r = get(
        &client,
        &format!("{coll}?watch=1&resourceVersion={start}&timeoutSeconds=1"),
    )
    .await;
    assert_eq!((r.code, r.text()), (200, String::new()));
}

#[tokio::test]
async fn resource_version_match() {
    let server = common::Server::start().await;
    let client = server.client().await;
    post(
        &client,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rvm"}}),
    )
    .await;
    let coll = "/api/v1/namespaces/rvm/configmaps";
    post(&client, coll, json!({"metadata": {"name": "first"}})).await;
    let at = rv(&get(&client, coll).await.json());
    post(&client, coll, json!({"metadata": {"name": "second"}})).await;

    // Exact: the list as it was at that revision.
    let r = get(
        &client,
        &format!("{coll}?resourceVersion={at}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text());
    let list = r.json();
    assert_eq!(names(&list), ["first"]);
    assert_eq!(rv(&list), at);
    // NotOlderThan: at least that fresh.
    for query in [
        format!("resourceVersion={at}&resourceVersionMatch=NotOlderThan"),
        "resourceVersion=0&resourceVersionMatch=NotOlderThan".to_string(),
    ] {
        let r = get(&client, &format!("{coll}?{query}")).await;
        assert_eq!(r.code, 200, "{query}: {}", r.text());
        assert_eq!(names(&r.json()), ["first", "second"], "{query}");
        assert!(rv(&r.json()) > at, "{query}");
    }

    // ValidateListOptions.
    for (query, reason, detail) in [
        (
            "resourceVersionMatch=Exact",
            "FieldValueForbidden",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersionMatch=NotOlderThan",
            "FieldValueForbidden",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersionMatch=Exact&resourceVersion=0",
            "FieldValueForbidden",
            "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        ),
        (
            "resourceVersionMatch=Foo&resourceVersion=1",
            "FieldValueNotSupported",
            "Unsupported value: \"Foo\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
        ),
    ] {
        let r = get(&client, &format!("{coll}?{query}")).await;
        assert_eq!(
            (r.code, r.json()),
            (
                422,
                invalid_options("ListOptions", "resourceVersionMatch", reason, detail)
            ),
            "{query}"
        );
    }

    // Beyond the current revision: 504 after the freshness wait.
    let future = at + 1_000_000;
    for query in [
        format!("resourceVersion={future}"),
        format!("resourceVersion={future}&resourceVersionMatch=NotOlderThan"),
    ] {
        // Raw: kube's client would retry the 504.
        let r = common::raw::request(&server, "GET", &format!("{coll}?{query}"), &[], b"").await;
        let mut body = r.json();
        let message = body["message"].as_str().unwrap_or_default().to_string();
        let prefix = format!("Timeout: Too large resource version: {future}, current: ");
        let current: i64 = message
            .strip_prefix(&prefix)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("{query}: {message}"));
        assert!(current > at && current < future, "{message}");
        body["message"] = json!("");
        assert_eq!(
            (r.status, body),
            (
                504,
                json!({
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "",
                    "reason": "Timeout",
                    "details": {
                        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                        "retryAfterSeconds": 1,
                    },
                    "code": 504,
                })
            ),
            "{query}"
        );
    }
}

/// The JSON inside a continue token (unpadded base64url).
fn decode_token(token: &str) -> Value {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let (mut bits, mut n, mut bytes) = (0u32, 0, Vec::new());
    for c in token.bytes() {
        let v = ALPHABET
            .iter()
            .position(|&a| a == c)
            .unwrap_or_else(|| panic!("token {token}: not base64url"));
        bits = (bits << 6) | v as u32;
        n += 6;
        if n >= 8 {
            n -= 8;
            bytes.push((bits >> n) as u8);
        }
    }
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("token {token}: {e}"))
}

/// Retries a GET until it answers `code` (compaction runs every second).
async fn eventually(client: &kube::Client, path: &str, code: u16) -> Reply {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = get(client, path).await;
        if r.code == code || Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn compaction_expires_continue_tokens_and_watches() {
    let etcd = common::Etcd::start().await;
    // ConfigMaps are read from etcd directly, Flunders through a watch cache
    // keeping the last two events.
    let server = common::Server::start_with(&[
        "--etcd-servers",
        &etcd.url,
        "--etcd-compaction-interval",
        "1s",
        "--watch-cache-sizes",
        "configmaps#0,flunders.wardle.example.com#2",
    ])
    .await;
    let client = server.client().await;
    let flunders = "/apis/wardle.example.com/v1beta1/namespaces/default/flunders";
    let configmaps = "/api/v1/namespaces/default/configmaps";
    for coll in [flunders, configmaps] {
        let mut created = Vec::new();
        for name in ["a", "b", "c"] {
            let body = if coll == flunders {
                json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder", "metadata": {"name": name}, "spec": {}})
            } else {
                json!({"metadata": {"name": name}})
            };
            created.push(rv(&post(&client, coll, body).await));
        }
        let first = get(&client, &format!("{coll}?limit=1")).await.json();
        assert_eq!(names(&first), ["a"], "{coll}");
        let token = first["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let at = rv(&first);
        let body = if coll == flunders {
            json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder", "metadata": {"name": "d"}, "spec": {}})
        } else {
            json!({"metadata": {"name": "d"}})
        };
        post(&client, coll, body).await;

        // Once compacted past the first page, the token is gone; the 410
        // offers an inconsistent continuation.
        let r = eventually(&client, &format!("{coll}?limit=1&continue={token}"), 410).await;
        let mut status = r.json();
        let fresh = status["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut expected_token = decode_token(&token);
        expected_token["rv"] = json!(-1);
        assert_eq!(decode_token(&fresh), expected_token, "{coll}");
        status["metadata"]["continue"] = json!("");
        assert_eq!(
            (r.code, status),
            (
                410,
                json!({
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {"continue": ""},
                    "status": "Failure",
                    "message": "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    "reason": "Expired",
                    "code": 410,
                })
            ),
            "{coll}"
        );
        // The inconsistent continuation lists the rest at the latest revision.
        let r = get(&client, &format!("{coll}?limit=10&continue={fresh}")).await;
        assert_eq!(r.code, 200, "{coll}: {}", r.text());
        let rest = r.json();
        assert_eq!(names(&rest), ["b", "c", "d"], "{coll}");
        assert!(rest["metadata"].get("continue").is_none(), "{rest}");
        assert!(rv(&rest) > at);

        // An exact list at the compacted revision.
        let r = get(
            &client,
            &format!("{coll}?resourceVersion={at}&resourceVersionMatch=Exact"),
        )
        .await;
        assert_eq!(
            (r.code, r.json()),
            (
                410,
                json!({
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "The resourceVersion for the provided list is too old.",
                    "reason": "Expired",
                    "code": 410,
                })
            ),
            "{coll}"
        );

        // A watch from before the window: 200 and one ERROR event.
        let r = get(
            &client,
            &format!(
                "{coll}?watch=1&resourceVersion={}&timeoutSeconds=5",
                created[0]
            ),
        )
        .await;
        let message = if coll == flunders {
            // The cache keeps the events of c and d: b is the oldest
            // revision it can resume after.
            format!("too old resource version: {} ({})", created[0], created[1])
        } else {
            "The resourceVersion for the provided watch is too old.".to_string()
        };
        let event = json!({
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": "Expired",
                "code": 410,
            },
        });
        assert_eq!(r.code, 200, "{coll}");
        let lines: Vec<Value> = r
            .text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
            .collect();
        assert_eq!(lines, [event], "{coll}");
    }
}

fn age_ok(cell: &Value) -> bool {
    cell.as_str().is_some_and(|s| {
        s.strip_suffix('s')
            .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n < 120))
    })
}

#[tokio::test]
async fn core_kind_tables() {
    let server = common::Server::start().await;
    let client = server.client().await;
    post(
        &client,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tables"}}),
    )
    .await;
    post(
        &client,
        "/api/v1/namespaces/tables/configmaps",
        json!({"metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}),
    )
    .await;
    post(
        &client,
        "/api/v1/namespaces/tables/secrets",
        json!({"metadata": {"name": "sec"}, "data": {"x": "eA=="}, "stringData": {"y": "z"}, "type": "Opaque"}),
    )
    .await;

    let name = json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names", "priority": 0});
    let age = json!({"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata", "priority": 0});
    let col = |n: &str, d: &str| json!({"name": n, "type": "string", "format": "", "description": d, "priority": 0});
    let cases = [
        (
            "/api/v1/namespaces/tables/configmaps",
            json!([
                name,
                col(
                    "Data",
                    "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process."
                ),
                age
            ]),
            json!([["cm", 3]]),
        ),
        (
            "/api/v1/namespaces/tables/secrets",
            json!([
                name,
                col(
                    "Type",
                    "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"
                ),
                col(
                    "Data",
                    "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4"
                ),
                age
            ]),
            json!([["sec", "Opaque", 2]]),
        ),
        (
            "/api/v1/namespaces?fieldSelector=metadata.name%3Dtables",
            json!([name, col("Status", "The status of the namespace"), age]),
            json!([["tables", "Active"]]),
        ),
    ];
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io";
    for (path, columns, rows) in cases {
        let req = http::Request::get(path)
            .header("Accept", accept)
            .body(Vec::new())
            .expect("request");
        let table: Value = client.request(req).await.expect("table");
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["columnDefinitions"], columns, "{path}");
        let cells: Vec<Value> = table["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|row| {
                let mut cells = row["cells"].as_array().cloned().unwrap_or_default();
                let age = cells.pop().unwrap_or(Value::Null);
                assert!(age_ok(&age), "{path}: age {age}");
                Value::Array(cells)
            })
            .collect();
        assert_eq!(Value::Array(cells), rows, "{path}");
    }

    // kubectl prints the same columns.
    let kubectl = common::kubectl::Kubectl::new(&server);
    for (args, header, row) in [
        (
            vec!["get", "configmaps", "-n", "tables"],
            vec!["NAME", "DATA", "AGE"],
            vec!["cm", "3"],
        ),
        (
            vec!["get", "secrets", "-n", "tables"],
            vec!["NAME", "TYPE", "DATA", "AGE"],
            vec!["sec", "Opaque", "2"],
        ),
        (
            vec!["get", "namespace", "tables"],
            vec!["NAME", "STATUS", "AGE"],
            vec!["tables", "Active"],
        ),
    ] {
        let out = kubectl.ok(&args);
        let lines: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines.len(), 2, "{args:?}: {out}");
        assert_eq!(lines[0], header, "{args:?}: {out}");
        assert_eq!(&lines[1][..row.len()], row.as_slice(), "{args:?}: {out}");
        assert!(age_ok(&json!(lines[1][row.len()])), "{args:?}: {out}");
    }
}

/// What a create or update answers is what later reads and watch events
/// give, byte for byte, in the storage version and in another one, from
/// the watch cache as it learnt of the write and as it re-reads storage
/// after a restart.
#[tokio::test]
async fn written_objects_read_back_byte_for_byte() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let port = common::free_port();
    let mut server = common::Server::start_in(&dir, port, &[]).await;
    let client = server.client().await;
    let mut answers = Vec::new();
    // v1alpha1 is the wardle group's storage version, v1beta1 is not.
    for version in ["v1alpha1", "v1beta1"] {
        let coll = format!("/apis/wardle.example.com/{version}/namespaces/default/flunders");
        let name = format!("bytes-{version}");
        let path = format!("{coll}/{name}");
        let created = send(
            &client,
            "POST",
            &coll,
            "application/json",
            Some(json!({
                "apiVersion": format!("wardle.example.com/{version}"), "kind": "Flunder",
                "metadata": {"name": name, "labels": {"step": "created"}},
            })),
        )
        .await;
        assert_eq!(created.code, 201, "{}", created.text());
        let read = get(&client, &path).await;
        assert_eq!(read.text(), created.text(), "GET {path} after the create");
        let mut changed = created.json();
        changed["metadata"]["labels"]["step"] = json!("updated");
        let updated = send(&client, "PUT", &path, "application/json", Some(changed)).await;
        assert_eq!(updated.code, 200, "{}", updated.text());

        // A watch from the create replays the update with the same object.
        let watch = get(
            &client,
            &format!(
                "{coll}?watch=true&fieldSelector=metadata.name%3D{name}&resourceVersion={}&timeoutSeconds=1",
                rv(&created.json())
            ),
        )
        .await;
        let first = watch
            .text()
            .lines()
            .next()
            .map(str::to_string)
            .unwrap_or_default();
        let event: Value = serde_json::from_str(&first).unwrap_or(Value::Null);
        assert_eq!(event["type"], "MODIFIED", "{}", watch.text());
        assert_eq!(event["object"], updated.json());
        // Reads from the cache, consistent and not, answer the same bytes.
        for query in ["", "?resourceVersion=0"] {
            let read = get(&client, &format!("{path}{query}")).await;
            assert_eq!(read.code, 200, "{}", read.text());
            assert_eq!(read.text(), updated.text(), "GET {path}{query}");
        }
        answers.push((path, updated.text()));
    }
    // After a restart the cache decodes everything from storage itself:
    // still the same bytes.
    server.kill();
    let server = common::Server::start_in(&dir, port, &[]).await;
    let client = server.client().await;
    for (path, answer) in answers {
        let read = get(&client, &path).await;
        assert_eq!(read.text(), answer, "GET {path} after a restart");
    }
}
