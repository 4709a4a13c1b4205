#!/usr/bin/env bash
# One hot key under 50 pipelining clients, kvik with a setting switched (OLD_ARGS, default
# `--rtc-lock-retries 0`) against kvik with its defaults, ROUNDS alternated rounds (default 3),
# a fresh server per run:
#   1. the latency of HSET of one hash (redis-benchmark -c 50 -n 600000 -P 16), with the
#      share of the commands the workers ran (INFO pool_commands);
#   2. one key written and read at once: INCR counter (25 clients) and GET counter (25 clients)
#      side by side, -n 600000 -P 16 each.
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/hot_key.sh
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
read -r -a old_args <<<"${OLD_ARGS:---rtc-lock-retries 0}"
N=${N:-600000}

rps() { tr '\r' '\n' <"$1" | grep 'requests per second' | tail -1 | sed 's/.*: //; s/ requests per second.*//'; }
pool() { redis-cli -p "$1" info stats | tr -d '\r' | sed -n 's/^pool_commands://p'; }

run_side() { # round label [server args...]
  local round=$1 label=$2; shift 2
  local port name
  port=$(free_port)
  name="kvik-$round-$label"
  start_kvik "$port" "$name" "$@"
  redis-benchmark -p "$port" -c 50 -r 100000 -n 20000 -P 16 -q HSET myhash element:__rand_int__ x >/dev/null
  redis-cli -p "$port" config resetstat >/dev/null
  local lat
  lat=$(redis-benchmark -p "$port" -c 50 -r 100000 -n "$N" -P 16 --precision 2 \
    HSET myhash element:__rand_int__ x | grep -A2 'latency summary' | tail -1 | xargs | tr ' ' '/')
  local hset_pool
  hset_pool=$(pool "$port")
  redis-cli -p "$port" config resetstat >/dev/null
  redis-benchmark -p "$port" -c 25 -n "$N" -P 16 -q INCR counter >"$BENCH_TMP/w.txt" &
  local writer=$!
  redis-benchmark -p "$port" -c 25 -n "$N" -P 16 -q GET counter >"$BENCH_TMP/r.txt"
  wait "$writer"
  echo "| $round | $label | $lat | $hset_pool | $(rps "$BENCH_TMP/w.txt") | $(rps "$BENCH_TMP/r.txt") | $(pool "$port") |"
  kill -9 "${PIDS[-1]}" 2>/dev/null || true
  wait "${PIDS[-1]}" 2>/dev/null || true
  unset 'PIDS[-1]'
  rm -rf "${BENCH_TMP:?}/$name"
}

echo "load before: $(uptime | sed 's/.*load average: //'); old: ${old_args[*]}; new: the defaults"
echo "| round | side | HSET -P 16 latency ms: avg/min/p50/p95/p99/max | HSETs on workers | INCR rps | GET rps | INCR+GET on workers |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  run_side "$round" old "${old_args[@]}"
  run_side "$round" new
done
