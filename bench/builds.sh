#!/usr/bin/env bash
# Two kvik-server builds side by side: rounds that alternate the builds (A B A B), a fresh
# server per run warmed with 20,000 requests, then one redis-benchmark run; prints requests per
# second and the server's CPU per request (utime + stime from /proc over the run) per round.
# For changes that have no switch of their own (a data structure, a hash): build the old
# commit, copy its binary aside, build the new one.
#
#   bench/builds.sh /tmp/kvik-old target/release/kvik-server -- -n 300000 SET key:__rand_int__ x
#   ROUNDS=5 bench/builds.sh OLD NEW -- -n 1000000 -P 16 SET key:__rand_int__ x
#   SCRIPT="return redis.call('incr', KEYS[1])" bench/builds.sh OLD NEW -- -n 150000 EVALSHA @sha 1 key:__rand_int__
#
# redis-benchmark gets -c 50 -r 100000 unless the arguments say otherwise; with SCRIPT set, the
# script is loaded on each server and `@sha` in the arguments becomes its SHA.
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/builds.sh ...
source "$(dirname "$0")/lib.sh"

[ $# -ge 4 ] && [ "$3" = "--" ] || {
  echo "usage: $0 OLD_BINARY NEW_BINARY -- [redis-benchmark args...]" >&2
  exit 2
}
builds=("$1" "$2")
shift 3
ROUNDS=${ROUNDS:-3}
args=("$@")
case " ${args[*]} " in *" -c "*) ;; *) args=(-c 50 "${args[@]}") ;; esac
case " ${args[*]} " in *" -r "*) ;; *) args=(-r 100000 "${args[@]}") ;; esac
tck=$(getconf CLK_TCK)
echo "load before: $(uptime | sed 's/.*load average: //')"
echo "command: redis-benchmark ${args[*]}; $ROUNDS rounds alternating old new"
echo "| round | build | rps | server CPU us/request |"
echo "|---|---|---|---|"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for round in $(seq 1 "$ROUNDS"); do
  for i in 0 1; do
    label=$([ "$i" = 0 ] && echo old || echo new)
    port=$(free_port)
    KVIK_BIN=${builds[$i]} start_kvik "$port" "build-$round-$i"
    pid=${PIDS[-1]}
    run_args=("${args[@]}")
    if [ -n "${SCRIPT:-}" ]; then
      sha=$(redis-cli -p "$port" SCRIPT LOAD "$SCRIPT")
      run_args=("${run_args[@]/@sha/$sha}")
    fi
    warm=("${run_args[@]}")
    for j in "${!warm[@]}"; do
      if [ "${warm[$j]}" = "-n" ]; then warm[j + 1]=20000; fi
    done
    redis-benchmark -p "$port" -q "${warm[@]}" >/dev/null 2>&1
    t0=$(cpu_ticks "$pid")
    out=$(redis-benchmark -p "$port" -q "${run_args[@]}" 2>/dev/null | tr '\r' '\n' | grep "requests per second" | tail -1)
    t1=$(cpu_ticks "$pid")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rps=$(echo "$out" | sed 's/.*: \([0-9.]*\) requests.*/\1/')
    n=200000
    for j in "${!run_args[@]}"; do
      if [ "${run_args[$j]}" = "-n" ]; then n=${run_args[j + 1]}; fi
    done
    python3 -c "print('| %d | %s | %.0f | %.2f |' % ($round, '$label', $rps, ($t1 - $t0) / $tck * 1e6 / $n))"
  done
done
