//! Strategy hooks end to end: `metadata.generation` for a kind with the
//! status subresource (showcase Database) and not for wardle, the
//! strategy's warnings and the deprecated version's warning as `Warning`
//! headers.

mod common;

use serde_json::{Value, json};

struct Reply {
    status: u16,
    warnings: Vec<String>,
    body: Value,
}

async fn send(client: &kube::Client, method: &str, path: &str, body: Option<Value>) -> Reply {
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
    let status = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let bytes = resp.into_body().collect_bytes().await.expect("body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Reply {
        status,
        warnings,
        body,
    }
}

const DBS: &str = "/apis/showcase.apiforge.dev/v1/namespaces/default/databases";

#[tokio::test]
async fn generation_and_warnings() {
    let server = common::Server::start().await;
    let client = server.client().await;

    // create: generation 1, the strategy's warnings as headers
    let created = send(
        &client,
        "POST",
        DBS,
        Some(
            json!({"apiVersion": "showcase.apiforge.dev/v1", "kind": "Database",
            "metadata": {"name": "legacy"},
            "spec": {"engine": "mysql", "version": "5.7", "replicas": 2}}),
        ),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["metadata"]["generation"], 1);
    assert_eq!(
        created.warnings,
        [
            "299 - \"spec.version: MySQL 5.7 is end of life; use 8.0 or later\"",
            "299 - \"spec.backup: a replicated database without backups\""
        ]
    );

    // a metadata-only update keeps the generation
    let mut obj = created.body.clone();
    obj["metadata"]["labels"] = json!({"team": "a"});
    let relabelled = send(&client, "PUT", &format!("{DBS}/legacy"), Some(obj)).await;
    assert_eq!(relabelled.status, 200, "{}", relabelled.body);
    assert_eq!(relabelled.body["metadata"]["generation"], 1);

    // a spec update bumps it; warnings come from warnings_on_update
    let mut obj = relabelled.body.clone();
    obj["spec"]["version"] = json!("8.0");
    obj["spec"]["replicas"] = json!(1);
    let upgraded = send(&client, "PUT", &format!("{DBS}/legacy"), Some(obj)).await;
    assert_eq!(upgraded.status, 200, "{}", upgraded.body);
    assert_eq!(upgraded.body["metadata"]["generation"], 2);
    assert!(upgraded.warnings.is_empty(), "{:?}", upgraded.warnings);

    // a client cannot set the generation
    let mut obj = upgraded.body.clone();
    obj["metadata"]["generation"] = json!(40);
    let forced = send(&client, "PUT", &format!("{DBS}/legacy"), Some(obj)).await;
    assert_eq!(forced.body["metadata"]["generation"], 2);

    // every request to the deprecated version carries its warning
    let old = "/apis/showcase.apiforge.dev/v1alpha1/namespaces/default/databases";
    let deprecated = "299 - \"showcase.apiforge.dev/v1alpha1 Database is deprecated; use showcase.apiforge.dev/v1 Database\"";
    let got = send(&client, "GET", &format!("{old}/legacy"), None).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.warnings, [deprecated]);
    let listed = send(&client, "GET", old, None).await;
    assert_eq!(listed.warnings, [deprecated]);
    let current = send(&client, "GET", &format!("{DBS}/legacy"), None).await;
    assert!(current.warnings.is_empty());

    // wardle (no status subresource) does not track generations
    let flunders = "/apis/wardle.example.com/v1beta1/namespaces/default/flunders";
    let f = send(
        &client,
        "POST",
        flunders,
        Some(json!({"metadata": {"name": "f"}, "spec": {}})),
    )
    .await;
    assert_eq!(f.status, 201, "{}", f.body);
    assert!(f.body["metadata"].get("generation").is_none(), "{}", f.body);
    assert!(f.warnings.is_empty());
}
