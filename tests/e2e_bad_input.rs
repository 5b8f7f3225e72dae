//! Bad input against the real binary over HTTPS: malformed bodies, wrong
//! kinds and versions, invalid names, deep nesting, oversized bodies,
//! invalid query parameters and selectors, bad options, unsupported media
//! types and broken patches, on a wardle Flunder (namespaced) and a core
//! Namespace (cluster-scoped). Each answer is kube-apiserver's Status (code,
//! reason, message, details) and changes nothing. Also the inputs near the
//! edge that kube-apiserver accepts.

mod common;

use serde_json::{Value, json};

const FLUNDERS: &str = "/apis/wardle.example.com/v1beta1/namespaces/default/flunders";
const NAMESPACES: &str = "/api/v1/namespaces";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const JSON: &str = "application/json";
const YAML: &str = "application/yaml";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// The Go type kube-apiserver first decodes a body into, as
/// `encoding/json` names it in its errors.
const KIND_PROBE: &str = r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;

/// A response: code, `Warning` headers, body as JSON (`Null` if not JSON).
struct Reply {
    code: u16,
    warnings: Vec<String>,
    body: Value,
}

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Reply {
    let mut req = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(kube::client::Body::from(body)).expect("request");
    let resp = client.send(req).await.expect("send");
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .collect();
    let bytes = resp.into_body().collect_bytes().await.expect("body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Reply {
        code,
        warnings,
        body,
    }
}

/// The expected message: exact, or a stable prefix where upstream's text
/// depends on its implementation (scheme names, YAML parser wording).
enum Msg {
    Exact(String),
    Prefix(String),
}

struct Case {
    what: String,
    method: &'static str,
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    code: u16,
    reason: &'static str,
    message: Msg,
    details: Option<Value>,
}

fn case(
    what: &str,
    method: &'static str,
    path: &str,
    content_type: &str,
    body: impl Into<Vec<u8>>,
    (code, reason): (u16, &'static str),
    message: Msg,
) -> Case {
    Case {
        what: what.to_string(),
        method,
        path: path.to_string(),
        headers: if content_type.is_empty() {
            Vec::new()
        } else {
            vec![("content-type", content_type.to_string())]
        },
        body: body.into(),
        code,
        reason,
        message,
        details: None,
    }
}

impl Case {
    fn details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }
}

fn exact(s: impl Into<String>) -> Msg {
    Msg::Exact(s.into())
}

fn prefix(s: impl Into<String>) -> Msg {
    Msg::Prefix(s.into())
}

const BAD_REQUEST: (u16, &str) = (400, "BadRequest");
const INVALID: (u16, &str) = (422, "Invalid");

/// `{"x":{"x":...{}...}}`, `depth` levels.
fn nested_json(depth: usize) -> String {
    format!("{}{{}}{}", "{\"x\":".repeat(depth), "}".repeat(depth))
}

/// Everything a bad request must leave alone: the collections' list
/// resourceVersions (the store's revision) and the fixtures' objects.
async fn world(client: &kube::Client) -> Value {
    let mut out = Vec::new();
    for path in [
        FLUNDERS.to_string(),
        NAMESPACES.to_string(),
        format!("{FLUNDERS}/f1"),
        format!("{NAMESPACES}/bi-ns"),
        CONFIGMAPS.to_string(),
        format!("{CONFIGMAPS}/cm1"),
    ] {
        let r = send(client, "GET", &path, &[], Vec::new()).await;
        assert_eq!(r.code, 200, "GET {path}: {}", r.body);
        let mut body = r.body;
        if let Some(items) = body.get_mut("items").and_then(Value::as_array_mut) {
            // Names and resourceVersions are enough.
            for item in items.iter_mut() {
                *item = json!([
                    item["metadata"]["name"],
                    item["metadata"]["resourceVersion"]
                ]);
            }
        }
        out.push(body);
    }
    Value::Array(out)
}

/// Runs the cases one by one; every mismatch is collected and reported.
async fn run(client: &kube::Client, cases: Vec<Case>) {
    let mut failures = Vec::new();
    for c in cases {
        let before = world(client).await;
        let headers: Vec<(&str, &str)> = c.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = send(client, c.method, &c.path, &headers, c.body.clone()).await;
        let after = world(client).await;
        let what = format!("{} ({} {})", c.what, c.method, c.path);
        if before != after {
            failures.push(format!("{what}: the request changed state"));
        }
        if (r.code, r.body["reason"].as_str().unwrap_or_default()) != (c.code, c.reason)
            || r.body["code"] != c.code
            || r.body["kind"] != "Status"
            || r.body["status"] != "Failure"
        {
            failures.push(format!(
                "{what}: expected {} {}, got {} {}",
                c.code, c.reason, r.code, r.body
            ));
            continue;
        }
        let message = r.body["message"].as_str().unwrap_or_default();
        match &c.message {
            Msg::Exact(m) if message != m => {
                failures.push(format!(
                    "{what}:\n  expected message {m:?}\n  got      {message:?}"
                ));
            }
            Msg::Prefix(p) if !message.starts_with(p.as_str()) => {
                failures.push(format!(
                    "{what}:\n  expected a message starting {p:?}\n  got {message:?}"
                ));
            }
            _ => {}
        }
        if let Some(d) = &c.details
            && r.body["details"] != *d
        {
            failures.push(format!(
                "{what}:\n  expected details {d}\n  got      {}",
                r.body["details"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A server with flunder `f1` (in `default`), namespace `bi-ns` and
/// configmap `cm1` (in `default`, with a label and data).
async fn fixture() -> (common::Server, kube::Client) {
    let server = common::Server::start().await;
    let client = server.client().await;
    let r = send(
        &client,
        "POST",
        FLUNDERS,
        &[("content-type", JSON)],
        br#"{"metadata":{"name":"f1"},"spec":{"referenceType":"Flunder","flunderReference":"a"}}"#
            .to_vec(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let r = send(
        &client,
        "POST",
        NAMESPACES,
        &[("content-type", JSON)],
        br#"{"metadata":{"name":"bi-ns"}}"#.to_vec(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let r = send(
        &client,
        "POST",
        CONFIGMAPS,
        &[("content-type", JSON)],
        br#"{"metadata":{"name":"cm1","labels":{"app":"web"}},"data":{"k":"v"}}"#.to_vec(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    // The cases compare the collections' list resourceVersions (the
    // store's revision) before and after each request. Controllers still
    // write just after start (the local APIServices' `Available`
    // conditions), later on a loaded machine: wait until the revision
    // stays put for 300 ms.
    let mut last = world(&client).await;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let now = world(&client).await;
        if now == last {
            break;
        }
        last = now;
    }
    (server, client)
}

fn unrecognized(kind: &str, error: &str, summary: &str) -> Msg {
    exact(format!(
        "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {error} ({summary})"
    ))
}

fn decoding_cases() -> Vec<Case> {
    let f1 = format!("{FLUNDERS}/f1");
    let ns = format!("{NAMESPACES}/bi-ns");
    let yaml_error = |kind: &str| {
        prefix(format!(
            "the object provided is unrecognized (must be of type {kind}): error converting YAML to JSON: yaml: "
        ))
    };
    let cannot_unmarshal =
        |what: &str| format!("json: cannot unmarshal {what} into Go value of type {KIND_PROBE}");
    vec![
        case(
            "malformed JSON",
            "POST",
            FLUNDERS,
            JSON,
            r#"{"metadata":{"name":"x""#,
            BAD_REQUEST,
            unrecognized(
                "Flunder",
                "unexpected end of JSON input",
                r#"{"metadata":{"name":"x""#,
            ),
        ),
        case(
            "malformed JSON",
            "POST",
            NAMESPACES,
            JSON,
            r#"{"metadata":{"name":"x"}"#,
            BAD_REQUEST,
            unrecognized(
                "Namespace",
                "unexpected end of JSON input",
                r#"{"metadata":{"name":"x"}"#,
            ),
        ),
        case(
            "malformed JSON",
            "PUT",
            &f1,
            JSON,
            r#"{"metadata":{"name":"f1""#,
            BAD_REQUEST,
            unrecognized(
                "Flunder",
                "unexpected end of JSON input",
                r#"{"metadata":{"name":"f1""#,
            ),
        ),
        case(
            "malformed JSON",
            "PUT",
            &ns,
            JSON,
            r#"{"metadata" {}}"#,
            BAD_REQUEST,
            unrecognized(
                "Namespace",
                "invalid character '{' after object key",
                r#"{"metadata" {}}"#,
            ),
        ),
        case(
            "empty body",
            "POST",
            FLUNDERS,
            JSON,
            "",
            BAD_REQUEST,
            unrecognized("Flunder", "unexpected end of JSON input", "<empty>"),
        ),
        case(
            "malformed YAML",
            "POST",
            FLUNDERS,
            YAML,
            "metadata:\n  name: [x\n",
            BAD_REQUEST,
            yaml_error("Flunder"),
        ),
        case(
            "malformed YAML",
            "PUT",
            &ns,
            YAML,
            "metadata:\n  name: [x\n",
            BAD_REQUEST,
            yaml_error("Namespace"),
        ),
        case(
            "JSON array",
            "POST",
            FLUNDERS,
            JSON,
            "[1]",
            BAD_REQUEST,
            unrecognized("Flunder", &cannot_unmarshal("array"), "5b315d"),
        ),
        case(
            "JSON string",
            "POST",
            NAMESPACES,
            JSON,
            r#""ns""#,
            BAD_REQUEST,
            unrecognized("Namespace", &cannot_unmarshal("string"), "226e7322"),
        ),
        case(
            "YAML list",
            "POST",
            FLUNDERS,
            YAML,
            "- a\n- b\n",
            BAD_REQUEST,
            unrecognized("Flunder", &cannot_unmarshal("array"), "2d20610a2d20620a"),
        ),
        case(
            "YAML scalar",
            "PUT",
            &f1,
            YAML,
            "7",
            BAD_REQUEST,
            unrecognized("Flunder", &cannot_unmarshal("number"), "37"),
        ),
        // Kinds and versions.
        case(
            "kind not served in this version",
            "POST",
            FLUNDERS,
            JSON,
            r#"{"apiVersion":"wardle.example.com/v1beta1","kind":"Fischer","metadata":{"name":"x"}}"#,
            BAD_REQUEST,
            prefix(
                r#"Fischer in version "v1beta1" cannot be handled as a Flunder: no kind "Fischer" is registered for version "wardle.example.com/v1beta1" in scheme "#,
            ),
        ),
        case(
            "another kind",
            "POST",
            FLUNDERS,
            JSON,
            r#"{"apiVersion":"wardle.example.com/v1alpha1","kind":"Fischer","metadata":{"name":"x"}}"#,
            BAD_REQUEST,
            prefix(r#"Fischer in version "v1alpha1" cannot be handled as a Flunder: "#),
        ),
        case(
            "another version",
            "POST",
            FLUNDERS,
            JSON,
            r#"{"apiVersion":"wardle.example.com/v1alpha1","kind":"Flunder","metadata":{"name":"x"}}"#,
            BAD_REQUEST,
            exact(
                "the API version in the data (wardle.example.com/v1alpha1) does not match the expected API version (wardle.example.com/v1beta1)",
            ),
        ),
        case(
            "another version",
            "PUT",
            &f1,
            JSON,
            r#"{"apiVersion":"wardle.example.com/v1alpha1","kind":"Flunder","metadata":{"name":"f1"}}"#,
            BAD_REQUEST,
            exact(
                "the API version in the data (wardle.example.com/v1alpha1) does not match the expected API version (wardle.example.com/v1beta1)",
            ),
        ),
        case(
            "another group",
            "POST",
            FLUNDERS,
            JSON,
            r#"{"apiVersion":"other.example.com/v1beta1","kind":"Flunder","metadata":{"name":"x"}}"#,
            BAD_REQUEST,
            prefix(
                r#"Flunder in version "v1beta1" cannot be handled as a Flunder: no kind "Flunder" is registered for version "other.example.com/v1beta1" in scheme "#,
            ),
        ),
        case(
            "unknown version",
            "POST",
            NAMESPACES,
            JSON,
            r#"{"apiVersion":"v2","kind":"Namespace","metadata":{"name":"x"}}"#,
            BAD_REQUEST,
            prefix(
                r#"Namespace in version "v2" cannot be handled as a Namespace: no kind "Namespace" is registered for version "v2" in scheme "#,
            ),
        ),
        case(
            "unknown kind",
            "PUT",
            &ns,
            JSON,
            r#"{"apiVersion":"v1","kind":"Bogus","metadata":{"name":"bi-ns"}}"#,
            BAD_REQUEST,
            prefix(
                r#"Bogus in version "v1" cannot be handled as a Namespace: no kind "Bogus" is registered for version "v1" in scheme "#,
            ),
        ),
        case(
            "unparsable apiVersion",
            "POST",
            FLUNDERS,
            JSON,
            r#"{"apiVersion":"a/b/c","metadata":{"name":"x"}}"#,
            BAD_REQUEST,
            exact(
                r#"the object provided is unrecognized (must be of type Flunder): unexpected GroupVersion string: a/b/c ({"apiVersion":"a/b/c","metadat ...)"#,
            ),
        ),
    ]
}

fn name_cases() -> Vec<Case> {
    let f1 = format!("{FLUNDERS}/f1");
    let ns = format!("{NAMESPACES}/bi-ns");
    let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    let long = "a".repeat(64);
    vec![
        case("uppercase namespace name", "POST", NAMESPACES, JSON, r#"{"metadata":{"name":"Upper"}}"#, INVALID,
            exact(format!(r#"Namespace "Upper" is invalid: metadata.name: Invalid value: "Upper": {label}"#)))
            .details(json!({"name": "Upper", "kind": "Namespace", "causes": [
                {"reason": "FieldValueInvalid", "message": format!(r#"Invalid value: "Upper": {label}"#), "field": "metadata.name"}]})),
        case("namespace name too long", "POST", NAMESPACES, JSON, format!(r#"{{"metadata":{{"name":"{long}"}}}}"#), INVALID,
            exact(format!(r#"Namespace "{long}" is invalid: metadata.name: Invalid value: "{long}": must be no more than 63 characters"#))),
        case("namespace name with '..'", "POST", NAMESPACES, JSON, r#"{"metadata":{"name":"a..b"}}"#, INVALID,
            exact(format!(r#"Namespace "a..b" is invalid: metadata.name: Invalid value: "a..b": {label}"#))),
        // The sample apiserver checks only that flunder names are path segments.
        case("flunder named '..'", "POST", FLUNDERS, JSON, r#"{"metadata":{"name":".."}}"#, INVALID,
            exact(r#"Flunder.wardle.example.com ".." is invalid: metadata.name: Invalid value: "..": may not be '..'"#))
            .details(json!({"name": "..", "group": "wardle.example.com", "kind": "Flunder", "causes": [
                {"reason": "FieldValueInvalid", "message": r#"Invalid value: "..": may not be '..'"#, "field": "metadata.name"}]})),
        case("flunder name with '/'", "POST", FLUNDERS, JSON, r#"{"metadata":{"name":"a/b"}}"#, INVALID,
            exact(r#"Flunder.wardle.example.com "a/b" is invalid: metadata.name: Invalid value: "a/b": may not contain '/'"#)),
        case("name in body is not the URL's", "PUT", &f1, JSON, r#"{"metadata":{"name":"other"}}"#, BAD_REQUEST,
            exact("the name of the object (other) does not match the name on the URL (f1)")),
        case("name in body is not the URL's", "PUT", &ns, JSON, r#"{"metadata":{"name":"other"}}"#, BAD_REQUEST,
            exact("the name of the object (other) does not match the name on the URL (bi-ns)")),
        case("namespace in body is not the path's", "POST", FLUNDERS, JSON, r#"{"metadata":{"name":"x","namespace":"other"}}"#, BAD_REQUEST,
            exact("the namespace of the provided object does not match the namespace sent on the request")),
        case("namespace in body is not the path's", "PUT", &f1, JSON, r#"{"metadata":{"name":"f1","namespace":"other"}}"#, BAD_REQUEST,
            exact("the namespace of the provided object does not match the namespace sent on the request")),
    ]
}

fn size_and_nesting_cases() -> Vec<Case> {
    let f1 = format!("{FLUNDERS}/f1");
    let deep = |kind: &str| {
        prefix(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: invalid character '{{' exceeded max depth ("
        ))
    };
    let yaml_error = prefix(
        "the object provided is unrecognized (must be of type Flunder): error converting YAML to JSON: yaml: ",
    );
    let deep_spec = format!(
        r#"{{"metadata":{{"name":"deep"}},"spec":{}}}"#,
        nested_json(10_000)
    );
    let deep_unknown = format!(
        r#"{{"metadata":{{"name":"deep"}},"zz":{}}}"#,
        nested_json(10_000)
    );
    let deep_yaml = format!(
        "metadata:\n  name: deep\nspec: {}{{}}{}\n",
        "{x: ".repeat(10_000),
        "}".repeat(10_000)
    );
    let deep_yaml_list = format!(
        "metadata:\n  name: deep\nspec: {}{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    // A body one byte over kube-apiserver's 3 MiB limit.
    let big = |name: &str| {
        let head = format!(r#"{{"metadata":{{"name":"{name}"}},"spec":{{"x":""#);
        let fill = 3 * 1024 * 1024 + 1 - head.len() - 3;
        format!("{head}{}\"}}}}", "a".repeat(fill)).into_bytes()
    };
    assert_eq!(big("x").len(), 3 * 1024 * 1024 + 1);
    let too_large = (413, "RequestEntityTooLarge");
    let limit = || exact("Request entity too large: limit is 3145728");
    vec![
        case(
            "10,000 levels in spec",
            "POST",
            FLUNDERS,
            JSON,
            deep_spec.clone(),
            BAD_REQUEST,
            deep("Flunder"),
        ),
        case(
            "10,000 levels in an unknown field",
            "POST",
            FLUNDERS,
            JSON,
            deep_unknown,
            BAD_REQUEST,
            deep("Flunder"),
        ),
        case(
            "10,000 levels in spec",
            "PUT",
            &f1,
            JSON,
            deep_spec.replace("\"deep\"", "\"f1\""),
            BAD_REQUEST,
            deep("Flunder"),
        ),
        case(
            "10,000 levels in an unknown field",
            "POST",
            NAMESPACES,
            JSON,
            format!(
                r#"{{"metadata":{{"name":"deep"}},"zz":{}}}"#,
                nested_json(10_000)
            ),
            BAD_REQUEST,
            deep("Namespace"),
        ),
        case(
            "10,000 levels of YAML mappings",
            "POST",
            FLUNDERS,
            YAML,
            deep_yaml,
            BAD_REQUEST,
            yaml_error,
        ),
        case(
            "10,000 levels of YAML sequences",
            "POST",
            FLUNDERS,
            YAML,
            deep_yaml_list,
            BAD_REQUEST,
            prefix(
                "the object provided is unrecognized (must be of type Flunder): error converting YAML to JSON: yaml: ",
            ),
        ),
        case(
            "body over 3 MiB",
            "POST",
            FLUNDERS,
            JSON,
            big("big"),
            too_large,
            limit(),
        ),
        case(
            "body over 3 MiB",
            "PUT",
            &f1,
            JSON,
            big("f1"),
            too_large,
            limit(),
        ),
        case(
            "body over 3 MiB",
            "PATCH",
            &f1,
            MERGE,
            big("f1"),
            too_large,
            limit(),
        ),
        case(
            "body over 3 MiB",
            "POST",
            NAMESPACES,
            JSON,
            big("big"),
            too_large,
            limit(),
        ),
    ]
}

fn query_cases() -> Vec<Case> {
    let f1 = format!("{FLUNDERS}/f1");
    let ns = format!("{NAMESPACES}/bi-ns");
    let get = |what: &str, path: String, code: (u16, &'static str), msg: Msg| {
        case(what, "GET", &path, "", "", code, msg)
    };
    let parse_int = || exact(r#"strconv.ParseInt: parsing "abc": invalid syntax"#);
    let bad_rv = || {
        exact(
            r#"invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax"#,
        )
    };
    let bad_in =
        || exact("unable to parse requirement: found '', expected: ',', ')' or identifier");
    let list_options = json!({"group": "meta.k8s.io", "kind": "ListOptions", "causes": [{
        "reason": "FieldValueForbidden",
        "message": "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        "field": "resourceVersionMatch"}]});
    vec![
        get("limit=abc", format!("{FLUNDERS}?limit=abc"), BAD_REQUEST, parse_int()),
        get("limit=abc", format!("{NAMESPACES}?limit=abc"), BAD_REQUEST, parse_int()),
        get("limit out of range", format!("{FLUNDERS}?limit=99999999999999999999"), BAD_REQUEST,
            exact(r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#)),
        get("timeoutSeconds=abc", format!("{FLUNDERS}?timeoutSeconds=abc"), BAD_REQUEST, parse_int()),
        get("timeoutSeconds=abc", format!("{FLUNDERS}?watch=1&timeoutSeconds=abc"), BAD_REQUEST, parse_int()),
        get("timeoutSeconds=abc", format!("{NAMESPACES}?watch=true&timeoutSeconds=abc"), BAD_REQUEST, parse_int()),
        get("resourceVersion=abc", format!("{FLUNDERS}?resourceVersion=abc"), BAD_REQUEST, bad_rv()),
        get("resourceVersion=abc", format!("{f1}?resourceVersion=abc"), BAD_REQUEST, bad_rv()),
        get("resourceVersion=abc", format!("{ns}?resourceVersion=abc"), BAD_REQUEST, bad_rv()),
        get("resourceVersion=abc", format!("{FLUNDERS}?watch=1&resourceVersion=abc"), BAD_REQUEST, bad_rv()),
        get("resourceVersionMatch without resourceVersion", format!("{FLUNDERS}?resourceVersionMatch=Exact"), INVALID,
            exact(r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"#))
            .details(list_options),
        get("continue=garbage", format!("{FLUNDERS}?continue=garbage"), BAD_REQUEST,
            prefix("invalid continue token: continue key is not valid")),
        get("continue=garbage", format!("{NAMESPACES}?continue=garbage&limit=1"), BAD_REQUEST,
            prefix("invalid continue token: continue key is not valid")),
        get("labelSelector 'a in ('", format!("{FLUNDERS}?labelSelector=a%20in%20("), BAD_REQUEST, bad_in()),
        get("labelSelector 'a in ('", format!("{NAMESPACES}?labelSelector=a%20in%20("), BAD_REQUEST, bad_in()),
        get("labelSelector 'a in ('", format!("{FLUNDERS}?watch=1&labelSelector=a%20in%20("), BAD_REQUEST, bad_in()),
        get("labelSelector '!=x'", format!("{FLUNDERS}?labelSelector=!%3Dx"), BAD_REQUEST,
            exact("found '!=', expected: !, identifier, or 'end of string'")),
        get("labelSelector 'a,'", format!("{NAMESPACES}?labelSelector=a,"), BAD_REQUEST,
            exact("found '', expected: identifier after ','")),
        get("fieldSelector on an unknown field", format!("{FLUNDERS}?fieldSelector=spec.foo%3Dx"), BAD_REQUEST,
            exact(r#""spec.foo" is not a known field selector: only "metadata.name", "metadata.namespace""#)),
        get("fieldSelector without operator", format!("{FLUNDERS}?fieldSelector=metadata.name"), BAD_REQUEST,
            exact("invalid selector: 'metadata.name'; can't understand 'metadata.name'")),
        get("Accept text/html", f1.clone(), (406, "NotAcceptable"),
            exact("only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"))
            .header("accept", "text/html"),
        get("Accept text/html", FLUNDERS.to_string(), (406, "NotAcceptable"),
            exact("only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"))
            .header("accept", "text/html"),
        get("Accept text/html", NAMESPACES.to_string(), (406, "NotAcceptable"),
            prefix("only the following media types are accepted: application/json, application/yaml"))
            .header("accept", "text/html"),
    ]
}

fn options_cases() -> Vec<Case> {
    let f1 = format!("{FLUNDERS}/f1");
    let ns = format!("{NAMESPACES}/bi-ns");
    let dry_run = |kind: &str| {
        (
            exact(format!(
                r#"{kind}.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Bogus"]: supported values: "All""#
            )),
            json!({"group": "meta.k8s.io", "kind": kind, "causes": [{"reason": "FieldValueNotSupported",
                "message": r#"Unsupported value: ["Bogus"]: supported values: "All""#, "field": "dryRun"}]}),
        )
    };
    let policy = || {
        exact(
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Bogus": supported values: "Foreground", "Background", "Orphan", "nil""#,
        )
    };
    let body = r#"{"metadata":{"name":"f1"}}"#;
    let mut cases = Vec::new();
    for (method, path, kind, ct) in [
        ("POST", FLUNDERS.to_string(), "CreateOptions", JSON),
        ("POST", NAMESPACES.to_string(), "CreateOptions", JSON),
        ("PUT", f1.clone(), "UpdateOptions", JSON),
        ("PATCH", f1.clone(), "PatchOptions", MERGE),
        ("DELETE", f1.clone(), "DeleteOptions", ""),
        ("DELETE", ns.clone(), "DeleteOptions", ""),
        ("DELETE", FLUNDERS.to_string(), "DeleteOptions", ""),
    ] {
        let (msg, details) = dry_run(kind);
        let body = if method == "DELETE" {
            ""
        } else if method == "PATCH" {
            "{}"
        } else {
            body
        };
        cases.push(
            case(
                "dryRun=Bogus",
                method,
                &format!("{path}?dryRun=Bogus"),
                ct,
                body,
                INVALID,
                msg,
            )
            .details(details),
        );
    }
    cases.extend([
        case("dryRun in DeleteOptions", "DELETE", &f1, JSON, r#"{"dryRun":["Bogus"]}"#, INVALID, dry_run("DeleteOptions").0),
        case("fieldValidation=Bogus", "POST", &format!("{FLUNDERS}?fieldValidation=Bogus"), JSON, body, INVALID,
            exact(r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn""#))
            .details(json!({"group": "meta.k8s.io", "kind": "CreateOptions", "causes": [{"reason": "FieldValueNotSupported",
                "message": r#"Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn""#, "field": "fieldValidation"}]})),
        case("fieldValidation=Bogus", "PUT", &format!("{f1}?fieldValidation=Bogus"), JSON, body, INVALID,
            prefix(r#"UpdateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus""#)),
        case("fieldValidation=Bogus", "PATCH", &format!("{f1}?fieldValidation=Bogus"), MERGE, "{}", INVALID,
            prefix(r#"PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus""#)),
        case("propagationPolicy=Bogus", "DELETE", &format!("{f1}?propagationPolicy=Bogus"), "", "", INVALID, policy())
            .details(json!({"group": "meta.k8s.io", "kind": "DeleteOptions", "causes": [{"reason": "FieldValueNotSupported",
                "message": r#"Unsupported value: "Bogus": supported values: "Foreground", "Background", "Orphan", "nil""#,
                "field": "propagationPolicy"}]})),
        case("propagationPolicy=Bogus", "DELETE", &format!("{ns}?propagationPolicy=Bogus"), "", "", INVALID, policy()),
        case("propagationPolicy=Bogus", "DELETE", &format!("{FLUNDERS}?propagationPolicy=Bogus"), "", "", INVALID, policy()),
        case("propagationPolicy in DeleteOptions", "DELETE", &f1, JSON, r#"{"propagationPolicy":"Bogus"}"#, INVALID, policy()),
        case("gracePeriodSeconds=abc", "DELETE", &format!("{f1}?gracePeriodSeconds=abc"), "", "", BAD_REQUEST,
            exact(r#"strconv.ParseInt: parsing "abc": invalid syntax"#)),
        case("malformed DeleteOptions", "DELETE", &f1, JSON, "{bad", BAD_REQUEST,
            exact("couldn't get version/kind; json parse error: invalid character 'b' looking for beginning of object key string")),
    ]);
    cases
}

fn media_and_patch_cases() -> Vec<Case> {
    let f1 = format!("{FLUNDERS}/f1");
    let ns = format!("{NAMESPACES}/bi-ns");
    let unknown_body = prefix(
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
    );
    let unsupported = (415, "UnsupportedMediaType");
    let not_a_patch =
        || exact("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
    let deep_json_patch = format!(
        r#"[{{"op":"add","path":"/spec/x","value":{}}}]"#,
        nested_json(10_000)
    );
    let deep_merge = format!(r#"{{"spec":{}}}"#, nested_json(10_000));
    let not_object = format!(
        r#" "" is invalid: patch: Invalid value: "[1]": couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type {KIND_PROBE}"#
    );
    vec![
        case("Content-Type text/plain", "POST", FLUNDERS, "text/plain", r#"{"metadata":{"name":"x"}}"#, unsupported, unknown_body),
        case("Content-Type text/plain", "PUT", &ns, "text/plain", r#"{"metadata":{"name":"bi-ns"}}"#, unsupported,
            prefix("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml")),
        case("unknown patch type", "PATCH", &f1, "application/foo+json", "{}", unsupported,
            prefix("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json")),
        case("unknown patch type", "PATCH", &ns, "text/plain", "{}", unsupported,
            prefix("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json")),
        case("JSON patch that is not an array", "PATCH", &f1, JSON_PATCH, "{}", BAD_REQUEST, not_a_patch()),
        case("JSON patch that is not an array", "PATCH", &ns, JSON_PATCH, "{}", BAD_REQUEST, not_a_patch()),
        case("JSON patch test op fails", "PATCH", &f1, JSON_PATCH,
            r#"[{"op":"test","path":"/spec/flunderReference","value":"nope"},{"op":"replace","path":"/spec/flunderReference","value":"b"}]"#,
            INVALID, exact("the server rejected our request due to an error in our request"))
            .details(json!({})),
        case("JSON patch test op fails", "PATCH", &ns, JSON_PATCH,
            r#"[{"op":"test","path":"/metadata/name","value":"nope"}]"#,
            INVALID, exact("the server rejected our request due to an error in our request")),
        case("merge patch that is not an object", "PATCH", &f1, MERGE, "[1]", INVALID, exact(not_object.clone()))
            .details(json!({"causes": [{"reason": "FieldValueInvalid",
                "message": not_object.trim_start().trim_start_matches(r#""" is invalid: patch: "#), "field": "patch"}]})),
        case("malformed merge patch", "PATCH", &f1, MERGE, "{bad", BAD_REQUEST, exact("Invalid JSON Patch")),
        case("strategic merge patch that is not an object", "PATCH", &f1, STRATEGIC, "[1]", BAD_REQUEST,
            exact("json: cannot unmarshal array into Go value of type map[string]interface {}")),
        case("10,000 levels in a JSON patch", "PATCH", &f1, JSON_PATCH, deep_json_patch, BAD_REQUEST,
            exact("invalid character '{' exceeded max depth")),
        case("10,000 levels in a strategic merge patch", "PATCH", &f1, STRATEGIC, deep_merge.clone(), BAD_REQUEST,
            exact("invalid character '{' exceeded max depth")),
        case("10,000 levels in a merge patch", "PATCH", &f1, MERGE, deep_merge, BAD_REQUEST, exact("Invalid JSON Patch")),
    ]
}

#[tokio::test]
async fn bad_bodies_get_upstream_status_and_change_nothing() {
    let (server, client) = fixture().await;
    let mut cases = decoding_cases();
    cases.extend(name_cases());
    cases.extend(size_and_nesting_cases());
    run(&client, cases).await;
    assert!(
        !server.log().contains("panicked") && !server.log().contains("overflow"),
        "the server panicked:\n{}",
        server.log()
    );
}

#[tokio::test]
async fn bad_parameters_media_types_and_patches_get_upstream_status_and_change_nothing() {
    let (server, client) = fixture().await;
    let mut cases = query_cases();
    cases.extend(options_cases());
    cases.extend(media_and_patch_cases());
    run(&client, cases).await;
    assert!(
        !server.log().contains("panicked") && !server.log().contains("overflow"),
        "the server panicked:\n{}",
        server.log()
    );
}

/// A client that writes its whole request before it reads (Python's
/// `requests`, curl without `Expect`) gets the answer to a request rejected
/// before its body was read, and keeps its connection: the server reads the
/// rest of the body (up to the body limit) instead of closing while the
/// client is still writing.
#[tokio::test]
async fn early_answers_reach_clients_that_write_the_whole_body_first() {
    use tokio::io::AsyncWriteExt;
    let (server, _client) = fixture().await;
    let auth = format!("Bearer {}", common::raw::token(&server));
    let mut conn = common::raw::connect(&server).await;
    // Bodies far larger than the socket buffers, rejected before they are
    // read: an unsupported media type, and a token nobody issued.
    let cases = [
        (
            auth.as_str(),
            "multipart/mixed; boundary=x",
            415,
            "UnsupportedMediaType",
        ),
        ("Bearer no-such-token", JSON, 401, "Unauthorized"),
    ];
    for (authorization, content_type, code, reason) in cases {
        let body = vec![b'x'; 2 << 20];
        let head = format!(
            "POST {FLUNDERS} HTTP/1.1\r\nHost: localhost\r\nAuthorization: {authorization}\r\n\
             Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).await.expect("head");
        conn.write_all(&body)
            .await
            .expect("the whole body is written: the server reads it");
        conn.flush().await.expect("flush");
        let resp = common::raw::read_one_response(&mut conn).await;
        assert_eq!(resp.status, code, "{reason}: {}", resp.text());
        assert_eq!(resp.json()["reason"], reason);
    }
    // The same connection serves the next request.
    let head = format!("GET /version HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\n\r\n");
    conn.write_all(head.as_bytes()).await.expect("head");
    conn.flush().await.expect("flush");
    let resp = common::raw::read_one_response(&mut conn).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
}

#[tokio::test]
async fn inputs_upstream_accepts_are_accepted() {
    let (_server, client) = fixture().await;
    let ct = [("content-type", JSON)];

    // No kind or apiVersion: both default to the endpoint's.
    let r = send(
        &client,
        "POST",
        FLUNDERS,
        &ct,
        br#"{"metadata":{"name":"kindless"}}"#.to_vec(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        (r.body["kind"].as_str(), r.body["apiVersion"].as_str()),
        (Some("Flunder"), Some("wardle.example.com/v1beta1"))
    );
    let r = send(
        &client,
        "POST",
        NAMESPACES,
        &ct,
        br#"{"apiVersion":"v1","metadata":{"name":"kindless"}}"#.to_vec(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);

    // The sample apiserver only requires flunder names to be path segments.
    let r = send(
        &client,
        "POST",
        FLUNDERS,
        &ct,
        br#"{"metadata":{"name":"Upper"}}"#.to_vec(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);

    // 100 levels of nesting, in spec and in an unknown field, JSON and YAML:
    // accepted, the unknown fields dropped with a warning.
    let bodies = [
        (
            JSON,
            format!(
                r#"{{"metadata":{{"name":"deep-json"}},"spec":{}}}"#,
                nested_json(100)
            ),
            "spec.x",
        ),
        (
            JSON,
            format!(
                r#"{{"metadata":{{"name":"deep-json-2"}},"zz":{}}}"#,
                nested_json(100)
            ),
            "zz",
        ),
        (
            YAML,
            format!(
                "metadata:\n  name: deep-yaml\nspec: {}{{}}{}\n",
                "{x: ".repeat(100),
                "}".repeat(100)
            ),
            "spec.x",
        ),
        (
            YAML,
            format!(
                "metadata:\n  name: deep-yaml-2\nzz:\n{}",
                (1..=100)
                    .map(|i| format!("{}x:\n", "  ".repeat(i)))
                    .collect::<String>()
            ),
            "zz",
        ),
    ];
    for (content_type, body, unknown) in bodies {
        let r = send(
            &client,
            "POST",
            FLUNDERS,
            &[("content-type", content_type)],
            body.into_bytes(),
        )
        .await;
        assert_eq!(r.code, 201, "{content_type}: {}", r.body);
        assert_eq!(
            r.warnings,
            [format!("299 - \"unknown field \\\"{unknown}\\\"\"")]
        );
        assert_eq!(r.body["spec"], json!({}));
    }
    let r = send(
        &client,
        "POST",
        NAMESPACES,
        &ct,
        format!(
            r#"{{"metadata":{{"name":"deep"}},"zz":{}}}"#,
            nested_json(100)
        )
        .into_bytes(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);

    // Writes that change nothing are not written: the resourceVersion
    // stays (an unknown field is dropped, with a warning).
    let f1 = format!("{FLUNDERS}/f1");
    let current = send(&client, "GET", &f1, &[], Vec::new()).await.body;
    let rv = current["metadata"]["resourceVersion"].clone();
    let r = send(&client, "PUT", &f1, &ct, current.to_string().into_bytes()).await;
    assert_eq!(
        (r.code, &r.body["metadata"]["resourceVersion"]),
        (200, &rv),
        "{}",
        r.body
    );
    let r = send(
        &client,
        "PATCH",
        &f1,
        &[("content-type", MERGE)],
        br#"{"spec":{"zz":1}}"#.to_vec(),
    )
    .await;
    assert_eq!(
        (r.code, &r.body["metadata"]["resourceVersion"]),
        (200, &rv),
        "{}",
        r.body
    );
    assert_eq!(r.warnings, ["299 - \"unknown field \\\"spec.zz\\\"\""]);

    // A negative limit is no limit.
    let r = send(
        &client,
        "GET",
        &format!("{FLUNDERS}?limit=-1"),
        &[],
        Vec::new(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert!(r.body["metadata"].get("continue").is_none());
    assert_eq!(r.body["items"].as_array().map(Vec::len), Some(7));

    // `()` is the set of the empty value; non-ASCII selector values are fine.
    let r = send(
        &client,
        "GET",
        &format!("{FLUNDERS}?labelSelector=a%20in%20()"),
        &[],
        Vec::new(),
    )
    .await;
    assert_eq!(
        (r.code, r.body["items"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{}",
        r.body
    );
    let r = send(
        &client,
        "GET",
        &format!("{FLUNDERS}?fieldSelector=metadata.name%3D%C3%A9%5C%C3%BC"),
        &[],
        Vec::new(),
    )
    .await;
    assert_eq!(
        (r.code, r.body["items"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{}",
        r.body
    );
}

/// Upstream's `ValidateObjectMetaAccessor` (apimachinery
/// `pkg/api/validation/objectmeta.go`), which the generic store runs on
/// every kind's create and update after the kind's own validation: label
/// keys are qualified names and values at most 63 characters, annotation
/// keys qualified names and all annotations at most 256 KiB, generation
/// not negative, finalizers qualified names, owner references complete.
/// Errors are at the map's or list's path, not the key's.
fn object_meta_cases() -> Vec<Case> {
    let cm1 = format!("{CONFIGMAPS}/cm1");
    let name_part = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let long = "a".repeat(64);
    let big = "v".repeat(300 * 1024);
    vec![
        case("label key with a space", "POST", CONFIGMAPS, JSON,
            r#"{"metadata":{"name":"x","labels":{"a b":"c"}},"data":{"k":"v"}}"#, INVALID,
            exact(format!(r#"ConfigMap "x" is invalid: metadata.labels: Invalid value: "a b": {name_part}"#)))
            .details(json!({"name": "x", "kind": "ConfigMap", "causes": [
                {"reason": "FieldValueInvalid", "message": format!(r#"Invalid value: "a b": {name_part}"#), "field": "metadata.labels"}]})),
        case("64-character label value", "POST", FLUNDERS, JSON,
            format!(r#"{{"metadata":{{"name":"x","labels":{{"a":"{long}"}}}}}}"#), INVALID,
            exact(format!(r#"Flunder.wardle.example.com "x" is invalid: metadata.labels: Invalid value: "{long}": must be no more than 63 characters"#))),
        case("label key with a space", "POST", NAMESPACES, JSON,
            r#"{"metadata":{"name":"x","labels":{"a b":"c"}}}"#, INVALID,
            exact(format!(r#"Namespace "x" is invalid: metadata.labels: Invalid value: "a b": {name_part}"#))),
        case("300 KiB of annotations", "POST", CONFIGMAPS, JSON,
            format!(r#"{{"metadata":{{"name":"x","annotations":{{"a":"{big}"}}}}}}"#), INVALID,
            exact(r#"ConfigMap "x" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"#))
            .details(json!({"name": "x", "kind": "ConfigMap", "causes": [
                {"reason": "FieldValueTooLong", "message": "Too long: may not be more than 262144 bytes", "field": "metadata.annotations"}]})),
        case("annotation key with a space", "POST", FLUNDERS, JSON,
            r#"{"metadata":{"name":"x","annotations":{"a b":"c"}}}"#, INVALID,
            exact(format!(r#"Flunder.wardle.example.com "x" is invalid: metadata.annotations: Invalid value: "a b": {name_part}"#))),
        case("negative generation", "POST", CONFIGMAPS, JSON,
            r#"{"metadata":{"name":"x","generation":-1}}"#, INVALID,
            exact(r#"ConfigMap "x" is invalid: metadata.generation: Invalid value: -1: must be greater than or equal to 0"#)),
        case("finalizer with a space", "POST", CONFIGMAPS, JSON,
            r#"{"metadata":{"name":"x","finalizers":["a b"]}}"#, INVALID,
            exact(format!(r#"ConfigMap "x" is invalid: metadata.finalizers: Invalid value: "a b": {name_part}"#))),
        case("owner reference without a kind", "POST", CONFIGMAPS, JSON,
            r#"{"metadata":{"name":"x","ownerReferences":[{"apiVersion":"v1","kind":"","name":"o","uid":"u"}]}}"#, INVALID,
            exact(r#"ConfigMap "x" is invalid: metadata.ownerReferences.kind: Invalid value: "": kind must not be empty"#)),
        case("label key with a space", "PUT", &cm1, JSON,
            r#"{"metadata":{"name":"cm1","labels":{"a b":"c"}},"data":{"k":"v"}}"#, INVALID,
            exact(format!(r#"ConfigMap "cm1" is invalid: metadata.labels: Invalid value: "a b": {name_part}"#))),
        case("label key with a space", "PATCH", &cm1, MERGE,
            r#"{"metadata":{"labels":{"a b":"c"}}}"#, INVALID,
            exact(format!(r#"ConfigMap "cm1" is invalid: metadata.labels: Invalid value: "a b": {name_part}"#))),
    ]
}

/// JSON patches kube-apiserver refuses (`handlers/patch.go` with
/// `gopkg.in/evanphx/json-patch.v4`): copies beyond
/// `AccumulatedCopySizeLimit` (the 3 MiB body limit) and operations on
/// the root are 422s without details (`NewGenericServerResponse`); a
/// patched object that lost its name fails `checkName` (400). Also the
/// field selector whose value holds an unescaped `=` (apimachinery
/// `fields.UnescapeValue`, `UnescapedRune` printed with `%v`).
fn hostile_patch_cases() -> Vec<Case> {
    let cm1 = format!("{CONFIGMAPS}/cm1");
    let rejected = || exact("the server rejected our request due to an error in our request");
    // Each copy doubles /x: 40 of them would be 2^40 KiB.
    let mut ops = vec![json!({"op": "add", "path": "/x", "value": {"a": "x".repeat(1024)}})];
    for i in 0..40 {
        ops.push(json!({"op": "copy", "from": "/x", "path": format!("/x/c{i}")}));
    }
    let amplification = Value::Array(ops).to_string();
    let no_name = || exact("the name of the object () does not match the name on the URL (cm1)");
    vec![
        case(
            "doubling copies",
            "PATCH",
            &cm1,
            JSON_PATCH,
            amplification,
            INVALID,
            rejected(),
        )
        .details(json!({})),
        case(
            "move to the root, then a failed test",
            "PATCH",
            &cm1,
            JSON_PATCH,
            r#"[{"op":"move","path":"","from":"/data"},{"op":"test","path":"/x","value":1}]"#,
            INVALID,
            rejected(),
        )
        .details(json!({})),
        case(
            "add at the root",
            "PATCH",
            &cm1,
            JSON_PATCH,
            r#"[{"op":"add","path":"","value":{}}]"#,
            INVALID,
            rejected(),
        ),
        case(
            "remove /metadata",
            "PATCH",
            &cm1,
            JSON_PATCH,
            r#"[{"op":"remove","path":"/metadata"}]"#,
            BAD_REQUEST,
            no_name(),
        ),
        case(
            "replace the root with {}",
            "PATCH",
            &cm1,
            JSON_PATCH,
            r#"[{"op":"replace","path":"","value":{}}]"#,
            BAD_REQUEST,
            no_name(),
        ),
        case(
            "merge patch removing the name",
            "PATCH",
            &cm1,
            MERGE,
            r#"{"metadata":{"name":null}}"#,
            BAD_REQUEST,
            no_name(),
        ),
        case(
            "fieldSelector metadata.name==a==b",
            "GET",
            &format!("{CONFIGMAPS}?fieldSelector=metadata.name%3D%3Da%3D%3Db"),
            "",
            "",
            BAD_REQUEST,
            exact("invalid field selector: unescaped character in value: 61"),
        ),
    ]
}

#[tokio::test]
async fn hostile_metadata_and_patches_get_upstream_status_and_change_nothing() {
    let (server, client) = fixture().await;
    let mut cases = object_meta_cases();
    cases.extend(hostile_patch_cases());
    run(&client, cases).await;

    // The doubling copies stop at the limit: a small answer, quickly.
    let mut ops = vec![json!({"op": "add", "path": "/x", "value": {"a": "x".repeat(1024)}})];
    for i in 0..40 {
        ops.push(json!({"op": "copy", "from": "/x", "path": format!("/x/c{i}")}));
    }
    let started = std::time::Instant::now();
    let r = send(
        &client,
        "PATCH",
        &format!("{CONFIGMAPS}/cm1"),
        &[("content-type", JSON_PATCH)],
        Value::Array(ops).to_string().into_bytes(),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(r.code, 422, "{}", r.body);
    eprintln!("40 doubling copies: 422 in {took:?}");
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
    assert!(
        !server.log().contains("panicked"),
        "the server panicked:\n{}",
        server.log()
    );
}

/// Go's `encoding/json` reads `null` into a map, slice or pointer as nil
/// and leaves other fields alone: kube-apiserver takes `null` metadata
/// fields and `spec` as absent, on create, update and in patches.
#[tokio::test]
async fn nulls_are_absent() {
    let (_server, client) = fixture().await;
    let ct = [("content-type", JSON)];
    let nulls = r#""labels":null,"annotations":null,"resourceVersion":null,"finalizers":null,"ownerReferences":null"#;
    let r = send(
        &client,
        "POST",
        CONFIGMAPS,
        &ct,
        format!(r#"{{"metadata":{{"name":"nulls",{nulls}}},"data":null}}"#).into_bytes(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert!(r.body["metadata"].get("labels").is_none(), "{}", r.body);
    let r = send(
        &client,
        "POST",
        FLUNDERS,
        &ct,
        format!(r#"{{"metadata":{{"name":"nulls",{nulls}}},"spec":null}}"#).into_bytes(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let r = send(
        &client,
        "POST",
        NAMESPACES,
        &ct,
        format!(r#"{{"metadata":{{"name":"nulls",{nulls}}},"spec":null}}"#).into_bytes(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);

    // An update with nulls: no resourceVersion (unconditional), no labels.
    let r = send(
        &client,
        "PUT",
        &format!("{CONFIGMAPS}/cm1"),
        &ct,
        format!(r#"{{"metadata":{{"name":"cm1",{nulls}}},"data":{{"k":"v2"}}}}"#).into_bytes(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["data"], json!({"k": "v2"}));
    assert!(r.body["metadata"].get("labels").is_none(), "{}", r.body);

    // A JSON patch that sets them to null.
    let r = send(
        &client,
        "PATCH",
        &format!("{FLUNDERS}/f1"),
        &[("content-type", JSON_PATCH)],
        br#"[{"op":"add","path":"/metadata/labels","value":null},{"op":"add","path":"/metadata/finalizers","value":null},{"op":"replace","path":"/spec","value":null}]"#.to_vec(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["metadata"]["name"], "f1");
}
