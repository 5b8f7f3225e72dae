//! Where audit events go: the log file and the webhook.

pub mod log;
pub mod webhook;
