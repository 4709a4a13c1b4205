#!/usr/bin/env bash
# kvik-client's local cache: threads doing GETs of a small hot key set over one shared
# connection, cache off (plain) vs on (cached), while another connection keeps overwriting hot
# keys; alternating rounds; prints medians and ratios.
#
#   bench/client_local_cache.sh                 # against a kvik-server it starts
#   BACKEND=redis bench/client_local_cache.sh   # against a redis-server it starts
#   OPS=500000 ROUNDS=5 THREADS=8 KEYS=100 WRITE_EVERY_US=1000 bench/client_local_cache.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
BACKEND="${BACKEND:-kvik}"
OPS="${OPS:-200000}"
ROUNDS="${ROUNDS:-3}"
THREADS="${THREADS:-8}"
KEYS="${KEYS:-100}"
WRITE_EVERY_US="${WRITE_EVERY_US:-1000}"

cargo build --release -q -p kvik-client --example bench_local_cache
cargo build --release -q -p kvik-server --bin kvik-server

start_backend "$BACKEND" server
port=$BACKEND_PORT
echo "backend=$BACKEND port=$port"
"$CARGO_TARGET_DIR/release/examples/bench_local_cache" --addr "127.0.0.1:$port" \
  --threads "$THREADS" --ops "$OPS" --rounds "$ROUNDS" --keys "$KEYS" \
  --write-every-us "$WRITE_EVERY_US"
