#!/usr/bin/env bash
# Property-based API testing with Schemathesis against the OpenAPI v3
# documents the server publishes: starts the release binary on a fresh
# embedded store, then runs Schemathesis on every group-version document
# (/openapi/v3/<path>) for a bounded time with three checks: no 5xx
# (not_a_server_error), response bodies conform to the documented schemas
# (response_schema_conformance), and Content-Types are among those
# documented (content_type_conformance). Fails on any failed check, any
# request error, or a panic in the server's log.
#
# Watches are tested elsewhere (they stream until their timeout): the
# `watch` query parameter and the deprecated /watch/ paths are taken out of
# the documents Schemathesis reads.
#
# One worker: with two, Hypothesis (4.32.5 on Python 3.11) fails now and
# then with "AST constructor recursion depth mismatch" while describing its
# own strategies on two threads at once.
#
# Usage: scripts/schemathesis.sh [SECONDS_PER_DOCUMENT]   (default 15)
# Needs target/release/apiforge (cargo build --release -p apiforge) and
# Schemathesis (scripts/install-deps.sh installs it in a virtualenv).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
repo=$PWD
st=${SCHEMATHESIS:-$HOME/.local/share/apiforge/schemathesis/bin/st}
[ -x "$st" ] || { echo "schemathesis: $st is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
bin=$repo/target/release/apiforge
[ -x "$bin" ] || { echo "schemathesis: $bin is missing (cargo build --release -p apiforge)" >&2; exit 1; }

out=$repo/target/schemathesis
rm -rf "$out"
mkdir -p "$out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve --secure-port "$port" --data-dir "$out/data" >"$out/server.log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true' EXIT
base=https://127.0.0.1:$port
for _ in $(seq 1 100); do
  if [ -f "$out/data/admin.token" ] &&
    curl -sfk -H "Authorization: Bearer $(cat "$out/data/admin.token")" "$base/readyz" >/dev/null; then
    break
  fi
  sleep 0.2
done
token=$(cat "$out/data/admin.token")
auth="Authorization: Bearer $token"
curl -sfk -H "$auth" "$base/readyz" >/dev/null || { cat "$out/server.log" >&2; exit 1; }

documents=$(curl -sfk -H "$auth" "$base/openapi/v3" | python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)["paths"]))')
status=0
total_cases=0
for doc in $documents; do
  name=${doc//\//_}
  curl -sfk -H "$auth" "$base/openapi/v3/$doc" | python3 -c '
import json, sys
doc = json.load(sys.stdin)
params = doc.get("components", {}).get("parameters", {})
def is_watch(p):
    p = params.get(p["$ref"].rsplit("/", 1)[-1], {}) if "$ref" in p else p
    return p.get("name") == "watch"
paths = {}
for path, item in doc["paths"].items():
    if "/watch/" in path:
        continue
    for key, op in item.items():
        if key == "parameters":
            item[key] = [p for p in op if not is_watch(p)]
        elif isinstance(op, dict) and "parameters" in op:
            op["parameters"] = [p for p in op["parameters"] if not is_watch(p)]
    paths[path] = item
doc["paths"] = paths
json.dump(doc, sys.stdout)
' >"$out/$name.json"
  log=$out/$name.log
  # Run from the output directory: Schemathesis keeps its cache
  # (.schemathesis/) in the working directory.
  if (cd "$out" && "$st" run "$out/$name.json" --url "$base" \
      -H "$auth" --tls-verify false --request-timeout 10 --workers 1 \
      --checks not_a_server_error,response_schema_conformance,content_type_conformance \
      --max-time "$seconds" --no-color >"$log" 2>&1); then
    cases=$(grep -Eo '[0-9]+ generated' "$log" | grep -Eo '[0-9]+' | tail -1 || echo 0)
    total_cases=$((total_cases + ${cases:-0}))
    ops=$(grep -Eo 'Tested: [0-9]+' "$log" | grep -Eo '[0-9]+' || echo "?")
    echo "schemathesis: $doc: $ops operations, $cases cases, every check passed"
  else
    status=1
    echo "schemathesis: $doc FAILED; the end of its log ($log):" >&2
    tail -60 "$log" >&2
  fi
done
if grep -n "panicked" "$out/server.log" >&2; then
  echo "schemathesis: the server panicked (above; its log: $out/server.log)" >&2
  status=1
fi
echo "schemathesis: $total_cases cases over $(echo "$documents" | wc -w) documents"
exit $status
