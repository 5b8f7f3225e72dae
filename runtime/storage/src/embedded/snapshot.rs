//! Snapshots of the embedded store: what `etcdctl snapshot save` and
//! `etcdutl snapshot restore` are for etcd.
//!
//! A snapshot is a redb database with the store's four tables, copied from
//! one read transaction: consistent at one revision while the store keeps
//! serving (the single writer is never blocked by a reader). It is written
//! to `<file>.part`, synced and renamed, so a snapshot file is whole or
//! absent. Restoring checks the file (the tables and the format version),
//! refuses a data directory that already has a store, and copies the file
//! in the same way; a server started on the directory then serves what the
//! snapshot held, at its revision.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::{
    DB_FILE, EmbeddedStore, FORMAT_VERSION, HISTORY, KV, LOG, META, META_CURRENT, META_FORMAT,
    db_err,
};
use crate::{Error, Result};

/// What a snapshot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The store's revision when the snapshot was taken.
    pub revision: i64,
    /// The keys (objects) in it.
    pub keys: u64,
    /// The file's size in bytes.
    pub bytes: u64,
}

impl EmbeddedStore {
    /// Writes a consistent snapshot of the store to `dest` (see the
    /// [module documentation](self)). Synchronous file I/O: call it from
    /// `spawn_blocking`.
    pub fn snapshot_to(&self, dest: &Path) -> Result<SnapshotInfo> {
        let handle = self.db()?;
        let part = part_path(dest);
        let _ = std::fs::remove_file(&part);
        let result = copy_tables(&handle.db, &part).and_then(|revision| {
            let keys = count_keys(&part)?;
            finish(&part, dest)?;
            Ok(SnapshotInfo {
                revision,
                keys,
                bytes: file_size(dest),
            })
        });
        if result.is_err() {
            let _ = std::fs::remove_file(&part);
        }
        result
    }
}

/// Restores the snapshot `file` into the store directory `dir` (created,
/// mode 0700, when missing), which must not hold a store yet.
pub fn restore(file: &Path, dir: &Path) -> Result<SnapshotInfo> {
    let target = dir.join(DB_FILE);
    if target.exists() {
        return Err(Error::Internal(format!(
            "{} already holds a store; restore into an empty data directory",
            dir.display()
        )));
    }
    let (revision, keys) = check(file)?;
    create_private_dir(dir)?;
    let part = part_path(&target);
    std::fs::copy(file, &part).map_err(|e| io(&part, e))?;
    finish(&part, &target)?;
    Ok(SnapshotInfo {
        revision,
        keys,
        bytes: file_size(&target),
    })
}

/// The revision and key count of the snapshot `file`, once it is known to
/// be one: a redb database with the store's tables in this format.
pub fn check(file: &Path) -> Result<(i64, u64)> {
    let not_a_snapshot =
        |why: String| Error::Internal(format!("{} is not a snapshot: {why}", file.display()));
    let db = Database::open(file).map_err(|e| not_a_snapshot(e.to_string()))?;
    let txn = db.begin_read().map_err(|e| not_a_snapshot(e.to_string()))?;
    let meta = txn
        .open_table(META)
        .map_err(|e| not_a_snapshot(e.to_string()))?;
    let value = |name: &str| -> Result<Option<i64>> {
        Ok(meta
            .get(name)
            .map_err(|e| not_a_snapshot(e.to_string()))?
            .map(|g| g.value()))
    };
    match value(META_FORMAT)? {
        Some(FORMAT_VERSION) => {}
        other => {
            return Err(not_a_snapshot(format!(
                "format version {other:?}, this server reads {FORMAT_VERSION}"
            )));
        }
    }
    let revision = value(META_CURRENT)?.unwrap_or(0);
    // Present even when empty: a snapshot has every table.
    txn.open_table(LOG)
        .map_err(|e| not_a_snapshot(e.to_string()))?;
    txn.open_table(HISTORY)
        .map_err(|e| not_a_snapshot(e.to_string()))?;
    let keys = txn
        .open_table(KV)
        .map_err(|e| not_a_snapshot(e.to_string()))?
        .len()
        .map_err(|e| not_a_snapshot(e.to_string()))?;
    Ok((revision, keys))
}

/// Copies every table from one read transaction of `db` into a new
/// database at `path`; the revision copied.
fn copy_tables(db: &Database, path: &Path) -> Result<i64> {
    let read = db.begin_read().map_err(db_err)?;
    let out = Database::create(path).map_err(db_err)?;
    let write = out.begin_write().map_err(db_err)?;
    let mut revision = 0;
    {
        let from = read.open_table(KV).map_err(db_err)?;
        let mut to = write.open_table(KV).map_err(db_err)?;
        for entry in from.iter().map_err(db_err)? {
            let (k, v) = entry.map_err(db_err)?;
            to.insert(k.value(), v.value()).map_err(db_err)?;
        }
    }
    {
        let from = read.open_table(LOG).map_err(db_err)?;
        let mut to = write.open_table(LOG).map_err(db_err)?;
        for entry in from.iter().map_err(db_err)? {
            let (k, v) = entry.map_err(db_err)?;
            to.insert(k.value(), v.value()).map_err(db_err)?;
        }
    }
    {
        let from = read.open_table(HISTORY).map_err(db_err)?;
        let mut to = write.open_table(HISTORY).map_err(db_err)?;
        for entry in from.iter().map_err(db_err)? {
            let (k, _) = entry.map_err(db_err)?;
            to.insert(k.value(), ()).map_err(db_err)?;
        }
    }
    {
        let from = read.open_table(META).map_err(db_err)?;
        let mut to = write.open_table(META).map_err(db_err)?;
        for entry in from.iter().map_err(db_err)? {
            let (k, v) = entry.map_err(db_err)?;
            if k.value() == META_CURRENT {
                revision = v.value();
            }
            to.insert(k.value(), v.value()).map_err(db_err)?;
        }
    }
    write.commit().map_err(db_err)?;
    drop(out);
    Ok(revision)
}

fn count_keys(path: &Path) -> Result<u64> {
    check(path).map(|(_, keys)| keys)
}

/// `<path>.part`.
fn part_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".part");
    PathBuf::from(name)
}

/// Syncs `part`, gives it mode 0600 and renames it to `dest`.
fn finish(part: &Path, dest: &Path) -> Result<()> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(part)
        .map_err(|e| io(part, e))?;
    set_private(part)?;
    file.sync_all().map_err(|e| io(part, e))?;
    std::fs::rename(part, dest).map_err(|e| io(dest, e))?;
    if let Some(parent) = dest.parent()
        && let Ok(dir) = std::fs::File::open(parent)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(unix)]
fn set_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|e| io(path, e))
}

#[cfg(not(unix))]
fn set_private(_: &Path) -> Result<()> {
    Ok(())
}

fn create_private_dir(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|e| io(dir, e))
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Unavailable(format!("{}: {e}", path.display()))
}
