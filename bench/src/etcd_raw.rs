//! The raw etcd references: what an etcd client does for a create and a
//! compare-and-swap update without any API server in between, so that
//! apiforge's etcd backend can be compared with the store underneath it;
//! and the bare etcd proxy ([`EtcdProxy`]), the same storage work behind
//! an HTTPS server that does nothing else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, bail};
use bytes::Bytes;
use etcd_client::{Client, Compare, CompareOp, KvClient, Txn, TxnOp, TxnOpResponse, WatchOptions};
use futures::FutureExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::task::JoinHandle;

use crate::reference::{Handler, json_response};

/// Creates keys `{prefix}{n}` if absent, as kube-apiserver's etcd3 store
/// does: one transaction comparing the key's create revision with 0 and
/// putting the value.
pub(crate) struct RawCreate {
    client: Client,
    prefix: String,
    value: Vec<u8>,
    next: AtomicU64,
}

impl RawCreate {
    /// Creates under `prefix` with `value` as every object.
    pub(crate) fn new(client: Client, prefix: String, value: Vec<u8>) -> Arc<RawCreate> {
        Arc::new(RawCreate {
            client,
            prefix,
            value,
            next: AtomicU64::new(0),
        })
    }

    /// One create; fails if the key existed.
    pub(crate) async fn call(self: Arc<Self>) -> anyhow::Result<u64> {
        let key = format!(
            "{}{}",
            self.prefix,
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        if !create_if_absent(&mut self.client.kv_client(), &key, self.value.clone()).await? {
            bail!("{key} already exists");
        }
        Ok(self.value.len() as u64)
    }
}

/// Compare-and-swap updates of one key per worker, as a guaranteed update
/// with a resourceVersion precondition does: put if the mod revision is
/// the one last seen, else read the current one and try again.
pub(crate) struct RawUpdate {
    client: Client,
    keys: Vec<String>,
    revisions: Vec<AtomicI64>,
    value: Vec<u8>,
    /// Failed compares (the analogue of 409 conflicts).
    pub(crate) conflicts: AtomicU64,
}

impl RawUpdate {
    /// Puts one key per worker (`{prefix}{worker}`) and remembers their
    /// revisions.
    pub(crate) async fn setup(
        client: Client,
        prefix: &str,
        workers: usize,
        value: Vec<u8>,
    ) -> anyhow::Result<Arc<RawUpdate>> {
        let mut keys = Vec::with_capacity(workers);
        let mut revisions = Vec::with_capacity(workers);
        let mut kv = client.kv_client();
        for w in 0..workers {
            let key = format!("{prefix}{w}");
            let resp = kv.put(key.as_str(), value.clone(), None).await?;
            let rev = resp.header().context("put without header")?.revision();
            keys.push(key);
            revisions.push(AtomicI64::new(rev));
        }
        Ok(Arc::new(RawUpdate {
            client,
            keys,
            revisions,
            value,
            conflicts: AtomicU64::new(0),
        }))
    }

    /// One successful compare-and-swap of worker `worker`'s key.
    pub(crate) async fn call(self: Arc<Self>, worker: usize) -> anyhow::Result<u64> {
        let key = self.keys.get(worker).context("no key for worker")?;
        let seen = self.revisions.get(worker).context("no key for worker")?;
        let mut kv = self.client.kv_client();
        loop {
            let rev = seen.load(Ordering::Relaxed);
            match compare_and_swap(&mut kv, key, rev, self.value.clone()).await? {
                Swap::Written(rev) => {
                    seen.store(rev, Ordering::Relaxed);
                    return Ok(self.value.len() as u64);
                }
                Swap::Conflict(Some(current)) => {
                    self.conflicts.fetch_add(1, Ordering::Relaxed);
                    seen.store(current, Ordering::Relaxed);
                }
                Swap::Conflict(None) => bail!("{key} vanished"),
            }
        }
    }
}

/// Puts `value` at `key` if the key does not exist (a transaction comparing
/// its create revision with 0); whether it was written.
async fn create_if_absent(kv: &mut KvClient, key: &str, value: Vec<u8>) -> anyhow::Result<bool> {
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key, value, None)]);
    Ok(kv.txn(txn).await?.succeeded())
}

/// The outcome of [`compare_and_swap`].
enum Swap {
    /// Written at this revision.
    Written(i64),
    /// The mod revision differed; the current one (`None`: no such key).
    Conflict(Option<i64>),
}

/// Puts `value` at `key` if its mod revision is `revision` (0: the key does
/// not exist), else reads the current one, in one transaction.
async fn compare_and_swap(
    kv: &mut KvClient,
    key: &str,
    revision: i64,
    value: Vec<u8>,
) -> anyhow::Result<Swap> {
    let txn = Txn::new()
        .when([Compare::mod_revision(key, CompareOp::Equal, revision)])
        .and_then([TxnOp::put(key, value, None)])
        .or_else([TxnOp::get(key, None)]);
    let resp = kv.txn(txn).await?;
    if resp.succeeded() {
        let written = resp.header().context("txn without header")?.revision();
        return Ok(Swap::Written(written));
    }
    Ok(Swap::Conflict(resp.op_responses().into_iter().find_map(
        |op| match op {
            TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.mod_revision()),
            _ => None,
        },
    )))
}

/// The floor of any API server on etcd: an HTTPS server on apiforge's own
/// TLS and HTTP stack, run in a process of its own
/// (`ref_process::RefProcess::etcd_proxy`), that does nothing but the storage work a
/// request needs, with a watch on its prefix as a watch cache keeps.
///
/// - `POST` creates `{prefix}{n}` with the request body (the create
///   transaction of [`RawCreate`]) and answers 201 with the body;
/// - `PUT path` writes the body to `{prefix}{path}` by compare-and-swap on
///   the mod revision the proxy last wrote there (on a failed compare it
///   reads the current one and tries again, like [`RawUpdate`]) and answers
///   200 with the body;
/// - `GET path` answers the value of `{prefix}{path}`, or 404.
///
/// There is no authentication, admission, decoding or validation, and the
/// watch only receives its events: what it measures is the transport (TLS,
/// HTTP, gRPC) and etcd's own work including its watch, which every API
/// server on this stack pays.
pub(crate) struct EtcdProxy {
    /// The request handler, served by the reference process.
    pub(crate) handler: Handler,
    watch: JoinHandle<()>,
}

impl Drop for EtcdProxy {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// What the proxy's requests share.
struct ProxyState {
    client: Client,
    prefix: String,
    next: AtomicU64,
    /// The mod revision the proxy last wrote to each key.
    revisions: Mutex<HashMap<String, i64>>,
}

impl EtcdProxy {
    /// Opens the watch on `prefix` and builds the handler.
    pub(crate) async fn start(client: Client, prefix: String) -> anyhow::Result<EtcdProxy> {
        let mut stream = client
            .watch_client()
            .watch(prefix.as_str(), Some(WatchOptions::new().with_prefix()))
            .await
            .context("opening the proxy's watch")?;
        let watch = tokio::spawn(async move { while let Ok(Some(_)) = stream.message().await {} });
        let state = Arc::new(ProxyState {
            client,
            prefix,
            next: AtomicU64::new(0),
            revisions: Mutex::new(HashMap::new()),
        });
        let handler: Handler = Arc::new(move |req| {
            let state = state.clone();
            async move {
                state.handle(req).await.unwrap_or_else(|e| {
                    json_response(StatusCode::INTERNAL_SERVER_ERROR, e.to_string().into())
                })
            }
            .boxed()
        });
        Ok(EtcdProxy { handler, watch })
    }
}

impl ProxyState {
    async fn handle(&self, req: Request<Incoming>) -> anyhow::Result<Response<Full<Bytes>>> {
        let (parts, body) = req.into_parts();
        let body = body.collect().await?.to_bytes();
        let mut kv = self.client.kv_client();
        match parts.method {
            Method::POST => {
                let key = format!(
                    "{}{}",
                    self.prefix,
                    self.next.fetch_add(1, Ordering::Relaxed)
                );
                if create_if_absent(&mut kv, &key, body.to_vec()).await? {
                    Ok(json_response(StatusCode::CREATED, body))
                } else {
                    Ok(json_response(StatusCode::CONFLICT, Bytes::new()))
                }
            }
            Method::PUT => {
                let key = format!("{}{}", self.prefix, parts.uri.path());
                let mut rev = self.revision(&key);
                loop {
                    match compare_and_swap(&mut kv, &key, rev, body.to_vec()).await? {
                        Swap::Written(written) => {
                            self.remember(key, written);
                            return Ok(json_response(StatusCode::OK, body));
                        }
                        // A missing key is written with revision 0.
                        Swap::Conflict(current) => rev = current.unwrap_or(0),
                    }
                }
            }
            Method::GET => {
                let key = format!("{}{}", self.prefix, parts.uri.path());
                let resp = kv.get(key.as_str(), None).await?;
                Ok(match resp.kvs().first() {
                    Some(found) => {
                        self.remember(key, found.mod_revision());
                        json_response(StatusCode::OK, Bytes::copy_from_slice(found.value()))
                    }
                    None => json_response(StatusCode::NOT_FOUND, Bytes::new()),
                })
            }
            _ => Ok(json_response(StatusCode::METHOD_NOT_ALLOWED, Bytes::new())),
        }
    }

    fn revision(&self, key: &str) -> i64 {
        let map = self
            .revisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.get(key).copied().unwrap_or(0)
    }

    fn remember(&self, key: String, revision: i64) {
        let mut map = self
            .revisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.insert(key, revision);
    }
}
