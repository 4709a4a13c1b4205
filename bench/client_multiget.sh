#!/usr/bin/env bash
# Benchmark (b) of kvik-client: get_multi of KEYS keys over 4 servers, each behind an
# in-process proxy that delays requests by DELAY_MS, concurrent readiness loop vs one server
# after another, alternating for ROUNDS rounds; prints medians and the ratio.
#
#   bench/client_multiget.sh                  # 4 kvik-servers it starts (quick size)
#   BACKEND=redis bench/client_multiget.sh    # 4 redis-servers
#   KEYS=1000 DELAY_MS=2 CALLS=100 ROUNDS=3 bench/client_multiget.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kvik-target}"
BACKEND="${BACKEND:-kvik}"
KEYS="${KEYS:-1000}"
DELAY_MS="${DELAY_MS:-2}"
CALLS="${CALLS:-100}"
ROUNDS="${ROUNDS:-3}"

cargo build --release -q -p kvik-client --example bench_multiget
[ "$BACKEND" = kvik ] && cargo build --release -q -p kvik-server

tmp="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

addrs=""
for i in 1 2 3 4; do
  if [ "$BACKEND" = kvik ]; then
    "$CARGO_TARGET_DIR/release/kvik-server" --port 0 --dir "$tmp/data$i" >"$tmp/log$i" 2>&1 &
    pids+=($!)
    port=""
    for _ in $(seq 600); do
      port="$(sed -n 's/.*ready to accept connections on port \([0-9]*\).*/\1/p' "$tmp/log$i" | head -1)"
      [ -n "$port" ] && break
      sleep 0.1
    done
  else
    port="$(free_port)"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/log$i" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  [ -n "$port" ] || { echo "server $i did not start"; cat "$tmp/log$i"; exit 1; }
  addrs="${addrs:+$addrs,}127.0.0.1:$port"
done
echo "backend=$BACKEND servers=$addrs"
"$CARGO_TARGET_DIR/release/examples/bench_multiget" --servers "$addrs" --keys "$KEYS" \
  --delay-ms "$DELAY_MS" --calls "$CALLS" --rounds "$ROUNDS"
