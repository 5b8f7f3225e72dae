#!/usr/bin/env bash
# The whole test suite: installs what the tests need (protoc, etcd), then
# checks formatting and lints and runs every test (unit, storage conformance
# on both backends, end-to-end against the real binary, kubectl smoke tests).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export CARGO_TERM_COLOR=never
# One-shot builds: incremental state only costs disk (tens of GiB over time).
export CARGO_INCREMENTAL=0
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== layering: apiforge-core serves nothing"
# The type-level crate must not pull in an HTTP or TLS stack.
if cargo tree -p apiforge-core -e normal --prefix none --locked | grep -E '^(hyper|axum|rustls|tokio-rustls|tokio) '; then
  echo "apiforge-core depends on a serving crate (above)" >&2
  exit 1
fi
echo "== cargo build"
cargo build --workspace --all-targets --locked
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== user guide: mdbook build docs, relative links"
# Its Rust samples are compiled by cargo test (apiforge-runtime doctests).
mdbook build docs
python3 scripts/check-doc-links.py .
echo "== cargo test"
cargo test --workspace --locked 2>&1 | tee target/test-output.log
echo "== cargo test -p apiforge-runtime --features testing (the in-process test server and kube-rs client types)"
# Feature-gated targets that the workspace run leaves out (required-features).
cargo test --locked -p apiforge-runtime --features testing 2>&1 | tee -a target/test-output.log
# cargo test prints one summary per test binary; end with the total.
awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "%d passed, %d failed, %d skipped\n", p, f, i }' target/test-output.log
echo "== apiforge init: a generated project builds, tests, serves, and kubectl uses it"
./scripts/scaffold-check.sh
echo "== fuzzing: every fuzz target for 15 s from its seed corpus (a crash fails the run)"
./scripts/fuzz.sh 15
echo "== cargo build --release (the binary Schemathesis and the benchmark run)"
cargo build --release --locked -p apiforge -p apiforge-bench
echo "== schemathesis: every served OpenAPI v3 document for 15 s (no 5xx, responses as documented)"
./scripts/schemathesis.sh 15
# Benchmark smoke test: the quick benchmark must run (a scenario that cannot
# run exits non-zero and fails CI), but missed performance targets are only
# reported: timings on shared CI machines are too noisy to gate on.
echo "== apiforge-bench --quick (smoke test; targets reported, not enforced)"
target/release/apiforge-bench --quick --json target/bench-quick.json | tee target/bench-quick.txt
awk -F'|' 'NF > 2 { v = $(NF-1); gsub(/ /, "", v); if (v == "pass") p++; else if (v == "FAIL") f++ }
    END { printf "benchmark targets: %d met, %d missed (not enforced)\n", p, f }' target/bench-quick.txt
