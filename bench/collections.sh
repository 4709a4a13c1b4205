#!/usr/bin/env bash
# Collections (issue 4): HSET, HGET, LPUSH, LPOP, SADD, ZADD and ZRANGE (first 10 of a sorted
# set) at -c 50, measured with kvik-bench against kvik, kvik with small hashes kept out of the
# hot cache (`cache-max-hash-fields 0`: HGET then reads RocksDB every time) and redis-server (no
# persistence), run alternately (kvik, kvik-nohashcache, redis, ...) for ROUNDS rounds; prints
# medians and the ratios against redis and draws docs/benchmarks/collections.svg. Each round starts from the data the previous rounds
# left (one hash, one list, one set, one sorted set, as redis-benchmark's own tests use them).
#
#   bench/collections.sh                  # full: 3 rounds, N=100000
#   QUICK=1 bench/collections.sh          # quick (make bench): 3 rounds, N=20000
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/collections.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
ensure_kvik_bench

if [ "${QUICK:-0}" = 1 ]; then N=${N:-20000}; else N=${N:-100000}; fi
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-10000}
SMALL_HASH=${SMALL_HASH:-100}
TESTS=${TESTS:-hset,hget,lpush,lpop,sadd,zadd,zrange}
PLOT=${PLOT:-docs/benchmarks/collections.svg}
RESULTS=$BENCH_TMP/results.csv

declare -A PORT
SIDES=(kvik kvik-nohashcache redis)
for side in "${SIDES[@]}"; do PORT[$side]=$(free_port); done
start_kvik "${PORT[kvik]}" kvik
start_kvik "${PORT[kvik-nohashcache]}" kvik-nohashcache --cache-max-hash-fields 0
start_redis "${PORT[redis]}" redis

# Warm-up: the hash, set and sorted set hold the whole field space on every side. That hash has
# 10,000 fields, more than the cache holds whole (512 by default), so its HGET row reads RocksDB
# on every side; the extra row "HGET small hash" reads a SMALL_HASH-field hash (database 1), which
# kvik answers from the hot cache on the I/O thread unless cache-max-hash-fields is 0.
for side in "${SIDES[@]}"; do
  "$KVIK_BENCH" -p "${PORT[$side]}" -q -c 50 -P 16 -r "$KEYSPACE" --dist seq -n "$KEYSPACE" \
    -t hset,sadd,zadd >/dev/null
  "$KVIK_BENCH" -p "${PORT[$side]}" -q -c 50 -r "$SMALL_HASH" --dist seq -n "$SMALL_HASH" \
    --dbnum 1 -t hset >/dev/null
done

echo "machine: $(nproc) cores, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3); load: $(uptime | sed 's/.*load average: //')"
echo "command: kvik-bench -t $TESTS -n $N -r $KEYSPACE -c $CLIENTS; $ROUNDS rounds, alternating ${SIDES[*]}"
for round in $(seq 1 "$ROUNDS"); do
  for side in "${SIDES[@]}"; do
    run_kb "${PORT[$side]}" "$side" -t "$TESTS" -n "$N" -r "$KEYSPACE" -c "$CLIENTS"
    KB_SUFFIX=" small hash" run_kb "${PORT[$side]}" "$side" -t hget -n "$N" -r "$SMALL_HASH" \
      --dbnum 1 -c "$CLIENTS"
  done
done
summarize_kb "kvik vs redis-server, collections, -c $CLIENTS" "$PLOT" "${SIDES[@]}"
