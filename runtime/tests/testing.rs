//! The in-process test server (`apiforge_runtime::testing`) and the kube-rs
//! client types of derived kinds (`apiforge_runtime::client`): one struct
//! defines a group served by apiforge and is the kube-rs client type.

use std::time::Duration;

use apiforge_runtime::client::KubeObject;
use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::resource::Strategy;
use apiforge_runtime::scheme::{Group, KindBuilder, Scheme};
use apiforge_runtime::testing::{TestServer, WriteFault};
use apiforge_runtime::{Resource, Validate};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A book (the kind of `examples/bookstore.rs`, trimmed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(group = "bookstore.example.com", version = "v1", namespaced)]
pub struct Book {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the book is.
    #[serde(default)]
    pub spec: BookSpec,
}

/// What the book is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
pub struct BookSpec {
    /// The title.
    #[serde(default)]
    #[validate(required)]
    pub title: String,
    /// The number of pages.
    #[serde(default)]
    #[validate(minimum = 1, default = 100)]
    pub pages: i32,
}

impl Strategy for Book {}

fn scheme() -> Scheme {
    let mut scheme = Scheme::new();
    scheme.add_group(
        Group::new("bookstore.example.com", &["v1"])
            .model_prefix("com.example.bookstore")
            .kind(KindBuilder::<Book>::new().version::<Book>().build()),
    );
    apiforge_runtime::builtin::install(&mut scheme);
    scheme
}

fn book(name: &str, title: &str) -> KubeObject<Book> {
    KubeObject::new(
        name,
        Book {
            spec: BookSpec {
                title: title.into(),
                pages: 0,
            },
            ..Default::default()
        },
    )
}

/// A started server and a `Book` API in a fresh namespace `ns`.
async fn setup(ns: &str) -> (TestServer, Api<KubeObject<Book>>) {
    let server = TestServer::start(scheme())
        .await
        .expect("test server starts");
    let namespaces: Api<Namespace> = Api::all(server.client());
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(ns.into());
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
    let books = Api::namespaced(server.client(), ns);
    (server, books)
}

fn api_error(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(status) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `check` until it holds (5 s at most).
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn one_struct_serves_and_is_the_kube_client_type() {
    let (server, books) = setup("shelf").await;
    assert!(server.url().starts_with("https://127.0.0.1:"));
    assert!(server.kubeconfig_path().is_file());

    // create: defaults applied by the server come back typed.
    let created = books
        .create(&PostParams::default(), &book("dune", "Dune"))
        .await
        .expect("create");
    assert_eq!(created.metadata.name.as_deref(), Some("dune"));
    assert_eq!(created.metadata.namespace.as_deref(), Some("shelf"));
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.spec.pages, 100, "server-side default");
    // The kind's own metadata inside the wrapper stays empty.
    assert_eq!(created.data.metadata, ObjectMeta::default());

    // get and list
    let got = books.get("dune").await.expect("get");
    assert_eq!(got.spec.title, "Dune");
    assert_eq!(
        got.metadata.resource_version,
        created.metadata.resource_version
    );
    let list = books.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("dune"));

    // merge patch
    let patched = books
        .patch(
            "dune",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"pages": 412}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(patched.spec.pages, 412);

    // server-side apply of the typed object, creating and then updating
    let mut applied = book("emma", "Emma");
    applied.spec.pages = 300;
    let params = PatchParams::apply("books-test").force();
    let out = books
        .patch("emma", &params, &Patch::Apply(&applied))
        .await
        .expect("apply (create)");
    assert_eq!(out.spec.pages, 300);
    assert!(
        out.metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| m.iter().any(|e| e.manager.as_deref() == Some("books-test"))),
        "apply records its field manager: {:?}",
        out.metadata.managed_fields
    );
    applied.spec.pages = 301;
    let out = books
        .patch("emma", &params, &Patch::Apply(&applied))
        .await
        .expect("apply (update)");
    assert_eq!(out.spec.pages, 301);

    // replace through the typed value, converted to the server-side form
    let server_side: Book = out.clone().into_inner();
    assert_eq!(server_side.metadata.name, "emma");
    let mut again = KubeObject::from(server_side);
    again.spec.title = "Emma (annotated)".into();
    let replaced = books
        .replace("emma", &PostParams::default(), &again)
        .await
        .expect("replace");
    assert_eq!(replaced.spec.title, "Emma (annotated)");

    // a reflector over the typed watcher sees both objects and a new one
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(books.clone(), watcher::Config::default()))
        .applied_objects()
        .boxed();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.expect("reflector ready");
    assert_eq!(reader.state().len(), 2);
    books
        .create(&PostParams::default(), &book("ulysses", "Ulysses"))
        .await
        .expect("create third");
    eventually("the reflector to see ulysses", || {
        reader
            .state()
            .iter()
            .any(|b| b.metadata.name.as_deref() == Some("ulysses"))
    })
    .await;
    task.abort();

    // delete
    books
        .delete("dune", &Default::default())
        .await
        .expect("delete");
    let (code, _) = api_error(books.get("dune").await.expect_err("gone"));
    assert_eq!(code, 404);
    server.stop().await.expect("graceful stop");
}

#[tokio::test]
async fn injected_write_failures_are_status_errors() {
    let (server, retrying) = setup("faults").await;
    let books: Api<KubeObject<Book>> = Api::namespaced(server.client_without_retries(), "faults");
    let faults = server.faults();
    for (fault, code, reason) in [
        (WriteFault::Conflict, 409, "Conflict"),
        (WriteFault::Internal, 500, "InternalError"),
        (WriteFault::Unavailable, 503, "ServiceUnavailable"),
        (WriteFault::TooManyRequests, 429, "TooManyRequests"),
    ] {
        faults.fail_writes("bookstore.example.com/books/", 2, fault);
        for _ in 0..2 {
            let err = books
                .create(&PostParams::default(), &book("b", "B"))
                .await
                .expect_err("injected failure");
            assert_eq!(api_error(err), (code, reason.to_string()), "{fault:?}");
        }
        assert_eq!(faults.pending_write_faults(), 0);
    }
    // A 429 tells the client when to come back, in the header and the body.
    faults.fail_writes(
        "bookstore.example.com/books/",
        1,
        WriteFault::TooManyRequests,
    );
    let body = serde_json::to_vec(&book("b", "B")).expect("encode");
    let request = http::Request::post("/apis/bookstore.example.com/v1/namespaces/faults/books")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body))
        .expect("request");
    let response = server
        .client_without_retries()
        .send(request)
        .await
        .expect("response");
    assert_eq!(response.status(), 429);
    assert_eq!(
        response.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    faults.fail_writes(
        "bookstore.example.com/books/",
        1,
        WriteFault::TooManyRequests,
    );
    match books.create(&PostParams::default(), &book("b", "B")).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 429);
            assert_eq!(status.reason, "TooManyRequests");
            assert_eq!(
                status.message,
                "Too many requests, please try again later. (injected)"
            );
        }
        other => panic!("expected 429, got {other:?}"),
    }
    // Other keys are not affected, and the next write goes through.
    books
        .create(&PostParams::default(), &book("b", "B"))
        .await
        .expect("create after the faults");
    // An update's storage conflict is retried by the server (as
    // GuaranteedUpdate does upstream), so it is absorbed; a 500 is not.
    faults.fail_writes("bookstore.example.com/books/", 1, WriteFault::Conflict);
    books
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"pages": 3}})),
        )
        .await
        .expect("the server retries a storage conflict of an update");
    assert_eq!(faults.pending_write_faults(), 0);
    faults.fail_writes("bookstore.example.com/books/", 1, WriteFault::Internal);
    let err = books
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"pages": 2}})),
        )
        .await
        .expect_err("update fails");
    assert_eq!(api_error(err), (500, "InternalError".to_string()));
    // kube-rs's default client retries a 503.
    faults.fail_writes("bookstore.example.com/books/", 1, WriteFault::Unavailable);
    retrying
        .delete("b", &Default::default())
        .await
        .expect("delete retried past the 503");
    assert_eq!(faults.pending_write_faults(), 0);
}

#[tokio::test]
async fn watches_from_expired_versions_get_410() {
    let (server, books) = setup("expiry").await;
    let created = books
        .create(&PostParams::default(), &book("a", "A"))
        .await
        .expect("create");
    let rv = created
        .metadata
        .resource_version
        .clone()
        .expect("resourceVersion");
    server.faults().expire_watches().await.expect("expire");
    let params = kube::api::WatchParams::default();
    let mut stream = books
        .watch(&params, &rv)
        .await
        .expect("watch request")
        .boxed();
    match stream.try_next().await {
        Ok(Some(kube::api::WatchEvent::Error(status))) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected 410 Expired, got {other:?}"),
    }
    // A fresh list gives a newer version to watch from.
    let list = books.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);
}

#[tokio::test]
async fn watcher_restarts_after_dropped_and_expired_watches() {
    let (server, books) = setup("restart").await;
    books
        .create(&PostParams::default(), &book("a", "A"))
        .await
        .expect("create a");
    let (reader, writer) = reflector::store();
    let inits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = inits.clone();
    let stream = reflector(writer, watcher(books.clone(), watcher::Config::default()))
        .filter_map(move |event| {
            if let Ok(watcher::Event::Init) = event {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            async { None::<()> }
        })
        .boxed();
    let task = tokio::spawn(stream.for_each(|()| async {}));
    reader.wait_until_ready().await.expect("reflector ready");
    let has = |name: &'static str| {
        let reader = reader.clone();
        move || {
            reader
                .state()
                .iter()
                .any(|b| b.metadata.name.as_deref() == Some(name))
        }
    };

    // Dropped watches: the watcher re-watches from its last version.
    server.faults().drop_watches();
    books
        .create(&PostParams::default(), &book("b", "B"))
        .await
        .expect("create b");
    eventually("b after dropped watches", has("b")).await;
    let before = inits.load(std::sync::atomic::Ordering::SeqCst);

    // Expired and dropped: the re-watch gets 410 and the watcher re-lists.
    server.faults().expire_watches().await.expect("expire");
    server.faults().drop_watches();
    books
        .create(&PostParams::default(), &book("c", "C"))
        .await
        .expect("create c");
    eventually("c after expired watches", has("c")).await;
    eventually("a re-list after 410", || {
        inits.load(std::sync::atomic::Ordering::SeqCst) > before
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn starts_fast_and_cleans_up() {
    let server = TestServer::start(scheme()).await.expect("start");
    let dir = server.data_dir().to_path_buf();
    eprintln!("test server start-up: {:?}", server.startup_time());
    assert!(dir.is_dir());
    drop(server);
    assert!(!dir.exists(), "the temporary directory is removed on drop");
    // A second start reuses the scheme's documents.
    let server = TestServer::start(scheme()).await.expect("start again");
    eprintln!(
        "test server start-up (documents cached): {:?}",
        server.startup_time()
    );
    server.stop().await.expect("stop");
}

/// Discovery and the OpenAPI documents (built after start-up, in the
/// background, or by the first request for them) describe the scheme's
/// group as soon as the server is ready.
#[tokio::test]
async fn serves_the_schemes_documents_at_once() {
    let server = TestServer::start(scheme()).await.expect("start");
    let client = server.client();
    let get = |path: &str| {
        let client = client.clone();
        let req = http::Request::get(path).body(Vec::new()).expect("request");
        async move {
            let text = client.request_text(req).await.expect("GET");
            serde_json::from_str::<serde_json::Value>(&text).expect("JSON")
        }
    };
    let (list, index, v3, v2) = tokio::join!(
        get("/apis/bookstore.example.com/v1"),
        get("/openapi/v3"),
        get("/openapi/v3/apis/bookstore.example.com/v1"),
        get("/openapi/v2"),
    );
    assert_eq!(list["resources"][0]["name"], "books");
    let url = index["paths"]["apis/bookstore.example.com/v1"]["serverRelativeURL"]
        .as_str()
        .expect("the group version in the index");
    assert!(url.starts_with("/openapi/v3/apis/bookstore.example.com/v1?hash="));
    let schemas = &v3["components"]["schemas"];
    assert_eq!(
        schemas["com.example.bookstore.v1.Book"]["x-kubernetes-group-version-kind"][0]["kind"],
        "Book"
    );
    assert!(v2["definitions"]["com.example.bookstore.v1.Book"].is_object());
    server.stop().await.expect("stop");
}

/// The lease clock: while it is frozen another instance's identity lease
/// outlives any wait; stepped past the lease's duration, the server
/// collects it at once, and renews its own lease at the stepped time.
#[tokio::test]
async fn a_stepped_clock_expires_identity_leases() {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    let server = TestServer::start(scheme())
        .await
        .expect("test server starts");
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let clock = server.clock();
    clock.freeze();
    let frozen_at = clock.now();
    let mut gone = Lease::default();
    gone.metadata.name = Some("apiserver-gone".into());
    gone.metadata.labels = Some(
        [(
            "apiserver.kubernetes.io/identity".to_string(),
            "kube-apiserver".to_string(),
        )]
        .into(),
    );
    gone.spec = Some(LeaseSpec {
        holder_identity: Some("apiserver-gone".into()),
        lease_duration_seconds: Some(60),
        renew_time: Some(MicroTime(frozen_at)),
        ..Default::default()
    });
    leases
        .create(&PostParams::default(), &gone)
        .await
        .expect("create another instance's lease");
    clock.step(Duration::from_secs(30));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        leases
            .get_opt("apiserver-gone")
            .await
            .expect("get")
            .is_some(),
        "30 s into a 60 s lease it stays"
    );
    clock.step(Duration::from_secs(31));
    let mut collected = false;
    for _ in 0..100 {
        if leases
            .get_opt("apiserver-gone")
            .await
            .expect("get")
            .is_none()
        {
            collected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(collected, "expired on the stepped clock: collected");
    let own = leases
        .list(&ListParams::default().labels("apiserver.kubernetes.io/identity=kube-apiserver"))
        .await
        .expect("list identity leases");
    assert_eq!(own.items.len(), 1, "the server's own lease stays");
    let renewed = own.items[0]
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0)
        .expect("renewTime");
    assert!(
        renewed.as_second() >= frozen_at.as_second() + 61,
        "renewed at the stepped time: {renewed} (frozen at {frozen_at})"
    );
}
