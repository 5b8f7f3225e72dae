#!/usr/bin/env bash
# Builds apiforge (release) and runs `apiforge serve` on the embedded store.
# Extra arguments go to `apiforge serve` (e.g. --secure-port 6443 --data-dir .apiforge).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --build-only
exec cargo run --release --locked --bin apiforge -- serve "$@"
