//! The raw etcd references: what an etcd client does for a create and a
//! compare-and-swap update without any API server in between, so that
//! apiforge's etcd backend can be compared with the store underneath it.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use anyhow::{Context, bail};
use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

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
        let txn = Txn::new()
            .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.as_str(), self.value.clone(), None)]);
        let resp = self.client.kv_client().txn(txn).await?;
        if !resp.succeeded() {
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
            let txn = Txn::new()
                .when([Compare::mod_revision(key.as_str(), CompareOp::Equal, rev)])
                .and_then([TxnOp::put(key.as_str(), self.value.clone(), None)])
                .or_else([TxnOp::get(key.as_str(), None)]);
            let resp = kv.txn(txn).await?;
            if resp.succeeded() {
                let rev = resp.header().context("txn without header")?.revision();
                seen.store(rev, Ordering::Relaxed);
                return Ok(self.value.len() as u64);
            }
            self.conflicts.fetch_add(1, Ordering::Relaxed);
            let current = resp
                .op_responses()
                .into_iter()
                .find_map(|op| match op {
                    TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.mod_revision()),
                    _ => None,
                })
                .with_context(|| format!("{key} vanished"))?;
            seen.store(current, Ordering::Relaxed);
        }
    }
}
