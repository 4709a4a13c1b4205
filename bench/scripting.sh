#!/usr/bin/env bash
# Scripting (issue 16): EVALSHA of a small script (GET, INCR, return) at -c 50, against kvik and
# redis-server with appendonly yes + appendfsync everysec (the durable peer), with
# redis-benchmark. The script is loaded with SCRIPT LOAD on both sides, then the sides run
# alternately (kvik, redis-aof, kvik, ...) for ROUNDS rounds; prints medians and the ratio.
# Goal (issue 16): at least 0.8x redis-server.
#
#   bench/scripting.sh                  # full: 3 rounds, N=200000
#   QUICK=1 bench/scripting.sh          # quick: 3 rounds, N=20000
#   ROUNDS=5 N=100000 bench/scripting.sh
#   OFF=1 bench/scripting.sh            # adds kvik-off: --rtc-scripts no (every script on a worker)
#   SCRIPT="return redis.call('get', KEYS[1])" bench/scripting.sh   # another script
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/scripting.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis

if [ "$QUICK" = 1 ]; then N=${N:-20000}; else N=${N:-200000}; fi
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
RESULTS=$BENCH_TMP/results.csv
SCRIPT=${SCRIPT:-"local v = redis.call('get', KEYS[1]) redis.call('incr', KEYS[1]) return v"}

declare -A PORT
SIDES=(kvik redis-aof)
[ "${OFF:-0}" = 1 ] && SIDES=(kvik kvik-off redis-aof)
for side in "${SIDES[@]}"; do PORT[$side]=$(free_port); done
start_kvik "${PORT[kvik]}" kvik
[ "${OFF:-0}" = 1 ] && start_kvik "${PORT[kvik-off]}" kvik-off --rtc-scripts no
start_redis "${PORT[redis-aof]}" redis-aof --appendonly yes --appendfsync everysec

declare -A SHA
for side in "${SIDES[@]}"; do
  SHA[$side]=$(redis-cli -p "${PORT[$side]}" SCRIPT LOAD "$SCRIPT")
  # Warm-up: every side has served some scripts (and compiled it on its threads).
  redis-benchmark -p "${PORT[$side]}" -q -c "$CLIENTS" -n 5000 -r "$KEYSPACE" \
    EVALSHA "${SHA[$side]}" 1 "key:__rand_int__" >/dev/null
done

echo "machine: $(nproc) cores, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3); load: $(uptime | sed 's/.*load average: //')"
echo "command: redis-benchmark -c $CLIENTS -n $N -r $KEYSPACE EVALSHA <sha> 1 key:__rand_int__ (script: $SCRIPT); $ROUNDS rounds, alternating ${SIDES[*]}"
for round in $(seq 1 "$ROUNDS"); do
  for side in "${SIDES[@]}"; do
    run_rb "${PORT[$side]}" "$side" -c "$CLIENTS" -n "$N" -r "$KEYSPACE" \
      EVALSHA "${SHA[$side]}" 1 "key:__rand_int__"
  done
done
summarize "${SIDES[@]}"
