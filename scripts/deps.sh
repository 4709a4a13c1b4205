#!/usr/bin/env bash
# Installs what building and testing kvik needs on Debian/Ubuntu, if it is missing:
# libclang (RocksDB's bindings are generated with bindgen), a C++ compiler, and Redis's tools
# (redis-cli and redis-benchmark for tests and benchmarks, redis-server as the peer we compare with),
# etcd (kvik-controller keeps the cluster topology in it; its tests start their own etcd), and
# util-linux (prlimit: a test runs the server under a file size limit).
set -euo pipefail

need=()
for pkg in libclang-dev clang g++ make redis-tools redis-server etcd-server util-linux; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done

# Tests drive kvik with Python clients (redis-py) from a virtualenv made below; Debian's python3
# needs python3-venv for that.
if ! command -v python3 >/dev/null 2>&1; then
  need+=(python3 python3-venv)
elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  need+=(python3-venv)
fi

if ((${#need[@]})); then
  echo "kvik: installing missing packages: ${need[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
  # Debian starts a redis-server service on 6379 when the package is installed; kvik's
  # default port is the same, and the tests start their own redis-server when they need one.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
    $SUDO systemctl stop redis-server || true
    $SUDO systemctl disable redis-server >/dev/null 2>&1 || true
  fi
  # Same for etcd (on 2379/2380): the tests start their own on free loopback ports with a
  # temporary --data-dir, and a production controller points at the operator's etcd.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
    $SUDO systemctl stop etcd || true
    $SUDO systemctl disable etcd >/dev/null 2>&1 || true
  fi
fi

# The test virtualenv: made once per machine, outside the checkout so every clone shares it,
# refreshed when scripts/test-requirements.txt changes (its copy inside the venv is the stamp).
pyenv="${KVIK_PYENV:-$HOME/.cache/kvik-pyenv}"
reqs="$(dirname "$0")/test-requirements.txt"
if ! cmp -s "$reqs" "$pyenv/kvik-requirements.txt" || [ ! -x "$pyenv/bin/python" ]; then
  echo "kvik: setting up the test virtualenv $pyenv (pinned packages from $reqs)"
  python3 -m venv "$pyenv"
  "$pyenv/bin/python" -m pip install -q --disable-pip-version-check -r "$reqs"
  cp "$reqs" "$pyenv/kvik-requirements.txt"
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "kvik: cargo not found. Install the Rust toolchain (rustup, stable >= 1.85) and run again." >&2
  exit 1
fi
