#!/usr/bin/env bash
# Profiles the apiforge server under one benchmark scenario with Linux perf
# (Debian's linux-perf) and prints its top frames by self time.
#
#   scripts/profile.sh SCENARIO MARKER SECONDS [OUT_DIR]
#
# Runs `target/release/apiforge-bench --scenario SCENARIO`, waits until the
# benchmark's progress output contains MARKER, then samples the newest
# apiforge server the benchmark started for SECONDS (999 Hz, user and
# kernel) and writes, under OUT_DIR (default target/profiles):
#   SCENARIO.perf.data   the samples (`perf report -i` reads them)
#   SCENARIO.top.txt     the top frames, self time, ≥ 0.5 % of samples
#   SCENARIO.bench.log   the benchmark's progress
# The benchmark is stopped once the samples are taken.
# BENCH_ARGS adds arguments to the benchmark (e.g. "--quick").
#
# Examples (markers are progress lines of the benchmark):
#   scripts/profile.sh get "object is" 8
#   scripts/profile.sh list "full list is" 8
#   scripts/profile.sh create "apiforge on etcd is ready" 8
#   scripts/profile.sh update "update etcd" 8
#   BENCH_ARGS=--scale-steps=300000 scripts/profile.sh scale "+300000 objects" 30
# Build first: cargo build --release -p apiforge -p apiforge-bench
set -euo pipefail

if [[ $# -lt 3 ]]; then
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
scenario=$1 marker=$2 seconds=$3 out=${4:-target/profiles}
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 2; }
[[ -x target/release/apiforge-bench ]] || { echo "build first: cargo build --release -p apiforge -p apiforge-bench" >&2; exit 2; }
mkdir -p "$out"
log=$out/$scenario.bench.log
# shellcheck disable=SC2086 # BENCH_ARGS is a list of words
target/release/apiforge-bench --scenario "$scenario" ${BENCH_ARGS:-} >/dev/null 2>"$log" &
bench=$!
# The benchmark's servers (apiforge, etcd, references) go with it.
trap 'pkill -P $bench 2>/dev/null; kill $bench 2>/dev/null || true' EXIT
until grep -qsF -- "$marker" "$log"; do
    if ! kill -0 $bench 2>/dev/null; then
        echo "the benchmark ended before printing '$marker'; see $log" >&2
        exit 1
    fi
    sleep 0.2
done
server=$(pgrep -n -P $bench -x apiforge) || { echo "no apiforge server under the benchmark" >&2; exit 1; }
echo "profiling apiforge (pid $server) for $seconds s after '$marker'" >&2
# PERF_ARGS replaces the sampling options (e.g. "-F 199 --call-graph dwarf").
# shellcheck disable=SC2086
perf record -q ${PERF_ARGS:--F 999} -p "$server" -o "$out/$scenario.perf.data" &
perf=$!
sleep "$seconds"
kill -INT $perf 2>/dev/null || true
wait $perf || true
perf report -i "$out/$scenario.perf.data" --no-children --sort dso,symbol --stdio \
    --percent-limit 0.5 2>/dev/null | grep -v '^#' | grep -v '^$' | sed 's/ *$//' >"$out/$scenario.top.txt" || true
cat "$out/$scenario.top.txt"
