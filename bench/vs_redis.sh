#!/usr/bin/env bash
# One redis-benchmark command against kvik (its defaults) and redis-server with AOF
# (`appendonly yes`, `appendfsync everysec`, the durable peer), side by side: both servers are
# started here and filled with the same PREP run, then the command runs on each in turn
# (kvik, redis-aof, kvik, ...) for ROUNDS rounds; each row gives requests per second and the
# server's CPU time per request (utime + stime from /proc over the run, divided by -n).
# For commands no other script covers (SISMEMBER, ZSCORE ...). -c 50 -r 100000 unless given.
#
#   PREP="-n 300000 -P 16 SADD myset element:__rand_int__" \
#     bench/vs_redis.sh -n 1500000 -P 16 SISMEMBER myset element:__rand_int__
#   ROUNDS=5 KVIK_ARGS="--cache-sets no" PREP=... bench/vs_redis.sh -n 300000 ZSCORE myzset element:__rand_int__
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/vs_redis.sh ...
source "$(dirname "$0")/lib.sh"
ensure_redis

ROUNDS=${ROUNDS:-3}
HZ=$(getconf CLK_TCK)
read -r -a prep <<<"${PREP:-}"
read -r -a kvik_args <<<"${KVIK_ARGS:-}"
n=100000
for ((i = 1; i <= $#; i++)); do
  [ "${!i}" = -n ] && { j=$((i + 1)); n=${!j}; }
done

kport=$(free_port)
start_kvik "$kport" kvik ${kvik_args[@]+"${kvik_args[@]}"}
kpid=${PIDS[-1]}
rport=$(free_port)
start_redis "$rport" redis-aof --appendonly yes --appendfsync everysec
rpid=${PIDS[-1]}
for port in "$kport" "$rport"; do
  [ ${#prep[@]} -gt 0 ] && redis-benchmark -p "$port" -c 50 -r 100000 -q "${prep[@]}" >/dev/null
done

echo "command: redis-benchmark -c 50 -r 100000 $*; PREP: ${PREP:-none}; $ROUNDS rounds"
echo "| round | server | req/s | server CPU us/request |"
echo "|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  for side in kvik redis-aof; do
    if [ "$side" = kvik ]; then port=$kport pid=$kpid; else port=$rport pid=$rpid; fi
    before=$(cpu_ticks "$pid")
    rps=$(redis-benchmark -p "$port" -c 50 -r 100000 --csv "$@" 2>/dev/null | tail -n 1 |
      tr -d '"' | cut -d, -f2)
    after=$(cpu_ticks "$pid")
    echo "| $round | $side | $rps | $(python3 -c "print(round(($after-$before)*1e6/$HZ/$n, 2))") |"
  done
done
