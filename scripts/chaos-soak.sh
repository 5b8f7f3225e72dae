#!/usr/bin/env bash
# The long form of the chaos soak (tests/e2e_etcd_cluster.rs::chaos_soak):
# random kills and pauses of etcd members and kills and restarts of
# replicas under a write load, then a check of every acknowledged write and
# every watch stream. The test suite runs a 20 s form.
#
#   scripts/chaos-soak.sh [SECONDS] [SEED]     (default 300 s, a fresh seed)
set -euo pipefail
cd "$(dirname "$0")/.."
export APIFORGE_SOAK_SECONDS="${1:-300}"
if [[ -n "${2:-}" ]]; then
    export APIFORGE_SOAK_SEED="$2"
fi
exec cargo test --locked -p apiforge --test e2e_etcd_cluster chaos_soak -- --exact --nocapture
