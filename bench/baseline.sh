#!/usr/bin/env bash
# Scenario 1 (issue 3): GET, SET, MGET (10 keys), HSET and HGET at -c 50, without and with
# -P 16, measured with kvik-bench against kvik, redis-server with appendonly yes +
# appendfsync everysec (the durable peer) and redis-server without persistence. All three are
# started here on free ports and filled with the same keys (a warm-up), then each test run
# alternately (kvik, redis-aof, redis, kvik, ...) for ROUNDS rounds; prints medians, the ratios
# kvik/redis-aof and kvik/redis, and each server's CPU time per request (utime + stime from
# /proc over its runs, background threads included), and draws docs/benchmarks/baseline.svg.
# Then SET alone against the strictest durability on both sides: kvik with appendfsync always
# against redis-server with appendonly yes + appendfsync always (ALWAYS=0 skips it).
#
#   bench/baseline.sh                       # full: 3 rounds, N=200000 (x4 with -P 16)
#   QUICK=1 bench/baseline.sh               # quick (make bench): 3 rounds, N=30000
#   ROUNDS=5 N=100000 TESTS=get,set bench/baseline.sh
#   ALWAYS=0 bench/baseline.sh              # without the appendfsync always rows
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/baseline.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
ensure_kvik_bench

if [ "$QUICK" = 1 ]; then N=${N:-30000}; else N=${N:-200000}; fi
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
TESTS=${TESTS:-set,get,mget,hset,hget}
PLOT=${PLOT:-docs/benchmarks/baseline.svg}
RESULTS=$BENCH_TMP/results.csv

declare -A PORT PID
SIDES=(kvik redis-aof redis)
for side in "${SIDES[@]}"; do PORT[$side]=$(free_port); done
start_kvik "${PORT[kvik]}" kvik
PID[kvik]=${PIDS[-1]}
start_redis "${PORT[redis-aof]}" redis-aof --appendonly yes --appendfsync everysec
PID[redis-aof]=${PIDS[-1]}
start_redis "${PORT[redis]}" redis
PID[redis]=${PIDS[-1]}

# Warm-up: every key of the keyspace and every hash field exists on every side, and each side
# has served some traffic, before anything is measured.
for side in "${SIDES[@]}"; do
  p=${PORT[$side]}
  "$KVIK_BENCH" -p "$p" -q -c 50 -P 16 -r "$KEYSPACE" --dist seq -n "$KEYSPACE" -t set >/dev/null
  "$KVIK_BENCH" -p "$p" -q -c 50 -P 16 -r "$KEYSPACE" --dist seq -n "$KEYSPACE" -t hset \
    >/dev/null 2>&1
  "$KVIK_BENCH" -p "$p" -q -c 50 -r "$KEYSPACE" -n 20000 -t get >/dev/null
done

echo "machine: $(nproc) cores, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3); load: $(uptime | sed 's/.*load average: //')"
echo "command: kvik-bench -t $TESTS -n N -r $KEYSPACE -c $CLIENTS [-P 16] (N=$N, 4N with -P 16); $ROUNDS rounds, alternating ${SIDES[*]}"
for pipeline in 1 16; do
  n=$N
  [ "$pipeline" = 16 ] && n=$((N * 4))
  for round in $(seq 1 "$ROUNDS"); do
    for test in ${TESTS//,/ }; do
      for side in "${SIDES[@]}"; do
        KB_SUFFIX=" -P $pipeline" KB_PID=${PID[$side]} run_kb "${PORT[$side]}" "$side" \
          -t "$test" -n "$n" -r "$KEYSPACE" -c "$CLIENTS" -P "$pipeline"
      done
    done
  done
done
summarize_kb "kvik vs redis-server, -c $CLIENTS" "$PLOT" "${SIDES[@]}"

# Every write synced before its reply (issue 15): one fsync per write group on both sides.
if [ "${ALWAYS:-1}" = 1 ]; then
  ALWAYS_SIDES=(kvik-always redis-always)
  PORT[kvik-always]=$(free_port)
  start_kvik "${PORT[kvik-always]}" kvik-always --appendfsync always
  PID[kvik-always]=${PIDS[-1]}
  PORT[redis-always]=$(free_port)
  start_redis "${PORT[redis-always]}" redis-always --appendonly yes --appendfsync always
  PID[redis-always]=${PIDS[-1]}
  for side in "${ALWAYS_SIDES[@]}"; do
    "$KVIK_BENCH" -p "${PORT[$side]}" -q -c 50 -P 16 -r "$KEYSPACE" --dist seq -n "$KEYSPACE" \
      -t set >/dev/null
  done
  echo
  echo "appendfsync always: kvik-bench -t set -n N -r $KEYSPACE -c $CLIENTS [-P 16]; $ROUNDS rounds, alternating ${ALWAYS_SIDES[*]}"
  for pipeline in 1 16; do
    n=$N
    [ "$pipeline" = 16 ] && n=$((N * 4))
    for round in $(seq 1 "$ROUNDS"); do
      for side in "${ALWAYS_SIDES[@]}"; do
        KB_SUFFIX=" -P $pipeline" KB_PID=${PID[$side]} run_kb "${PORT[$side]}" "$side" \
          -t set -n "$n" -r "$KEYSPACE" -c "$CLIENTS" -P "$pipeline"
      done
    done
  done
  summarize_kb "kvik vs redis-server, both appendfsync always, -c $CLIENTS" - "${ALWAYS_SIDES[@]}"
fi
