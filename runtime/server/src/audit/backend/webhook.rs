//! The webhook backend (`--audit-webhook-config-file`): events are POSTed
//! as `audit.k8s.io/v1` `EventList`s to the server a kubeconfig names.
//!
//! In `batch` mode events go to a bounded queue (never blocking a request;
//! when the queue is full the event is dropped and logged, as upstream) and
//! a task sends a batch when `--audit-webhook-batch-max-size` events are
//! queued or `--audit-webhook-batch-max-wait` passed since the first. In
//! `blocking` mode every event is sent before the request goes on.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::audit::event::{Event, EventList};
use crate::webhook::Client;

/// How events are sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WebhookMode {
    /// Buffered and sent asynchronously in batches.
    #[default]
    Batch,
    /// Sent one by one while the request waits.
    Blocking,
}

/// Webhook backend settings.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    /// The kubeconfig naming the server.
    pub config_file: PathBuf,
    /// The mode.
    pub mode: WebhookMode,
    /// Queue capacity (`--audit-webhook-batch-buffer-size`).
    pub buffer_size: usize,
    /// Events per batch at most.
    pub batch_max_size: usize,
    /// Longest wait before a partial batch is sent.
    pub batch_max_wait: Duration,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            config_file: PathBuf::new(),
            mode: WebhookMode::Batch,
            buffer_size: 10000,
            batch_max_size: 400,
            batch_max_wait: Duration::from_secs(30),
        }
    }
}

/// The webhook backend.
pub struct WebhookBackend {
    target: Arc<Client>,
    mode: WebhookMode,
    queue: Option<mpsc::Sender<Event>>,
}

async fn send_events(target: &Client, events: &[Event]) {
    let body = match serde_json::to_vec(&EventList::new(events)) {
        Ok(b) => Bytes::from(b),
        Err(e) => {
            audit_errors(events.len());
            tracing::error!(error = %e, "audit: encoding events failed");
            return;
        }
    };
    let result = match target.post(body).await {
        Ok((code, _)) if code.is_success() => Ok(()),
        Ok((code, _)) => Err(format!("the webhook answered {code}")),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = result {
        audit_errors(events.len());
        tracing::error!(
            "Error in audit plugin 'webhook' affecting {} audit events: {e}",
            events.len()
        );
    }
}

impl WebhookBackend {
    /// Reads the kubeconfig and, in batch mode, starts the sending task.
    pub fn new(options: &WebhookOptions) -> Result<Self, String> {
        let target = Arc::new(
            Client::from_kubeconfig(&options.config_file)
                .map_err(|e| format!("invalid audit {e}"))?,
        );
        let queue = match options.mode {
            WebhookMode::Blocking => None,
            WebhookMode::Batch => {
                let (tx, rx) = mpsc::channel(options.buffer_size.max(1));
                tokio::spawn(run_batches(
                    target.clone(),
                    rx,
                    options.batch_max_size.max(1),
                    options.batch_max_wait,
                ));
                Some(tx)
            }
        };
        Ok(WebhookBackend {
            target,
            mode: options.mode,
            queue,
        })
    }

    /// Queues (batch) or sends (blocking) an event.
    pub async fn process(&self, event: &Event) {
        match (&self.queue, self.mode) {
            (Some(queue), _) => {
                if queue.try_send(event.clone()).is_err() {
                    audit_errors(1);
                    tracing::error!(
                        audit_id = %event.audit_id,
                        "Error in audit plugin 'webhook' affecting 1 audit events: audit buffer queue blocked"
                    );
                }
            }
            (None, _) => send_events(&self.target, std::slice::from_ref(event)).await,
        }
    }
}

async fn run_batches(
    target: Arc<Client>,
    mut rx: mpsc::Receiver<Event>,
    max_size: usize,
    max_wait: Duration,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + max_wait;
        while batch.len() < max_size {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(ev)) => batch.push(ev),
                Ok(None) | Err(_) => break,
            }
        }
        send_events(&target, &batch).await;
    }
}

/// Counts events the webhook backend lost (`apiserver_audit_error_total`).
fn audit_errors(events: usize) {
    crate::metrics::global()
        .audit_errors
        .with_label_values(&["webhook"])
        .inc_by(events as u64);
}
