#!/usr/bin/env bash
# Coverage-guided fuzzing of apiforge's input edges (fuzz/fuzz_targets/):
# builds every cargo-fuzz target (libFuzzer, AddressSanitizer) and runs each
# for a bounded time from its checked-in seed corpus (fuzz/corpus/<target>;
# what a run finds is kept in target/fuzz-corpus, not committed). Fails on
# any crash; the crashing input is left in fuzz/artifacts/<target>/.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 20)
# cargo-fuzz passes -Z flags to rustc: on a stable toolchain this script
# sets RUSTC_BOOTSTRAP=1 for that (the sanitizer runtime ships with std).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
command -v cargo-fuzz >/dev/null || { echo "fuzz: cargo-fuzz is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR=$PWD/target/fuzz
cd fuzz
start=$(date +%s)
# The build's output goes to a log: on failure, its errors are printed
# without the linker's command line (thousands of characters that would
# bury the linker's own message), with the disk and memory left, and the
# build is tried once more one job at a time (one sanitized link at a
# time needs less memory and scratch space; the crates already built are
# kept, so only what failed is redone).
build_log=$CARGO_TARGET_DIR/build.log
mkdir -p "$CARGO_TARGET_DIR"
if ! cargo fuzz build -O >"$build_log" 2>&1; then
  echo "fuzz: the build failed; its messages (linker command lines left out):" >&2
  grep -v -e '^ *= note: *"' -e '^ *Compiling ' -e '^ *Downloaded ' "$build_log" | tail -80 >&2 || true
  df -h "$CARGO_TARGET_DIR" >&2
  free -m >&2
  echo "fuzz: building again, one job at a time" >&2
  CARGO_BUILD_JOBS=1 cargo fuzz build -O
fi
built=$(date +%s)
echo "fuzz: targets built in $((built - start)) s"
status=0
for target in $(cargo fuzz list); do
  corpus=$CARGO_TARGET_DIR/../fuzz-corpus/$target
  mkdir -p "$corpus"
  log=$CARGO_TARGET_DIR/$target.log
  if cargo fuzz run -O "$target" "$corpus" "corpus/$target" -- \
      -max_total_time="$seconds" -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "fuzz: $target: $runs executions in ${seconds} s, no crash"
  else
    status=1
    echo "fuzz: $target FAILED; the end of its log ($log):" >&2
    tail -40 "$log" >&2
  fi
done
exit $status
