//! The log backend (`--audit-log-path`): one JSON event per line, to a file
//! rotated as lumberjack rotates it (`--audit-log-maxsize` MiB, old files
//! renamed `<name>-<UTC timestamp>.<ext>`, pruned by `--audit-log-maxbackup`
//! and `--audit-log-maxage` days), or to standard output for `-`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::audit::event::Event;

/// Log backend settings.
#[derive(Clone, Debug, Default)]
pub struct LogOptions {
    /// The file, or `-` for standard output.
    pub path: PathBuf,
    /// Days to keep rotated files (0 = no limit).
    pub max_age_days: u64,
    /// Rotated files to keep (0 = no limit).
    pub max_backups: usize,
    /// MiB before the file is rotated (0 = lumberjack's 100).
    pub max_size_mib: u64,
    /// `json` or `legacy`.
    pub format: LogFormat,
}

/// The line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// A JSON `Event` per line.
    #[default]
    Json,
    /// kube-apiserver's legacy single-line text.
    Legacy,
}

enum Sink {
    Stdout,
    File { file: Option<File>, size: u64 },
}

/// The log backend.
pub struct LogBackend {
    options: LogOptions,
    sink: Mutex<Sink>,
}

impl LogBackend {
    /// Opens (creates, appends to) the log.
    pub fn new(options: LogOptions) -> std::io::Result<Self> {
        let sink = if options.path.as_os_str() == "-" {
            Sink::Stdout
        } else {
            if let Some(dir) = options.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let file = open(&options.path)?;
            let size = file.metadata()?.len();
            Sink::File {
                file: Some(file),
                size,
            }
        };
        Ok(LogBackend {
            options,
            sink: Mutex::new(sink),
        })
    }

    fn max_bytes(&self) -> u64 {
        match self.options.max_size_mib {
            0 => 100 * 1024 * 1024,
            n => n * 1024 * 1024,
        }
    }

    /// Writes one event.
    pub fn write(&self, event: &Event) {
        let mut line = match self.options.format {
            LogFormat::Json => match serde_json::to_vec(event) {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!(error = %e, "audit: encoding event failed");
                    audit_error();
                    return;
                }
            },
            LogFormat::Legacy => legacy_line(event).into_bytes(),
        };
        line.push(b'\n');
        let mut sink = match self.sink.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        let result = match &mut *sink {
            Sink::Stdout => std::io::stdout().lock().write_all(&line),
            Sink::File { file, size } => {
                let len = line.len() as u64;
                if *size > 0 && *size + len > self.max_bytes() {
                    file.take();
                    if let Err(e) = self.rotate() {
                        tracing::error!(error = %e, "audit: rotating the log failed");
                    }
                    *size = 0;
                }
                if file.is_none() {
                    match open(&self.options.path) {
                        Ok(f) => *file = Some(f),
                        Err(e) => {
                            tracing::error!(error = %e, "audit: opening the log failed");
                            audit_error();
                            return;
                        }
                    }
                }
                *size += len;
                file.as_mut().map_or(Ok(()), |f| f.write_all(&line))
            }
        };
        if let Err(e) = result {
            tracing::error!(error = %e, "audit: writing the log failed");
            audit_error();
        }
    }

    /// Renames the current file to its backup name and prunes old backups.
    fn rotate(&self) -> std::io::Result<()> {
        let path = &self.options.path;
        let (dir, prefix, ext) = split_name(path);
        let stamp = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H-%M-%S%.3f")
            .to_string();
        let backup = dir.join(format!("{prefix}-{stamp}{ext}"));
        std::fs::rename(path, &backup)?;
        let mut backups: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)?
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let stamp = name
                    .strip_prefix(&format!("{prefix}-"))?
                    .strip_suffix(ext.as_str())?
                    .to_string();
                jiff::civil::DateTime::strptime("%Y-%m-%dT%H-%M-%S%.f", &stamp).ok()?;
                Some((stamp, e.path()))
            })
            .collect();
        backups.sort_by(|a, b| b.0.cmp(&a.0));
        let now = jiff::Timestamp::now();
        for (i, (stamp, file)) in backups.iter().enumerate() {
            let too_many = self.options.max_backups > 0 && i >= self.options.max_backups;
            let too_old = self.options.max_age_days > 0
                && jiff::civil::DateTime::strptime("%Y-%m-%dT%H-%M-%S%.f", stamp)
                    .ok()
                    .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
                    .is_some_and(|z| {
                        now.as_second() - z.timestamp().as_second()
                            > (self.options.max_age_days * 86400) as i64
                    });
            if too_many || too_old {
                let _ = std::fs::remove_file(file);
            }
        }
        Ok(())
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// `dir/name.ext` → (`dir`, `name`, `.ext`).
fn split_name(path: &Path) -> (PathBuf, String, String) {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let prefix = file.strip_suffix(ext.as_str()).unwrap_or(&file).to_string();
    (dir, prefix, ext)
}

/// The legacy format: `<timestamp> AUDIT: id="..." stage="..." ip="..."
/// method="..." user="..." groups="..." as="..." asgroups="..."
/// user-agent="..." namespace="..." uri="..." response="..."`.
fn legacy_line(e: &Event) -> String {
    let quote = |s: &str| format!("{s:?}");
    let groups = e
        .user
        .groups
        .iter()
        .map(|g| quote(g))
        .collect::<Vec<_>>()
        .join(",");
    let (as_user, as_groups) = match &e.impersonated_user {
        Some(u) => (
            quote(&u.name),
            u.groups
                .iter()
                .map(|g| quote(g))
                .collect::<Vec<_>>()
                .join(","),
        ),
        None => ("<self>".to_string(), "<lookup>".to_string()),
    };
    let namespace = e
        .object_ref
        .as_ref()
        .map(|o| o.namespace.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "<none>".into());
    let response = e
        .response_status
        .as_ref()
        .map_or_else(|| "<deferred>".to_string(), |s| s.code.to_string());
    format!(
        "{} AUDIT: id={} stage={} ip={} method={} user={} groups={} as={} asgroups={} user-agent={} namespace={} uri={} response=\"{}\"",
        e.stage_timestamp,
        quote(&e.audit_id),
        quote(&format!("{:?}", e.stage)),
        quote(&e.source_ips.join(",")),
        quote(&e.verb),
        quote(&e.user.name),
        quote(&format!("[{groups}]")),
        as_user,
        as_groups,
        quote(&e.user_agent),
        quote(&namespace),
        quote(&e.request_uri),
        response
    )
}

/// Counts an event the log backend lost (`apiserver_audit_error_total`).
fn audit_error() {
    crate::metrics::global()
        .audit_errors
        .with_label_values(&["log"])
        .inc();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_split_like_lumberjack() {
        let (dir, prefix, ext) = split_name(Path::new("/var/log/audit.log"));
        assert_eq!(
            (dir, prefix.as_str(), ext.as_str()),
            (PathBuf::from("/var/log"), "audit", ".log")
        );
        let (_, prefix, ext) = split_name(Path::new("audit"));
        assert_eq!((prefix.as_str(), ext.as_str()), ("audit", ""));
    }
}
