//! Binary encoding of the records kept in the redb tables.
//!
//! All integers are little-endian. The formats are private to this module
//! and versioned as a whole by the `format_version` entry of the `meta`
//! table.
//!
//! `kv` value (the key is the table key):
//!
//! ```text
//! create_revision i64 | mod_revision i64 | version i64 | value (rest)
//! ```
//!
//! `log` value (the revision is the table key):
//!
//! ```text
//! kind u8 (0 created, 1 modified, 2 deleted)
//! key_len u32 | key (UTF-8)
//! create_revision i64 | version i64              -- of the new state
//! [prev_create i64 | prev_mod i64 | prev_version i64 |
//!  prev_value_len u64 | prev_value]              -- modified and deleted only
//! value (rest)                                   -- empty for deleted
//! ```
//!
//! For a delete, the event's `kv` is the previous state with `mod_revision`
//! set to the delete's revision, so the new value is not stored again.

use bytes::Bytes;

use crate::{Error, Event, EventType, KeyValue, Result, Revision};

const KIND_CREATED: u8 = 0;
const KIND_MODIFIED: u8 = 1;
const KIND_DELETED: u8 = 2;

fn corrupt(what: &str) -> Error {
    Error::Internal(format!("corrupt {what} record in the embedded store"))
}

/// A bounds-checked reader over an encoded record.
struct Reader<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, what }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(corrupt(self.what));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let bytes = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn len_prefixed_u64(&mut self) -> Result<&'a [u8]> {
        let len = usize::try_from(self.u64()?).map_err(|_| corrupt(self.what))?;
        self.take(len)
    }

    fn str_u32(&mut self) -> Result<&'a str> {
        let len = usize::try_from(self.u32()?).map_err(|_| corrupt(self.what))?;
        std::str::from_utf8(self.take(len)?).map_err(|_| corrupt(self.what))
    }

    fn rest(self) -> &'a [u8] {
        self.buf
    }
}

/// Encodes a key's current state for the `kv` table.
pub(super) fn encode_kv(kv: &KeyValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + kv.value.len());
    out.extend_from_slice(&kv.create_revision.to_le_bytes());
    out.extend_from_slice(&kv.mod_revision.to_le_bytes());
    out.extend_from_slice(&kv.version.to_le_bytes());
    out.extend_from_slice(&kv.value);
    out
}

/// Decodes a `kv` table value stored under `key`.
pub(super) fn decode_kv(key: &str, bytes: &[u8]) -> Result<KeyValue> {
    let mut r = Reader::new(bytes, "kv");
    let create_revision = r.i64()?;
    let mod_revision = r.i64()?;
    let version = r.i64()?;
    Ok(KeyValue {
        key: key.to_owned(),
        value: Bytes::copy_from_slice(r.rest()),
        create_revision,
        mod_revision,
        version,
        stale: false,
    })
}

/// Encodes an event for the `log` table. Fails when the key is longer than
/// `u32::MAX` bytes (the callers limit sizes far below that).
pub(super) fn encode_event(event: &Event) -> Result<Vec<u8>> {
    let key = event.kv.key.as_bytes();
    let key_len = u32::try_from(key.len())
        .map_err(|_| Error::Internal(format!("key of {} bytes is too long", key.len())))?;
    let kind = match event.kind {
        EventType::Created => KIND_CREATED,
        EventType::Modified => KIND_MODIFIED,
        EventType::Deleted => KIND_DELETED,
    };
    let prev_len = event.prev.as_ref().map_or(0, |p| 32 + p.value.len());
    let value: &[u8] = match event.kind {
        EventType::Deleted => &[],
        _ => &event.kv.value,
    };
    let mut out = Vec::with_capacity(1 + 4 + key.len() + 16 + prev_len + value.len());
    out.push(kind);
    out.extend_from_slice(&key_len.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&event.kv.create_revision.to_le_bytes());
    out.extend_from_slice(&event.kv.version.to_le_bytes());
    if event.kind != EventType::Created {
        let prev = event
            .prev
            .as_ref()
            .ok_or_else(|| Error::Internal("modify/delete event without previous state".into()))?;
        out.extend_from_slice(&prev.create_revision.to_le_bytes());
        out.extend_from_slice(&prev.mod_revision.to_le_bytes());
        out.extend_from_slice(&prev.version.to_le_bytes());
        out.extend_from_slice(&(prev.value.len() as u64).to_le_bytes());
        out.extend_from_slice(&prev.value);
    }
    out.extend_from_slice(value);
    Ok(out)
}

/// Reads only the key of a `log` table value (cheap prefix filtering).
pub(super) fn decode_event_key(bytes: &[u8]) -> Result<&str> {
    let mut r = Reader::new(bytes, "log");
    r.u8()?;
    r.str_u32()
}

/// Decodes the `log` table value stored under `revision`.
pub(super) fn decode_event(revision: Revision, bytes: &[u8]) -> Result<Event> {
    let mut r = Reader::new(bytes, "log");
    let kind = match r.u8()? {
        KIND_CREATED => EventType::Created,
        KIND_MODIFIED => EventType::Modified,
        KIND_DELETED => EventType::Deleted,
        _ => return Err(corrupt("log")),
    };
    let key = r.str_u32()?.to_owned();
    let create_revision = r.i64()?;
    let version = r.i64()?;
    let prev = if kind == EventType::Created {
        None
    } else {
        let create_revision = r.i64()?;
        let mod_revision = r.i64()?;
        let version = r.i64()?;
        let value = Bytes::copy_from_slice(r.len_prefixed_u64()?);
        Some(KeyValue {
            key: key.clone(),
            value,
            create_revision,
            mod_revision,
            version,
            stale: false,
        })
    };
    let value = match (&kind, &prev) {
        (EventType::Deleted, Some(prev)) => prev.value.clone(),
        _ => Bytes::copy_from_slice(r.rest()),
    };
    Ok(Event {
        kind,
        kv: KeyValue {
            key,
            value,
            create_revision,
            mod_revision: revision,
            version,
            stale: false,
        },
        prev,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: &'static [u8], c: i64, m: i64, v: i64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Bytes::from_static(value),
            create_revision: c,
            mod_revision: m,
            version: v,
            stale: false,
        }
    }

    #[test]
    fn kv_round_trip() -> Result<()> {
        let k = kv("/a/b", b"hello", 3, 7, 2);
        let enc = encode_kv(&k);
        assert_eq!(decode_kv("/a/b", &enc)?, k);
        assert!(decode_kv("/a/b", &enc[..10]).is_err());
        Ok(())
    }

    #[test]
    fn event_round_trip() -> Result<()> {
        let events = [
            Event {
                kind: EventType::Created,
                kv: kv("/k", b"v1", 5, 5, 1),
                prev: None,
            },
            Event {
                kind: EventType::Modified,
                kv: kv("/k", b"v2", 5, 6, 2),
                prev: Some(kv("/k", b"v1", 5, 5, 1)),
            },
            Event {
                kind: EventType::Deleted,
                kv: kv("/k", b"v2", 5, 7, 2),
                prev: Some(kv("/k", b"v2", 5, 6, 2)),
            },
        ];
        for ev in events {
            let enc = encode_event(&ev)?;
            assert_eq!(decode_event_key(&enc)?, "/k");
            assert_eq!(decode_event(ev.kv.mod_revision, &enc)?, ev);
            for cut in 0..enc.len().min(40) {
                // Truncated records never panic.
                let _ = decode_event(1, &enc[..cut]);
            }
        }
        assert!(decode_event(1, &[9, 0, 0, 0, 0]).is_err());
        Ok(())
    }
}
