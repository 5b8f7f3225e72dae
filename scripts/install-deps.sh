#!/usr/bin/env bash
# Installs what building and testing apiforge needs on a fresh Debian machine:
#   protoc      (etcd-client's build script compiles etcd's protobuf definitions;
#                with libprotobuf-dev for the well-known .proto files)
#   etcd        (the etcd3 storage backend's tests start a throwaway etcd)
#   mdbook      (the user guide is built and its links checked)
#   cargo-fuzz  (scripts/fuzz.sh runs the fuzz targets)
#   schemathesis (scripts/schemathesis.sh; from PyPI into a virtualenv under
#                ~/.local/share/apiforge/schemathesis)
# kubectl is expected on the machine (the smoke tests say so clearly if it is missing).
# Idempotent: does nothing when everything is there.
# Usage: install-deps.sh [--build-only]   (--build-only: just what building needs)
set -euo pipefail

build_only=0
[ "${1:-}" = "--build-only" ] && build_only=1

need=()
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
# Debian's protoc ships without the well-known types etcd-client's protos import.
[ -f /usr/include/google/protobuf/descriptor.proto ] || need+=(libprotobuf-dev)
if [ $build_only -eq 0 ] && ! command -v etcd >/dev/null 2>&1; then
  need+=(etcd-server)
fi

if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # etcd-server's package starts a system etcd on 2379; the tests never use it.
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  if [[ " ${need[*]} " == *" etcd-server "* ]]; then
    ($SUDO systemctl disable --now etcd >/dev/null 2>&1 || $SUDO service etcd stop >/dev/null 2>&1 || true)
  fi
fi

# mdBook builds the user guide (docs/); Debian 12 does not package it, so
# it comes from crates.io (a few minutes' build, once per machine).
MDBOOK_VERSION=0.5.4
if [ $build_only -eq 0 ] && ! mdbook --version 2>/dev/null | grep -q "v$MDBOOK_VERSION"; then
  echo "install-deps: installing mdbook $MDBOOK_VERSION with cargo" >&2
  cargo install mdbook --version "$MDBOOK_VERSION" --locked --no-default-features --quiet
fi

# cargo-fuzz runs the fuzz targets (scripts/fuzz.sh).
CARGO_FUZZ_VERSION=0.13.2
if [ $build_only -eq 0 ] && ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  echo "install-deps: installing cargo-fuzz $CARGO_FUZZ_VERSION with cargo" >&2
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --quiet
fi

# Schemathesis tests the served OpenAPI documents (scripts/schemathesis.sh).
SCHEMATHESIS_VERSION=4.32.5
SCHEMATHESIS_VENV=$HOME/.local/share/apiforge/schemathesis
if [ $build_only -eq 0 ] && ! "$SCHEMATHESIS_VENV/bin/st" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  echo "install-deps: installing schemathesis $SCHEMATHESIS_VERSION with pip into $SCHEMATHESIS_VENV" >&2
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  rm -rf "$SCHEMATHESIS_VENV"
  python3 -m venv "$SCHEMATHESIS_VENV"
  "$SCHEMATHESIS_VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

command -v protoc >/dev/null || { echo "install-deps: protoc is still missing" >&2; exit 1; }
if [ $build_only -eq 0 ]; then
  command -v etcd >/dev/null || { echo "install-deps: etcd is still missing" >&2; exit 1; }
  "$SCHEMATHESIS_VENV/bin/st" --version >/dev/null || { echo "install-deps: schemathesis is still missing" >&2; exit 1; }
fi
