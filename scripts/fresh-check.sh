#!/usr/bin/env bash
# What a new user sees: clones the current commit into a scratch directory and runs the README's
# two commands there (`make run`, then `make test`), with an empty Python user site and a test
# virtualenv of its own, so nothing this machine's Python happens to have can help. Prints the
# wall time of each step and exits non-zero if either fails.
#
#   scripts/fresh-check.sh                 # reuses the machine's cargo target dir (RocksDB built once)
#   FRESH_TARGET=1 scripts/fresh-check.sh  # a scratch target dir too: the full first build (~25 min)
#   KEEP=1 scripts/fresh-check.sh          # keep the scratch directory for a look afterwards
#
# Only committed work is checked: uncommitted changes are not in the clone.
set -uo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
commit=$(git -C "$top" rev-parse HEAD)
scratch=$(mktemp -d /tmp/kvik-fresh.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$scratch"' EXIT

export PYTHONNOUSERSITE=1 PYTHONUSERBASE="$scratch/python-user" KVIK_PYENV="$scratch/pyenv"
if [ "${FRESH_TARGET:-0}" = 1 ]; then export CARGO_TARGET_DIR="$scratch/target"; fi
unset KVIK_SKIP_PYTHON
mkdir -p "$PYTHONUSERBASE"

echo "fresh-check: commit $commit in $scratch/kvik"
git clone -q "$top" "$scratch/kvik" && git -C "$scratch/kvik" checkout -q "$commit" || exit 1
cd "$scratch/kvik" || exit 1

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

# Step 1: make run, until the server answers PING (the first run builds everything first).
start=$(date +%s)
make run ARGS="--port $port" >"$scratch/make-run.log" 2>&1 &
run_pid=$!
run_ok=0
for _ in $(seq 1 3600); do   # at most an hour: a from-scratch RocksDB build is ~15-25 minutes
  if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; then run_ok=1; break; fi
  kill -0 "$run_pid" 2>/dev/null || break
  sleep 1
done
run_secs=$(( $(date +%s) - start ))
if [ "$run_ok" = 1 ]; then
  redis-cli -p "$port" set fresh-check ok >/dev/null
  [ "$(redis-cli -p "$port" get fresh-check)" = ok ] || run_ok=0
  [ -d kvik-data ] || { echo "fresh-check: make run did not put its data in ./kvik-data"; run_ok=0; }
  redis-cli -p "$port" shutdown >/dev/null 2>&1
fi
wait "$run_pid" 2>/dev/null
if [ "$run_ok" != 1 ]; then
  echo "fresh-check: make run FAILED after ${run_secs}s; its log:"; tail -40 "$scratch/make-run.log"
  exit 1
fi
echo "fresh-check: make run: serving after ${run_secs}s (SET/GET ok, data in ./kvik-data)"

# Step 2: make test.
start=$(date +%s)
make test >"$scratch/make-test.log" 2>&1
test_status=$?
test_secs=$(( $(date +%s) - start ))
tail -1 "$scratch/make-test.log"
if [ "$test_status" != 0 ]; then
  echo "fresh-check: make test FAILED (exit $test_status) after ${test_secs}s; its log ends:"
  grep -E "FAILED|panicked|error" "$scratch/make-test.log" | head -40
  exit 1
fi
echo "fresh-check: make test: passed in ${test_secs}s"
echo "fresh-check: OK (make run ${run_secs}s, make test ${test_secs}s, target dir ${CARGO_TARGET_DIR:-$HOME/.cache/kvik-target})"
