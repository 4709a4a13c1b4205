#!/usr/bin/env bash
# Latency under a fixed load (issue 3): kvik-bench's open loop (--rate) sends GET and SET at a
# target rate that both servers can sustain, so the comparison is of latency, not throughput.
# Latency runs from each request's intended send time, so a stall shows up in every request
# scheduled behind it (no coordinated omission). kvik against redis-server with appendonly yes
# + appendfsync everysec (the durable peer), alternating for ROUNDS rounds; prints medians of
# p50/p99/p99.9 and the throughput ratio (which should be 1.00: both keep the rate), and draws
# docs/benchmarks/rate.svg.
#
#   bench/rate.sh                  # full: RATE=10000 for 20 s per run, 3 rounds
#   QUICK=1 bench/rate.sh          # quick (make bench): 5 s per run
#   RATE=5000 DURATION=10s bench/rate.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/rate.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
ensure_kvik_bench

if [ "$QUICK" = 1 ]; then DURATION=${DURATION:-5s}; else DURATION=${DURATION:-20s}; fi
RATE=${RATE:-10000}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
PLOT=${PLOT:-docs/benchmarks/rate.svg}
RESULTS=$BENCH_TMP/results.csv

declare -A PORT
SIDES=(kvik redis-aof)
for side in "${SIDES[@]}"; do PORT[$side]=$(free_port); done
start_kvik "${PORT[kvik]}" kvik
start_redis "${PORT[redis-aof]}" redis-aof --appendonly yes --appendfsync everysec
for side in "${SIDES[@]}"; do
  "$KVIK_BENCH" -p "${PORT[$side]}" -q -c 50 -P 16 -r "$KEYSPACE" --dist seq -n "$KEYSPACE" \
    -t set >/dev/null
done

echo "machine: $(nproc) cores, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3); load: $(uptime | sed 's/.*load average: //')"
echo "command: kvik-bench -t get,set --rate $RATE --duration $DURATION -r $KEYSPACE -c $CLIENTS; $ROUNDS rounds, alternating ${SIDES[*]}"
for round in $(seq 1 "$ROUNDS"); do
  for side in "${SIDES[@]}"; do
    KB_SUFFIX=" @${RATE}/s" run_kb "${PORT[$side]}" "$side" -t get,set --rate "$RATE" \
      --duration "$DURATION" -r "$KEYSPACE" -c "$CLIENTS"
  done
done
summarize_kb "kvik vs redis-server (aof), fixed rate $RATE/s" "$PLOT" "${SIDES[@]}"
