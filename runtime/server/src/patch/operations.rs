//! Applying JSON patch (RFC 6902) operations as kube-apiserver's
//! json-patch library (`gopkg.in/evanphx/json-patch.v4`) does, with its
//! bounds:
//!
//! - `copy` operations may add at most a limit of bytes in total (the
//!   library's `AccumulatedCopySizeLimit`, which kube-apiserver sets from
//!   its request body limit): each copy is measured as the JSON text of the
//!   copied value *before* anything is allocated for it, so a patch of
//!   doubling copies stops at the limit instead of exhausting memory;
//! - the root (`""`) is no target of `add`, `remove`, `move` or `copy`,
//!   nor a `from`; `replace` of the root with anything but an object or an
//!   array changes nothing (v4.12's `replace` returns a nil error there).
//!
//! Operations apply one by one to a document the caller owns and throws
//! away on failure, so nothing is undone (the crate's undo of a failed
//! patch panics on some inputs, e.g. a `move` to the root followed by a
//! failing `test`).

use std::io;

use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::Value;

/// Why an operation of a JSON patch failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationError {
    /// The failed operation's index.
    pub index: usize,
    /// Whether a `test` operation found another value (mutating admission
    /// policies skip such a patch instead of failing).
    pub test_failed: bool,
    /// What went wrong, for logs and admission messages.
    pub message: String,
}

impl std::fmt::Display for OperationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Applies `ops` to `doc` in order, the accumulated size of `copy`
/// operations bounded by `copy_limit` bytes. On error `doc` holds the
/// operations before the failed one: the caller discards it.
pub fn apply(
    doc: &mut Value,
    ops: &[PatchOperation],
    copy_limit: usize,
) -> Result<(), OperationError> {
    let mut copied = 0usize;
    for (index, op) in ops.iter().enumerate() {
        let fail = |message: String| OperationError {
            index,
            test_failed: false,
            message,
        };
        match op {
            PatchOperation::Add(o) if o.path.is_root() => {
                return Err(fail(
                    "add operation does not apply: doc is missing path: \"\"".into(),
                ));
            }
            PatchOperation::Remove(o) if o.path.is_root() => {
                return Err(fail(
                    "remove operation does not apply: doc is missing path: \"\"".into(),
                ));
            }
            // json-patch v4.12 answers such a replace with a nil error
            // (`errors.Wrapf(nil, ...)`): the document stays as it is.
            PatchOperation::Replace(o)
                if o.path.is_root() && !(o.value.is_object() || o.value.is_array()) =>
            {
                continue;
            }
            PatchOperation::Move(o) if o.from.is_root() => {
                return Err(fail(
                    "move operation does not apply: doc is missing from path: ".into(),
                ));
            }
            PatchOperation::Move(o) if o.path.is_root() => {
                return Err(fail(
                    "move operation does not apply: doc is missing destination path: ".into(),
                ));
            }
            PatchOperation::Copy(o) if o.from.is_root() => {
                return Err(fail(
                    "copy operation does not apply: doc is missing from path: ".into(),
                ));
            }
            PatchOperation::Copy(o) if o.path.is_root() => {
                return Err(fail(
                    "copy operation does not apply: doc is missing destination path: ".into(),
                ));
            }
            PatchOperation::Copy(o) => {
                let Some(source) = doc.pointer(o.from.as_str()) else {
                    return Err(fail(format!(
                        "copy operation does not apply: doc is missing from path: {}",
                        o.from
                    )));
                };
                let left = copy_limit.saturating_sub(copied);
                match json_size_within(source, left) {
                    Some(size) => copied += size,
                    None => {
                        return Err(fail(format!(
                            "Unable to complete the copy, the accumulated size increase of copy exceeds the limit {copy_limit}"
                        )));
                    }
                }
            }
            _ => {}
        }
        json_patch::patch_unsafe(doc, std::slice::from_ref(op)).map_err(|e| OperationError {
            index,
            test_failed: matches!(e.kind, PatchErrorKind::TestFailed),
            message: e.to_string(),
        })?;
    }
    Ok(())
}

/// The length of `value`'s JSON text when it is at most `max` bytes;
/// counted without building the text, and given up on once over.
pub fn json_size_within(value: &Value, max: usize) -> Option<usize> {
    struct Counter {
        count: usize,
        max: usize,
    }
    impl io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.count = self.count.saturating_add(buf.len());
            if self.count > self.max {
                return Err(io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { count: 0, max };
    serde_json::to_writer(&mut counter, value).ok()?;
    Some(counter.count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ops(v: Value) -> Vec<PatchOperation> {
        serde_json::from_value::<json_patch::Patch>(v)
            .map(|p| p.0)
            .unwrap_or_default()
    }

    #[test]
    fn copy_size_counts_json_text_and_stops_at_the_limit() {
        // evanphx/json-patch's own case: each copy of a 49-character
        // string adds 51 bytes (its quotes included).
        let a49 = "A".repeat(49);
        let mut doc = json!({"foo": ["A", a49]});
        let p = ops(json!([
            {"op": "copy", "path": "/foo/-", "from": "/foo/1"},
            {"op": "copy", "path": "/foo/-", "from": "/foo/1"},
        ]));
        let err = apply(&mut doc.clone(), &p, 100).unwrap_err();
        assert_eq!(err.index, 1);
        assert!(err.message.contains("exceeds the limit 100"), "{err}");
        apply(&mut doc, &p, 102).unwrap();
        assert_eq!(doc["foo"].as_array().map(Vec::len), Some(4));
    }

    #[test]
    fn doubling_copies_stop_before_allocating() {
        let mut doc = json!({"a": "x".repeat(1024)});
        let mut list = vec![json!({"op": "add", "path": "/b", "value": {}})];
        for i in 0..40 {
            list.push(json!({"op": "copy", "from": "", "path": format!("/b/{i}")}));
        }
        // `from: ""` is refused outright; a copy of a growing subtree is
        // bounded by size.
        assert!(apply(&mut doc.clone(), &ops(Value::Array(list)), 3 << 20).is_err());
        let mut list = vec![json!({"op": "add", "path": "/b", "value": {"x": doc["a"].clone()}})];
        for i in 0..40 {
            list.push(json!({"op": "copy", "from": "/b", "path": format!("/b/{i}")}));
        }
        let err = apply(&mut doc, &ops(Value::Array(list)), 3 << 20).unwrap_err();
        assert!(err.index < 15, "{err:?}");
    }

    #[test]
    fn a_move_to_the_root_then_a_failed_test_does_not_panic() {
        let mut doc = json!({"data": {"k": "v"}, "metadata": {"name": "x"}});
        let p = ops(json!([
            {"op": "move", "path": "", "from": "/data"},
            {"op": "test", "path": "/x", "value": 1},
        ]));
        let err = apply(&mut doc, &p, 1 << 20).unwrap_err();
        assert_eq!(err.index, 0);
        assert!(!err.test_failed);
    }

    #[test]
    fn root_targets_are_refused_but_replace_and_test_of_the_root() {
        let doc = json!({"a": 1});
        for bad in [
            json!({"op": "add", "path": "", "value": {}}),
            json!({"op": "remove", "path": ""}),
            json!({"op": "copy", "path": "", "from": "/a"}),
            json!({"op": "move", "path": "/b", "from": ""}),
        ] {
            assert!(
                apply(&mut doc.clone(), &ops(json!([bad])), 1 << 20).is_err(),
                "{bad}"
            );
        }
        let mut out = doc.clone();
        apply(
            &mut out,
            &ops(json!([{"op": "replace", "path": "", "value": 1},
                        {"op": "test", "path": "", "value": {"a": 1}},
                        {"op": "replace", "path": "", "value": {"b": 2}}])),
            1 << 20,
        )
        .unwrap();
        assert_eq!(out, json!({"b": 2}));
        let err = apply(
            &mut doc.clone(),
            &ops(json!([{"op": "test", "path": "/a", "value": 2}])),
            1 << 20,
        )
        .unwrap_err();
        assert!(err.test_failed);
    }
}
