#!/usr/bin/env bash
# Scenario 5 (issue 5): the hot cache and run-to-completion (RTC) reads, in the shape of Pika's
# PR #2837 test, scaled to this machine. Four servers are started on free ports:
#
#   rtc      kvik, cache on, rtc-read yes   (hits answered on the I/O thread)
#   pool     kvik, cache on, rtc-read no    (hits answered from the cache by a pool worker)
#   nocache  kvik, cache-enabled no         (every GET reads RocksDB in the pool)
#   redis    redis-server (no persistence), the in-memory peer
#
# Each is preloaded with N keys of 128 bytes (key:000000000000 .. N-1, all present), then
# rounds of `redis-benchmark -t get -r HOT` (uniform over the first HOT keys, so the cache warms
# and the hit ratio climbs over the rounds) run alternately rtc pool nocache redis, without and
# with -P 16. Prints medians, ratios against redis, and the cache hit ratio of each kvik run
# (from INFO deltas).
#
#   bench/cache.sh                  # quick default: N=200000, HOT=50000, 3 rounds (~3 minutes)
#   N=1000000 HOT=200000 GETS=500000 ROUNDS=5 bench/cache.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/cache.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
ensure_kvik_bench

N=${N:-200000}
HOT=${HOT:-50000}
GETS=${GETS:-200000}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
RESULTS=$BENCH_TMP/results.csv
HITS=$BENCH_TMP/hits.csv
: >"$HITS"

declare -A PORT
SIDES=(rtc pool nocache redis)
for side in "${SIDES[@]}"; do PORT[$side]=$(free_port); done
start_kvik "${PORT[rtc]}" rtc --rtc-read yes
start_kvik "${PORT[pool]}" pool --rtc-read no
start_kvik "${PORT[nocache]}" nocache --cache-enabled no
start_redis "${PORT[redis]}" redis

echo "machine: $(nproc) cores, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3)"
echo "load before: $(uptime | sed 's/.*load average: //')"
for side in "${SIDES[@]}"; do
  "$KVIK_BENCH" -p "${PORT[$side]}" -q -c 50 -P 16 -r "$N" --dist seq -n "$N" -d 128 -t set \
    >/dev/null
done

stat() { # port field
  redis-cli -p "$1" info stats | tr -d '\r' | sed -n "s/^$2://p"
}

echo "command: redis-benchmark -t get -n $GETS -r $HOT -c $CLIENTS [-P 16], $N keys of 128 bytes preloaded; $ROUNDS rounds, alternating ${SIDES[*]}"
for pipeline in 1 16; do
  n=$GETS
  [ "$pipeline" = 16 ] && n=$((GETS * 4))
  for round in $(seq 1 "$ROUNDS"); do
    for side in "${SIDES[@]}"; do
      p=${PORT[$side]}
      if [ "$side" != redis ]; then h0=$(stat "$p" cache_hits); m0=$(stat "$p" cache_misses); fi
      run_rb "$p" "$side" -t get -n "$n" -r "$HOT" -c "$CLIENTS" -P "$pipeline"
      if [ "$side" != redis ]; then
        h1=$(stat "$p" cache_hits); m1=$(stat "$p" cache_misses)
        echo "$side,$pipeline,$round,$((h1 - h0)),$((m1 - m0))" >>"$HITS"
      fi
    done
  done
  # run_rb names the test "GET"; tell the two pipeline depths apart.
  sed -i "s/^\([a-z]*\),GET,/\1,GET -P $pipeline,/" "$RESULTS"
done
echo "load after: $(uptime | sed 's/.*load average: //')"
echo
summarize "${SIDES[@]}"
echo
python3 - "$HITS" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
print("| side | pipeline | cache hit ratio by round |")
print("|---|---|---|")
by = {}
for side, p, rnd, h, m in rows:
    h, m = int(h), int(m)
    by.setdefault((side, p), []).append(f"{100 * h / max(1, h + m):.1f}%")
for (side, p), v in by.items():
    print(f"| {side} | {p} | {' → '.join(v)} |")
PY
echo
echo "every run (label,test,rps,avg,p50,p95,p99,max), in order:"
cat "$RESULTS"
echo
for side in rtc pool nocache; do
  p=${PORT[$side]}
  echo "$side: rtc_commands=$(stat "$p" rtc_commands) pool_commands=$(stat "$p" pool_commands) queue_wait avg=$(stat "$p" pool_queue_wait_avg_usec)us p99=$(stat "$p" pool_queue_wait_p99_usec)us cache_used_memory=$(stat "$p" cache_used_memory) entries=$(stat "$p" cache_entries)"
done
