#!/usr/bin/env bash
# Issue 14: what a big keyspace costs when nobody talks to the server, and what DBSIZE costs.
# Loads KEYS strings of 100 B (kvik-bench, sequential keys), then TTL_KEYS more with an expiry
# an hour away (so the expiry index is not empty), lets compactions settle, measures the CPU
# time the process uses (utime + stime from /proc/<pid>/stat) over IDLE seconds, and times DBSIZE
# and INFO keyspace (redis-benchmark, one client).
#
#   bench/idle_keys.sh                      # 2M keys, ~3 min
#   KEYS=10000000 bench/idle_keys.sh        # the issue's size, ~15 min on 2 cores
#   BASE_BIN=/path/to/other/kvik-server bench/idle_keys.sh   # the same, then with another build
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/idle_keys.sh
source "$(dirname "$0")/lib.sh"

KEYS=${KEYS:-2000000}
TTL_KEYS=${TTL_KEYS:-200000}
SETTLE=${SETTLE:-30}
IDLE=${IDLE:-20}
TICK=$(getconf CLK_TCK)

cpu_ticks() { # pid: utime + stime in clock ticks (fields 14 and 15)
  awk '{print $14 + $15}' "/proc/$1/stat"
}

measure() { # name binary
  local name=$1 bin=$2 port pid start end
  port=$(free_port)
  KVIK_BIN=$bin start_kvik "$port" "$name"
  pid=${PIDS[-1]}
  local t0=$SECONDS
  "$KVIK_BENCH" -p "$port" -q -t set -n "$KEYS" -r "$KEYS" --dist seq -d 100 -c 50 -P 16 >/dev/null
  redis-benchmark -p "$port" -q -n "$TTL_KEYS" -r "$TTL_KEYS" -c 50 -P 16 \
    SET ttl:__rand_int__ v EX 3600 >/dev/null
  echo "$name: loaded in $((SECONDS - t0)) s; $(du -sh "$BENCH_TMP/$name" | cut -f1) on disk"
  sleep "$SETTLE"
  start=$(cpu_ticks "$pid")
  sleep "$IDLE"
  end=$(cpu_ticks "$pid")
  python3 -c "import sys; t,hz,s=map(float,sys.argv[1:4]); print(f'  idle: {t/hz:.3f} s CPU over {s:.0f} s = {100*t/hz/s:.2f}% of one core')" \
    "$((end - start))" "$TICK" "$IDLE"
  local t0 t1
  t0=$(date +%s%N); echo "  DBSIZE = $(redis-cli -p "$port" dbsize)"; t1=$(date +%s%N)
  echo "  one DBSIZE through redis-cli: $(( (t1 - t0) / 1000000 )) ms"
  if [ $(( (t1 - t0) / 1000000 )) -lt 100 ]; then # an O(N) DBSIZE would take hours here
    redis-benchmark -p "$port" -n 2000 -c 1 -q DBSIZE | tr '\r' '\n' | grep -v '^$' | tail -1 | sed 's/^/  /'
    redis-benchmark -p "$port" -n 500 -c 1 -q INFO keyspace | tr '\r' '\n' | grep -v '^$' | tail -1 | sed 's/^/  /'
  fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "${BENCH_TMP:?}/$name"
}

echo "machine: $(nproc) cores; load: $(uptime | sed 's/.*load average/load average/')"
echo "keys: $KEYS x 100 B + $TTL_KEYS with an expiry; settle ${SETTLE}s, idle ${IDLE}s"
measure this "$KVIK_BIN"
if [ -n "${BASE_BIN:-}" ]; then
  measure base "$BASE_BIN"
fi
