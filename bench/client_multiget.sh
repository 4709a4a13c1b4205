#!/usr/bin/env bash
# Benchmark (b) of kvik-client: get_multi of KEYS keys over 4 servers, each behind an
# in-process proxy that delays requests by DELAY_MS, concurrent readiness loop vs one server
# after another, alternating for ROUNDS rounds; prints medians and the ratio.
#
#   bench/client_multiget.sh                  # 4 kvik-servers it starts (quick size)
#   BACKEND=redis bench/client_multiget.sh    # 4 redis-servers
#   KEYS=1000 DELAY_MS=2 CALLS=100 ROUNDS=3 bench/client_multiget.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
BACKEND="${BACKEND:-kvik}"
KEYS="${KEYS:-1000}"
DELAY_MS="${DELAY_MS:-2}"
CALLS="${CALLS:-100}"
ROUNDS="${ROUNDS:-3}"

cargo build --release -q -p kvik-client --example bench_multiget
cargo build --release -q -p kvik-server --bin kvik-server

addrs=""
for i in 1 2 3 4; do
  start_backend "$BACKEND" "server$i"
  port=$BACKEND_PORT
  addrs="${addrs:+$addrs,}127.0.0.1:$port"
done
echo "backend=$BACKEND servers=$addrs"
"$CARGO_TARGET_DIR/release/examples/bench_multiget" --servers "$addrs" --keys "$KEYS" \
  --delay-ms "$DELAY_MS" --calls "$CALLS" --rounds "$ROUNDS"
