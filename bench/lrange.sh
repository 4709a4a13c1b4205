#!/usr/bin/env bash
# redis-benchmark's list reads against lists' heads in the hot cache: per round, a fresh
# server of each side in turn: kvik (`cache-list-elements 1024`, the default), kvik with
# `cache-list-elements 0`, and redis-server with appendonly yes, appendfsync everysec. Each
# gets `redis-benchmark -t lpush -n 100000` (the list LRANGE_* reads), then `-t lrange -n N
# -c 50 -P P`: LRANGE_100, _300, _500 and _600 of the list's head. Then the cost a cached head
# adds to the pushes that edit it: the list filled with 2,000 elements of D bytes, its first
# 1,024 read once (a head of ~60 KiB cached), then `-t lpush -n PUSHES -c 50 -P 16 -d D`, with
# the server's CPU us per push (kvik sides only).
#
#   bench/lrange.sh                 # ROUNDS=3 N=50000 P=1 PUSHES=400000 D=60
#   P=16 N=30000 bench/lrange.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/lrange.sh
source "$(dirname "$0")/lib.sh"
ensure_redis

ROUNDS=${ROUNDS:-3}
N=${N:-50000}
P=${P:-1}
PUSHES=${PUSHES:-400000}
D=${D:-60}

# start side: a fresh server of `side` on a free port; its port and pid in PORT and PID.
start() {
  PORT=$(free_port)
  case $1 in
    kvik) start_kvik "$PORT" "kvik-$round" ;;
    kvik-off) start_kvik "$PORT" "off-$round" --cache-list-elements 0 ;;
    redis) start_redis "$PORT" "redis-$round" --appendonly yes --appendfsync everysec ;;
  esac
  PID=${PIDS[-1]}
}

rtc() { redis-cli -p "$1" info stats | tr -d '\r' | sed -n 's/^rtc_commands://p'; }

echo "side,round,LPUSH,LRANGE_100,LRANGE_300,LRANGE_500,LRANGE_600 (req/s, -P $P)"
for round in $(seq 1 "$ROUNDS"); do
  for side in kvik kvik-off redis; do
    start "$side"
    redis-benchmark -p "$PORT" -q -n 100000 -c 50 -t lpush >/dev/null
    rates=$(redis-benchmark -p "$PORT" -q -n "$N" -c 50 -P "$P" -t lrange --csv |
      tail -n +2 | cut -d, -f2 | tr -d '"' | paste -sd,)
    echo "$side,$round,$rates"
    kill "$PID"
    wait "$PID" 2>/dev/null || true
  done
done

echo "side,round,LPUSH req/s,CPU us per LPUSH (a cached head of 1,024 elements of $D bytes)"
for round in $(seq 1 "$ROUNDS"); do
  for side in kvik kvik-off; do
    start "$side"
    redis-benchmark -p "$PORT" -q -n 2000 -c 1 -d "$D" -t lpush >/dev/null
    redis-cli -p "$PORT" lrange mylist 0 1023 >/dev/null
    t0=$(cpu_ticks "$PID")
    rate=$(redis-benchmark -p "$PORT" -q -n "$PUSHES" -c 50 -P 16 -d "$D" -t lpush --csv |
      tail -1 | cut -d, -f2 | tr -d '"')
    t1=$(cpu_ticks "$PID")
    cpu=$(awk "BEGIN {printf \"%.2f\", ($t1 - $t0) / $(getconf CLK_TCK) * 1e6 / $PUSHES}")
    # Whether the pushes kept the head cached: its read then runs on the I/O thread.
    r0=$(rtc "$PORT")
    redis-cli -p "$PORT" lrange mylist 0 9 >/dev/null
    kept=$([ "$(rtc "$PORT")" -gt "$r0" ] && echo yes || echo no)
    echo "$side,$round,$rate,$cpu,head cached after the pushes: $kept"
    kill "$PID"
    wait "$PID" 2>/dev/null || true
  done
done
