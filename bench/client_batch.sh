#!/usr/bin/env bash
# Benchmark (a) of kvik-client: 8/64/512 threads doing blocking GETs over one shared
# connection, auto-batch flush on vs off vs the `redis` crate's multiplexed connection,
# alternating A B C for ROUNDS rounds; prints medians and ratios.
#
#   bench/client_batch.sh                 # against a kvik-server it starts (quick size)
#   BACKEND=redis bench/client_batch.sh   # against a redis-server it starts
#   OPS=200000 ROUNDS=5 THREADS=8,64,512 bench/client_batch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kvik-target}"
BACKEND="${BACKEND:-kvik}"
OPS="${OPS:-60000}"
ROUNDS="${ROUNDS:-3}"
THREADS="${THREADS:-8,64,512}"
MODES="${MODES:-on,off,redis}"

cargo build --release -q -p kvik-client --example bench_batch
[ "$BACKEND" = kvik ] && cargo build --release -q -p kvik-server

tmp="$(mktemp -d)"
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start_server() {
  if [ "$BACKEND" = kvik ]; then
    "$CARGO_TARGET_DIR/release/kvik-server" --port 0 --dir "$tmp/data" >"$tmp/log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do
      port="$(sed -n 's/.*ready to accept connections on port \([0-9]*\).*/\1/p' "$tmp/log" | head -1)"
      [ -n "$port" ] && break
      sleep 0.1
    done
  else
    port="$(free_port)"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  [ -n "${port:-}" ] || { echo "server did not start"; cat "$tmp/log"; exit 1; }
}

start_server
echo "backend=$BACKEND port=$port"
"$CARGO_TARGET_DIR/release/examples/bench_batch" --addr "127.0.0.1:$port" \
  --threads "$THREADS" --ops "$OPS" --rounds "$ROUNDS" --modes "$MODES"
