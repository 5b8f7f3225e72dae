//! `apiforge snapshot save` and `apiforge snapshot restore`: snapshots of
//! the embedded store, as `etcdctl snapshot save` and `etcdutl snapshot
//! restore` are for etcd.
//!
//! `save` opens the store itself when no server holds it; while a server
//! runs on the data directory (the store is locked), it asks that server
//! for a consistent copy (`GET /snapshot`, with the directory's
//! `admin.kubeconfig`). `restore` writes a snapshot into a data directory
//! that has no store yet.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use apiforge_storage::embedded::{EmbeddedOptions, EmbeddedStore, snapshot};

/// The snapshot subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum SnapshotCommand {
    /// Write a consistent snapshot of the store in --data-dir to FILE
    /// (through the running server when one holds the store).
    Save(SaveOptions),
    /// Restore FILE into --data-dir, which must not hold a store yet.
    Restore(RestoreOptions),
}

#[derive(Debug, Args)]
pub(crate) struct SaveOptions {
    /// Where to write the snapshot.
    file: PathBuf,
    /// The server's --data-dir.
    #[arg(long, default_value = ".apiforge")]
    data_dir: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct RestoreOptions {
    /// The snapshot to restore.
    file: PathBuf,
    /// The data directory to restore into (created when missing).
    #[arg(long, default_value = ".apiforge")]
    data_dir: PathBuf,
}

/// Runs a snapshot subcommand.
pub(crate) fn run(command: SnapshotCommand) -> anyhow::Result<()> {
    match command {
        SnapshotCommand::Save(opts) => save(&opts.file, &opts.data_dir),
        SnapshotCommand::Restore(opts) => {
            let info = snapshot::restore(&opts.file, &opts.data_dir.join("store"))
                .with_context(|| format!("restoring {}", opts.file.display()))?;
            println!(
                "restored {} keys at revision {} into {}",
                info.keys,
                info.revision,
                opts.data_dir.display()
            );
            Ok(())
        }
    }
}

fn save(file: &Path, data_dir: &Path) -> anyhow::Result<()> {
    let store_dir = data_dir.join("store");
    if !store_dir.join("store.redb").exists() {
        bail!("{} holds no embedded store", data_dir.display());
    }
    let options = EmbeddedOptions {
        compaction_interval: std::time::Duration::ZERO,
        ..EmbeddedOptions::default()
    };
    match EmbeddedStore::open(&store_dir, options) {
        Ok(store) => {
            let info = store
                .snapshot_to(file)
                .with_context(|| format!("writing {}", file.display()))?;
            println!(
                "saved {} keys at revision {} to {} ({} bytes)",
                info.keys,
                info.revision,
                file.display(),
                info.bytes
            );
            Ok(())
        }
        Err(apiforge_storage::Error::Unavailable(why)) if why.contains("locked") => {
            from_server(file, data_dir)
        }
        Err(e) => Err(e).with_context(|| format!("opening the store in {}", store_dir.display())),
    }
}

/// Asks the server running on `data_dir` for the snapshot.
fn from_server(file: &Path, data_dir: &Path) -> anyhow::Result<()> {
    let kubeconfig = data_dir.join("admin.kubeconfig");
    let client = crate::webhook::Client::from_kubeconfig(&kubeconfig)
        .context("the store is in use by a server; reading its admin.kubeconfig")?
        .at_path("/snapshot")
        .map_err(anyhow::Error::msg)?
        .with_timeout(std::time::Duration::from_secs(600));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (code, body) = runtime
        .block_on(client.get())
        .context("asking the running server for a snapshot")?;
    if !code.is_success() {
        bail!(
            "the server answered {code}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let mut part = file.as_os_str().to_owned();
    part.push(".part");
    let part = PathBuf::from(part);
    std::fs::write(&part, &body).with_context(|| format!("writing {}", part.display()))?;
    let (revision, keys) = match snapshot::check(&part) {
        Ok(found) => found,
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            return Err(e).context("the server's answer");
        }
    };
    std::fs::rename(&part, file).with_context(|| format!("writing {}", file.display()))?;
    println!(
        "saved {keys} keys at revision {revision} to {} ({} bytes, from the running server)",
        file.display(),
        body.len()
    );
    Ok(())
}
