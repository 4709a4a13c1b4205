#!/usr/bin/env bash
# Benchmark (a) of kvik-client: 8/64/512 threads doing blocking GETs over one shared
# connection, auto-batch flush on vs off vs the `redis` crate's multiplexed connection,
# alternating A B C for ROUNDS rounds; prints medians and ratios.
#
#   bench/client_batch.sh                 # against a kvik-server it starts (quick size)
#   BACKEND=redis bench/client_batch.sh   # against a redis-server it starts
#   OPS=200000 ROUNDS=5 THREADS=8,64,512 bench/client_batch.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
BACKEND="${BACKEND:-kvik}"
OPS="${OPS:-60000}"
ROUNDS="${ROUNDS:-3}"
THREADS="${THREADS:-8,64,512}"
MODES="${MODES:-on,off,redis}"

cargo build --release -q -p kvik-client --example bench_batch
cargo build --release -q -p kvik-server --bin kvik-server

start_backend "$BACKEND" server
port=$BACKEND_PORT
echo "backend=$BACKEND port=$port"
"$CARGO_TARGET_DIR/release/examples/bench_batch" --addr "127.0.0.1:$port" \
  --threads "$THREADS" --ops "$OPS" --rounds "$ROUNDS" --modes "$MODES"
